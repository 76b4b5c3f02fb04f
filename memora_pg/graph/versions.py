"""Version chains: the CONTRARY_UPDATE edges of ``memory_updates`` (old -> new).

A memory has at most one predecessor and may have several successors. The current
version(s) of a memory are the memories reachable through newer-version edges that have no
newer version themselves, found with one recursive CTE; history walks the same edges
backwards. Deleting a middle version re-attaches its successors to its nearest surviving
predecessor, so a superseded fact never comes back (memora-semantics.md §15.4).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.graph.render import MEMORY_COLUMNS, WITH_NAMES_AND_SOURCES, to_model
from memora_pg.models import Memory
from memora_pg.statements import sql

if TYPE_CHECKING:
    # memories imports this module (a delete repairs chains): NewMemory only types arguments here.
    from memora_pg.graph.memories import NewMemory

# -- linking ---------------------------------------------------------------------------------

# A CTE arm of a statement that has just written memories: each contrary memory supersedes an
# existing memory of the same organization and user only (the statement's snapshot is taken
# before its own inserts, so the target existed before the call).
LINKS = """
links AS (
    INSERT INTO {schema}.memory_updates (org_id, new_memory_id, old_memory_id)
    SELECT old.org_id, contrary.new_id, old.memory_id
    FROM scope,
         unnest(CAST(:new_ids AS uuid[]), CAST(:old_ids AS uuid[])) AS contrary(new_id, old_id)
         JOIN {schema}.memories AS old
           ON old.org_id = :org_id AND old.user_id = :user_id AND old.memory_id = contrary.old_id
    RETURNING new_memory_id
)"""


def link_params(items: Sequence[NewMemory]) -> dict[str, list[uuid.UUID]]:
    """The parameters of :data:`LINKS`: the contrary memories and the memories they supersede."""
    contrary = [(item.memory_id, item.supersedes) for item in items if item.supersedes is not None]
    return {"new_ids": [new for new, _ in contrary], "old_ids": [old for _, old in contrary if old is not None]}


def unlinked(items: Sequence[NewMemory], linked: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The contrary memories whose target was not found for the user: they were stored without a link."""
    done = set(linked)
    return [item.memory_id for item in items if item.supersedes is not None and item.memory_id not in done]


# The oldest version of each target's chain, locked: every contradiction anywhere in a chain
# waits for the others, so two of them can never both see the same current version.
LOCK_CHAIN_ROOTS = """
WITH RECURSIVE older(org_id, memory_id) AS (
    SELECT org_id, memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = ANY(CAST(:old_ids AS uuid[]))
  UNION
    SELECT edge.org_id, edge.old_memory_id
    FROM older JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.new_memory_id = older.memory_id
)
SELECT root.memory_id FROM {schema}.memories AS root
WHERE root.org_id = :org_id
  AND root.memory_id IN (
      SELECT memory_id FROM older
      WHERE NOT EXISTS (
          SELECT 1 FROM {schema}.memory_updates AS edge
          WHERE edge.org_id = :org_id AND edge.new_memory_id = older.memory_id
      )
  )
ORDER BY root.memory_id
FOR UPDATE OF root
"""

# Link one contrary memory to the current version of its target's chain (the newest one
# reachable that has no newer version itself).
LINK_TO_CURRENT = """
INSERT INTO {schema}.memory_updates (org_id, new_memory_id, old_memory_id)
WITH RECURSIVE newer(memory_id) AS (
    SELECT memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = :old_id
  UNION
    SELECT edge.new_memory_id
    FROM newer JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
)
SELECT :org_id, :new_id, current_version.memory_id
FROM newer
JOIN {schema}.memories AS current_version
  ON current_version.org_id = :org_id AND current_version.memory_id = newer.memory_id
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.memory_updates AS edge
    WHERE edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
)
ORDER BY current_version.seq DESC
LIMIT 1
RETURNING new_memory_id
"""


async def link_linear(
    conn: AsyncConnection, *, org_id: str, user_id: str, contrary: Sequence[NewMemory]
) -> list[uuid.UUID]:
    """Link each contrary memory after its target chain's current version, one at a time, chains locked.

    The lock is taken first; the links are then read and written in statements of their own,
    which under READ COMMITTED see every contradiction committed while this one waited.
    Returns the contrary memories left unlinked.
    """
    contrary = [item for item in contrary if item.supersedes is not None]
    if not contrary:
        return []
    params = {"org_id": org_id, "user_id": user_id}
    await conn.execute(sql(conn, LOCK_CHAIN_ROOTS), {**params, "old_ids": [item.supersedes for item in contrary]})
    left = []
    for item in contrary:
        linked = await conn.execute(
            sql(conn, LINK_TO_CURRENT), {**params, "old_id": item.supersedes, "new_id": item.memory_id}
        )
        if linked.one_or_none() is None:
            left.append(item.memory_id)
    return left


# -- repairing on delete -----------------------------------------------------------------------

# Successors of the doomed memories (those of the organization named in :memory_ids, and of
# the user :user_id unless it is null) are re-attached to the nearest predecessor that survives.
RELINK_AROUND = """
WITH RECURSIVE doomed AS (
    SELECT memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND memory_id = ANY(CAST(:memory_ids AS uuid[]))
      AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id)
), climb(new_memory_id, ancestor) AS (
    SELECT edge.new_memory_id, edge.old_memory_id
    FROM {schema}.memory_updates AS edge
    WHERE edge.org_id = :org_id
      AND edge.old_memory_id IN (SELECT memory_id FROM doomed)
      AND edge.new_memory_id NOT IN (SELECT memory_id FROM doomed)
  UNION ALL
    SELECT climb.new_memory_id, parent.old_memory_id
    FROM climb
    JOIN {schema}.memory_updates AS parent
      ON parent.org_id = :org_id AND parent.new_memory_id = climb.ancestor
    WHERE climb.ancestor IN (SELECT memory_id FROM doomed)
)
UPDATE {schema}.memory_updates AS edge
SET old_memory_id = climb.ancestor
FROM climb
WHERE edge.org_id = :org_id
  AND edge.new_memory_id = climb.new_memory_id
  AND climb.ancestor NOT IN (SELECT memory_id FROM doomed)
"""


async def relink_around(
    conn: AsyncConnection, *, org_id: str, memory_ids: Sequence[uuid.UUID], user_id: str | None = None
) -> None:
    """Re-attach the successors of ``memory_ids`` (only the user's, when ``user_id`` is given) to
    their nearest surviving predecessor, before those memories are deleted."""
    if memory_ids:
        await conn.execute(
            sql(conn, RELINK_AROUND), {"org_id": org_id, "user_id": user_id, "memory_ids": list(memory_ids)}
        )


# -- reading ---------------------------------------------------------------------------------

# The memory and its predecessors, newest first: history walks CONTRARY_UPDATE edges backwards.
HISTORY = f"""
WITH RECURSIVE older(depth, memory_id) AS (
    SELECT 0, memory_id
    FROM {{schema}}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = :memory_id
  UNION ALL
    SELECT older.depth + 1, edge.old_memory_id
    FROM older
    JOIN {{schema}}.memory_updates AS edge
      -- the constant org_id lets Citus run the recursion on the organization's one shard
      ON edge.org_id = :org_id AND edge.new_memory_id = older.memory_id
)
SELECT {MEMORY_COLUMNS}
FROM older
JOIN {{schema}}.memories AS m ON m.org_id = :org_id AND m.memory_id = older.memory_id
{WITH_NAMES_AND_SOURCES}
ORDER BY older.depth
"""

# Each requested memory (all of the organization :org_id) is replaced by its current version(s):
# every memory reachable through newer-version edges that has no newer version itself. Results
# keep the order of the first request that reached them; versions reached from one request come
# newest first. Every table is pinned to :org_id, so Citus runs it on the organization's shard.
RESOLVE = f"""
WITH RECURSIVE requested AS (
    SELECT *
    FROM unnest(
        CAST(:batches AS int[]), CAST(:positions AS int[]), CAST(:user_ids AS text[]), CAST(:memory_ids AS uuid[])
    ) AS r(batch, pos, user_id, memory_id)
), newer(batch, pos, memory_id) AS (
    SELECT requested.batch, requested.pos, found.memory_id
    FROM requested
    JOIN {{schema}}.memories AS found
      ON found.org_id = :org_id
     AND found.user_id = requested.user_id
     AND found.memory_id = requested.memory_id
  UNION
    SELECT newer.batch, newer.pos, edge.new_memory_id
    FROM newer
    JOIN {{schema}}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
), latest AS (
    SELECT batch, min(pos) AS first_pos, memory_id
    FROM newer
    WHERE NOT EXISTS (
        SELECT 1 FROM {{schema}}.memory_updates AS edge
        WHERE edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
    )
    GROUP BY batch, memory_id
)
SELECT latest.batch, latest.first_pos, m.seq, {MEMORY_COLUMNS}
FROM latest
JOIN {{schema}}.memories AS m ON m.org_id = :org_id AND m.memory_id = latest.memory_id
{WITH_NAMES_AND_SOURCES}
ORDER BY latest.batch, latest.first_pos, m.seq DESC
"""


async def history(conn: AsyncConnection, *, org_id: str, user_id: str, memory_id: uuid.UUID) -> list[Memory]:
    result = await conn.execute(sql(conn, HISTORY), {"org_id": org_id, "user_id": user_id, "memory_id": memory_id})
    return [to_model(row) for row in result]


@dataclass(frozen=True)
class Requested:
    batch: int
    position: int
    org_id: str
    user_id: str
    memory_id: uuid.UUID


async def resolve(conn: AsyncConnection, requests: Sequence[Requested], batches: int) -> list[list[Memory]]:
    """The current versions of the requested memories, one list per batch.

    One statement per organization among the requests (one in the common case): a statement is
    pinned to its organization, which is what a Citus cluster needs to run it on one shard.
    """
    results: list[list[Memory]] = [[] for _ in range(batches)]
    by_org: dict[str, list[Requested]] = {}
    for request in requests:
        by_org.setdefault(request.org_id, []).append(request)
    found: list[Any] = []
    for org_id, group in by_org.items():
        found.extend(
            await conn.execute(
                sql(conn, RESOLVE),
                {
                    "org_id": org_id,
                    "batches": [r.batch for r in group],
                    "positions": [r.position for r in group],
                    "user_ids": [r.user_id for r in group],
                    "memory_ids": [r.memory_id for r in group],
                },
            )
        )
    if len(by_org) > 1:
        # Each statement's rows are in order: merge them into the order one statement would give.
        found.sort(key=lambda row: (row.batch, row.first_pos, -row.seq))
    for row in found:
        results[row.batch].append(to_model(row))
    return results
