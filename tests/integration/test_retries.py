"""Transactions that lose a race (deadlock, serialization failure) are typed as transient and retried."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg.db import unit_of_work
from memora_pg.errors import DatabaseError, TransientDatabaseError
from memora_pg.graph.store import RETRIES, retried


async def test_a_real_deadlock_is_a_transient_error(engine: AsyncEngine) -> None:
    """Two transactions locking two rows in opposite orders: PostgreSQL aborts one, typed TransientDatabaseError."""
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO memora.organizations (org_id, org_name) VALUES ('a', 'a'), ('b', 'b')"))
    first_locked, second_locked = asyncio.Event(), asyncio.Event()

    async def lock(mine: str, theirs: str, locked: asyncio.Event, other: asyncio.Event) -> None:
        async with unit_of_work(engine) as conn:
            await conn.execute(text("SELECT 1 FROM memora.organizations WHERE org_id = :o FOR UPDATE"), {"o": mine})
            locked.set()
            await other.wait()
            await conn.execute(text("SELECT 1 FROM memora.organizations WHERE org_id = :o FOR UPDATE"), {"o": theirs})

    results = await asyncio.gather(
        lock("a", "b", first_locked, second_locked), lock("b", "a", second_locked, first_locked), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert isinstance(failures[0], TransientDatabaseError)
    assert "40P01" in str(failures[0])


async def test_retried_runs_again_after_a_lost_race_and_gives_up_after_three() -> None:
    """A write that loses a race twice succeeds on the third attempt; one that always loses raises."""
    calls = 0

    @retried
    async def flaky(losses: int) -> str:
        nonlocal calls
        calls += 1
        if calls <= losses:
            raise TransientDatabaseError("lost a race")
        return "done"

    assert await flaky(2) == "done"
    assert calls == 3
    calls = 0
    with pytest.raises(TransientDatabaseError):
        await flaky(99)
    assert calls == RETRIES
    calls = 0

    @retried
    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise DatabaseError("not a race")

    with pytest.raises(DatabaseError):
        await broken()
    assert calls == 1
