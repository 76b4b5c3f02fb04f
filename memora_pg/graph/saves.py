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
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Row

from memora_pg.graph import audit, history, versions
from memora_pg.graph.interactions import Message
from memora_pg.graph.memories import NEW_MEMORIES, SCOPE, SOURCES, NewMemory, memory_params, scope_params
from memora_pg.statements import Statement

SAVE = f"""
WITH owners AS (
    SELECT EXISTS (SELECT FROM {{schema}}.users WHERE org_id = :org_id AND user_id = :user_id) AS user_exists,
           EXISTS (SELECT FROM {{schema}}.agents WHERE org_id = :org_id AND agent_id = :agent_id) AS agent_exists
),
interaction AS (
    INSERT INTO {{schema}}.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
    SELECT :org_id, :interaction_id, :user_id, :agent_id, :at, :at
    FROM owners
    WHERE owners.user_exists AND owners.agent_exists
    RETURNING org_id, user_id, agent_id, interaction_id, created_at
),
scope AS (
    SELECT org_id, user_id, agent_id, interaction_id, created_at AS obtained_at FROM interaction
),
new_messages AS (
    INSERT INTO {{schema}}.messages (org_id, interaction_id, msg_position, role, content)
    SELECT scope.org_id, scope.interaction_id, given.n - 1, given.role, given.content
    FROM scope,
         unnest(CAST(:roles AS text[]), CAST(:contents AS text[])) WITH ORDINALITY AS given(role, content, n)
),
{NEW_MEMORIES},
{SOURCES},
{versions.LINKS},
{audit.ARM}
SELECT owners.user_exists, owners.agent_exists, ARRAY(SELECT new_memory_id FROM links) AS linked
FROM owners
"""


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
    messages: Sequence[Message],
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
    return Statement(SAVE, params)


def saved(rows: Sequence[Row[Any]], items: Sequence[NewMemory]) -> Saved:
    """What :func:`save`'s statement did."""
    (row,) = rows
    return Saved(
        user_exists=bool(row.user_exists),
        agent_exists=bool(row.agent_exists),
        unlinked=versions.unlinked(items, row.linked),
    )


WRITE = f"""
WITH {SCOPE},
{NEW_MEMORIES},
{SOURCES},
{versions.LINKS},
{audit.ARM}
SELECT ARRAY(SELECT memory_id FROM new_memories) AS written, ARRAY(SELECT new_memory_id FROM links) AS linked
"""


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
    return Statement(WRITE, params)


def written(rows: Sequence[Row[Any]], items: Sequence[NewMemory]) -> Written:
    """What :func:`write`'s statement did."""
    (row,) = rows
    return Written(written=list(row.written), unlinked=versions.unlinked(items, row.linked))


ADD = f"""
WITH organization AS (
    INSERT INTO {{schema}}.organizations (org_id, org_name) VALUES (:org_id, :collection)
    ON CONFLICT DO NOTHING
),
collection_user AS (
    INSERT INTO {{schema}}.users (org_id, user_id, user_name) VALUES (:org_id, :user_id, :user_name)
    ON CONFLICT DO NOTHING
),
{SCOPE},
{NEW_MEMORIES},
{history.ADDED},
{audit.ARM}
SELECT 1
"""


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
    return Statement(ADD, params)
