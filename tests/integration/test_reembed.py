"""Re-embedding: a database, or one organization, moves to another embedding model or dimension."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from alembic import command
from memora_pg import (
    ConfigurationError,
    EmbeddingError,
    InvalidInputError,
    MemorySearchScope,
    NotFoundError,
    PgVectorDB,
    PostgresGraphDB,
    Settings,
    migrations,
)
from memora_pg.autogen import MemoryContent, MemoryMimeType, PostgresMemory
from memora_pg.db import Database
from memora_pg.embeddings import Embedder, HashEmbedder
from memora_pg.langgraph import AsyncMemoraStore
from memora_pg.migrations import MigrationOptions
from memora_pg.ops.reembed import ReembedBusyError, ReembedResult, reembed
from tests.integration.helpers import chat, payload

SCHEMA = "memora"
PNG = b"\x89PNG\r\n\x1a\n not really an image"
ANIMALS = ("otter", "heron", "lynx", "badger", "falcon", "newt", "marmot", "ibis")
PLACES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra")


class Named:
    """An embedder with a model name: another wording of the texts, or the same one under another name."""

    def __init__(self, model: str, dimensions: int, prefix: str = "") -> None:
        self.model = model
        self.prefix = prefix
        self.inner = HashEmbedder(dimensions)

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def vector(self, text: str) -> list[float]:
        return self.inner.embed_text(self.prefix + text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]


class FailsAfter(Named):
    """Embeds ``batches`` batches, then fails as an unreachable embedding service would."""

    def __init__(self, model: str, dimensions: int, batches: int) -> None:
        super().__init__(model, dimensions)
        self.left = batches

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.left == 0:
            raise ConnectionError("embedding service unreachable")
        self.left -= 1
        return await super().embed_documents(texts)


class Gated(Named):
    """Waits in its first batch until released, so that a test can act while a re-embed runs."""

    def __init__(self, model: str, dimensions: int) -> None:
        super().__init__(model, dimensions)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        await self.release.wait()
        return await super().embed_documents(texts)


@dataclass
class Corpus:
    engine: AsyncEngine
    settings: Settings
    graph: PostgresGraphDB
    org_id: str
    other_org_id: str
    user_id: str
    texts: list[str]
    unsearchable: list[str]


@pytest.fixture
async def own_engine(fresh_database: str) -> AsyncIterator[AsyncEngine]:
    """A database of its own at 384 dimensions: the switch alters its schema."""
    engine = create_async_engine(fresh_database)
    await migrations.upgrade(engine, MigrationOptions(schema=SCHEMA, dimensions=384))
    yield engine
    await engine.dispose()


def vector_literal(values: Sequence[float]) -> str:
    """pgvector's text form of a vector (what a hand-written writer would send)."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


@pytest.fixture
def own_settings(fresh_database: str) -> Settings:
    return Settings(database_url=fresh_database, db_schema=SCHEMA)


@pytest.fixture
async def corpus(own_engine: AsyncEngine, own_settings: Settings) -> AsyncIterator[Corpus]:
    """Two organizations of memories (some no longer searchable) and AutoGen entries of every kind."""
    engine, settings = own_engine, own_settings
    graph = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(384))
    org = await graph.create_organization("Acme")
    other = await graph.create_organization("Globex")
    texts: list[str] = []
    user_id = ""
    for org_id, users in ((org.org_id, ("Jake", "Mia")), (other.org_id, ("Ola",))):
        agent = await graph.create_agent(org_id, "Coach")
        for name in users:
            user = await graph.create_user(org_id, name)
            user_id = user_id or user.user_id
            facts = [
                f"{name} saw a {animal} near {place} on day {n}"
                for n, (animal, place) in enumerate(zip(ANIMALS * 2, PLACES * 4, strict=False))
            ]
            texts += facts
            await graph.save_interaction_with_memories(
                org_id,
                agent.agent_id,
                user.user_id,
                memories_and_interaction=payload(chat("hello"), [(fact, [0]) for fact in facts]),
            )
    vector_db = graph.get_associated_vector_db()
    assert isinstance(vector_db, PgVectorDB)
    async with engine.connect() as conn:
        unsearchable = [
            str(row.memory_id)
            for row in await conn.execute(
                text("SELECT memory_id FROM memora.memories WHERE memory LIKE 'Mia saw a heron%'")
            )
        ]
    await vector_db.delete_memories(unsearchable)
    notes = PostgresMemory("notes", engine=engine, settings=settings, embedder=HashEmbedder(384), org_id=org.org_id)
    await notes.add(MemoryContent(content="Prefers aisle seats on long flights", mime_type=MemoryMimeType.TEXT))
    await notes.add(MemoryContent(content="# Diet\nvegetarian, no nuts", mime_type=MemoryMimeType.MARKDOWN))
    await notes.add(
        MemoryContent(content={"seat": "aisle", "meal": "vegetarian", "miles": 1.5}, mime_type=MemoryMimeType.JSON)
    )
    await notes.add(MemoryContent(content=PNG, mime_type="image/png"))
    other_notes = PostgresMemory("notes", engine=engine, settings=settings, embedder=HashEmbedder(384))
    await other_notes.add(MemoryContent(content="Globex notes live elsewhere", mime_type=MemoryMimeType.TEXT))
    async with AsyncMemoraStore(
        engine=engine, settings=settings, embedder=HashEmbedder(384), org_id=org.org_id
    ) as items:
        await items.aput(("users", "mia"), "seat", {"text": "Mia books window seats"})
        await items.aput(("users", "mia"), "seat", {"text": "Mia books aisle seats now"})
        await items.aput(("users", "mia"), "plain", {"text": "kept without a vector"}, index=False)
    yield Corpus(engine, settings, graph, org.org_id, other.org_id, user_id, texts, unsearchable)
    await graph.close()


# -- looking at the database -----------------------------------------------------------------


async def column_type(engine: AsyncEngine, table: str, column: str = "embedding") -> str | None:
    async with engine.connect() as conn:
        found = await conn.scalar(
            text(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = to_regclass(:t) AND attname = :c AND NOT attisdropped"
            ),
            {"t": f"memora.{table}", "c": column},
        )
    return str(found) if found is not None else None


async def searchable(engine: AsyncEngine, table: str) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(text(f"SELECT count(embedding) FROM memora.{table}")) or 0)


async def off_by(engine: AsyncEngine, embedder: Named, *, org_id: str | None = None) -> float:
    """The largest distance between a stored vector and ``embedder``'s vector of the row's text."""
    org = "" if org_id is None else " AND org_id = :org"
    async with engine.connect() as conn:
        memory_rows = (
            await conn.execute(
                text(f"SELECT memory_id, memory FROM memora.memories WHERE embedding IS NOT NULL{org}"), {"org": org_id}
            )
        ).all()
        content_rows = (
            await conn.execute(
                text(
                    "SELECT content_id, coalesce(content_text, content_json::text) AS body, "
                    "content_json IS NOT NULL AS is_json "
                    f"FROM memora.autogen_contents WHERE embedding IS NOT NULL{org}"
                ),
                {"org": org_id},
            )
        ).all()
        item_rows = (
            await conn.execute(
                text(f"SELECT item_id, indexed_text FROM memora.store_items WHERE embedding IS NOT NULL{org}"),
                {"org": org_id},
            )
        ).all()
        worst = 0.0
        for table, key, rows in (
            ("memories", "memory_id", memory_rows),
            ("autogen_contents", "content_id", content_rows),
            ("store_items", "item_id", item_rows),
        ):
            bodies = (
                [canonical(row) for row in rows]
                if table == "autogen_contents"
                else [row.indexed_text for row in rows]
                if table == "store_items"
                else [row.memory for row in rows]
            )
            found = await conn.scalar(
                text(
                    f"SELECT coalesce(max(t.embedding <-> CAST(given.v AS vector)), 0) FROM memora.{table} AS t "
                    "JOIN unnest(CAST(:ids AS uuid[]), CAST(:vs AS text[])) AS given(id, v) "
                    f"ON t.{key} = given.id"
                ),
                {"ids": [row[0] for row in rows], "vs": [vector_literal(embedder.vector(b)) for b in bodies]},
            )
            worst = max(worst, float(found or 0))
    return worst


def canonical(row: Any) -> str:
    if not row.is_json:
        return str(row.body)
    return json.dumps(json.loads(row.body), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


async def vectors_of(engine: AsyncEngine, org_id: str) -> dict[str, bytes]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT memory_id::text AS id, vector_send(embedding) AS v FROM memora.memories "
                "WHERE org_id = :org AND embedding IS NOT NULL "
                "UNION ALL SELECT content_id::text, vector_send(embedding) FROM memora.autogen_contents "
                "WHERE org_id = :org AND embedding IS NOT NULL "
                "UNION ALL SELECT item_id::text, vector_send(embedding) FROM memora.store_items "
                "WHERE org_id = :org AND embedding IS NOT NULL"
            ),
            {"org": org_id},
        )
        return {row.id: bytes(row.v) for row in rows}


async def leftovers(engine: AsyncEngine) -> list[str]:
    """Anything a switch adds besides its vectors: shadow columns, triggers, functions, comments."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT 'column ' || attrelid::regclass || '.' || attname FROM pg_attribute "
                "WHERE attname = 'embedding_next' AND NOT attisdropped "
                "UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE tgname LIKE 'memora_pg_reembed%' "
                "UNION ALL SELECT 'function ' || proname FROM pg_proc WHERE proname LIKE 'memora_pg_reembed%' "
                "UNION ALL SELECT 'comment ' || objoid::regclass FROM pg_description "
                "WHERE objoid IN (to_regclass('memora.memories'), to_regclass('memora.autogen_contents'))"
            )
        )
        return [row[0] for row in rows]


async def best_memory(store: PostgresGraphDB, org_id: str, query: str, user_id: str | None = None) -> str:
    vector_db = store.get_associated_vector_db()
    assert vector_db is not None
    scope = MemorySearchScope.USER if user_id else MemorySearchScope.ORGANIZATION
    hits = await vector_db.search_memory(query, scope, org_id, user_id)
    return hits[0][0].memory


def store(corpus: Corpus, embedder: Embedder) -> PostgresGraphDB:
    return PostgresGraphDB(corpus.engine, settings=corpus.settings, embedder=embedder)


def database(corpus: Corpus) -> Database:
    return Database(corpus.engine, settings=corpus.settings)


# -- the whole database ----------------------------------------------------------------------


async def test_switch_to_another_dimension(corpus: Corpus) -> None:
    """Every searchable row gets the new model's vector in a column of the new dimension, with its HNSW index."""
    engine = corpus.engine
    queries = [corpus.texts[3], corpus.texts[21], "Ola saw a newt near Hanoi"]
    before = [await best_memory(corpus.graph, corpus.org_id, q) for q in queries[:2]]
    before_user = await best_memory(corpus.graph, corpus.org_id, queries[0], corpus.user_id)
    rows = {t: await searchable(engine, t) for t in ("memories", "autogen_contents", "store_items")}
    calls: list[tuple[int, int]] = []

    result = await reembed(database(corpus), Named("hash-256", 256), batch_size=7, progress=lambda *a: calls.append(a))

    assert result.dimensions == 256
    assert result.embedded == rows
    assert (result.already_done, result.resumed) == (0, False)
    assert await column_type(engine, "memories") == "vector(256)"
    assert await column_type(engine, "autogen_contents") == "vector(256)"
    assert {t: await searchable(engine, t) for t in rows} == rows
    assert await off_by(engine, Named("hash-256", 256)) < 1e-6
    assert await leftovers(engine) == []
    total = sum(rows.values())
    assert calls[0] == (0, total)
    assert calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)

    async with engine.connect() as conn:
        index = (
            await conn.execute(
                text(
                    "SELECT pg_get_indexdef(i.indexrelid) AS definition, i.indisvalid AS valid, "
                    "format_type(a.atttypid, a.atttypmod) AS type FROM pg_index AS i "
                    "JOIN pg_attribute AS a ON a.attrelid = i.indexrelid "
                    "WHERE i.indexrelid = to_regclass('memora.ix_memories_embedding_hnsw')"
                )
            )
        ).one()
        unsearchable = await conn.scalar(
            text(
                "SELECT count(*) FROM memora.memories WHERE memory_id = ANY(CAST(:ids AS uuid[])) AND embedding IS NULL"
            ),
            {"ids": corpus.unsearchable},
        )
        image = (
            await conn.execute(
                text("SELECT content_bytes, embedding FROM memora.autogen_contents WHERE mime_type = 'image/png'")
            )
        ).one()
    assert index.valid
    assert index.type == "vector(256)"
    assert "USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='128')" in index.definition
    assert unsearchable == len(corpus.unsearchable) > 0
    assert (bytes(image.content_bytes), image.embedding) == (PNG, None)

    switched = store(corpus, Named("hash-256", 256))
    assert [await best_memory(switched, corpus.org_id, q) for q in queries[:2]] == before
    assert await best_memory(switched, corpus.org_id, queries[0], corpus.user_id) == before_user
    notes = PostgresMemory(
        "notes", engine=engine, settings=corpus.settings, embedder=Named("hash-256", 256), org_id=corpus.org_id
    )
    found = await notes.query("aisle seats on long flights", k=1)
    assert found.results[0].content == "Prefers aisle seats on long flights"
    with pytest.raises(ConfigurationError):
        await best_memory(store(corpus, HashEmbedder(384)), corpus.org_id, queries[0])


async def test_switch_keeps_the_searchable_together_checks(corpus: Corpus) -> None:
    """Dropping the old vector column drops the CHECK constraints on it (migration 0011's): the switch makes
    each again on the new column, and validates it."""
    await reembed(database(corpus), Named("hash-200", 200))
    async with corpus.engine.connect() as conn:
        checks = (
            await conn.execute(
                text(
                    "SELECT conname, convalidated FROM pg_constraint"
                    " WHERE conname LIKE '%searchable_together' AND connamespace = 'memora'::regnamespace"
                    " ORDER BY conname"
                )
            )
        ).all()
    assert [(row.conname, row.convalidated) for row in checks] == [
        ("ck_autogen_contents_searchable_together", True),
        ("ck_memories_searchable_together", True),
        ("ck_store_items_searchable_together", True),
    ]
    with pytest.raises(sa_exc.IntegrityError, match="ck_memories_searchable_together"):
        async with corpus.engine.begin() as conn:
            await conn.execute(text("UPDATE memora.memories SET search_text = NULL WHERE embedding IS NOT NULL"))


async def test_switch_leaves_no_drift(corpus: Corpus) -> None:
    """After a switch alembic check finds the schema exactly as the migrations made it."""
    await reembed(database(corpus), Named("hash-128", 128))

    def check(connection: Connection) -> None:
        command.check(migrations.alembic_config(MigrationOptions(schema=SCHEMA, dimensions=128), connection))

    async with corpus.engine.connect() as conn:
        await conn.run_sync(check)


async def test_interrupted_switch_continues_where_it_stopped(corpus: Corpus) -> None:
    """A run that fails after two batches keeps them; the next run embeds only the rest, and the result is whole."""
    engine = corpus.engine
    query = corpus.texts[5]
    before = await best_memory(corpus.graph, corpus.org_id, query)
    tables = ("memories", "autogen_contents", "store_items")
    rows = sum([await searchable(engine, table) for table in tables])

    with pytest.raises(EmbeddingError):
        await reembed(database(corpus), FailsAfter("hash-256", 256, batches=2), batch_size=5)

    # Until the switch, the application keeps working on the old vectors, and keeps writing.
    assert await column_type(engine, "memories") == "vector(384)"
    assert await best_memory(corpus.graph, corpus.org_id, query) == before
    async with engine.connect() as conn:
        done = (
            await conn.execute(
                text("SELECT org_id, memory_id, user_id, memory FROM memora.memories WHERE embedding_next IS NOT NULL")
            )
        ).all()
    assert len(done) == 10
    vector_db = corpus.graph.get_associated_vector_db()
    assert isinstance(vector_db, PgVectorDB)
    rewritten = done[0]
    agent = await corpus.graph.create_agent(rewritten.org_id, "Late")
    await vector_db.add_memories(
        rewritten.org_id,
        rewritten.user_id,
        agent.agent_id,
        [rewritten.memory_id],
        ["Someone moved to Porto"],
        "2026-02-01T00:00:00+00:00",
    )
    forgotten = done[1].memory_id
    await vector_db.delete_memory(str(forgotten))
    await vector_db.add_memories(
        corpus.org_id,
        corpus.user_id,
        (await corpus.graph.create_agent(corpus.org_id, "Later")).agent_id,
        [uuid.uuid4()],
        ["Jake adopted a basset hound"],
        "2026-02-01T00:00:00+00:00",
    )

    result = await reembed(database(corpus), Named("hash-256", 256), batch_size=5)

    assert result.resumed
    # The rewritten memory's new vector belonged to its old text, the forgotten one is not searchable.
    assert result.already_done == 8
    assert result.already_done + result.total_embedded == rows + 1 - 1
    assert sum([await searchable(engine, table) for table in tables]) == rows
    assert await column_type(engine, "memories") == "vector(256)"
    assert await column_type(engine, "store_items") == "vector(256)"
    assert await off_by(engine, Named("hash-256", 256)) < 1e-6
    assert await leftovers(engine) == []
    async with engine.connect() as conn:
        assert await conn.scalar(
            text("SELECT embedding IS NULL FROM memora.memories WHERE memory_id = :id"), {"id": forgotten}
        )
    switched = store(corpus, Named("hash-256", 256))
    assert await best_memory(switched, rewritten.org_id, "moved to Porto") == "Someone moved to Porto"
    assert await best_memory(switched, corpus.org_id, "basset hound", corpus.user_id) == "Jake adopted a basset hound"


async def test_another_target_is_refused_until_restart(corpus: Corpus) -> None:
    """An unfinished switch is continued only with its own target; restart=True discards it for another."""
    with pytest.raises(EmbeddingError):
        await reembed(database(corpus), FailsAfter("hash-256", 256, batches=1), batch_size=4)

    with pytest.raises(ConfigurationError, match=r"'hash-256' \(256 dimensions\)"):
        await reembed(database(corpus), Named("hash-128", 128))
    with pytest.raises(ConfigurationError, match="in progress"):
        await reembed(database(corpus), Named("other-256", 256))
    assert await column_type(corpus.engine, "memories", "embedding_next") == "vector(256)"

    result = await reembed(database(corpus), Named("hash-128", 128), restart=True)

    assert (result.resumed, result.already_done, result.dimensions) == (False, 0, 128)
    assert await column_type(corpus.engine, "memories") == "vector(128)"
    assert await off_by(corpus.engine, Named("hash-128", 128)) < 1e-6


async def test_an_interrupted_index_build_is_finished_by_the_next_run(corpus: Corpus) -> None:
    """A run stopped while the index is built leaves searches working; the next run builds it and embeds nothing."""
    engine = corpus.engine
    async with engine.connect() as blocker:
        # An older snapshot makes CREATE INDEX CONCURRENTLY wait at its end, where the run is stopped.
        await blocker.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        await blocker.execute(text("SELECT count(*) FROM memora.organizations"))
        running = asyncio.create_task(reembed(database(corpus), Named("hash-256", 256)))
        async with engine.connect() as watcher:
            for _ in range(600):
                phase = await watcher.scalar(text("SELECT phase FROM pg_stat_progress_create_index"))
                await watcher.rollback()
                if phase == "waiting for old snapshots":
                    break
                await asyncio.sleep(0.05)
        assert phase == "waiting for old snapshots"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await blocker.rollback()
    async with engine.connect() as conn:
        left = await conn.scalar(
            text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('memora.ix_memories_embedding_hnsw')")
        )
    assert left is False
    assert await column_type(engine, "memories") == "vector(256)"
    assert await best_memory(store(corpus, Named("hash-256", 256)), corpus.org_id, corpus.texts[2]) == corpus.texts[2]

    result = await reembed(database(corpus), Named("hash-256", 256))

    assert (result.resumed, result.total_embedded, result.batches) == (True, 0, 0)
    assert await leftovers(engine) == []
    async with engine.connect() as conn:
        valid = await conn.scalar(
            text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('memora.ix_memories_embedding_hnsw')")
        )
    assert valid
    assert await off_by(engine, Named("hash-256", 256)) < 1e-6


async def test_a_second_run_at_once_is_refused(corpus: Corpus) -> None:
    """While one re-embed runs, another on the same schema is a ReembedBusyError and changes nothing."""
    gated = Gated("hash-256", 256)
    first = asyncio.create_task(reembed(database(corpus), gated))
    await asyncio.wait_for(gated.entered.wait(), 10)

    with pytest.raises(ReembedBusyError):
        await reembed(database(corpus), Named("hash-256", 256))

    gated.release.set()
    result = await first
    assert result.dimensions == 256
    assert await off_by(corpus.engine, Named("hash-256", 256)) < 1e-6


async def test_a_row_rewritten_while_its_batch_is_embedded_is_embedded_again(corpus: Corpus) -> None:
    """A batch does not write a vector to a row whose text changed after it was read; the next pass embeds it."""
    async with corpus.engine.connect() as conn:
        first = (
            await conn.execute(
                text(
                    "SELECT org_id, memory_id, user_id FROM memora.memories WHERE embedding IS NOT NULL "
                    "ORDER BY org_id, memory_id LIMIT 1"
                )
            )
        ).one()
    gated = Gated("hash-256", 256)
    running = asyncio.create_task(reembed(database(corpus), gated, batch_size=3))
    await asyncio.wait_for(gated.entered.wait(), 10)
    vector_db = corpus.graph.get_associated_vector_db()
    assert isinstance(vector_db, PgVectorDB)
    agent = await corpus.graph.create_agent(first.org_id, "Editor")
    await vector_db.add_memories(
        first.org_id, first.user_id, agent.agent_id, [first.memory_id], ["rewritten mid-batch"], "2026-03-01T00:00:00Z"
    )
    gated.release.set()

    result = await running

    assert result.total_embedded == sum(
        [await searchable(corpus.engine, t) for t in ("memories", "autogen_contents", "store_items")]
    )
    assert await off_by(corpus.engine, Named("hash-256", 256)) < 1e-6


async def test_bad_arguments_change_nothing(corpus: Corpus) -> None:
    """A bad batch size, a dimension no index holds, a missing organization: typed errors and no shadow column."""
    with pytest.raises(InvalidInputError):
        await reembed(database(corpus), Named("hash-256", 256), batch_size=0)
    with pytest.raises(InvalidInputError):
        await reembed(database(corpus), Named("hash-huge", 2001))
    unbuildable = corpus.settings.model_copy(update={"hnsw_m": 48, "hnsw_ef_construction": 64})
    with pytest.raises(ConfigurationError, match="twice"):
        await reembed(Database(corpus.engine, settings=unbuildable), Named("hash-256", 256))
    with pytest.raises(NotFoundError):
        await reembed(database(corpus), Named("hash-384", 384), org_id="no-such-org")
    assert await leftovers(corpus.engine) == []


async def test_a_role_under_row_level_security_is_refused(corpus: Corpus, fresh_database: str) -> None:
    """Policies that would hide rows from the re-embed make it a ConfigurationError before anything changes."""
    role = f"memora_app_{uuid.uuid4().hex[:8]}"
    async with corpus.engine.begin() as conn:
        await conn.execute(text(f"CREATE ROLE {role}"))
        await conn.execute(text(f"GRANT USAGE ON SCHEMA memora TO {role}"))
        await conn.execute(text("ALTER TABLE memora.memories ENABLE ROW LEVEL SECURITY"))
    as_app = create_async_engine(fresh_database, connect_args={"server_settings": {"role": role}})
    try:
        with pytest.raises(ConfigurationError, match="BYPASSRLS"):
            await reembed(Database(as_app, settings=corpus.settings), Named("hash-256", 256))
    finally:
        await as_app.dispose()
        async with corpus.engine.begin() as conn:
            await conn.execute(text(f"DROP OWNED BY {role}"))
            await conn.execute(text(f"DROP ROLE {role}"))
    assert await leftovers(corpus.engine) == []
    assert await column_type(corpus.engine, "memories") == "vector(384)"


# -- one organization ------------------------------------------------------------------------


async def test_one_organization_keeps_the_others_untouched(corpus: Corpus) -> None:
    """One organization's rows take the new model's vectors; every other organization's stay byte-identical."""
    engine = corpus.engine
    other_before = await vectors_of(engine, corpus.other_org_id)
    default_org = await vectors_of(engine, "default")
    new_model = Named("hash-384-passage", 384, prefix="passage ")
    calls: list[tuple[int, int]] = []

    result = await reembed(
        database(corpus), new_model, org_id=corpus.org_id, batch_size=8, progress=lambda *a: calls.append(a)
    )

    org_rows = len(await vectors_of(engine, corpus.org_id))
    assert result.total_embedded == org_rows
    assert calls[-1] == (org_rows, org_rows)
    assert (result.org_id, result.dimensions) == (corpus.org_id, 384)
    assert await off_by(engine, new_model, org_id=corpus.org_id) < 1e-6
    assert await off_by(engine, Named("hash", 384), org_id=corpus.other_org_id) < 1e-6
    assert await vectors_of(engine, corpus.other_org_id) == other_before
    assert await vectors_of(engine, "default") == default_org
    assert await leftovers(engine) == []
    async with engine.connect() as conn:
        valid = await conn.scalar(
            text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('memora.ix_memories_embedding_hnsw')")
        )
    assert valid


async def test_one_organization_cannot_change_dimension(corpus: Corpus) -> None:
    """Every organization shares one column, so another dimension for one of them is an InvalidInputError."""
    before = await vectors_of(corpus.engine, corpus.org_id)

    with pytest.raises(InvalidInputError, match="whole database"):
        await reembed(database(corpus), Named("hash-256", 256), org_id=corpus.org_id)

    assert await vectors_of(corpus.engine, corpus.org_id) == before
    assert await leftovers(corpus.engine) == []


async def test_result_counts(corpus: Corpus) -> None:
    """The result counts batches and rows per table and states the model it moved to."""
    result: ReembedResult = await reembed(database(corpus), Named("hash-200", 200), batch_size=10)
    reported = json.loads(json.dumps(result.as_dict()))

    memories = await searchable(corpus.engine, "memories")
    contents = await searchable(corpus.engine, "autogen_contents")
    items = await searchable(corpus.engine, "store_items")
    assert items == 2
    assert result.embedded == {"memories": memories, "autogen_contents": contents, "store_items": items}
    assert result.batches == -(-memories // 10) + -(-contents // 10) + -(-items // 10)
    assert result.model == "hash-200"
    assert reported["total_embedded"] == memories + contents + items
    assert reported["dimensions"] == 200
    assert result.elapsed_seconds > 0
