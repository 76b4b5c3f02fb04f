"""Every statement runs on the pooled connection's asyncpg connection (memora_pg.driver).

Each hot call of every face is checked to send one statement, and every call nothing through
SQLAlchemy's execution; a failed or cancelled statement leaves the pool as it found it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings, driver
from memora_pg.autogen import MemoryContent, PostgresMemory
from memora_pg.db import Database
from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.errors import DatabaseError, InvalidInputError, NotFoundError
from memora_pg.mem0 import AsyncMemory, MemoryConfig
from memora_pg.statements import Statement
from tests.integration.helpers import chat, payload, world

Call = Callable[[], Awaitable[Any]]


@pytest.fixture
async def own_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine of this test's own, so the listeners added here die with it."""
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


class Faces:
    """Every face on one engine."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        embedder = HashEmbedder(384)
        self.graph = PostgresGraphDB(engine, settings=settings, embedder=embedder)
        self.vectors = PgVectorDB(engine, settings=settings, embedder=embedder)
        self.dense = PgVectorDB(engine, settings=settings, embedder=embedder, search_mode="dense")
        store = {"collection_name": "driver", "schema": settings.db_schema}
        self.mem0 = AsyncMemory(
            MemoryConfig(vector_store={"provider": "pgvector", "config": store}), engine=engine, embedder=embedder
        )
        self.autogen = PostgresMemory("driver", engine=engine, settings=settings, embedder=embedder)


async def _hot_calls(faces: Faces) -> dict[str, Call]:
    """The hot call of each face, on a user with two interactions and a chain."""
    graph = faces.graph
    w = await world(graph)
    first, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("I live in Paris", "ok"), [("user_Jake lives in Paris", [0])])
    )
    memories = (await graph.get_interaction(w.org_id, w.user_id, first)).memories or []
    await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        payload(chat("I moved to Rome", "ok"), contrary=[("Jake lives in Rome", [0], memories[0].memory_id)]),
    )
    added = await faces.mem0.add("I like green tea", user_id="jake", infer=False)
    tea = added["results"][0]["id"]
    await faces.autogen.add(MemoryContent(content="The user likes green tea", mime_type="text/plain"))
    refs = [[{"org_id": w.org_id, "user_id": w.user_id, "memory_id": memories[0].memory_id}]]
    saves = iter(range(1000))
    return {
        "save": lambda: graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat(f"note {next(saves)}"), [("a note", [0])])
        ),
        "resolved fetch": lambda: graph.fetch_user_memories_resolved_batch(refs),
        "get_all_user_memories": lambda: graph.get_all_user_memories(w.org_id, w.user_id),
        "get_user_memory": lambda: graph.get_user_memory(w.org_id, w.user_id, memories[0].memory_id),
        "get_interaction": lambda: graph.get_interaction(w.org_id, w.user_id, first, True, True),
        "get_all_user_interactions": lambda: graph.get_all_user_interactions(w.org_id, w.user_id, True, True, 0, 10),
        "user search, hybrid": lambda: faces.vectors.search_memory(
            "where does Jake live", MemorySearchScope.USER, w.org_id, w.user_id
        ),
        "user search, dense": lambda: faces.dense.search_memory(
            "where does Jake live", MemorySearchScope.USER, w.org_id, w.user_id
        ),
        "mem0 search": lambda: faces.mem0.search("green tea", user_id="jake"),
        "mem0 get": lambda: faces.mem0.get(tea),
        "mem0 get_all": lambda: faces.mem0.get_all(filters={"user_id": "jake"}),
        "mem0 add": lambda: faces.mem0.add(f"note {next(saves)}", user_id="jake", infer=False),
        "autogen query": lambda: faces.autogen.query("green tea"),
    }


def _routes(engine: AsyncEngine) -> tuple[list[str], list[str]]:
    """The statements sent through SQLAlchemy's execution, and all the statements sent (``driver.listen``
    sees both), from now on."""
    through_sqlalchemy: list[str] = []
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: through_sqlalchemy.append(args[2]))
    driver.listen(engine, lambda sql, arguments: sent.append(sql))
    return through_sqlalchemy, sent


async def test_every_hot_call_sends_one_statement_and_nothing_through_sqlalchemy(
    own_engine: AsyncEngine, settings: Settings
) -> None:
    """Each hot call of each face is one statement on the driver, none through SQLAlchemy's execution."""
    calls = await _hot_calls(Faces(own_engine, settings))
    for call in calls.values():
        await call()
    through_sqlalchemy, sent = _routes(own_engine)
    for name, call in calls.items():
        through_sqlalchemy.clear()
        sent.clear()
        await call()
        assert (len(through_sqlalchemy), len(sent)) == (0, 1), name


async def test_calls_of_several_statements_send_nothing_through_sqlalchemy(
    own_engine: AsyncEngine, settings: Settings
) -> None:
    """The transactions (creates, updates, deletes of every face) run on the driver too, in one transaction."""
    faces = Faces(own_engine, settings)
    graph = faces.graph
    w = await world(graph)
    added = await faces.mem0.add("I like green tea", user_id="jake", infer=False)
    tea = added["results"][0]["id"]
    through_sqlalchemy, sent = _routes(own_engine)
    await graph.create_user(w.org_id, "second user")
    await faces.mem0.update(tea, "I like black tea")
    await faces.mem0.delete(tea)
    await faces.autogen.add(MemoryContent(content="The user likes green tea", mime_type="text/plain"))
    await faces.autogen.clear()
    await graph.delete_all_user_memories(w.org_id, w.user_id)
    assert through_sqlalchemy == []
    assert len(sent) >= 6


async def test_a_refused_statement_is_translated_and_the_connection_reused(
    own_engine: AsyncEngine, settings: Settings
) -> None:
    """The server's errors come out as the package's, and the connection goes back to the pool."""
    graph = PostgresGraphDB(own_engine, settings=settings, embedder=HashEmbedder(384))
    w = await world(graph)
    database = graph.database
    with pytest.raises(NotFoundError):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, "no-such-user", payload(chat("hi")))
    with pytest.raises(InvalidInputError):
        await database.execute_one(Statement("SELECT CAST(:value AS int)", {"value": "not a number"}))
    with pytest.raises(DatabaseError):
        await database.execute_one(Statement("SELECT * FROM {schema}.no_such_table"))
    pool = own_engine.sync_engine.pool
    assert pool.checkedout() == 0  # type: ignore[attr-defined]
    assert [tuple(row) for row in await database.execute_one(Statement("SELECT 1 AS one"))] == [(1,)]


async def test_a_cancelled_statement_never_returns_its_connection(own_engine: AsyncEngine, settings: Settings) -> None:
    """A call cancelled mid-statement invalidates its connection; the next call gets a good one."""
    database = Database(own_engine, settings=settings)
    slow = Statement("SELECT pg_sleep(5) AS slept")
    before = await database.execute_one(Statement("SELECT pg_backend_pid() AS pid"))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(database.execute_one(slow), 0.3)
    pool = own_engine.sync_engine.pool
    assert pool.checkedout() == 0  # type: ignore[attr-defined]
    after = await database.execute_one(Statement("SELECT pg_backend_pid() AS pid"))
    assert after[0].pid != before[0].pid  # the cancelled one was closed, not handed out again


async def test_rows_read_like_sqlalchemy_rows(own_engine: AsyncEngine, settings: Settings) -> None:
    database = Database(own_engine, settings=settings)
    found: Any = await database.execute_one(Statement("SELECT 1 AS one, 'two' AS two"))
    (row,) = found
    assert (row.one, row[1], row._mapping["two"], row._asdict(), row._fields) == (
        1,
        "two",
        "two",
        {"one": 1, "two": "two"},
        ("one", "two"),
    )
    with pytest.raises(AttributeError):
        _ = row.three


async def test_the_engine_echo_logs_memora_pgs_statements(
    database_url: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    engine = create_async_engine(database_url, echo=True)
    try:
        database = Database(engine, settings=settings)
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine.Engine"):
            await database.execute_one(Statement("SELECT CAST(:n AS int) AS echoed", {"n": 7}))
        assert any("AS echoed" in record.getMessage() for record in caplog.records)
    finally:
        await engine.dispose()
