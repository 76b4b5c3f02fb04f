"""One public write, one transaction: whatever fails, nothing of the call remains (issue: ACID writes)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import CommitOutcomeUnknownError, DatabaseError, EmbeddingError, PostgresGraphDB, Settings
from memora_pg.contract import BaseVectorDB
from memora_pg.embeddings import HashEmbedder
from memora_pg.migrations import MigrationOptions, upgrade
from tests.integration.helpers import World, chat, payload, world

TABLES = ("interactions", "messages", "memories", "memory_sources", "memory_updates")


async def _counts(engine: AsyncEngine, schema: str = "memora") -> dict[str, int]:
    async with engine.connect() as conn:
        return {t: int(await conn.scalar(text(f"SELECT count(*) FROM {schema}.{t}")) or 0) for t in TABLES}


class FailingEmbedder(HashEmbedder):
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")


async def _seeded(graph: PostgresGraphDB) -> tuple[World, str, str]:
    """A user with one interaction holding a memory, to update and to contradict."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi", "I live in Paris"), [("lives in Paris", [1])])
    )
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    return w, interaction_id, memory.memory_id


async def test_embedder_failure_writes_nothing(engine: AsyncEngine, settings: Settings) -> None:
    """The embedder raising is an EmbeddingError, raised before the transaction opens."""
    seed = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder())
    w, interaction_id, memory_id = await _seeded(seed)
    before = await _counts(engine)
    graph = PostgresGraphDB(engine, settings=settings, embedder=FailingEmbedder())
    body = payload(chat("hi", "moved"), [("new", [1])], [("lives in Rome", [1], memory_id)])
    with pytest.raises(EmbeddingError):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    with pytest.raises(EmbeddingError):
        await graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, body)
    assert await _counts(engine) == before


async def test_constraint_failing_after_earlier_statements_rolls_back(
    engine: AsyncEngine, graph: PostgresGraphDB
) -> None:
    """A constraint that fails on the memories insert undoes the interaction and messages already written."""
    w, interaction_id, memory_id = await _seeded(graph)
    before = await _counts(engine)
    async with engine.begin() as conn:
        await conn.execute(text("ALTER TABLE memora.memories ADD CONSTRAINT no_poison CHECK (memory <> 'poison')"))
    try:
        body = payload(chat("hi", "x", "y"), [("fine", [2]), ("poison", [1])], [("contrary", [0], memory_id)])
        with pytest.raises(DatabaseError):
            await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
        with pytest.raises(DatabaseError):
            await graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, body)
        assert await _counts(engine) == before
        stored = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
        assert [m.content for m in stored.messages or []] == ["hi", "I live in Paris"]
    finally:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE memora.memories DROP CONSTRAINT no_poison"))


class ExplodingVectorDB(BaseVectorDB):
    """A foreign vector store whose write fails after the graph's statements ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def add_memories(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("add_memories")
        raise RuntimeError("vector store unavailable")

    async def close(self) -> None: ...
    async def setup(self, *args: Any, **kwargs: Any) -> None: ...
    async def search_memory(self, *args: Any, **kwargs: Any) -> Any: ...
    async def search_memories(self, *args: Any, **kwargs: Any) -> Any: ...
    async def delete_memory(self, memory_id: str) -> None: ...
    async def delete_memories(self, memory_ids: list[str]) -> None: ...
    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None: ...
    async def delete_all_organization_memories(self, org_id: str) -> None: ...


async def test_foreign_vector_store_failure_rolls_the_graph_back(engine: AsyncEngine, settings: Settings) -> None:
    """A foreign store is called last inside the transaction (upstream's order); its failure undoes the graph."""
    foreign = ExplodingVectorDB()
    graph = PostgresGraphDB(engine, settings=settings, associated_vector_db=foreign)
    w = await world(graph)
    before = await _counts(engine)
    with pytest.raises(RuntimeError, match="vector store unavailable"):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])]))
    assert foreign.calls == ["add_memories"]
    assert await _counts(engine) == before


@pytest.fixture
async def isolated(fresh_database: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database of its own (the test adds a trigger to it)."""
    engine = create_async_engine(fresh_database)
    await upgrade(engine, MigrationOptions(schema="memora"))
    yield engine
    await engine.dispose()


async def _install_slow_trigger(engine: AsyncEngine, condition: str) -> None:
    """Make inserts of memories matching ``condition`` sleep 5 s inside the server (a window to interfere)."""
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE FUNCTION memora.slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN IF {condition} THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END $$"
            )
        )
        await conn.execute(
            text(
                "CREATE TRIGGER slow BEFORE INSERT ON memora.memories"
                " FOR EACH ROW EXECUTE FUNCTION memora.slow_insert()"
            )
        )


async def _kill_when_busy(engine: AsyncEngine) -> int:
    """Terminate the backend held in the slow trigger (its memories insert); return how many were killed.

    It is found by what it waits on, not by its statement's text: ``pg_stat_activity.query`` keeps only the
    text's first ``track_activity_query_size`` bytes, where a long statement's insert may not be."""
    for _ in range(200):
        async with engine.connect() as conn:
            killed = await conn.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND state = 'active' AND wait_event = 'PgSleep'"
                )
            )
        if killed:
            return int(killed)
        await asyncio.sleep(0.02)
    return 0


@pytest.mark.parametrize("operation", ["save", "update"])
async def test_backend_terminated_mid_write_leaves_it_whole_or_absent(isolated: AsyncEngine, operation: str) -> None:
    """pg_terminate_backend while the memories insert runs.

    The save is one autocommit statement: its caller cannot tell whether it committed before the connection
    died, which is CommitOutcomeUnknownError (here it had not: nothing of it exists). The update is a
    transaction, which the server rolled back when its backend died: memora_pg runs it again, once, and it
    is there whole. Either way the next call works on the same object.
    """
    url = isolated.url.render_as_string(hide_password=False)
    graph = PostgresGraphDB(url, settings=Settings(database_url=url, db_schema="memora"), embedder=HashEmbedder())
    w, interaction_id, memory_id = await _seeded(graph)
    await _install_slow_trigger(isolated, "NEW.memory LIKE 'slow%'")
    before = await _counts(isolated)
    body = payload(chat("hi", "I live in Paris", "moved"), [("slow fact", [2])], [("slow contrary", [2], memory_id)])
    if operation == "save":
        call = graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    else:
        call = graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, body)
    task = asyncio.ensure_future(call)
    assert await _kill_when_busy(isolated) == 1
    if operation == "save":
        with pytest.raises(CommitOutcomeUnknownError) as caught:
            await task
        assert await _counts(isolated) == before
        memory_ids = caught.value.ids["memory_ids"]  # what to look up to learn the outcome
        assert isinstance(memory_ids, list)
        assert len(memory_ids) == 2
    else:
        await task
        after = await _counts(isolated)
        assert after["memories"] == before["memories"] + 2
        assert after["memory_updates"] == before["memory_updates"] + 1
    # The pool drops the dead connection: the same object works on the next call.
    assert (await graph.get_user(w.org_id, w.user_id)).user_id == w.user_id
    await graph.close()


async def test_cancelled_task_rolls_back(isolated: AsyncEngine) -> None:
    """Cancelling the caller's task mid-write rolls back and returns a clean connection."""
    url = isolated.url.render_as_string(hide_password=False)
    graph = PostgresGraphDB(url, settings=Settings(database_url=url, db_schema="memora"), embedder=HashEmbedder())
    w, _, _ = await _seeded(graph)
    await _install_slow_trigger(isolated, "true")
    before = await _counts(isolated)
    task = asyncio.ensure_future(
        graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("a"), [(str(uuid.uuid4()), [0])])
        )
    )
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with isolated.begin() as conn:
        await conn.execute(text("DROP TRIGGER slow ON memora.memories"))
    assert await _counts(isolated) == before
    assert (await graph.get_user(w.org_id, w.user_id)).user_name == "Jake"
    await graph.close()
