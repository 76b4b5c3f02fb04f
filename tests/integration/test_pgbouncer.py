"""Behind a real pgbouncer in transaction pooling mode: the core flows of every face work unchanged.

The test starts Debian's pgbouncer on a free loopback port, in transaction mode with a single
server connection, so every transaction of every client shares one server session: anything
memora_pg left behind in a session (a setting, a prepared statement) would show.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.lib import pgbouncer
from memora_pg import DatabaseError, MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings
from memora_pg.autogen import MemoryContent, MemoryMimeType, PostgresMemory
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import create_engine
from memora_pg.mem0 import AsyncMemory
from tests.integration.helpers import chat, payload, world


@pytest.fixture(scope="module")
def bouncer_url(server_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session database through pgbouncer (transaction mode, one server connection)."""
    if pgbouncer.binary() is None:
        pytest.skip("pgbouncer is not installed (scripts/ci-system-deps.sh installs it)")
    database = str(make_url(database_url).database)
    try:
        bouncer = pgbouncer.start(server_url, database, tmp_path_factory.mktemp("pgbouncer"))
    except pgbouncer.PgbouncerError as error:
        pytest.fail(str(error))
    try:
        yield bouncer.url
    finally:
        bouncer.stop()


@pytest.fixture
def bounced(settings: Settings, bouncer_url: str) -> Settings:
    """The test settings, pointed at pgbouncer, with the statement cache off as transaction pooling needs."""
    return Settings(database_url=bouncer_url, db_schema=settings.db_schema, statement_cache_size=0)


@pytest.fixture
async def through_bouncer(bounced: Settings, bouncer_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(bouncer_url, bounced)
    yield engine
    await engine.dispose()


async def _named_statements(engine: AsyncEngine) -> list[str]:
    """Prepared statements left on pgbouncer's one server connection."""
    async with engine.connect() as conn:
        return list((await conn.execute(text("SELECT name FROM pg_prepared_statements"))).scalars())


async def test_graph_and_vector_flows_run_through_pgbouncer(bounced: Settings, through_bouncer: AsyncEngine) -> None:
    """setup(), save, update, resolved fetch and both search scopes work through pgbouncer, also concurrently."""
    graph = PostgresGraphDB(settings=bounced, embedder=HashEmbedder(384))
    try:
        await graph.setup()
        w = await world(graph)
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "I live in Lisbon"), [("lives in Lisbon", [1])])
        )
        (old,) = await graph.get_all_user_memories(w.org_id, w.user_id)
        await graph.update_interaction_and_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            interaction_id,
            payload(chat("hi", "I live in Lisbon", "now in Porto"), contrary=[("lives in Porto", [2], old.memory_id)]),
        )
        (current,) = await graph.fetch_user_memories_resolved(
            [{"org_id": w.org_id, "user_id": w.user_id, "memory_id": old.memory_id}]
        )
        assert current.memory == "lives in Porto"
        vectors = graph.get_associated_vector_db()
        assert isinstance(vectors, PgVectorDB)
        searches = await asyncio.gather(
            *(vectors.search_memory("Porto", MemorySearchScope.USER, w.org_id, w.user_id) for _ in range(5)),
            *(vectors.search_memory("Porto", MemorySearchScope.ORGANIZATION, w.org_id) for _ in range(5)),
            *(graph.get_interaction(w.org_id, w.user_id, interaction_id) for _ in range(5)),
        )
        for hits in searches[:10]:
            assert isinstance(hits, list)
            assert hits[0][0].memory == "lives in Porto"
        assert await _named_statements(through_bouncer) == []
    finally:
        await graph.close()
    # The org-wide searches set their planner settings with SET LOCAL: nothing stays on the session.
    async with through_bouncer.connect() as conn:
        assert await conn.scalar(text("SELECT current_setting('hnsw.iterative_scan', true)")) in (None, "", "off")


async def test_mem0_and_autogen_run_through_pgbouncer(
    bounced: Settings,
    bouncer_url: str,
    through_bouncer: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mem0-style add and search and the AutoGen add and query work through pgbouncer."""
    monkeypatch.setenv("MEMORA_PG_STATEMENT_CACHE_SIZE", "0")
    monkeypatch.setenv("MEMORA_PG_SCHEMA", bounced.db_schema)
    memory = AsyncMemory.from_config(
        {
            "vector_store": {"provider": "pgvector", "config": {"connection_string": bouncer_url}},
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        }
    )
    notes = PostgresMemory("notes", database_url=bouncer_url, settings=bounced, embedder=HashEmbedder(384))
    try:
        await memory.add("I am vegetarian", user_id="alice", infer=False)
        found = await memory.search("vegetarian", filters={"user_id": "alice"})
        assert [hit["memory"] for hit in found["results"]] == ["I am vegetarian"]
        await notes.add(MemoryContent(content="the deploy runs on Fridays", mime_type=MemoryMimeType.TEXT))
        result = await notes.query("when is the deploy?")
        assert [item.content for item in result.results] == ["the deploy runs on Fridays"]
        assert await _named_statements(through_bouncer) == []
    finally:
        await memory.close()
        await notes.close()


async def test_statement_cache_on_leaves_statements_on_the_server_connection(
    settings: Settings, bouncer_url: str, through_bouncer: AsyncEngine
) -> None:
    """With asyncpg's statement cache on, named statements stay on pgbouncer's server connection.

    There they collide with other processes' statement names and are missing from the other
    server connections a client is given: the reason for statement_cache_size=0.
    """
    cached = Settings(database_url=bouncer_url, db_schema=settings.db_schema, statement_cache_size=100)
    graph = PostgresGraphDB(settings=cached, embedder=HashEmbedder(384))
    try:
        await graph.get_all_organizations()
        assert any(name.startswith("__asyncpg_") for name in await _named_statements(through_bouncer))
    finally:
        await graph.close()
        async with through_bouncer.begin() as conn:
            await conn.execute(text("DEALLOCATE ALL"))


async def test_startup_statement_timeout_is_refused_by_pgbouncer(bounced: Settings) -> None:
    """statement_timeout_ms travels as a startup parameter, which pgbouncer refuses: a DatabaseError, as documented."""
    graph = PostgresGraphDB(settings=bounced.model_copy(update={"statement_timeout_ms": 1000}), embedder=None)
    try:
        with pytest.raises(DatabaseError, match="statement_timeout"):
            await graph.get_all_organizations()
    finally:
        await graph.close()


def test_test_server_is_not_reached_directly(bouncer_url: str, server_url: str) -> None:
    """The stores' URL names pgbouncer's loopback port, not the server."""
    assert make_url(bouncer_url).host == "127.0.0.1"
    assert make_url(bouncer_url).port != make_url(server_url).port
