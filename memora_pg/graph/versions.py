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
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from memora_pg.driver import Connection, Row
from memora_pg.graph import timeline
from memora_pg.graph.render import MEMORY_COLUMNS, WITH_NAMES_AND_SOURCES, to_model
from memora_pg.models import Memory
from memora_pg.sql_text import render
from memora_pg.statements import Statement, function_call

if TYPE_CHECKING:
    # memories imports this module (a delete repairs chains): NewMemory only types arguments here.
    from memora_pg.graph.memories import NewMemory

# -- the clocks of superseded versions (memora_pg.graph.timeline) ------------------------------

# The versions that new links supersede get their clocks' ends: the rule is the schema's
# ``clock_superseded`` function (migration 0016), which the write functions call too.
CLOCK_LINKED = function_call("clock_superseded", ("org_id", "linked"))


async def clock_linked(conn: Connection, *, org_id: str, linked: Sequence[uuid.UUID]) -> None:
    """End the clocks of the versions the memories ``linked`` (just linked) supersede."""
    if linked:
        await conn.execute(CLOCK_LINKED, {"org_id": org_id, "linked": list(linked)})


# Every chain of an organization clocked from scratch: each version's clocks end at the earliest
# start among its later versions (after an import, whose export may predate the clocks).
CLOCK_ORGANIZATION = """
WITH RECURSIVE later(ancestor, memory_id) AS (
    SELECT old_memory_id, new_memory_id FROM {schema}.memory_updates WHERE org_id = :org_id
  UNION
    SELECT later.ancestor, edge.new_memory_id
    FROM later JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = later.memory_id
)
UPDATE {schema}.memories AS m
SET valid_until = ends.valid_until, superseded_at = ends.superseded_at
FROM (
    SELECT later.ancestor AS memory_id, min(v.obtained_at) AS valid_until,
           min(coalesce(v.stored_at, v.obtained_at)) AS superseded_at
    FROM later JOIN {schema}.memories AS v ON v.org_id = :org_id AND v.memory_id = later.memory_id
    GROUP BY later.ancestor
) AS ends
WHERE m.org_id = :org_id AND m.memory_id = ends.memory_id
"""


async def clock_organization(conn: Connection, *, org_id: str) -> None:
    """Set the clocks' ends of every version of the organization from its chains."""
    await conn.execute(CLOCK_ORGANIZATION, {"org_id": org_id})


# -- linking ---------------------------------------------------------------------------------


def link_params(items: Sequence[NewMemory]) -> dict[str, list[uuid.UUID]]:
    """The links' arguments of a write function (migration 0016): the contrary memories and the
    memories they supersede."""
    return {
        "new_ids": [item.memory_id for item in items if item.supersedes is not None],
        "old_ids": [item.supersedes for item in items if item.supersedes is not None],
    }


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


async def link_linear(conn: Connection, *, org_id: str, user_id: str, contrary: Sequence[NewMemory]) -> list[uuid.UUID]:
    """Link each contrary memory after its target chain's current version, one at a time, chains locked.

    The lock is taken first; the links are then read and written in statements of their own,
    which under READ COMMITTED see every contradiction committed while this one waited.
    Returns the contrary memories left unlinked.
    """
    contrary = [item for item in contrary if item.supersedes is not None]
    if not contrary:
        return []
    params = {"org_id": org_id, "user_id": user_id}
    await conn.execute(LOCK_CHAIN_ROOTS, {**params, "old_ids": [item.supersedes for item in contrary]})
    left: list[uuid.UUID] = []
    linked: list[uuid.UUID] = []
    for item in contrary:
        link = await conn.first(LINK_TO_CURRENT, {**params, "old_id": item.supersedes, "new_id": item.memory_id})
        (left if link is None else linked).append(item.memory_id)
    await clock_linked(conn, org_id=org_id, linked=linked)
    return left


# -- repairing on delete -----------------------------------------------------------------------

# Successors of the doomed memories (those of the organization named in :memory_ids, and of
# the user :user_id unless it is null) are re-attached to the nearest predecessor that survives,
# and every surviving version before a doomed one gets its clocks' ends again from the later
# versions that survive: a deleted version leaves no trace in any clock.
RELINK_AROUND = """
WITH RECURSIVE doomed AS (
    SELECT memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND memory_id = ANY(CAST(:memory_ids AS uuid[]))
      AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id)
), before_doomed(memory_id) AS (
    SELECT edge.old_memory_id FROM {schema}.memory_updates AS edge
    WHERE edge.org_id = :org_id AND edge.new_memory_id IN (SELECT memory_id FROM doomed)
  UNION
    SELECT edge.old_memory_id
    FROM before_doomed JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.new_memory_id = before_doomed.memory_id
), later(ancestor, memory_id) AS (
    SELECT edge.old_memory_id, edge.new_memory_id FROM {schema}.memory_updates AS edge
    WHERE edge.org_id = :org_id AND edge.old_memory_id IN (SELECT memory_id FROM before_doomed)
  UNION
    SELECT later.ancestor, edge.new_memory_id
    FROM later JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = later.memory_id
), reclocked AS (
    UPDATE {schema}.memories AS m
    SET valid_until = ends.valid_until, superseded_at = ends.superseded_at
    FROM (
        SELECT later.ancestor AS memory_id,
               min(survivor.obtained_at) AS valid_until,
               min(coalesce(survivor.stored_at, survivor.obtained_at)) AS superseded_at
        FROM later
        LEFT JOIN {schema}.memories AS survivor
          ON survivor.org_id = :org_id AND survivor.memory_id = later.memory_id
         AND survivor.memory_id NOT IN (SELECT memory_id FROM doomed)
        GROUP BY later.ancestor
    ) AS ends
    WHERE m.org_id = :org_id AND m.memory_id = ends.memory_id AND m.memory_id NOT IN (SELECT memory_id FROM doomed)
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
    conn: Connection, *, org_id: str, memory_ids: Sequence[uuid.UUID], user_id: str | None = None
) -> None:
    """Re-attach the successors of ``memory_ids`` (only the user's, when ``user_id`` is given) to
    their nearest surviving predecessor, before those memories are deleted."""
    if memory_ids:
        await conn.execute(RELINK_AROUND, {"org_id": org_id, "user_id": user_id, "memory_ids": list(memory_ids)})


# -- reading ---------------------------------------------------------------------------------

# The memory and its predecessors, newest first: history walks CONTRARY_UPDATE edges backwards.
# ``{begun}`` keeps the versions that had begun by the as-of time (true: all of them).
_HISTORY = """
WITH RECURSIVE older(depth, memory_id) AS (
    SELECT 0, memory_id
    FROM {schema}.memories AS m
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = :memory_id AND {begun}
  UNION ALL
    SELECT older.depth + 1, edge.old_memory_id
    FROM older
    JOIN {schema}.memory_updates AS edge
      -- the constant org_id lets Citus run the recursion on the organization's one shard
      ON edge.org_id = :org_id AND edge.new_memory_id = older.memory_id
)
SELECT {memory_columns}
FROM older
JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = older.memory_id
{with_names_and_sources}
WHERE {begun}
ORDER BY older.depth
"""


@lru_cache(maxsize=4)
def history_statement(clock: str | None) -> str:
    """The history of one memory: all of it, or as it stood at :as_of by ``clock``."""
    begun = "true" if clock is None else timeline.begun_by("m", clock)
    return render(_HISTORY, begun=begun, memory_columns=MEMORY_COLUMNS, with_names_and_sources=WITH_NAMES_AND_SOURCES)


# The requested memories of a resolved fetch: (batch, position in it, user, memory).
_REQUESTED = """requested AS (
    SELECT *
    FROM unnest(
        CAST(:batches AS int[]), CAST(:positions AS int[]), CAST(:user_ids AS text[]), CAST(:memory_ids AS uuid[])
    ) AS r(batch, pos, user_id, memory_id)
)"""
# Each requested memory, found among its user's: (batch, position, memory).
_FOUND = """
    SELECT requested.batch, requested.pos, found.memory_id
    FROM requested
    JOIN {schema}.memories AS found
      ON found.org_id = :org_id
     AND found.user_id = requested.user_id
     AND found.memory_id = requested.memory_id"""
# One step from the versions in ``newer`` to the versions that superseded them.
_NEWER_STEP = """
    SELECT newer.batch, newer.pos, edge.new_memory_id
    FROM newer
    JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id"""


# The versions in ``latest`` (batch, first position, memory) matching ``where``, rendered: in the
# order of the first request that reached them, versions reached from one request newest first.
def _rendered(where: str) -> str:
    return render(
        """
SELECT latest.batch, latest.first_pos, m.seq, {memory_columns}
FROM latest
JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = latest.memory_id
{with_names_and_sources}
WHERE {where}
ORDER BY latest.batch, latest.first_pos, m.seq DESC
""",
        memory_columns=MEMORY_COLUMNS,
        with_names_and_sources=WITH_NAMES_AND_SOURCES,
        where=where,
    )


# Each requested memory (all of the organization :org_id) is replaced by its current version(s):
# every memory reachable through newer-version edges that has no newer version itself and has not
# expired. Every table is pinned to :org_id, so Citus runs it on the organization's shard.
RESOLVE = render(
    """
WITH RECURSIVE {requested}, newer(batch, pos, memory_id) AS ({found}
  UNION{newer_step}
), latest AS (
    SELECT batch, min(pos) AS first_pos, memory_id
    FROM newer
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.memory_updates AS edge
        WHERE edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
    )
    GROUP BY batch, memory_id
){rendered}""",
    requested=_REQUESTED,
    found=_FOUND,
    newer_step=_NEWER_STEP,
    rendered=_rendered(timeline.unexpired("m")),
)

# As of :as_of, each requested memory is replaced by the versions of its lineage (the versions
# before it and after it) that were current then: the same walk, both ways, and the clock's rule.
_RESOLVE_AS_OF = """
WITH RECURSIVE {requested}, found AS ({found}
), newer(batch, pos, memory_id) AS (
    SELECT batch, pos, memory_id FROM found
  UNION{newer_step}
), older(batch, pos, memory_id) AS (
    SELECT batch, pos, memory_id FROM found
  UNION
    SELECT older.batch, older.pos, edge.old_memory_id
    FROM older
    JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.new_memory_id = older.memory_id
), latest AS (
    SELECT batch, min(pos) AS first_pos, memory_id
    FROM (SELECT * FROM newer UNION ALL SELECT * FROM older) AS lineage
    GROUP BY batch, memory_id
){rendered}"""


@lru_cache(maxsize=4)
def resolve_statement(clock: str | None) -> str:
    """The resolved fetch: the current versions now (None), or at :as_of by ``clock``."""
    if clock is None:
        return RESOLVE
    return render(
        _RESOLVE_AS_OF,
        requested=_REQUESTED,
        found=_FOUND,
        newer_step=_NEWER_STEP,
        rendered=_rendered(timeline.current_at("m", clock)),
    )


def history_of(
    *, org_id: str, user_id: str, memory_id: uuid.UUID, as_of: datetime | None = None, clock: str = timeline.VALID
) -> Statement:
    """The memory and the versions before it, newest first (rows for ``to_model``); as it stood at
    ``as_of`` when given."""
    params = {"org_id": org_id, "user_id": user_id, "memory_id": memory_id, "as_of": as_of}
    return Statement(history_statement(None if as_of is None else clock), params)


@dataclass(frozen=True)
class Requested:
    batch: int
    position: int
    org_id: str
    user_id: str
    memory_id: uuid.UUID


def resolving(
    requests: Sequence[Requested], *, as_of: datetime | None = None, clock: str = timeline.VALID
) -> list[Statement]:
    """The statements of a resolved fetch: one per organization among the requests (one in the common
    case), each pinned to its organization, which is what a Citus cluster needs to run it on one shard.
    Each finds the current versions of its requests (now, or at ``as_of`` by ``clock``)."""
    by_org: dict[str, list[Requested]] = {}
    for request in requests:
        by_org.setdefault(request.org_id, []).append(request)
    template = resolve_statement(None if as_of is None else clock)
    return [
        Statement(
            template,
            {
                "org_id": org_id,
                "as_of": as_of,
                "batches": [r.batch for r in group],
                "positions": [r.position for r in group],
                "user_ids": [r.user_id for r in group],
                "memory_ids": [r.memory_id for r in group],
            },
        )
        for org_id, group in by_org.items()
    ]


def resolved(rows: Sequence[Row], batches: int, *, merged: bool) -> list[list[Memory]]:
    """The rows of :func:`resolving`'s statements as one list of memories per batch; ``merged`` when the
    rows of several statements were put together (each statement's are in order, not their union)."""
    if merged:
        rows = sorted(rows, key=lambda row: (row.batch, row.first_pos, -row.seq))
    results: list[list[Memory]] = [[] for _ in range(batches)]
    for row in rows:
        results[row.batch].append(to_model(row))
    return results
