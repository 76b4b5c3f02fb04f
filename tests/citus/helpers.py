"""Builders and the catalogue of known failures shared by the Citus tests.

Each ``XFAIL_*`` is the reason a test of a call that fails on Citus 13.2 is marked
``xfail(strict=True)``: when the SQL is fixed the test passes, the strict mark fails, and the
mark is removed. The README of this folder lists each with its SQLSTATE, statement and rewrite.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB
from tests.integration.helpers import World, chat, day, payload, world

ORGS = 3  # organizations per test: their rows land on different shards and workers

# SQLSTATE 0A000 (feature_not_supported) unless noted.
XFAIL_COMPLEX_JOIN = (
    "0A000 complex joins are only supported when all distributed tables are co-located and joined on their "
    "distribution columns: correlated subquery / LATERAL joined on x.org_id = y.org_id, not on the constant"
)
XFAIL_LATERAL_OUTER = (
    "0A000 cannot perform a lateral outer join when a distributed subquery references a reference table "
    "or complex joins: the LEFT JOIN LATERAL of the listing"
)
XFAIL_RECURSIVE = (
    "0A000 recursive CTEs are only supported when they contain a filter on the distribution column: "
    "the recursive term joins on org_id = chain.org_id, not org_id = :org_id"
)
XFAIL_RESOLVED = (
    "0A000 recursive CTE without a filter on the distribution column, over entries of several organizations "
    "in one statement"
)
XFAIL_FOR_UPDATE = (
    "0A000 could not run distributed query with FOR UPDATE/SHARE commands: the lock statement has an EXISTS "
    "in its target list"
)
XFAIL_NEWER = '42P01 relation "newer" does not exist: a data-modifying CTE referenced from a subquery'
XFAIL_RLS_SET_CONFIG = (
    "42501 new row violates row-level security policy / rows not found: set_config('memora.org_id', ..., true) "
    "(memora_pg.db TENANT) is not sent to the workers, whose policies then see no organization "
    "(SET LOCAL is, with citus.propagate_set_commands = 'local')"
)
XFAIL_RLS_SAVE = (
    '42P01 missing FROM-clause entry for table "memory_updates": the one-statement save under RLS '
    "(the workers' policy quals in the deparsed writable CTEs)"
)
XFAIL_NOT_EXISTS = (
    '42601 a column definition list is required for functions returning "record": import\'s emptiness check '
    "SELECT NOT EXISTS (SELECT FROM organizations) (ops.transfer DATABASE_IS_EMPTY) as Citus plans it"
)


def expect_failure(request: pytest.FixtureRequest, reason: str, when: bool = True) -> None:
    """Mark the running test xfail(strict=True) when ``when``: the call is known to fail on Citus."""
    if when:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


async def worlds(graph: PostgresGraphDB, n: int = ORGS) -> list[World]:
    """``n`` organizations, each with a user and an agent."""
    return [await world(graph, user_name=f"User {i}", agent_label=f"Agent {i}") for i in range(n)]


async def memory_ids(engine: AsyncEngine, org_id: str, interaction_id: str) -> list[str]:
    """The ids of the memories an interaction produced, read with plain SQL (router-plannable)."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT memory_id FROM memora.memories WHERE org_id = :o AND interaction_id = :i ORDER BY memory"),
            {"o": org_id, "i": interaction_id},
        )
        return [str(r[0]) for r in rows]


async def remember(
    graph: PostgresGraphDB, engine: AsyncEngine, w: World, fact: str, *, supersedes: str | None = None, at: int = 1
) -> str:
    """Save one memory in its own interaction (contrary to ``supersedes`` when given); its id."""
    if supersedes is None:
        body = payload(chat(fact), [(fact, [0])], at=day(at))
    else:
        body = payload(chat(fact), contrary=[(fact, [0], supersedes)], at=day(at))
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    (memory_id,) = await memory_ids(engine, w.org_id, interaction_id)
    return memory_id


def ref(w: World, memory_id: str) -> dict[str, str]:
    return {"memory_id": memory_id, "user_id": w.user_id, "org_id": w.org_id}
