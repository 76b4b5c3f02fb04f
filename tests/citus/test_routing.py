"""Where statements go on the cluster: router plans for one organization, and what a save sends to the workers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from tests.citus.helpers import worlds
from tests.citus.trace import Trace, assert_router_plannable, traced_engine
from tests.integration.helpers import chat, payload

# The statement shapes memora_pg uses, with every table reference pinned to the constant org_id.
PINNED_JOIN = """
SELECT m.memory_id, s.msg_position FROM memora.memories AS m
JOIN memora.memory_sources AS s ON s.org_id = :org_id AND s.memory_id = m.memory_id
WHERE m.org_id = :org_id AND m.user_id = :user_id
"""
COLUMN_JOIN = """
SELECT m.memory_id, (SELECT count(*) FROM memora.memory_sources AS s
                     WHERE s.org_id = m.org_id AND s.memory_id = m.memory_id) AS sources
FROM memora.memories AS m WHERE m.org_id = :org_id AND m.user_id = :user_id
"""
PINNED_RECURSIVE = """
WITH RECURSIVE chain AS (
    SELECT u.new_memory_id, u.old_memory_id FROM memora.memory_updates AS u
    WHERE u.org_id = :org_id AND u.new_memory_id = CAST(:memory_id AS uuid)
    UNION ALL
    SELECT u.new_memory_id, u.old_memory_id FROM memora.memory_updates AS u
    JOIN chain ON u.org_id = :org_id AND u.new_memory_id = chain.old_memory_id
)
SELECT * FROM chain
"""
NOT_ROUTED = "SELECT count(*) FROM memora.memories"


@pytest.fixture
async def traced(database_url: str, settings: Settings) -> AsyncIterator[tuple[PostgresGraphDB, Trace, AsyncEngine]]:
    """A graph store whose connections report every command the coordinator sends to a worker."""
    trace = Trace()
    engine = traced_engine(database_url, trace)
    store = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(384))
    yield store, trace, engine
    await store.close()
    await engine.dispose()


async def test_the_router_check_accepts_one_shard_and_refuses_many(engine: AsyncEngine, graph: PostgresGraphDB) -> None:
    """assert_router_plannable passes a statement pinned to one org_id and fails one that scans every shard."""
    (w,) = await worlds(graph, 1)
    params = {"org_id": w.org_id, "user_id": w.user_id}
    async with engine.connect() as conn:
        await assert_router_plannable(conn, PINNED_JOIN, params)
        await assert_router_plannable(
            conn, PINNED_RECURSIVE, {"org_id": w.org_id, "memory_id": "00000000-0000-0000-0000-000000000000"}
        )
        with pytest.raises(AssertionError, match="not single-shard"):
            await assert_router_plannable(conn, NOT_ROUTED)


async def test_a_join_on_the_column_instead_of_the_constant_is_not_routed(
    engine: AsyncEngine, graph: PostgresGraphDB
) -> None:
    """A correlated subquery joined on s.org_id = m.org_id goes to every shard although m is pinned: pin s too."""
    (w,) = await worlds(graph, 1)
    async with engine.connect() as conn:
        with pytest.raises(AssertionError, match=r"task counts \[8\]"):
            await assert_router_plannable(conn, COLUMN_JOIN, {"org_id": w.org_id, "user_id": w.user_id})
        await assert_router_plannable(
            conn,
            COLUMN_JOIN.replace("s.org_id = m.org_id", "s.org_id = :org_id"),
            {"org_id": w.org_id, "user_id": w.user_id},
        )


async def test_simple_calls_touch_one_worker_without_two_phase_commit(
    traced: tuple[PostgresGraphDB, Trace, AsyncEngine],
) -> None:
    """get_user and create_user send their commands to one worker and commit in one phase."""
    store, trace, _ = traced
    (w,) = await worlds(store, 1)
    with trace.capture():
        await store.get_user(w.org_id, w.user_id)
    assert len(trace.nodes) == 1, trace.summary()
    assert not trace.two_phase, trace.summary()


async def test_a_save_touches_both_workers_with_two_phase_commit(
    traced: tuple[PostgresGraphDB, Trace, AsyncEngine],
) -> None:
    """A one-statement save is not single-shard today: many remote commands, both workers, PREPARE TRANSACTION.

    When the save becomes router-plannable this fails: then assert one worker and no 2PC instead.
    """
    store, trace, _ = traced
    (w,) = await worlds(store, 1)
    with trace.capture():
        await store.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "yo"), [(f"fact {i}", [0]) for i in range(10)])
        )
    print(trace.summary())
    assert trace.two_phase, trace.summary()
    assert len(trace.nodes) >= 2, trace.summary()
