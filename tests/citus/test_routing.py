"""Where statements go on the cluster: router plans for one organization, and what a save sends to the workers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import PostgresGraphDB, Settings, driver
from memora_pg.embeddings import HashEmbedder
from tests.citus.helpers import ref, remember, worlds
from tests.citus.trace import Trace, assert_router_plannable, traced_engine
from tests.integration.helpers import chat, day, payload

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


@pytest.mark.parametrize("mode", ["branch", "linear"])
async def test_a_save_touches_one_worker_without_two_phase_commit(
    database_url: str, settings: Settings, mode: str
) -> None:
    """A save of 10 memories goes to one worker and commits in one phase: the coordinator hands the call of
    ``save_interaction`` to the organization's worker, which writes every row itself."""
    trace = Trace()
    engine = traced_engine(database_url, trace)
    store = PostgresGraphDB(
        engine, settings=settings.model_copy(update={"contradiction_chains": mode}), embedder=HashEmbedder(384)
    )
    (w,) = await worlds(store, 1)
    with trace.capture():
        await store.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "yo"), [(f"fact {i}", [0]) for i in range(10)])
        )
    await store.close()
    await engine.dispose()
    print(trace.summary())
    assert len(trace.nodes) == 1, trace.summary()
    assert not trace.two_phase, trace.summary()
    assert not any(c.sql.startswith("COPY") for c in trace.commands), trace.summary()
    assert len([c for c in trace.commands if "save_interaction(" in c.sql]) == 1, trace.summary()
    assert not any(c.sql.lstrip().upper().startswith("INSERT") for c in trace.commands), trace.summary()


class _Sent:
    """Every statement an engine sends, with its driver-level parameters."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.statements: list[tuple[str, Any]] = []
        driver.listen(engine, lambda statement, arguments: self.statements.append((statement, arguments)))

    def tables(self) -> list[tuple[str, Any]]:
        """The statements that read or write memora_pg's tables (not the catalog, not SET)."""
        return [
            (sql, params)
            for sql, params in self.statements
            if "memora" in sql
            and sql.lstrip().split(None, 1)[0].upper() in ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")
        ]


async def test_every_statement_of_the_main_calls_is_router_plannable(
    database_url: str, engine: AsyncEngine, settings: Settings
) -> None:
    """Each statement of the one-organization calls (writes, reads, history, resolution, deletes) is single-shard."""
    sent_engine = create_async_engine(database_url)
    sent = _Sent(sent_engine)
    for mode in ("branch", "linear"):
        store = PostgresGraphDB(
            sent_engine,
            settings=settings.model_copy(update={"contradiction_chains": mode}),
            embedder=HashEmbedder(384),
        )
        (w,) = await worlds(store, 1)
        old = await remember(store, engine, w, "lives in Paris", at=1)
        new = await remember(store, engine, w, "moved to Rome", supersedes=old, at=2)
        interaction_id, _ = await store.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "yo"), [("fact", [0])])
        )
        await store.update_interaction_and_memories(
            w.org_id, w.agent_id, w.user_id, interaction_id, payload(chat("hi", "more"), [("second", [1])], at=day(3))
        )
        await store.get_interaction(w.org_id, w.user_id, interaction_id, True, True)
        await store.get_all_user_interactions(w.org_id, w.user_id)
        await store.get_user_memory(w.org_id, w.user_id, new)
        await store.get_all_user_memories(w.org_id, w.user_id)
        await store.get_all_user_memories(w.org_id, w.user_id, w.agent_id)
        await store.get_user_memory_history(w.org_id, w.user_id, new)
        await store.fetch_user_memories_resolved([ref(w, old)])
        await store.delete_user_memory(w.org_id, w.user_id, old)
        await store.delete_user_interaction_and_its_memories(w.org_id, w.user_id, interaction_id)
        await store.close()
    checked = sent.tables()
    assert len(checked) > 30
    explained = 0
    for statement, params in checked:
        try:
            # A connection each: after the EXPLAIN of a routed multi-row insert, a savepoint of the
            # same transaction is not always usable again.
            async with driver.checkout(sent_engine, settings.db_schema) as conn:
                rows = await conn.raw.fetch("EXPLAIN (COSTS OFF) " + statement, *params)
        except asyncpg.PostgresError as error:
            if "could not create distributed plan" not in str(error):
                raise
            continue  # Citus cannot EXPLAIN this bound statement generically; the call itself ran
        if not rows:
            continue  # the driver gave the EXPLAIN of an executemany no rows to read
        explained += 1
        plan = "\n".join(row[0] for row in rows)
        counts = [int(n) for n in re.findall(r"Task Count: (\d+)", plan)]
        if not counts and "INSERT/SELECT method: pull to coordinator" in plan:
            continue  # a step of a write over constants: the coordinator sends its rows to one shard
        assert counts, f"not a distributed plan:\n{statement}\n{plan}"
        assert counts == [1] * len(counts), f"not single-shard:\n{statement}\n{plan}"
        assert "Distributed Subplan" not in plan, f"planned in several steps:\n{statement}\n{plan}"
    await sent_engine.dispose()
    assert explained > 20
