"""Export and import as JSON Lines: a faithful round trip, one organization at a time, streamed, all or nothing."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import re
import threading
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import (
    AlreadyExistsError,
    ConfigurationError,
    InvalidInputError,
    MemorySearchScope,
    NotFoundError,
    PostgresGraphDB,
    Settings,
    migrations,
)
from memora_pg.autogen import MemoryContent, MemoryMimeType, PostgresMemory
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.langgraph import AsyncMemoraStore
from memora_pg.mem0 import AsyncMemory
from memora_pg.ops import transfer
from memora_pg.schema import metadata
from memora_pg.testing import count_statements
from tests.integration.helpers import chat, day, payload

SCHEMA = "memora"


# -- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
async def target(fresh_database: str) -> str:
    """An empty database of its own, migrated to head: where imports go."""
    engine = create_async_engine(fresh_database)
    try:
        await migrations.upgrade(engine, migrations.MigrationOptions(schema=SCHEMA))
    finally:
        await engine.dispose()
    return fresh_database


@pytest.fixture
def source(graph: PostgresGraphDB) -> Database:
    """The session database, where the graph fixture writes (emptied after each test)."""
    return graph.database


def database(url: str) -> Database:
    return Database(url, settings=Settings(database_url=url, db_schema=SCHEMA))


def graph_on(url: str) -> PostgresGraphDB:
    return PostgresGraphDB(url, settings=Settings(database_url=url, db_schema=SCHEMA), embedder=HashEmbedder(384))


async def row_counts(url: str) -> dict[str, int]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return {
                table.name: int(await conn.scalar(text(f"SELECT count(*) FROM {SCHEMA}.{table.name}")) or 0)
                for table in transfer.EXPORTED_TABLES
            }
    finally:
        await engine.dispose()


async def export_text(db: Database, **kwargs: Any) -> str:
    out = io.StringIO()
    await transfer.export(db, out, **kwargs)
    return out.getvalue()


async def import_text(url: str, exported: str) -> dict[str, int]:
    target_db = database(url)
    try:
        return await transfer.import_(target_db, io.StringIO(exported))
    finally:
        await target_db.close()


def records(exported: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in exported.splitlines()]


def without_timestamp(exported: str) -> list[str]:
    """The lines of an export, its header's exported_at left out."""
    header, *rest = exported.splitlines()
    return [json.dumps({**json.loads(header), "exported_at": None}), *rest]


# -- a realistic dataset, written through the public APIs ----------------------------------------


@dataclass
class Dataset:
    org_ids: list[str]
    users: list[tuple[str, str]]  # (org_id, user_id)
    chain: list[str]  # oldest version first
    mem0_ids: list[str]


def mem0_config(url: str) -> dict[str, Any]:
    return {
        "vector_store": {"provider": "pgvector", "config": {"connection_string": url, "collection_name": "c"}},
        "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
    }


def item_store(url: str) -> AsyncMemoraStore:
    return AsyncMemoraStore(
        database_url=url, settings=Settings(database_url=url, db_schema=SCHEMA), embedder=HashEmbedder(384)
    )


def notes_memory(url: str) -> PostgresMemory:
    return PostgresMemory(
        "notes", database_url=url, settings=Settings(database_url=url, db_schema=SCHEMA), embedder=HashEmbedder(384)
    )


async def memory_ids(graph: PostgresGraphDB, org_id: str, user_id: str, interaction_id: str) -> list[str]:
    found = await graph.get_interaction(org_id, user_id, interaction_id)
    return [m.memory_id for m in found.memories or []]


async def populate(graph: PostgresGraphDB, url: str) -> Dataset:
    """Two organizations of the graph, a mem0 collection with history, and AutoGen entries of every kind."""
    acme = (await graph.create_organization("Acme")).org_id
    jake = (await graph.create_user(acme, "Jake")).user_id
    mia = (await graph.create_user(acme, "Mia")).user_id
    jenny = (await graph.create_agent(acme, "Jenny")).agent_id
    coach = (await graph.create_agent(acme, "Coach", user_id=jake)).agent_id

    first, _ = await graph.save_interaction_with_memories(
        acme,
        jenny,
        jake,
        payload(
            chat("I live in Lisbon", "Nice!", "I work as a nurse", "Night shifts?"),
            [(f"user_{jake} lives in Lisbon", [0]), (f"user_{jake} works as a nurse", [2, 3])],
            at=day(1),
        ),
    )
    # The update diverges at message 1: messages 1-3 go, and the nurse memory loses its sources.
    await graph.update_interaction_and_memories(
        acme, jenny, jake, first, payload(chat("I live in Lisbon", "Which district?"), at=day(2))
    )

    # A contradiction chain of depth 3: green tea <- black tea <- coffee.
    drinks = chat("I drink green tea", "ok")
    second, _ = await graph.save_interaction_with_memories(
        acme, coach, jake, payload(drinks, [(f"user_{jake} drinks green tea", [0])], at=day(3))
    )
    chain = await memory_ids(graph, acme, jake, second)
    for drink, when in (("black tea", 4), ("coffee", 5)):
        drinks = [*drinks, *chat(f"Now I drink {drink}", "noted")]
        contrary = [(f"user_{jake} drinks {drink}", [len(drinks) - 2], chain[-1])]
        await graph.update_interaction_and_memories(
            acme, coach, jake, second, payload(drinks, contrary=contrary, at=day(when))
        )
        (newest,) = [m for m in await memory_ids(graph, acme, jake, second) if m not in chain]
        chain.append(newest)

    third, _ = await graph.save_interaction_with_memories(
        acme, jenny, mia, payload(chat("I run marathons", "Great"), [(f"user_{mia} runs marathons", [0])], at=day(6))
    )
    # Removed from the vector store only: the row stays, without its vectors.
    vector_db = graph.get_associated_vector_db()
    assert vector_db is not None
    await vector_db.delete_memory((await memory_ids(graph, acme, mia, third))[0])

    globex = (await graph.create_organization("Globex")).org_id
    ann = (await graph.create_user(globex, "Ann")).user_id
    bot = (await graph.create_agent(globex, "Bot")).agent_id
    await graph.save_interaction_with_memories(
        globex, bot, ann, payload(chat("I live in Lisbon too"), [(f"user_{ann} lives in Lisbon", [0])], at=day(7))
    )

    mem0 = AsyncMemory.from_config(mem0_config(url))
    try:
        added = await mem0.add(
            [
                {"role": "user", "content": "I like green tea"},
                {"role": "user", "content": "I live in Porto"},
                {"role": "assistant", "content": "Noted"},
            ],
            user_id="alice",
            agent_id="helper",
            metadata={"topic": "profile", "weight": 0.75},
            infer=False,
        )
        mem0_ids = [r["id"] for r in added["results"]]
        await mem0.update(mem0_ids[0], "I like black tea")
        await mem0.delete(mem0_ids[2])
    finally:
        await mem0.close()

    notes = notes_memory(url)
    try:
        await notes.add(MemoryContent(content="Jake likes mornings", mime_type=MemoryMimeType.TEXT, metadata={"n": 1}))
        await notes.add(MemoryContent(content={"diet": "vegetarian", "ratio": 0.5}, mime_type=MemoryMimeType.JSON))
        await notes.add(MemoryContent(content=b"\x00\x01 bytes \xff", mime_type=MemoryMimeType.BINARY))
    finally:
        await notes.close()

    items = item_store(url)
    try:
        await items.aput(("users", "jake"), "prefs", {"text": "Jake takes his coffee black", "n": 1})
        await items.aput(("users", "jake"), "prefs", {"text": "Jake takes his coffee with milk", "n": 2})
        await items.aput(("users", "jake"), "raw", {"text": "not indexed"}, index=False)
    finally:
        await items.close()
    return Dataset([acme, globex], [(acme, jake), (acme, mia), (globex, ann)], chain, mem0_ids)


async def observe(url: str, data: Dataset) -> dict[str, Any]:
    """What every face answers about the dataset, method by method."""
    seen: dict[str, Any] = {}
    graph = graph_on(url)
    mem0 = AsyncMemory.from_config(mem0_config(url))
    notes = notes_memory(url)
    items = item_store(url)
    try:
        seen["get_all_organizations"] = await graph.get_all_organizations()
        for org_id in data.org_ids:
            seen[f"get_all_org_users {org_id}"] = await graph.get_all_org_users(org_id)
            seen[f"get_all_org_agents {org_id}"] = await graph.get_all_org_agents(org_id)
        for org_id, user_id in data.users:
            seen[f"get_all_user_interactions {user_id}"] = await graph.get_all_user_interactions(org_id, user_id)
            stored = await graph.get_all_user_memories(org_id, user_id)
            seen[f"get_all_user_memories {user_id}"] = stored
            for memory in stored:
                seen[f"get_user_memory_history {memory.memory_id}"] = await graph.get_user_memory_history(
                    org_id, user_id, memory.memory_id
                )
        acme, jake = data.users[0]
        seen["fetch_user_memories_resolved"] = await graph.fetch_user_memories_resolved(
            [{"org_id": acme, "user_id": jake, "memory_id": memory_id} for memory_id in data.chain]
        )
        vector_db = graph.get_associated_vector_db()
        assert vector_db is not None
        queries = ["where in Lisbon", "tea or coffee", "nurse"]
        seen["search_memories user"] = await vector_db.search_memories(queries, MemorySearchScope.USER, acme, jake)
        seen["search_memories org"] = await vector_db.search_memories(queries, MemorySearchScope.ORGANIZATION, acme)
        seen["mem0 get_all"] = await mem0.get_all(filters={"user_id": "alice"})
        seen["mem0 history"] = [await mem0.history(memory_id) for memory_id in data.mem0_ids]
        seen["mem0 search"] = await mem0.search("tea", filters={"user_id": "alice"})
        seen["autogen list"] = await notes.list()
        seen["autogen query"] = await notes.query("mornings")
        seen["store search"] = [i.dict() for i in await items.asearch(("users",), query="coffee with milk")]
        seen["store get"] = await items.aget(("users", "jake"), "raw")
    finally:
        await items.close()
        await graph.close()
        await mem0.close()
        await notes.close()
    return seen


# -- the round trip -------------------------------------------------------------------------------


async def test_round_trip_answers_every_method_alike(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """An export imported into an empty database gives the same answers, method by method, and the same export."""
    data = await populate(graph, database_url)
    assert len(data.chain) == 3
    before = await observe(database_url, data)
    assert before["fetch_user_memories_resolved"][0].memory.endswith("drinks coffee")
    assert [m.memory_id for m in before[f"get_user_memory_history {data.chain[2]}"]] == data.chain[::-1]
    jake_memories = {m.memory: m for m in before[f"get_all_user_memories {data.users[0][1]}"]}
    assert jake_memories["Jake lives in Lisbon"].message_sources
    assert not jake_memories["Jake works as a nurse"].message_sources  # truncated by the update
    assert [[e["event"] for e in events] for events in before["mem0 history"]] == [
        ["ADD", "UPDATE"],
        ["ADD"],
        ["ADD", "DELETE"],
    ]

    exported = await export_text(source)
    written = await import_text(target, exported)

    assert written == await row_counts(target)
    assert written == records(exported)[-1]["counts"]
    assert all(written.values())  # the dataset reaches every table
    after = await observe(target, data)
    assert after.keys() == before.keys()
    for method, answer in before.items():
        assert after[method] == answer, method
    assert without_timestamp(await export_text(database(target))) == without_timestamp(exported)


async def test_export_records_are_plain_json(graph: PostgresGraphDB, database_url: str, source: Database) -> None:
    """Header first, end record last; UUID strings, ISO timestamps with offset, float lists, base64, searchable."""
    await populate(graph, database_url)
    lines = records(await export_text(source))
    header, end = lines[0], lines[-1]
    assert header["type"] == transfer.FORMAT
    assert header["version"] == 1
    assert header["schema_revision"] == migrations.head_revision()
    assert header["embedding_dimensions"] == 384
    assert end["type"] == transfer.FORMAT_END
    memories = [r for r in lines if r["type"] == "memories"]
    assert {r["searchable"] for r in memories} == {True, False}
    assert all("search_text" not in r for r in memories)
    assert all(r["obtained_at"].endswith("+00:00") for r in memories)
    assert all(r["embedding"] is None or len(r["embedding"]) == 384 for r in memories)
    assert not [r for r in memories if r["searchable"] and r["embedding"] is None]
    (binary,) = [r for r in lines if r["type"] == "autogen_contents" and r["content_bytes"] is not None]
    assert binary["content_bytes"] == "AAEgYnl0ZXMg/w=="
    order = [transfer.EXPORTED_TABLES.index(metadata.tables[r["type"]]) for r in lines[1:-1]]
    assert order == sorted(order)


async def test_export_of_one_organization_holds_nothing_of_another(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str, tmp_path: Path
) -> None:
    """With org_id, every exported row is that organization's, and importing it brings back that organization only."""
    data = await populate(graph, database_url)
    acme, globex = data.org_ids
    path = tmp_path / "acme.jsonl.gz"
    counts = await transfer.export(source, path, org_id=acme)
    lines = records(gzip.decompress(path.read_bytes()).decode("utf-8"))
    assert {r["org_id"] for r in lines[1:-1]} == {acme}
    assert counts["memories"] == len([r for r in lines if r["type"] == "memories"]) > 0

    target_db = database(target)
    try:
        assert await transfer.import_(target_db, path) == counts
    finally:
        await target_db.close()
    imported = graph_on(target)
    try:
        assert [o.org_id for o in await imported.get_all_organizations()] == [acme]
        assert await imported.get_all_org_users(acme) == await graph.get_all_org_users(acme)
        assert await imported.get_all_org_users(globex) == []
    finally:
        await imported.close()


async def _add_late_organization(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"INSERT INTO {SCHEMA}.organizations (org_id, org_name) VALUES ('late', 'Late')"))
            await conn.execute(
                text(f"INSERT INTO {SCHEMA}.users (org_id, user_id, user_name) VALUES ('late', 'u', 'U')")
            )
    finally:
        await engine.dispose()


async def test_export_reads_one_snapshot(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """Rows committed while an export runs are not in it, so its users never lack their organization."""
    org = (await graph.create_organization("Acme")).org_id
    await graph.create_user(org, "Jake")

    def commit_meanwhile(written: int) -> None:
        # Called after the organizations are written and before the users are read; the
        # other thread commits a new organization and user on a connection of its own.
        if written == 1:
            other = threading.Thread(target=asyncio.run, args=(_add_late_organization(database_url),))
            other.start()
            other.join()

    out = io.StringIO()
    await transfer.export(source, out, progress=commit_meanwhile)
    assert {r.get("org_id") for r in records(out.getvalue())[1:-1]} == {org}
    assert (await import_text(target, out.getvalue()))["users"] == 1
    assert (await row_counts(database_url))["users"] == 2


async def test_export_of_a_missing_organization_is_not_found(source: Database) -> None:
    """Exporting an organization that does not exist is NotFoundError, not an empty file."""
    with pytest.raises(NotFoundError):
        await export_text(source, org_id="no-such-org")


async def test_import_moves_identity_sequences_past_the_imported_rows(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """A memory written after the import is ordered after every imported one (its seq is larger)."""
    org = (await graph.create_organization("Acme")).org_id
    user = (await graph.create_user(org, "Jake")).user_id
    agent = (await graph.create_agent(org, "Jenny")).agent_id
    for n in range(3):
        await graph.save_interaction_with_memories(org, agent, user, payload(chat(f"fact {n}"), [(f"fact {n}", [0])]))
    await import_text(target, await export_text(source))

    imported = graph_on(target)
    try:
        await imported.save_interaction_with_memories(org, agent, user, payload(chat("later"), [("later", [0])]))
    finally:
        await imported.close()
    engine = create_async_engine(target)
    try:
        async with engine.connect() as conn:
            seqs: dict[str, int] = dict((await conn.execute(text(f"SELECT memory, seq FROM {SCHEMA}.memories"))).all())
    finally:
        await engine.dispose()
    assert seqs["later"] > max(seq for memory, seq in seqs.items() if memory != "later")


async def test_an_import_leaves_the_statistics_the_search_reads_up_to_date(
    graph: PostgresGraphDB, source: Database, target: str
) -> None:
    """An import analyzes the searched tables in its own transaction: the imported memories' words are in
    ``pg_stats`` as it commits, not after autovacuum's next analyze (a large scope's search reads them)."""
    org = (await graph.create_organization("Acme")).org_id
    user = (await graph.create_user(org, "Jake")).user_id
    agent = (await graph.create_agent(org, "Jenny")).agent_id
    facts = [(f"user_X collects kites number {n}", [0]) for n in range(20)]
    await graph.save_interaction_with_memories(org, agent, user, payload(chat("kites"), facts))
    await import_text(target, await export_text(source))
    engine = create_async_engine(target)
    try:
        async with engine.connect() as conn:
            words = (
                await conn.execute(
                    text(
                        "SELECT CAST(most_common_elems AS text) FROM pg_stats"
                        " WHERE schemaname = :schema AND tablename = 'memories' AND attname = 'search_text'"
                    ),
                    {"schema": SCHEMA},
                )
            ).scalar()
    finally:
        await engine.dispose()
    assert words is not None
    assert "kite" in words


# -- all or nothing -------------------------------------------------------------------------------


async def test_importing_twice_is_already_exists_and_changes_nothing(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """A second import of the same export finds its keys taken: AlreadyExistsError, and the database is unchanged."""
    await populate(graph, database_url)
    exported = await export_text(source)
    await import_text(target, exported)
    counts = await row_counts(target)
    with pytest.raises(AlreadyExistsError, match="organizations"):
        await import_text(target, exported)
    assert await row_counts(target) == counts


def _replace_line(exported: str, type_: str, change: dict[str, Any]) -> str:
    lines = exported.splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == type_)
    lines[index] = json.dumps({**json.loads(lines[index]), **change}) + "\n"
    return "".join(lines)


def _move_before_end(exported: str, type_: str) -> str:
    lines = exported.splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == type_)
    moved = lines.pop(index)
    return "".join([*lines[:-1], moved, lines[-1]])


# The first number of the first embedding, as the export writes it.
EXPORTED_FIRST_NUMBER = re.compile(r'("embedding" : \[)[^,]+')

CORRUPTIONS: dict[str, Callable[[str], str]] = {
    "cut in the middle of a line": lambda e: e[: len(e) // 2 + 7],
    "cut before the end record": lambda e: "".join(e.splitlines(keepends=True)[:-1]),
    "unknown record type": lambda e: _replace_line(e, "memory_sources", {"type": "gossip"}),
    "wrong format version": lambda e: _replace_line(e, transfer.FORMAT, {"version": 2}),
    "tables out of order": lambda e: _move_before_end(e, "memory_history"),
    "a field of another table": lambda e: _replace_line(e, "users", {"agent_label": "x"}),
    "a required field left out": lambda e: _replace_line(e, "interactions", {"user_id": None}),
    "an embedding of the wrong length": lambda e: _replace_line(e, "memories", {"embedding": [0.5, 1]}),
    "an embedding with a string in it": lambda e: _replace_line(e, "memories", {"embedding": ["0.5"] * 384}),
    # As the export writes it, so that the array is read as its text and pgvector refuses it on the server.
    "an embedding with a number pgvector cannot read": lambda e: EXPORTED_FIRST_NUMBER.sub(r"\g<1>1-2", e, count=1),
    "a memory id that is not a UUID": lambda e: _replace_line(e, "memories", {"memory_id": "m-1"}),
    "a timestamp without offset": lambda e: _replace_line(e, "users", {"created_at": "2026-01-01T12:00:00"}),
    "bytes that are not base64": lambda e: _replace_line(e, "autogen_contents", {"content_bytes": "***"}),
    "a number where text belongs": lambda e: _replace_line(e, "messages", {"content": 1.5}),
    "a message of an interaction the file lacks": lambda e: _replace_line(e, "messages", {"interaction_id": "gone"}),
    "a source of a memory the file lacks": lambda e: _replace_line(
        e, "memory_sources", {"memory_id": str(uuid.UUID(int=7))}
    ),
    "a line after the end": lambda e: e + json.dumps({"type": "users"}) + "\n",
    "end counts that do not match": lambda e: _replace_line(e, transfer.FORMAT_END, {"counts": {}}),
}


async def test_a_malformed_or_incomplete_export_writes_nothing(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """Each kind of damaged file is InvalidInputError naming a line, and not one row of it is written."""
    await populate(graph, database_url)
    exported = await export_text(source)
    for corruption, damage in CORRUPTIONS.items():
        damaged = damage(exported)
        with pytest.raises(InvalidInputError, match=r"[Ll]ines? \d+") as raised:
            await import_text(target, damaged)
        if corruption == "unknown record type":
            assert f"Line {_line_of(damaged, 'gossip')}:" in str(raised.value)
        assert set((await row_counts(target)).values()) == {0}, corruption
    await import_text(target, exported)  # the undamaged file goes in


@pytest.mark.parametrize(
    ("corruption", "message"),
    [
        ("a message of an interaction the file lacks", r"the database refused these messages rows\. .*foreign key"),
        ("a source of a memory the file lacks", r"the database refused these memory_sources rows\. .*foreign key"),
        ("an embedding with a number pgvector cannot read", r"the database refused these memories rows\. .*vector"),
    ],
)
async def test_rows_the_database_refuses_are_named_by_their_lines(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str, corruption: str, message: str
) -> None:
    """A file the server refuses (a row it lacks, a vector pgvector cannot read) is InvalidInputError naming
    the lines of the batch and the server's reason, and nothing is written."""
    await populate(graph, database_url)
    damaged = CORRUPTIONS[corruption](await export_text(source))
    with pytest.raises(InvalidInputError, match=rf"^Lines \d+-\d+: {message}"):
        await import_text(target, damaged)
    assert set((await row_counts(target)).values()) == {0}


def _line_of(exported: str, type_: str) -> int:
    return next(n for n, line in enumerate(exported.splitlines(), 1) if json.loads(line)["type"] == type_)


async def test_an_empty_file_is_invalid_input(target: str) -> None:
    """A file without a header line is InvalidInputError."""
    with pytest.raises(InvalidInputError, match="line 1"):
        await import_text(target, "")


async def test_another_vector_dimension_is_a_configuration_error(
    graph: PostgresGraphDB, database_url: str, source: Database, fresh_database: str
) -> None:
    """Importing 384-dimension vectors into a database of 8 is ConfigurationError naming both numbers."""
    engine = create_async_engine(fresh_database)
    try:
        await migrations.upgrade(engine, migrations.MigrationOptions(schema=SCHEMA, dimensions=8))
    finally:
        await engine.dispose()
    await populate(graph, database_url)
    with pytest.raises(ConfigurationError, match=r"384.*8"):
        await import_text(fresh_database, await export_text(source))
    assert set((await row_counts(fresh_database)).values()) == {0}


async def test_a_role_under_row_level_security_is_refused(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str
) -> None:
    """A role that the organization policies restrict would miss rows: ConfigurationError, for export and import."""
    await graph.create_organization("Acme")
    exported = await export_text(source)
    role = f"memora_app_{uuid.uuid4().hex[:8]}"
    owner = create_async_engine(target)
    async with owner.begin() as conn:
        await conn.execute(text(f"CREATE ROLE {role}"))
        await conn.execute(text(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}"))
        await conn.execute(text(f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}"))
    as_app = create_async_engine(target, connect_args={"server_settings": {"role": role}})
    db = Database(as_app, settings=Settings(db_schema=SCHEMA))
    try:
        with pytest.raises(ConfigurationError, match="BYPASSRLS"):
            await transfer.import_(db, io.StringIO(exported))
        with pytest.raises(ConfigurationError, match="BYPASSRLS"):
            await export_text(db)
    finally:
        await db.close()
        await as_app.dispose()
        async with owner.begin() as conn:
            await conn.execute(text(f"DROP OWNED BY {role}"))
            await conn.execute(text(f"DROP ROLE {role}"))
        await owner.dispose()
    assert set((await row_counts(target)).values()) == {0}


# -- the format covers the schema ------------------------------------------------------------------


def test_every_table_is_exported_or_excluded_on_purpose() -> None:
    """A table of the schema that is neither exported nor excluded with a reason fails here."""
    exported = [table.name for table in transfer.EXPORTED_TABLES]
    assert len(set(exported)) == len(exported)
    assert not set(exported) & set(transfer.EXCLUDED_TABLES)
    assert set(exported) | set(transfer.EXCLUDED_TABLES) == set(metadata.tables)


def test_tables_are_exported_after_the_tables_they_refer_to() -> None:
    """Every foreign key of an exported table points to a table exported before it, so a replay never dangles."""
    position = {table.name: index for index, table in enumerate(transfer.EXPORTED_TABLES)}
    for table in transfer.EXPORTED_TABLES:
        assert "org_id" in table.c, table.name  # what an export of one organization filters on
        for key in table.foreign_keys:
            assert position[key.column.table.name] < position[table.name], (table.name, key.column.table.name)


def test_every_column_has_a_record_field() -> None:
    """Each column of each exported table maps to a field of its record; an unknown column type would raise."""
    for table in transfer.EXPORTED_TABLES:
        assert len(transfer.record_fields(table)) == len(table.columns)


# -- streaming -------------------------------------------------------------------------------------

MANY = 20_000

# Random unit-scale vectors, one per memory, made by the server (distinct per row through the
# outer reference to g).
MANY_MEMORIES = f"""
INSERT INTO {SCHEMA}.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text)
SELECT 'big', gen_random_uuid(), 'u', 'a', 'memory number ' || g, now(),
       (SELECT CAST(array_agg(random() - 0.5) AS vector) FROM generate_series(1, 384) AS d WHERE g > 0),
       to_tsvector('simple', 'memory number ' || g)
FROM generate_series(1, :n) AS g
"""


async def _fill(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        # The HNSW index plays no part in an export or an import; without it 20k random vectors
        # go in within seconds instead of a minute.
        await conn.execute(text(f"DROP INDEX {SCHEMA}.ix_memories_embedding_hnsw"))
        await conn.execute(text(f"INSERT INTO {SCHEMA}.organizations (org_id, org_name) VALUES ('big', 'Big')"))
        await conn.execute(text(f"INSERT INTO {SCHEMA}.users (org_id, user_id, user_name) VALUES ('big', 'u', 'U')"))
        await conn.execute(text(MANY_MEMORIES), {"n": MANY})


async def test_export_streams_in_bounded_memory(target: str, tmp_path: Path) -> None:
    """20k memories are exported while Python's peak allocation stays far below their size."""
    engine = create_async_engine(target)
    db = database(target)
    try:
        await _fill(engine)
        path = tmp_path / "big.jsonl"
        reported: list[int] = []
        tracemalloc.start()
        try:
            counts = await transfer.export(db, path, progress=reported.append)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await db.close()
        await engine.dispose()
    size = path.stat().st_size
    assert counts["memories"] == MANY
    assert reported == sorted(reported)
    assert reported[-1] == MANY + 2
    assert size > 80_000_000
    assert peak < size / 8, (peak, size)


async def test_import_writes_batches_of_rows(
    graph: PostgresGraphDB, database_url: str, source: Database, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each table goes in through one COPY per batch_size rows, never one statement per row; a table with
    derived columns is copied into a temporary table and moved into its own by one INSERT ... SELECT per batch."""
    await populate(graph, database_url)
    exported = await export_text(source)
    copied: list[str] = []
    copy = asyncpg.Connection.copy_records_to_table

    async def counted(self: asyncpg.Connection, table_name: str, **options: Any) -> str:
        copied.append(table_name)
        return str(await copy(self, table_name, **options))

    monkeypatch.setattr(asyncpg.Connection, "copy_records_to_table", counted)
    engine = create_async_engine(target)
    sent = count_statements(engine)
    db = Database(engine, settings=Settings(db_schema=SCHEMA))
    try:
        counts = await transfer.import_(db, io.BytesIO(exported.encode()), batch_size=3)
    finally:
        await db.close()
        await engine.dispose()
    staged = {"memories", "autogen_contents", "store_items"}
    for table, rows in counts.items():
        batches = -(-rows // 3)
        copies = copied.count(f"memora_pg_import_{table}" if table in staged else table)
        inserts = [s for s in sent if s.startswith(f'INSERT INTO "{SCHEMA}"."{table}" (')]
        assert copies == batches, (table, rows, copies)
        assert len(inserts) == (batches if table in staged else 0), (table, rows, len(inserts))
    assert len(copied) == sum(-(-rows // 3) for rows in counts.values())
