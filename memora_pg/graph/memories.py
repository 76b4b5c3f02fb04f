"""Memories: their rows and the messages they came from.

Where a memory is written: the write functions of migration 0016 (:mod:`memora_pg.graph.saves`), whose
``write_memories`` holds the one ``INSERT`` of memory rows that every face's writes go through (a save,
an update, a mem0-style add, the vector store's upsert). The full-text vector is always computed by
the schema's ``to_search_text`` function, which holds the database's text-search configuration
(migration 0006), so writers and searches can never disagree on it.

A memory is searchable when it has an embedding; its full-text vector is set exactly then.
Version chains (``memory_updates``) live in :mod:`memora_pg.graph.versions`; searches in
:mod:`memora_pg.graph.search`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, bindparam, delete, select

from memora_pg import vector_params
from memora_pg.driver import Connection, Row
from memora_pg.errors import InvalidInputError
from memora_pg.graph import audit, timeline, versions
from memora_pg.graph.render import MEMORY_COLUMNS, WITH_NAMES_AND_SOURCES
from memora_pg.schema import memories
from memora_pg.sql_text import render
from memora_pg.statements import FilterShape, Statement, from_json, function_call


@dataclass(frozen=True)
class NewMemory:
    memory_id: uuid.UUID
    text: str
    positions: Sequence[int] = ()
    embedding: Sequence[float] | None = None
    supersedes: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None
    # When the memory stops being current (mem0's expiration_date); None: never.
    expires_at: datetime | None = None
    # A memory's own user, agent and time, for a write of many users' memories known before it (an import);
    # None: the call's.
    user_id: str | None = None
    agent_id: str | None = None
    obtained_at: datetime | None = None


# -- writing ---------------------------------------------------------------------------------


def memory_params(items: Sequence[NewMemory]) -> dict[str, Any]:
    """The arguments of a write function (migration 0016) for ``items``: the memories, and the messages
    they came from."""
    return {
        "memory_ids": [item.memory_id for item in items],
        "memories": [item.text for item in items],
        "metadata": [None if item.metadata is None else json_text(item.metadata) for item in items],
        "embeddings": vector_params.many([item.embedding for item in items]),
        "expires_at": [item.expires_at for item in items],
        "source_memory_ids": [item.memory_id for item in items for _ in sorted(set(item.positions))],
        "source_positions": [position for item in items for position in sorted(set(item.positions))],
    }


def owner_params(items: Sequence[NewMemory]) -> dict[str, Any]:
    """Each memory's own user, agent and time for ``write_memories`` (migration 0018); an argument no item
    gives is NULL, the call's."""

    def given(values: list[Any]) -> list[Any] | None:
        return values if any(value is not None for value in values) else None

    return {
        "user_ids": given([item.user_id for item in items]),
        "agent_ids": given([item.agent_id for item in items]),
        "obtained_at": given([item.obtained_at for item in items]),
    }


def json_text(value: dict[str, Any]) -> str:
    """Metadata as JSON text for a statement; a value that is not JSON is InvalidInputError."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"metadata must be JSON: {error}") from error


# The vector store's delete: the memory stops being searchable, its graph row stays.
UNSEARCHABLE_BY_ID = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE memory_id = ANY(CAST(:memory_ids AS uuid[]))
"""
UNSEARCHABLE_FOR_USER = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE org_id = :org_id AND user_id = :user_id AND embedding IS NOT NULL
"""
UNSEARCHABLE_FOR_ORG = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE org_id = :org_id AND embedding IS NOT NULL
"""


async def make_unsearchable(
    conn: Connection,
    *,
    memory_ids: Sequence[uuid.UUID] = (),
    org_id: str | None = None,
    user_id: str | None = None,
) -> int:
    """Clear the vectors of ``memory_ids`` (in any organization: the vector store's delete is unscoped),
    or of every memory of the user, or of the organization; the number of memories changed."""
    if memory_ids:
        return await conn.execute(UNSEARCHABLE_BY_ID, {"memory_ids": list(memory_ids)})
    if user_id is not None:
        return await conn.execute(UNSEARCHABLE_FOR_USER, {"org_id": org_id, "user_id": user_id})
    return await conn.execute(UNSEARCHABLE_FOR_ORG, {"org_id": org_id})


@dataclass(frozen=True)
class Change:
    """A memory changed in place: its new text and vector (None: both kept), metadata merged into its own,
    and, with ``set_expiry``, its new expiry."""

    memory_id: uuid.UUID
    text: str | None
    embedding: Sequence[float] | None
    metadata: dict[str, Any]
    set_expiry: bool = False
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Before:
    """A memory as it was before a :class:`Change`."""

    memory_id: uuid.UUID
    user_id: str
    text: str
    metadata: dict[str, Any]


# Memories changed in place, with their UPDATE events and the audit row (migration 0018's ``update_memories``).
UPDATE_IN_PLACE = function_call(
    "update_memories",
    ("org_id", "memory_ids", "memories", "embeddings", "metadata", "set_expiry", "expires_at", *audit.ARGUMENTS),
)


def update_in_place(org_id: str, changes: Sequence[Change], audited: audit.Entry | None) -> Statement:
    """The statement changing ``changes`` in one call; :func:`updated` reads what they were. A memory that is
    gone is skipped."""
    return Statement(
        UPDATE_IN_PLACE,
        {
            "org_id": org_id,
            "memory_ids": [change.memory_id for change in changes],
            "memories": [change.text for change in changes],
            "embeddings": vector_params.many([change.embedding for change in changes]),
            "metadata": [json_text(change.metadata) for change in changes],
            "set_expiry": [change.set_expiry for change in changes],
            "expires_at": [change.expires_at for change in changes],
            **audit.arguments(audited),
        },
    )


def updated(rows: Sequence[Row]) -> list[Before]:
    """What :func:`update_in_place`'s statement changed, as it was, in the order of the changes."""
    return [Before(row.memory_id, row.user_id, row.old_memory, from_json(row.old_metadata) or {}) for row in rows]


async def delete_one(conn: Connection, *, org_id: str, user_id: str, memory_id: uuid.UUID) -> bool:
    """Delete one memory of the user (its sources and links go with it), repairing its chain."""
    await versions.relink_around(conn, org_id=org_id, user_id=user_id, memory_ids=[memory_id])
    deleted = await conn.execute(
        delete(memories).where(
            memories.c.org_id == org_id, memories.c.user_id == user_id, memories.c.memory_id == memory_id
        )
    )
    return deleted > 0


async def delete_by_ids(
    conn: Connection, *, org_id: str, memory_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, str, str]]:
    """Delete memories of the organization by id, repairing their chains; (id, user id, text) of each deleted."""
    if not memory_ids:
        return []
    await versions.relink_around(conn, org_id=org_id, memory_ids=memory_ids)
    result = await conn.fetch(
        delete(memories)
        .where(memories.c.org_id == org_id, memories.c.memory_id.in_(list(memory_ids)))
        .returning(memories.c.memory_id, memories.c.user_id, memories.c.memory)
    )
    return [(row.memory_id, row.user_id, row.memory) for row in result]


async def metadata_where(
    conn: Connection, *, org_id: str, where: ColumnElement[bool]
) -> dict[uuid.UUID, dict[str, Any]]:
    """The metadata of the organization's memories matching ``where``, by memory id."""
    rows = await conn.fetch(select(memories.c.memory_id, memories.c.metadata).where(memories.c.org_id == org_id, where))
    return {row.memory_id: row.metadata or {} for row in rows}


async def delete_for_user(conn: Connection, *, org_id: str, user_id: str) -> int:
    """Delete every memory of the user; the chains go with them (they never leave one user)."""
    return await conn.execute(delete(memories).where(memories.c.org_id == org_id, memories.c.user_id == user_id))


# -- reading: the Memora contract's rendered memories ----------------------------------------

GET_ONE = render(
    """
SELECT {memory_columns}
FROM {schema}.memories AS m
{with_names_and_sources}
WHERE m.org_id = :org_id AND m.user_id = :user_id AND m.memory_id = :memory_id
""",
    memory_columns=MEMORY_COLUMNS,
    with_names_and_sources=WITH_NAMES_AND_SOURCES,
)

# The user's memories, newest first; the agent filter is an equality the btree
# ix_memories_user_agent_recent can serve, which an "IS NULL OR" would hide from it. As of a
# time, the versions current then (timeline.current_at).
_LIST_FOR_USER = """
SELECT {memory_columns}
FROM (
    SELECT * FROM {schema}.memories AS listed
    WHERE listed.org_id = :org_id AND listed.user_id = :user_id {agent_condition} {as_of_condition}
    ORDER BY obtained_at DESC, seq DESC
    OFFSET :skip LIMIT :limit
) AS m
{with_names_and_sources}
ORDER BY m.obtained_at DESC, m.seq DESC
"""


@lru_cache(maxsize=8)
def list_statement(agent: bool, clock: str | None) -> str:
    """The user's memories (the agent's, with ``agent``): every version, or those current at :as_of."""
    return render(
        _LIST_FOR_USER,
        memory_columns=MEMORY_COLUMNS,
        with_names_and_sources=WITH_NAMES_AND_SOURCES,
        agent_condition="AND agent_id = :agent_id" if agent else "",
        as_of_condition="" if clock is None else render("AND {current}", current=timeline.current_at("listed", clock)),
    )


LIST_FOR_USER = list_statement(False, None)


def one(*, org_id: str, user_id: str, memory_id: uuid.UUID) -> Statement:
    """That memory of the user (a row for ``to_model``, or none)."""
    return Statement(GET_ONE, {"org_id": org_id, "user_id": user_id, "memory_id": memory_id})


def listing(
    *,
    org_id: str,
    user_id: str,
    agent_id: str | None,
    skip: int,
    limit: int,
    as_of: datetime | None = None,
    clock: str = timeline.VALID,
) -> Statement:
    """A page of the user's memories (rows for ``to_model``), newest first: every version, or those
    current at ``as_of``."""
    params: dict[str, Any] = {"org_id": org_id, "user_id": user_id, "skip": skip, "limit": limit}
    if agent_id:
        params["agent_id"] = agent_id
    if as_of is not None:
        params["as_of"] = as_of
    return Statement(list_statement(bool(agent_id), None if as_of is None else clock), params)


# -- reading: plain rows (the mem0-style API) ------------------------------------------------

# What the mem0-style API shows of a memory, and what its searches return.
FIELDS = (
    memories.c.memory_id,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.memory,
    memories.c.metadata,
    memories.c.obtained_at,
)


# One memory by its id (bound), built once.
FIND = select(*FIELDS).where(memories.c.org_id == bindparam("org_id"), memories.c.memory_id == bindparam("memory_id"))


def find_statement(*, org_id: str, memory_id: uuid.UUID) -> Statement:
    """The organization's memory with that id, as :data:`FIELDS` (a row, or none)."""
    return Statement(FIND, {"org_id": org_id, "memory_id": memory_id})


async def find(conn: Connection, *, org_id: str, memory_id: uuid.UUID) -> dict[str, Any] | None:
    """The organization's memory with that id, as :data:`FIELDS`; None when there is none."""
    rows = await conn.run(find_statement(org_id=org_id, memory_id=memory_id))
    return rows[0]._asdict() if rows else None


def newest_statement(*, org_id: str, where: ColumnElement[bool], limit: int) -> Statement:
    """Up to ``limit`` of the organization's memories matching ``where``, newest first; the statement
    is built once per shape of ``where`` (its values bound as parameters)."""
    params: dict[str, Any] = {"org_id": org_id, "limit": limit}
    shape = FilterShape(where)
    if shape.key is None:
        return Statement(_newest(where), params)
    return Statement(_newest_of_shape(shape), {**params, **shape.values})


def _newest(where: ColumnElement[bool]) -> Select[Any]:
    return (
        select(*FIELDS)
        .where(memories.c.org_id == bindparam("org_id"), where)
        .order_by(memories.c.obtained_at.desc(), memories.c.seq.desc())
        .limit(bindparam("limit", type_=Integer))
    )


@lru_cache(maxsize=256)
def _newest_of_shape(shape: FilterShape) -> Select[Any]:
    return _newest(shape.condition)
