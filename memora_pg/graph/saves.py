"""Where memories are written: every statement that stores new memories, each one round trip.

Each statement is one ``INSERT`` per table, chained as data-modifying CTEs, built from the
same arms: the memory rows (:data:`memories.NEW_MEMORIES`), their source messages, their
CONTRARY_UPDATE links (:data:`versions.LINKS`) and the call's audit row (:data:`audit.ARM`).
Every arm reads the statement's ``scope`` CTE, one row naming the organization, user,
agent, interaction and time, or no row when the write must not happen; so nothing at all is
written unless, for example, the user and the agent exist. The foreign keys between the new
rows are checked at the end of the statement, when all of them are there.

* :data:`SAVE`: a new interaction with its messages and memories (Memora's save).
* :data:`ADD`: new memories of a mem0-style collection, with the organization and user they
  need and their ADD history events.
* :data:`WRITE`: new memories of an existing interaction (an update) or of none (the vector
  store's upsert).

A contrary memory supersedes a memory that existed before the call (its id came from an
earlier search or read): the statement's snapshot is taken before its own inserts.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.graph import audit, history, interactions, versions
from memora_pg.graph.memories import NEW_MEMORIES, SCOPE, SOURCES, NewMemory, memory_params, scope_params
from memora_pg.sql_text import render
from memora_pg.statements import Statement, sql

# The messages of the new interaction (the statement's ``scope`` names it).
NEW_MESSAGES = """
new_messages AS (
    INSERT INTO {schema}.messages (org_id, interaction_id, msg_position, role, content)
    SELECT scope.org_id, scope.interaction_id, given.n - 1, given.role, given.content
    FROM scope,
         unnest(CAST(:roles AS text[]), CAST(:contents AS text[])) WITH ORDINALITY AS given(role, content, n)
)"""


# -- statement by statement (Citus) ------------------------------------------------------------------
# On a Citus cluster each data-modifying CTE of a one-statement write is run first and its result
# broadcast to every worker, and the transaction commits in two phases on all of them. There the
# same rows are written by statements of their own, each a multi-row ``INSERT ... VALUES`` with the
# organization as a constant, in the caller's transaction. Citus routes such an insert to the
# organization's one shard and evaluates its identity defaults (``nextval``) on the coordinator; an
# ``INSERT ... SELECT FROM unnest(...)`` instead is pulled to the coordinator and COPYed into the
# shard (a two-phase commit, and ``nextval`` of the worker's sequence, which an application role
# may not use). One worker, one-phase commit.

# Rows per multi-row insert: each row binds a handful of parameters, PostgreSQL allows 32767.
ROWS_PER_STATEMENT = 1000


def rows_statement(head: str, row: str, tail: str, n: int) -> str:
    """``head VALUES row_0, ..., row_{n-1} tail``: ``{n}`` in ``row`` becomes each row's parameter suffix."""
    values = ",\n".join(render(row, n=f"_{i}") for i in range(n))
    return render("{head}\nVALUES {values}\n{tail}", head=head, values=values, tail=tail)


async def insert_rows(
    conn: AsyncConnection, head: str, row: str, tail: str, common: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> list[Any]:
    """Insert ``rows`` (each its parameters without suffix) with multi-row inserts; the first column of
    what they return."""
    returned: list[Any] = []
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        params = dict(common)
        for i, values in enumerate(chunk):
            params.update({f"{name}_{i}": value for name, value in values.items()})
        result = await conn.execute(sql(conn, rows_statement(head, row, tail, len(chunk))), params)
        if result.returns_rows:
            returned.extend(result.scalars())
    return returned


MESSAGE_ROWS = (
    "INSERT INTO {schema}.messages (org_id, interaction_id, msg_position, role, content)",
    "(:org_id, :interaction_id, :msg_position{n}, :role{n}, :content{n})",
    "",
)
MEMORY_ROWS = (
    """INSERT INTO {schema}.memories AS m
    (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, metadata, embedding, search_text,
     expires_at)""",
    "(:org_id, :memory_id{n}, :user_id, :agent_id, CAST(:interaction_id AS text), :memory{n},"
    " CAST(:obtained_at AS timestamptz), coalesce(CAST(:metadata{n} AS jsonb), '{}'), CAST(:embedding{n} AS vector),"
    " CASE WHEN CAST(:embedding{n} AS vector) IS NOT NULL THEN {schema}.to_search_text(CAST(:memory{n} AS text)) END,"
    " CAST(:expires_at{n} AS timestamptz))",
    """ON CONFLICT (org_id, memory_id) DO UPDATE
SET memory = excluded.memory, agent_id = excluded.agent_id, obtained_at = excluded.obtained_at,
    embedding = excluded.embedding, search_text = excluded.search_text
WHERE m.user_id = excluded.user_id
RETURNING m.memory_id""",
)
SOURCE_ROWS = (
    "INSERT INTO {schema}.memory_sources (org_id, memory_id, interaction_id, msg_position)",
    "(:org_id, :memory_id{n}, :interaction_id, :msg_position{n})",
    "",
)
ADDED_ROWS = (
    "INSERT INTO {schema}.memory_history"
    " (org_id, event_id, memory_id, user_id, event, new_memory, actor_id, role, created_at)",
    "(:org_id, :event_id{n}, :memory_id{n}, :user_id, 'ADD', :memory{n}, :actor_id{n}, :role{n},"
    " CAST(:at AS timestamptz))",
    "",
)
AUDIT_ALONE = """
INSERT INTO {schema}.audit_log (org_id, event_id, user_id, agent_id, method, ids)
VALUES (:org_id, :audit_event_id, :audit_user_id, :audit_agent_id, :audit_method, CAST(:audit_ids AS jsonb))"""


def _common(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters every row of a write shares (its SCOPE)."""
    return {name: params[name] for name in ("org_id", "user_id", "agent_id", "interaction_id", "at", "obtained_at")}


# A contrary memory supersedes a memory that existed before the call: as a statement of its own
# after the new memories are in, the link must skip this call's own memories. It reads the old
# memory pinned to the organization, so Citus plans the whole insert on its shard.
LINKS_ALONE = render("WITH {scope}{link}", scope=SCOPE, link=render(versions.LINK, own=versions.OWN_MEMORIES_LEFT_OUT))


@dataclass(frozen=True)
class _Result:
    """A row of the shape the one-statement writes return."""

    user_exists: bool = True
    agent_exists: bool = True
    written: list[uuid.UUID] = field(default_factory=list)
    linked: list[uuid.UUID] = field(default_factory=list)


def _rows(params: dict[str, Any], arrays: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of a write, each with its own parameters, from the one-statement form's arrays:
    ``arrays`` names, for each parameter of a row, the array parameter holding it."""
    columns = [params[array] for array in arrays.values()]
    return [dict(zip(arrays, values, strict=True)) for values in zip(*columns, strict=True)]


MEMORY_ARRAYS = {
    "memory_id": "memory_ids",
    "memory": "memories",
    "metadata": "metadata",
    "embedding": "embeddings",
    "expires_at": "expires_at",
}


async def _messages_alone(conn: AsyncConnection, params: dict[str, Any]) -> None:
    rows = _rows(params, {"role": "roles", "content": "contents"})
    await insert_rows(conn, *MESSAGE_ROWS, _common(params), [{**row, "msg_position": n} for n, row in enumerate(rows)])


async def _memories_alone(conn: AsyncConnection, params: dict[str, Any], *, link: bool) -> _Result:
    """The memory rows, their sources, their links (with ``link``) and the audit row, one statement each."""
    common = _common(params)
    written: list[uuid.UUID] = []
    if params["memory_ids"]:
        written = await insert_rows(conn, *MEMORY_ROWS, common, _rows(params, MEMORY_ARRAYS))
    if params["source_memory_ids"]:
        sources = _rows(params, {"memory_id": "source_memory_ids", "msg_position": "source_positions"})
        await insert_rows(conn, *SOURCE_ROWS, common, sources)
    linked: list[uuid.UUID] = []
    if link and params["new_ids"]:
        linked = list((await conn.execute(sql(conn, LINKS_ALONE), params)).scalars())
        await versions.clock_linked(conn, org_id=params["org_id"], linked=linked)
    await _audit_alone(conn, params)
    return _Result(written=written, linked=linked)


async def _audit_alone(conn: AsyncConnection, params: dict[str, Any]) -> None:
    if params["audited"]:
        await conn.execute(
            sql(conn, AUDIT_ALONE),
            {name: params[name] for name in params if name == "org_id" or name.startswith("audit_")},
        )


async def _added_alone(conn: AsyncConnection, params: dict[str, Any]) -> None:
    arrays = {
        "event_id": "event_ids",
        "memory_id": "memory_ids",
        "memory": "memories",
        "actor_id": "actor_ids",
        "role": "roles",
    }
    await insert_rows(conn, *ADDED_ROWS, _common(params), _rows(params, arrays))


# The arms that write new memories with their sources, their contrary links and the call's audit row.
_MEMORY_ARMS = {"new_memories": NEW_MEMORIES, "sources": SOURCES, "links": versions.LINKS, "audit": audit.ARM}

SAVE = render(
    """
WITH RECURSIVE owners AS (
    SELECT EXISTS (SELECT FROM {schema}.users WHERE org_id = :org_id AND user_id = :user_id) AS user_exists,
           EXISTS (SELECT FROM {schema}.agents WHERE org_id = :org_id AND agent_id = :agent_id) AS agent_exists
),
interaction AS (
    INSERT INTO {schema}.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
    SELECT :org_id, :interaction_id, :user_id, :agent_id, :at, :at
    FROM owners
    WHERE owners.user_exists AND owners.agent_exists
    RETURNING org_id, user_id, agent_id, interaction_id, created_at
),
scope AS (
    SELECT org_id, user_id, agent_id, interaction_id, created_at AS obtained_at FROM interaction
),
{new_messages},
{new_memories},
{sources},
{links},
{audit}
SELECT owners.user_exists, owners.agent_exists, ARRAY(SELECT new_memory_id FROM links) AS linked
FROM owners
""",
    new_messages=NEW_MESSAGES,
    **_MEMORY_ARMS,
)


@dataclass(frozen=True)
class Saved:
    user_exists: bool
    agent_exists: bool
    # The contrary memories whose target was not found for this user: stored without a link.
    unlinked: list[uuid.UUID]


def save(
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str,
    at: datetime,
    messages: Sequence[interactions.Message],
    items: Sequence[NewMemory],
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing the interaction and everything in it, unless the user or the agent is
    missing (then nothing); :func:`saved` reads its result."""
    params = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at),
        "roles": [message.role for message in messages],
        "contents": [message.content for message in messages],
        **memory_params(items),
        **versions.link_params(items),
        **audit.arm_params(audited),
    }

    async def steps(conn: AsyncConnection) -> list[_Result]:
        user_exists, agent_exists = await interactions.create(
            conn, org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at
        )
        if not (user_exists and agent_exists):
            return [_Result(user_exists=user_exists, agent_exists=agent_exists)]
        if messages:
            await _messages_alone(conn, params)
        return [await _memories_alone(conn, params, link=True)]

    return Statement(SAVE, params, steps)


def saved(rows: Sequence[Row[Any]], items: Sequence[NewMemory]) -> Saved:
    """What :func:`save`'s statement did."""
    (row,) = rows
    return Saved(
        user_exists=bool(row.user_exists),
        agent_exists=bool(row.agent_exists),
        unlinked=versions.unlinked(items, row.linked),
    )


WRITE = render(
    """
WITH RECURSIVE {scope},
{new_memories},
{sources},
{links},
{audit}
SELECT ARRAY(SELECT memory_id FROM new_memories) AS written, ARRAY(SELECT new_memory_id FROM links) AS linked
""",
    scope=SCOPE,
    **_MEMORY_ARMS,
)


@dataclass(frozen=True)
class Written:
    # The ids written (an upsert of an id another user has writes nothing for it).
    written: list[uuid.UUID]
    # The contrary memories stored without a link (their target was not found for the user).
    unlinked: list[uuid.UUID]


def write(
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str | None,
    at: datetime,
    items: Sequence[NewMemory],
    link: bool,
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing ``items`` with their sources (and, with ``link``, their contrary links)
    and the audit row; :func:`written` reads its result."""
    params = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at),
        **memory_params(items),
        **versions.link_params(items if link else ()),
        **audit.arm_params(audited),
    }

    async def steps(conn: AsyncConnection) -> list[_Result]:
        return [await _memories_alone(conn, params, link=link)]

    return Statement(WRITE, params, steps)


def written(rows: Sequence[Row[Any]], items: Sequence[NewMemory]) -> Written:
    """What :func:`write`'s statement did."""
    (row,) = rows
    return Written(written=list(row.written), unlinked=versions.unlinked(items, row.linked))


COLLECTION_ORGANIZATION = """
INSERT INTO {schema}.organizations (org_id, org_name) VALUES (:org_id, :collection)
ON CONFLICT DO NOTHING"""
COLLECTION_USER = """
INSERT INTO {schema}.users (org_id, user_id, user_name) VALUES (:org_id, :user_id, :user_name)
ON CONFLICT DO NOTHING"""

ADD = render(
    """
WITH organization AS ({organization}
),
collection_user AS ({user}
),
{scope},
{new_memories},
{added},
{audit}
SELECT 1
""",
    organization=COLLECTION_ORGANIZATION,
    user=COLLECTION_USER,
    scope=SCOPE,
    new_memories=NEW_MEMORIES,
    added=history.ADDED,
    audit=audit.ARM,
)


def add(
    *,
    org_id: str,
    collection: str,
    user_id: str,
    agent_id: str,
    at: datetime,
    items: Sequence[NewMemory],
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing mem0-style ``items`` (each with its vector) for the user, with their ADD
    events and the audit row.

    The collection's organization and the user are created if missing, never changed.
    """
    params: dict[str, Any] = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=None, at=at),
        "collection": collection,
        "user_name": user_id or "(no user)",
        **memory_params(items),
        **history.added_params(items),
        **audit.arm_params(audited),
    }

    async def steps(conn: AsyncConnection) -> list[_Result]:
        await conn.execute(sql(conn, COLLECTION_ORGANIZATION), params)
        await conn.execute(sql(conn, COLLECTION_USER), params)
        if params["memory_ids"]:
            await insert_rows(conn, *MEMORY_ROWS, _common(params), _rows(params, MEMORY_ARRAYS))
            await _added_alone(conn, params)
        await _audit_alone(conn, params)
        return [_Result()]

    return Statement(ADD, params, steps)
