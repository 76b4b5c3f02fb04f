"""Connections go to waiting callers in arrival order (memora_pg.fair_checkout): no caller starves."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import asyncpg_url
from memora_pg.errors import DatabaseError
from memora_pg.fair_checkout import FairGate, gate_of

CALL = "SELECT pg_sleep(0.004)"


async def _loop(database: Database, seconds: float) -> tuple[list[float], list[float], int]:
    """Transactions in a loop for ``seconds``, each asked for again as soon as the last one ended: the time
    each waited for its connection, each call's time, and the pool timeouts."""
    waits: list[float] = []
    calls: list[float] = []
    timeouts = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        asked = time.monotonic()
        try:
            async with database.transaction() as conn:
                waits.append(time.monotonic() - asked)
                await conn.execute(CALL)
        except DatabaseError:
            timeouts += 1
        calls.append(time.monotonic() - asked)
    return waits, calls, timeouts


async def test_three_callers_on_one_connection_are_all_served(database_url: str) -> None:
    """Three tasks on a pool of one connection, each looping for a few seconds: every task is served
    about as often as the others, none times out, and the longest wait is at most 3x the median call
    (a caller waits for the two ahead of it, never for the pool timeout)."""
    settings = Settings(database_url=database_url, pool_size=1, max_overflow=0, pool_timeout=5)
    database = Database(settings=settings)
    try:
        results = await asyncio.gather(*(_loop(database, 4.0) for _ in range(3)))
    finally:
        await database.close()
    served = [len(waits) for waits, _, _ in results]
    assert sum(timeouts for _, _, timeouts in results) == 0
    assert min(served) >= 0.8 * max(served), served
    median_call = statistics.median(call for _, calls, _ in results for call in calls)
    longest_wait = max(wait for waits, _, _ in results for wait in waits)
    assert longest_wait <= 3 * median_call, (longest_wait, median_call)


async def test_a_users_engine_gets_the_gate_too(database_url: str) -> None:
    """An engine passed in is queued for fairly as well: its pool has a gate with as many places as the
    pool can hand out, and a NullPool (no bound) has none."""
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(asyncpg_url(database_url), pool_size=2, max_overflow=1)
    unbounded = create_async_engine(asyncpg_url(database_url), poolclass=NullPool)
    try:
        gate = gate_of(engine)
        assert gate is not None
        assert gate.capacity == 3
        assert gate_of(engine.execution_options(schema_translate_map={None: "memora"})) is gate
        assert gate_of(unbounded) is None
        graph = PostgresGraphDB(engine, embedder=HashEmbedder(384))
        org = await graph.create_organization("Fair")
        assert (await graph.get_organization(org.org_id)).org_id == org.org_id
        await graph.close()
        assert gate.waiting == 0
    finally:
        await engine.dispose()
        await unbounded.dispose()


async def test_the_gate_hands_places_in_order_and_survives_cancellation() -> None:
    """FairGate: callers are admitted in the order they arrived; one that gives up (cancelled, or past its
    timeout) leaves the line without taking a place from the others."""
    gate = FairGate(1, timeout=None)
    await gate.enter()
    order: list[int] = []

    async def caller(n: int) -> None:
        await gate.enter()
        order.append(n)
        await asyncio.sleep(0)
        gate.leave()

    tasks = [asyncio.create_task(caller(n)) for n in range(5)]
    await asyncio.sleep(0.01)
    tasks[2].cancel()
    gate.leave()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert order == [0, 1, 3, 4]
    await gate.enter()  # the place is free again
    gate.leave()
    patient = FairGate(1, timeout=0.05)
    await patient.enter()
    with pytest.raises(Exception, match="No place in line"):
        await patient.enter()
    patient.leave()
    await patient.enter()
