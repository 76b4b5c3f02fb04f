"""Memory through time: as-of reads by valid and system time, on every face and in SQL.

The chains here hold what makes the two clocks differ: a back-dated correction (saved last,
dated earlier), a branch (two successors of one version), an expiry, and a deleted middle
version. Dates are interaction dates (valid time); system times are the instants between
the saves, read from the server's clock.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import InvalidInputError, MemorySearchScope, PostgresGraphDB, migrations
from memora_pg.autogen import MemoryContent, MemoryMimeType, PostgresMemory
from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.mem0 import AsyncMemory, DuragValidationError
from memora_pg.models import Memory
from memora_pg.ops import transfer
from memora_pg.vector import PgVectorDB
from tests.conftest import TEST_SCHEMA
from tests.fake_openai import FakeOpenAIServer
from tests.integration.helpers import World, chat, day, payload, world

UTC = timezone.utc


async def _remember(
    graph: PostgresGraphDB, w: World, text_: str, *, at: datetime, supersedes: Memory | None = None
) -> Memory:
    """One memory in its own interaction dated ``at`` (contrary to ``supersedes`` when given)."""
    if supersedes is None:
        body = payload(chat(text_), [(text_, [0])], at=at)
    else:
        body = payload(chat(text_), contrary=[(text_, [0], supersedes.memory_id)], at=at)
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    interaction = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    return (interaction.memories or [])[0]


async def _server_now(engine: AsyncEngine) -> datetime:
    """An instant strictly between the transactions before and after it (now() is per transaction)."""
    await asyncio.sleep(0.01)
    async with engine.connect() as conn:
        instant: datetime = await conn.scalar(text("SELECT clock_timestamp()"))
    await asyncio.sleep(0.01)
    return instant


def _ids(memories: list[Memory]) -> list[str]:
    return [m.memory_id for m in memories]


def _ref(w: World, memory: Memory) -> dict[str, str]:
    return {"memory_id": memory.memory_id, "user_id": w.user_id, "org_id": w.org_id}


class Chain:
    """A (Jan 1) <- B (Jan 10) <- C (Jan 5: a back-dated correction of B, saved last), and
    D (Jan 1) with two successors: E (Jan 2) and F (Jan 3). ``t_*``: system instants after each save."""

    def __init__(self, w: World, memories: dict[str, Memory], instants: dict[str, datetime]) -> None:
        self.w, self.m, self.t = w, memories, instants

    def ref(self, name: str) -> dict[str, str]:
        return _ref(self.w, self.m[name])

    def ids(self, *names: str) -> list[str]:
        return [self.m[name].memory_id for name in names]


@pytest.fixture
async def chain(graph: PostgresGraphDB, engine: AsyncEngine) -> Chain:
    w = await world(graph)
    m: dict[str, Memory] = {}
    t: dict[str, datetime] = {"start": await _server_now(engine)}
    m["A"] = await _remember(graph, w, "user_X lives in Paris", at=day(1))
    t["A"] = await _server_now(engine)
    m["B"] = await _remember(graph, w, "user_X lives in Berlin", at=day(10), supersedes=m["A"])
    t["B"] = await _server_now(engine)
    m["C"] = await _remember(graph, w, "user_X lives in Rome", at=day(5), supersedes=m["B"])
    t["C"] = await _server_now(engine)
    m["D"] = await _remember(graph, w, "user_X plays chess", at=day(1))
    m["E"] = await _remember(graph, w, "user_X plays go", at=day(2), supersedes=m["D"])
    m["F"] = await _remember(graph, w, "user_X plays bridge", at=day(3), supersedes=m["D"])
    t["F"] = await _server_now(engine)
    return Chain(w, m, t)


def noon(n: int) -> datetime:
    return day(n)


# -- the Memora face --------------------------------------------------------------------------


async def test_resolved_fetch_as_of_valid_time(graph: PostgresGraphDB, chain: Chain) -> None:
    """By valid time the back-dated C ends A on Jan 5, and B (Jan 10) never was true on its own."""
    fetch = graph.fetch_user_memories_resolved
    assert _ids(await fetch([chain.ref("A")], as_of=day(3))) == chain.ids("A")
    assert _ids(await fetch([chain.ref("C")], as_of=day(3))) == chain.ids("A")
    assert _ids(await fetch([chain.ref("A")], as_of=day(7))) == chain.ids("C")
    assert _ids(await fetch([chain.ref("B")], as_of=day(12))) == chain.ids("C")
    # Before the fact was known at all: nothing.
    assert await fetch([chain.ref("A")], as_of=datetime(2025, 12, 31, tzinfo=UTC)) == []
    # Now (and without as_of): the newest version, as before.
    assert _ids(await fetch([chain.ref("A")])) == chain.ids("C")
    assert _ids(await fetch([chain.ref("A")], as_of=datetime.now(UTC))) == chain.ids("C")


async def test_resolved_fetch_as_of_system_time(graph: PostgresGraphDB, chain: Chain) -> None:
    """By system time each version was current from its save until the next one."""
    fetch = graph.fetch_user_memories_resolved
    assert await fetch([chain.ref("A")], as_of=chain.t["start"], as_of_clock="system") == []
    assert _ids(await fetch([chain.ref("C")], as_of=chain.t["A"], as_of_clock="system")) == chain.ids("A")
    assert _ids(await fetch([chain.ref("A")], as_of=chain.t["B"], as_of_clock="system")) == chain.ids("B")
    assert _ids(await fetch([chain.ref("A")], as_of=chain.t["C"], as_of_clock="system")) == chain.ids("C")


async def test_a_branch_has_both_successors_current_once_both_began(graph: PostgresGraphDB, chain: Chain) -> None:
    fetch = graph.fetch_user_memories_resolved
    assert _ids(await fetch([chain.ref("D")], as_of=day(1) + timedelta(hours=1))) == chain.ids("D")
    assert _ids(await fetch([chain.ref("D")], as_of=day(2) + timedelta(hours=1))) == chain.ids("E")
    assert _ids(await fetch([chain.ref("D")], as_of=day(4))) == chain.ids("F", "E")
    batch = await graph.fetch_user_memories_resolved_batch(
        [[chain.ref("D")], [chain.ref("A"), chain.ref("E")]], as_of=day(4)
    )
    assert [_ids(one) for one in batch] == [chain.ids("F", "E"), chain.ids("A", "E")]


async def test_get_all_and_history_as_of(graph: PostgresGraphDB, chain: Chain) -> None:
    w = chain.w
    assert _ids(await graph.get_all_user_memories(w.org_id, w.user_id, as_of=day(3))) == chain.ids("F", "E", "A")
    assert _ids(await graph.get_all_user_memories(w.org_id, w.user_id, as_of=day(7))) == chain.ids("C", "F", "E")
    assert _ids(
        await graph.get_all_user_memories(w.org_id, w.user_id, as_of=chain.t["B"], as_of_clock="system")
    ) == chain.ids("B")
    # Without as_of: every version, as the contract says.
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 6
    history = graph.get_user_memory_history
    assert _ids(await history(w.org_id, w.user_id, chain.m["C"].memory_id)) == chain.ids("C", "B", "A")
    assert _ids(await history(w.org_id, w.user_id, chain.m["C"].memory_id, as_of=day(7))) == chain.ids("C", "A")
    assert await history(w.org_id, w.user_id, chain.m["C"].memory_id, as_of=day(3)) == []
    assert (
        _ids(await history(w.org_id, w.user_id, chain.m["C"].memory_id, as_of=chain.t["B"], as_of_clock="system")) == []
    )
    assert _ids(
        await history(w.org_id, w.user_id, chain.m["B"].memory_id, as_of=chain.t["B"], as_of_clock="system")
    ) == chain.ids("B", "A")


async def test_an_expiry_ends_the_current_version_and_keeps_its_history(
    graph: PostgresGraphDB, chain: Chain, engine: AsyncEngine
) -> None:
    """C expires on Jan 20: current before, nothing after (A and B stay superseded), history intact."""
    async with engine.begin() as conn:
        await conn.execute(
            text(f"UPDATE {TEST_SCHEMA}.memories SET expires_at = :at WHERE memory_id = :id"),
            {"at": day(20), "id": uuid.UUID(chain.m["C"].memory_id)},
        )
    fetch = graph.fetch_user_memories_resolved
    assert _ids(await fetch([chain.ref("A")], as_of=day(19))) == chain.ids("C")
    assert await fetch([chain.ref("A")], as_of=day(21)) == []
    assert await fetch([chain.ref("A")]) == []
    w = chain.w
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, chain.m["C"].memory_id)) == chain.ids(
        "C", "B", "A"
    )
    # A future time: what is current now, less what expires before it.
    future = datetime.now(UTC) + timedelta(days=365)
    assert _ids(await graph.get_all_user_memories(w.org_id, w.user_id, as_of=future)) == chain.ids("F", "E")


async def test_deleting_a_middle_version_leaves_no_trace_in_either_clock(
    graph: PostgresGraphDB, engine: AsyncEngine
) -> None:
    """P (Jan 1) <- Q (Jan 2) <- R (Jan 3); Q deleted: P was current until R began, in both clocks."""
    w = await world(graph)
    p = await _remember(graph, w, "user_X drinks tea", at=day(1))
    q = await _remember(graph, w, "user_X drinks coffee", at=day(2), supersedes=p)
    t_q = await _server_now(engine)
    r = await _remember(graph, w, "user_X drinks water", at=day(3), supersedes=q)
    await graph.delete_user_memory(w.org_id, w.user_id, q.memory_id)
    fetch = graph.fetch_user_memories_resolved
    assert _ids(await fetch([_ref(w, p)], as_of=day(2) + timedelta(hours=1))) == [p.memory_id]
    assert _ids(await fetch([_ref(w, p)], as_of=t_q, as_of_clock="system")) == [p.memory_id]
    assert _ids(await fetch([_ref(w, p)], as_of=day(4))) == [r.memory_id]
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, r.memory_id, as_of=day(4))) == [
        r.memory_id,
        p.memory_id,
    ]
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    f"SELECT memory_id, supersedes, valid_from, valid_to FROM {TEST_SCHEMA}.memory_timeline"
                    " WHERE org_id = :org ORDER BY valid_from"
                ),
                {"org": w.org_id},
            )
        ).all()
    assert [(str(row.memory_id), row.supersedes and str(row.supersedes), row.valid_to) for row in rows] == [
        (p.memory_id, None, day(3)),
        (r.memory_id, p.memory_id, None),
    ]
    # Deleting the newest version makes its predecessor current again, in both clocks.
    await graph.delete_user_memory(w.org_id, w.user_id, r.memory_id)
    assert _ids(await fetch([_ref(w, p)], as_of=day(4))) == [p.memory_id]
    assert _ids(await fetch([_ref(w, p)], as_of=datetime.now(UTC), as_of_clock="system")) == [p.memory_id]


async def test_vector_search_as_of(graph: PostgresGraphDB, chain: Chain) -> None:
    vector = graph.get_associated_vector_db()
    assert isinstance(vector, PgVectorDB)
    w = chain.w
    for scope, user in ((MemorySearchScope.USER, w.user_id), (MemorySearchScope.ORGANIZATION, None)):
        hits = await vector.search_memory("where does Jake live", scope, w.org_id, user, as_of=day(3))
        found = {memory.memory_id for memory, _ in hits}
        assert chain.m["A"].memory_id in found
        assert found <= set(chain.ids("A", "E", "F"))
        later = await vector.search_memory(
            "where does Jake live", scope, w.org_id, user, as_of=chain.t["B"], as_of_clock="system"
        )
        assert {memory.memory_id for memory, _ in later} <= set(chain.ids("B"))


async def test_bad_as_of_arguments_are_typed_errors(graph: PostgresGraphDB, chain: Chain) -> None:
    w = chain.w
    with pytest.raises(InvalidInputError, match="as_of must be a datetime"):
        await graph.get_all_user_memories(w.org_id, w.user_id, as_of="2026-01-01")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="as_of_clock"):
        await graph.fetch_user_memories_resolved([chain.ref("A")], as_of=day(3), as_of_clock="wall")
    # A naive datetime is UTC.
    naive = datetime(2026, 1, 3, 12, 0)
    assert _ids(await graph.fetch_user_memories_resolved([chain.ref("A")], as_of=naive)) == chain.ids("A")


# -- SQL for reports ----------------------------------------------------------------------------


@pytest.mark.parametrize("clock", ["valid", "system"])
async def test_memories_as_of_agrees_with_the_face(
    graph: PostgresGraphDB, chain: Chain, engine: AsyncEngine, clock: str
) -> None:
    w = chain.w
    instants = [day(n) for n in (1, 2, 3, 4, 6, 11, 21)] + list(chain.t.values()) + [datetime.now(UTC)]
    async with engine.connect() as conn:
        for instant in instants:
            in_sql = (
                await conn.execute(
                    text(
                        f"SELECT memory_id FROM {TEST_SCHEMA}.memories_as_of(:at, :clock)"
                        " WHERE org_id = :org AND user_id = :user ORDER BY obtained_at DESC, seq DESC"
                    ),
                    {"at": instant, "clock": clock, "org": w.org_id, "user": w.user_id},
                )
            ).scalars()
            face = await graph.get_all_user_memories(w.org_id, w.user_id, as_of=instant, as_of_clock=clock)
            assert [str(memory_id) for memory_id in in_sql] == _ids(face), instant
        default = await conn.execute(
            text(f"SELECT count(*) FROM {TEST_SCHEMA}.memories_as_of(:at) WHERE org_id = :org"),
            {"at": day(7), "org": w.org_id},
        )
        assert default.scalar() == 3  # C, E, F
        with pytest.raises(Exception, match="clock must be 'valid' or 'system'"):
            await conn.execute(text(f"SELECT * FROM {TEST_SCHEMA}.memories_as_of(now(), 'wall')"))


async def test_memory_timeline_has_both_clocks(chain: Chain, engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        rows = {
            str(row.memory_id): row
            for row in await conn.execute(
                text(f"SELECT * FROM {TEST_SCHEMA}.memory_timeline WHERE org_id = :org"), {"org": chain.w.org_id}
            )
        }
    a, b, c = (rows[chain.m[name].memory_id] for name in "ABC")
    assert (a.valid_from, a.valid_to) == (day(1), day(5))
    # B began on Jan 10 but C says Rome from Jan 5: an empty span.
    assert (b.valid_from, b.valid_to) == (day(10), day(10))
    assert (c.valid_from, c.valid_to, c.is_current) == (day(5), None, True)
    assert chain.t["start"] < a.system_from < chain.t["A"] < a.system_to == b.system_from < chain.t["B"]
    assert b.system_to == c.system_from < chain.t["C"]
    assert str(c.supersedes) == chain.m["B"].memory_id
    assert not a.is_current
    assert not b.is_current
    e, f = rows[chain.m["E"].memory_id], rows[chain.m["F"].memory_id]
    assert rows[chain.m["D"].memory_id].valid_to == day(2)
    assert e.is_current
    assert f.is_current


# -- the mem0-style face ------------------------------------------------------------------------


@pytest.fixture
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def mem0(database_url: str, llm: FakeOpenAIServer) -> AsyncIterator[AsyncMemory]:
    store = AsyncMemory.from_config(
        {
            "vector_store": {
                "provider": "pgvector",
                "config": {"connection_string": database_url, "collection_name": "timeline"},
            },
            "llm": {"provider": "openai", "config": {"model": "m", "api_key": "k", "openai_base_url": llm.base_url}},
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        }
    )
    yield store
    await store.close()


def _texts(result: dict[str, Any]) -> list[str]:
    return [item["memory"] for item in result["results"]]


async def test_mem0_add_with_timestamp_and_as_of_reads(mem0: AsyncMemory, engine: AsyncEngine) -> None:
    jan = datetime(2026, 1, 1, tzinfo=UTC)
    await mem0.add("Likes tea", user_id="u", infer=False, timestamp=int(jan.timestamp()))
    await mem0.add("Likes jazz", user_id="u", infer=False, timestamp=datetime(2026, 3, 1))
    added = await mem0.get_all(filters={"user_id": "u"})
    assert {item["memory"]: item["created_at"][:10] for item in added["results"]} == {
        "Likes tea": "2026-01-01",
        "Likes jazz": "2026-03-01",
    }
    assert _texts(await mem0.get_all(filters={"user_id": "u"}, as_of=datetime(2026, 2, 1))) == ["Likes tea"]
    found = await mem0.search("jazz", filters={"user_id": "u"}, as_of=datetime(2026, 2, 1), threshold=0)
    assert _texts(found) == ["Likes tea"]
    # By system time both were stored just now.
    before = datetime.now(UTC) - timedelta(minutes=5)
    assert _texts(await mem0.get_all(filters={"user_id": "u"}, as_of=before, as_of_clock="system")) == []
    with pytest.raises(DuragValidationError, match="timestamp"):
        await mem0.add("x", user_id="u", infer=False, timestamp="yesterday")
    with pytest.raises(DuragValidationError, match="as_of"):
        await mem0.get_all(filters={"user_id": "u"}, as_of=12)  # type: ignore[arg-type]


async def test_mem0_expiry_is_valid_time(mem0: AsyncMemory) -> None:
    await mem0.add("Has a cold", user_id="u", infer=False, timestamp=datetime(2026, 1, 1), expiration_date="2026-01-10")
    await mem0.add("Lives in Oslo", user_id="u", infer=False, timestamp=datetime(2026, 1, 1))
    within = datetime(2026, 1, 10, 23, 0)
    after = datetime(2026, 1, 11, 0, 1)
    assert sorted(_texts(await mem0.get_all(filters={"user_id": "u"}, as_of=within))) == ["Has a cold", "Lives in Oslo"]
    assert _texts(await mem0.get_all(filters={"user_id": "u"}, as_of=after)) == ["Lives in Oslo"]
    assert _texts(await mem0.get_all(filters={"user_id": "u"})) == ["Lives in Oslo"]
    assert len((await mem0.get_all(filters={"user_id": "u"}, show_expired=True))["results"]) == 2
    # update() moves the expiry; the history keeps every event.
    cold = next(
        i for i in (await mem0.get_all(filters={"user_id": "u"}, show_expired=True))["results"] if "cold" in i["memory"]
    )
    await mem0.update(cold["id"], expiration_date=None)
    assert len((await mem0.get_all(filters={"user_id": "u"}))["results"]) == 2


async def test_mem0_reads_chains_written_by_the_memora_face(
    mem0: AsyncMemory, engine: AsyncEngine, settings: Settings
) -> None:
    """A Memora agent and a mem0 client on the same collection see the same versions at any time."""
    await mem0.add("Likes tea", user_id="u", infer=False, timestamp=datetime(2025, 12, 1))
    graph = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(384))
    try:
        agent = await graph.create_agent(mem0.org_id, "agent")
        w = World(mem0.org_id, "u", agent.agent_id)
        a = await _remember(graph, w, "lives in Paris", at=day(1))
        b = await _remember(graph, w, "lives in Berlin", at=day(10), supersedes=a)
        await _remember(graph, w, "lives in Rome", at=day(5), supersedes=b)
        # A branch: chess (Jan 1) superseded by go (Jan 2) and by bridge (Jan 3).
        d = await _remember(graph, w, "plays chess", at=day(1))
        await _remember(graph, w, "plays go", at=day(2), supersedes=d)
        await _remember(graph, w, "plays bridge", at=day(3), supersedes=d)
        # A middle version deleted through the mem0 face: tea (Jan 1) <- coffee (Jan 2) <- water (Jan 3).
        p = await _remember(graph, w, "drinks tea", at=day(1))
        q = await _remember(graph, w, "drinks coffee", at=day(2), supersedes=p)
        await _remember(graph, w, "drinks water", at=day(3), supersedes=q)
    finally:
        await graph.close()
    await mem0.delete(q.memory_id)

    async def texts_at(at: datetime) -> list[str]:
        return sorted(_texts(await mem0.get_all(filters={"user_id": "u"}, as_of=at)))

    assert await texts_at(day(1) + timedelta(hours=1)) == ["Likes tea", "drinks tea", "lives in Paris", "plays chess"]
    assert await texts_at(day(2) + timedelta(hours=1)) == ["Likes tea", "drinks tea", "lives in Paris", "plays go"]
    assert await texts_at(day(4)) == ["Likes tea", "drinks water", "lives in Paris", "plays bridge", "plays go"]
    assert await texts_at(day(12)) == ["Likes tea", "drinks water", "lives in Rome", "plays bridge", "plays go"]
    found = await mem0.search("Paris Berlin Rome", filters={"user_id": "u"}, as_of=day(7), threshold=0)
    assert "lives in Paris" not in _texts(found)
    assert "lives in Berlin" not in _texts(found)


# -- the AutoGen face ---------------------------------------------------------------------------


async def test_postgres_memory_query_as_of(engine: AsyncEngine, settings: Settings) -> None:
    memory = PostgresMemory("notes", engine=engine, settings=settings, embedder=HashEmbedder(384))
    try:
        await memory.add(MemoryContent(content="the build uses make", mime_type=MemoryMimeType.TEXT))
        between = await _server_now(engine)
        await memory.add(MemoryContent(content="the build uses bazel", mime_type=MemoryMimeType.TEXT))
        now = await memory.query("build", k=5)
        assert len(now.results) == 2
        then = await memory.query("build", k=5, as_of=between)
        assert [c.content for c in then.results] == ["the build uses make"]
        assert (await memory.query("build", as_of=between, as_of_clock="system")).results == then.results
        with pytest.raises(InvalidInputError):
            await memory.query("build", as_of="yesterday")
    finally:
        await memory.close()


# -- export and import ------------------------------------------------------------------------


async def _timeline(url: str, org_id: str) -> list[tuple[Any, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    f"SELECT memory_id, supersedes, valid_from, valid_to, system_from, system_to, expires_at"
                    f" FROM {TEST_SCHEMA}.memory_timeline WHERE org_id = :org ORDER BY memory_id"
                ),
                {"org": org_id},
            )
            return [tuple(row) for row in rows]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("older_export", [False, True], ids=["with-clocks", "export-without-clocks"])
async def test_export_and_import_keep_both_clocks(
    graph: PostgresGraphDB, chain: Chain, database_url: str, fresh_database: str, older_export: bool
) -> None:
    """The clocks survive a round trip; an export written before them gets them back from its chains."""
    engine = create_async_engine(fresh_database)
    try:
        await migrations.upgrade(engine, migrations.MigrationOptions(schema=TEST_SCHEMA))
    finally:
        await engine.dispose()
    out = io.StringIO()
    await transfer.export(graph.database, out)
    exported = out.getvalue()
    if older_export:
        lines = []
        for line in exported.splitlines():
            record = json.loads(line)
            if record.get("type") == "memories":
                for key in ("valid_until", "superseded_at"):
                    record.pop(key, None)
            lines.append(json.dumps(record))
        exported = "\n".join(lines) + "\n"
    target = Database(fresh_database, settings=Settings(database_url=fresh_database, db_schema=TEST_SCHEMA))
    try:
        await transfer.import_(target, io.StringIO(exported))
    finally:
        await target.close()
    assert await _timeline(fresh_database, chain.w.org_id) == await _timeline(database_url, chain.w.org_id)
    imported = PostgresGraphDB(
        fresh_database,
        settings=Settings(database_url=fresh_database, db_schema=TEST_SCHEMA),
        embedder=HashEmbedder(384),
    )
    try:
        for instant, clock in ((day(3), "valid"), (day(7), "valid"), (chain.t["B"], "system")):
            assert _ids(
                await imported.fetch_user_memories_resolved([chain.ref("A")], as_of=instant, as_of_clock=clock)
            ) == _ids(await graph.fetch_user_memories_resolved([chain.ref("A")], as_of=instant, as_of_clock=clock))
    finally:
        await imported.close()
