"""Memories: their rows, source links and CONTRARY_UPDATE version chains.

A memory links to the messages it came from (``memory_sources``) and to the memory it
supersedes (``memory_updates``, old -> new). The newest version(s) of a memory are found with
one recursive CTE; history walks the same edges backwards. Every read returns memories with
their user's name, their agent's label and their source messages in the same statement.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, cast, delete, func, insert, literal
from sqlalchemy.dialects.postgresql import REGCONFIG
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg import vector_params
from memora_pg.db import from_json, sql
from memora_pg.graph.render import render
from memora_pg.models import Memory, MessageBlock
from memora_pg.schema import memories, memory_sources

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewMemory:
    memory_id: uuid.UUID
    text: str
    positions: Sequence[int]
    embedding: Sequence[float] | None = None
    supersedes: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None


# -- writing ---------------------------------------------------------------------------------


async def insert_many(
    conn: AsyncConnection,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str | None,
    obtained_at: datetime,
    items: Sequence[NewMemory],
    text_search_config: str,
    searchable: bool,
    linear: bool = False,
) -> list[uuid.UUID]:
    """Write memories with their sources and contrary links; return the ids of those left unlinked.

    ``searchable`` memories get their embedding and full-text vector in the same row; the
    others are written without (no vector store is associated). ``linear`` chains link each
    contrary memory to the current version of its target's chain (see :func:`link_linear`).
    """
    if not items:
        return []
    stmt = insert(memories)
    if searchable:
        stmt = stmt.values(
            embedding=bindparam("embedding_values", type_=vector_params.BinaryVector()),
            search_text=func.to_tsvector(cast(literal(text_search_config), REGCONFIG), bindparam("searchable_text")),
        )
    await conn.execute(
        stmt,
        [
            {
                "org_id": org_id,
                "memory_id": item.memory_id,
                "user_id": user_id,
                "agent_id": agent_id,
                "interaction_id": interaction_id,
                "memory": item.text,
                "obtained_at": obtained_at,
                "metadata": item.metadata or {},
                **(
                    {"embedding_values": vector_params.one(item.embedding), "searchable_text": item.text}
                    if searchable
                    else {}
                ),
            }
            for item in items
        ],
    )
    sources = [
        {"org_id": org_id, "memory_id": item.memory_id, "interaction_id": interaction_id, "msg_position": position}
        for item in items
        for position in sorted(set(item.positions))
    ]
    if sources:
        await conn.execute(insert(memory_sources), sources)
    contrary = [item for item in items if item.supersedes is not None]
    if not contrary:
        return []
    if linear:
        return await link_linear(conn, org_id=org_id, user_id=user_id, contrary=contrary)
    linked = await conn.execute(
        sql(conn, LINK_CONTRARY),
        {
            "org_id": org_id,
            "user_id": user_id,
            "new_ids": [item.memory_id for item in contrary],
            "old_ids": [item.supersedes for item in contrary],
        },
    )
    done = {row[0] for row in linked}
    return [item.memory_id for item in contrary if item.memory_id not in done]


# A contrary memory supersedes an existing memory of the same organization and user only.
LINK_CONTRARY = """
INSERT INTO {schema}.memory_updates (org_id, new_memory_id, old_memory_id)
SELECT old.org_id, contrary.new_id, old.memory_id
FROM unnest(CAST(:new_ids AS uuid[]), CAST(:old_ids AS uuid[])) AS contrary(new_id, old_id)
JOIN {schema}.memories AS old
  ON old.org_id = :org_id AND old.user_id = :user_id AND old.memory_id = contrary.old_id
RETURNING new_memory_id
"""


# The oldest version of each target's chain, locked: every contradiction anywhere in a chain
# waits for the others, so two of them can never both see the same current version.
LOCK_CHAIN_ROOTS = """
WITH RECURSIVE older(org_id, memory_id) AS (
    SELECT org_id, memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = ANY(CAST(:old_ids AS uuid[]))
  UNION
    SELECT edge.org_id, edge.old_memory_id
    FROM older JOIN {schema}.memory_updates AS edge
      ON edge.org_id = older.org_id AND edge.new_memory_id = older.memory_id
)
SELECT root.memory_id FROM {schema}.memories AS root
WHERE root.org_id = :org_id
  AND root.memory_id IN (
      SELECT memory_id FROM older
      WHERE NOT EXISTS (
          SELECT 1 FROM {schema}.memory_updates AS edge
          WHERE edge.org_id = older.org_id AND edge.new_memory_id = older.memory_id
      )
  )
ORDER BY root.memory_id
FOR UPDATE OF root
"""

# Link one contrary memory to the current version of its target's chain (the newest one
# reachable that has no newer version itself).
LINK_TO_CURRENT = """
WITH RECURSIVE newer(memory_id) AS (
    SELECT memory_id FROM {schema}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = :old_id
  UNION
    SELECT edge.new_memory_id
    FROM newer JOIN {schema}.memory_updates AS edge
      ON edge.org_id = :org_id AND edge.old_memory_id = newer.memory_id
)
INSERT INTO {schema}.memory_updates (org_id, new_memory_id, old_memory_id)
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
    """
    params = {"org_id": org_id, "user_id": user_id}
    await conn.execute(sql(conn, LOCK_CHAIN_ROOTS), {**params, "old_ids": [item.supersedes for item in contrary]})
    unlinked = []
    for item in contrary:
        linked = await conn.execute(
            sql(conn, LINK_TO_CURRENT), {**params, "old_id": item.supersedes, "new_id": item.memory_id}
        )
        if linked.one_or_none() is None:
            unlinked.append(item.memory_id)
    return unlinked


# Successors of memories about to be deleted are re-attached to the nearest predecessor that
# survives, so deleting a middle version never brings a superseded fact back (§15.4).
RELINK_AROUND = """
WITH RECURSIVE doomed AS (
    SELECT unnest(CAST(:memory_ids AS uuid[])) AS memory_id
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


async def relink_around(conn: AsyncConnection, *, org_id: str, memory_ids: Sequence[uuid.UUID]) -> None:
    """Re-attach the successors of ``memory_ids`` to their nearest surviving predecessor."""
    if memory_ids:
        await conn.execute(sql(conn, RELINK_AROUND), {"org_id": org_id, "memory_ids": list(memory_ids)})


async def delete_one(conn: AsyncConnection, *, org_id: str, user_id: str, memory_id: uuid.UUID) -> bool:
    """Delete one memory of the user (its sources and links go with it), repairing its chain."""
    await conn.execute(
        sql(conn, RELINK_AROUND_OWNED), {"org_id": org_id, "user_id": user_id, "memory_ids": [memory_id]}
    )
    result = await conn.execute(
        delete(memories).where(
            memories.c.org_id == org_id, memories.c.user_id == user_id, memories.c.memory_id == memory_id
        )
    )
    return result.rowcount > 0


# The same repair, for ids first narrowed to memories the user owns (ids come from the caller).
RELINK_AROUND_OWNED = RELINK_AROUND.replace(
    "SELECT unnest(CAST(:memory_ids AS uuid[])) AS memory_id",
    "SELECT memory_id FROM {schema}.memories"
    " WHERE org_id = :org_id AND user_id = :user_id AND memory_id = ANY(CAST(:memory_ids AS uuid[]))",
)


async def delete_for_user(conn: AsyncConnection, *, org_id: str, user_id: str) -> int:
    """Delete every memory of the user; the chains go with them (they never leave one user)."""
    result = await conn.execute(delete(memories).where(memories.c.org_id == org_id, memories.c.user_id == user_id))
    return result.rowcount


# -- reading ---------------------------------------------------------------------------------

# Appended to a query that names its memories `m`: the agent's label and the source messages
# (in position order), in the same statement.
WITH_AGENT_AND_SOURCES = """
LEFT JOIN {schema}.agents AS agent ON agent.org_id = m.org_id AND agent.agent_id = m.agent_id
LEFT JOIN LATERAL (
    SELECT json_agg(
               json_build_object('msg_position', src.msg_position, 'role', msg.role, 'content', msg.content)
               ORDER BY src.msg_position
           ) AS sources
    FROM {schema}.memory_sources AS src
    JOIN {schema}.messages AS msg
      ON msg.org_id = src.org_id AND msg.interaction_id = src.interaction_id AND msg.msg_position = src.msg_position
    WHERE src.org_id = m.org_id AND src.memory_id = m.memory_id
) AS sourced ON true
"""

# The same, and the user's name.
WITH_NAMES_AND_SOURCES = (
    """
LEFT JOIN {schema}.users AS owner ON owner.org_id = m.org_id AND owner.user_id = m.user_id"""
    + WITH_AGENT_AND_SOURCES
)

MEMORY_COLUMNS = """
m.org_id, m.user_id, m.agent_id, m.interaction_id, m.memory_id, m.memory, m.obtained_at,
owner.user_name, agent.agent_label, sourced.sources
"""

GET_ONE = f"""
SELECT {MEMORY_COLUMNS}
FROM {{schema}}.memories AS m
{WITH_NAMES_AND_SOURCES}
WHERE m.org_id = :org_id AND m.user_id = :user_id AND m.memory_id = :memory_id
"""

# The memory and its predecessors, newest first: history walks CONTRARY_UPDATE edges backwards.
HISTORY = f"""
WITH RECURSIVE older(depth, org_id, memory_id) AS (
    SELECT 0, org_id, memory_id
    FROM {{schema}}.memories
    WHERE org_id = :org_id AND user_id = :user_id AND memory_id = :memory_id
  UNION ALL
    SELECT older.depth + 1, edge.org_id, edge.old_memory_id
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

LIST_FOR_USER = f"""
SELECT {MEMORY_COLUMNS}
FROM (
    SELECT * FROM {{schema}}.memories
    WHERE org_id = :org_id AND user_id = :user_id {{agent_filter}}
    ORDER BY obtained_at DESC, seq DESC
    OFFSET :skip LIMIT :limit
) AS m
{WITH_NAMES_AND_SOURCES}
ORDER BY m.obtained_at DESC, m.seq DESC
"""

# Each requested memory is replaced by its current version(s): every memory reachable through
# newer-version edges that has no newer version itself. Results keep the order of the first
# request that reached them; versions reached from one request come newest first.
RESOLVE = f"""
WITH RECURSIVE requested AS (
    SELECT *
    FROM unnest(
        CAST(:batches AS int[]), CAST(:positions AS int[]),
        CAST(:org_ids AS text[]), CAST(:user_ids AS text[]), CAST(:memory_ids AS uuid[])
    ) AS r(batch, pos, org_id, user_id, memory_id)
), newer(batch, pos, org_id, memory_id) AS (
    SELECT requested.batch, requested.pos, found.org_id, found.memory_id
    FROM requested
    JOIN {{schema}}.memories AS found
      ON found.org_id = requested.org_id
     AND found.user_id = requested.user_id
     AND found.memory_id = requested.memory_id
  UNION
    SELECT newer.batch, newer.pos, edge.org_id, edge.new_memory_id
    FROM newer
    JOIN {{schema}}.memory_updates AS edge
      ON edge.org_id = newer.org_id AND edge.old_memory_id = newer.memory_id
), latest AS (
    SELECT batch, min(pos) AS first_pos, org_id, memory_id
    FROM newer
    WHERE NOT EXISTS (
        SELECT 1 FROM {{schema}}.memory_updates AS edge
        WHERE edge.org_id = newer.org_id AND edge.old_memory_id = newer.memory_id
    )
    GROUP BY batch, org_id, memory_id
)
SELECT latest.batch, {MEMORY_COLUMNS}
FROM latest
JOIN {{schema}}.memories AS m ON m.org_id = latest.org_id AND m.memory_id = latest.memory_id
{WITH_NAMES_AND_SOURCES}
ORDER BY latest.batch, latest.first_pos, m.seq DESC
"""


def to_model(row: Row[Any] | dict[str, Any]) -> Memory:
    """A row of MEMORY_COLUMNS (or its JSON form) as the contract's rendered ``Memory``."""
    data = row._mapping if isinstance(row, Row) else row
    sources = from_json(data["sources"])
    return Memory(
        org_id=data["org_id"],
        user_id=data["user_id"],
        agent_id=data["agent_id"],
        interaction_id=data["interaction_id"],
        memory_id=str(data["memory_id"]),
        memory=render(data["memory"], user_name=data["user_name"], agent_label=data["agent_label"]),
        obtained_at=data["obtained_at"],
        message_sources=[MessageBlock(**source) for source in sources or []],
    )


async def get_one(conn: AsyncConnection, *, org_id: str, user_id: str, memory_id: uuid.UUID) -> Memory | None:
    result = await conn.execute(sql(conn, GET_ONE), {"org_id": org_id, "user_id": user_id, "memory_id": memory_id})
    row = result.one_or_none()
    return to_model(row) if row else None


async def history(conn: AsyncConnection, *, org_id: str, user_id: str, memory_id: uuid.UUID) -> list[Memory]:
    result = await conn.execute(sql(conn, HISTORY), {"org_id": org_id, "user_id": user_id, "memory_id": memory_id})
    return [to_model(row) for row in result]


async def list_for_user(
    conn: AsyncConnection, *, org_id: str, user_id: str, agent_id: str | None, skip: int, limit: int
) -> list[Memory]:
    params: dict[str, Any] = {"org_id": org_id, "user_id": user_id, "skip": skip, "limit": limit}
    template = LIST_FOR_USER.replace("{agent_filter}", "AND agent_id = :agent_id" if agent_id else "")
    if agent_id:
        params["agent_id"] = agent_id
    return [to_model(row) for row in await conn.execute(sql(conn, template), params)]


@dataclass(frozen=True)
class Requested:
    batch: int
    position: int
    org_id: str
    user_id: str
    memory_id: uuid.UUID


async def resolve(conn: AsyncConnection, requests: Sequence[Requested], batches: int) -> list[list[Memory]]:
    """The current versions of the requested memories, one list per batch, in one statement."""
    results: list[list[Memory]] = [[] for _ in range(batches)]
    if not requests:
        return results
    rows = await conn.execute(
        sql(conn, RESOLVE),
        {
            "batches": [r.batch for r in requests],
            "positions": [r.position for r in requests],
            "org_ids": [r.org_id for r in requests],
            "user_ids": [r.user_id for r in requests],
            "memory_ids": [r.memory_id for r in requests],
        },
    )
    for row in rows:
        results[row.batch].append(to_model(row))
    return results


# -- changing one memory (the mem0-style API) ------------------------------------------------

REWRITE = """
WITH old AS (
    SELECT memory_id, memory, user_id FROM {schema}.memories
    WHERE org_id = :org_id AND memory_id = :memory_id
    FOR UPDATE
)
UPDATE {schema}.memories AS m
SET memory = :memory,
    embedding = CAST(:embedding AS vector),
    search_text = to_tsvector(CAST(:ts_config AS regconfig), :memory),
    metadata = CAST(:metadata AS jsonb)
FROM old
WHERE m.org_id = :org_id AND m.memory_id = old.memory_id
RETURNING old.memory AS old_memory, old.user_id
"""


async def rewrite(
    conn: AsyncConnection,
    *,
    org_id: str,
    memory_id: uuid.UUID,
    text: str,
    embedding: Sequence[float],
    metadata: dict[str, Any],
    text_search_config: str,
) -> tuple[str, str] | None:
    """Replace a memory's text, vectors and metadata, keeping its id; (old text, user id), or None if missing."""
    row = (
        await conn.execute(
            sql(conn, REWRITE),
            {
                "org_id": org_id,
                "memory_id": memory_id,
                "memory": text,
                "embedding": vector_params.one(embedding),
                "ts_config": text_search_config,
                "metadata": json.dumps(metadata),
            },
        )
    ).one_or_none()
    return (row.old_memory, row.user_id) if row else None


async def delete_by_ids(
    conn: AsyncConnection, *, org_id: str, memory_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, str, str]]:
    """Delete memories of the organization by id, repairing their chains; (id, user id, text) of each deleted."""
    if not memory_ids:
        return []
    await relink_around(conn, org_id=org_id, memory_ids=memory_ids)
    result = await conn.execute(
        delete(memories)
        .where(memories.c.org_id == org_id, memories.c.memory_id.in_(list(memory_ids)))
        .returning(memories.c.memory_id, memories.c.user_id, memories.c.memory)
    )
    return [(row.memory_id, row.user_id, row.memory) for row in result]
