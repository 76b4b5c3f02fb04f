"""Saving a new interaction with its memories: one statement.

The interaction, its messages, its memories with their vectors, their source links, the
CONTRARY_UPDATE links to the memories they supersede and the audit row go in one ``INSERT``
per table, chained as data-modifying CTEs of one statement: one round trip for the whole
save instead of five. Every insert reads from the ``interaction`` CTE, so nothing at all is
written unless the user and the agent exist; the foreign keys between the new rows are
checked at the end of the statement, when all of them are there.

A contrary memory supersedes a memory that existed before the call (its id came from an
earlier search or read): the statement's snapshot is taken before its own inserts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg import vector_params
from memora_pg.db import sql
from memora_pg.graph.interactions import Message
from memora_pg.graph.memories import NewMemory


@dataclass(frozen=True)
class Saved:
    user_exists: bool
    agent_exists: bool
    # The contrary memories whose target was not found for this user: stored without a link.
    unlinked: list[uuid.UUID]


@lru_cache(maxsize=4)
def save_sql(*, searchable: bool, audit: bool) -> str:
    """The statement for memories with or without their vectors, and with or without the audit row."""
    if searchable:
        vector_columns = ", embedding, search_text"
        vector_values = ", given.embedding, to_tsvector(CAST(:ts_config AS regconfig), given.memory)"
        given = """unnest(CAST(:memory_ids AS uuid[]), CAST(:memories AS text[]), CAST(:embeddings AS vector[]))
         WITH ORDINALITY AS given(memory_id, memory, embedding, n)"""
    else:
        vector_columns = vector_values = ""
        given = """unnest(CAST(:memory_ids AS uuid[]), CAST(:memories AS text[]))
         WITH ORDINALITY AS given(memory_id, memory, n)"""
    audit_row = (
        """,
audit AS (
    INSERT INTO {schema}.audit_log (org_id, event_id, user_id, agent_id, method, ids)
    SELECT interaction.org_id, :event_id, :user_id, :agent_id, :method, CAST(:audit_ids AS jsonb)
    FROM interaction
)"""
        if audit
        else ""
    )
    return f"""
WITH owners AS (
    SELECT EXISTS (SELECT FROM {{schema}}.users WHERE org_id = :org_id AND user_id = :user_id) AS user_exists,
           EXISTS (SELECT FROM {{schema}}.agents WHERE org_id = :org_id AND agent_id = :agent_id) AS agent_exists
),
interaction AS (
    INSERT INTO {{schema}}.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
    SELECT :org_id, :interaction_id, :user_id, :agent_id, :at, :at
    FROM owners
    WHERE owners.user_exists AND owners.agent_exists
    RETURNING org_id, interaction_id
),
new_messages AS (
    INSERT INTO {{schema}}.messages (org_id, interaction_id, msg_position, role, content)
    SELECT interaction.org_id, interaction.interaction_id, given.n - 1, given.role, given.content
    FROM interaction,
         unnest(CAST(:roles AS text[]), CAST(:contents AS text[])) WITH ORDINALITY AS given(role, content, n)
),
new_memories AS (
    INSERT INTO {{schema}}.memories
        (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at{vector_columns})
    SELECT interaction.org_id, given.memory_id, :user_id, :agent_id, interaction.interaction_id, given.memory,
           :at{vector_values}
    FROM interaction,
         {given}
    ORDER BY given.n
),
sources AS (
    INSERT INTO {{schema}}.memory_sources (org_id, memory_id, interaction_id, msg_position)
    SELECT interaction.org_id, given.memory_id, interaction.interaction_id, given.msg_position
    FROM interaction,
         unnest(CAST(:source_memory_ids AS uuid[]), CAST(:source_positions AS int[])) AS given(memory_id, msg_position)
),
-- A contrary memory supersedes an existing memory of the same organization and user only.
links AS (
    INSERT INTO {{schema}}.memory_updates (org_id, new_memory_id, old_memory_id)
    SELECT old.org_id, contrary.new_id, old.memory_id
    FROM interaction,
         unnest(CAST(:new_ids AS uuid[]), CAST(:old_ids AS uuid[])) AS contrary(new_id, old_id)
         JOIN {{schema}}.memories AS old
           ON old.org_id = :org_id AND old.user_id = :user_id AND old.memory_id = contrary.old_id
    RETURNING new_memory_id
){audit_row}
SELECT owners.user_exists, owners.agent_exists, ARRAY(SELECT new_memory_id FROM links) AS linked
FROM owners
"""


async def save(
    conn: AsyncConnection,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str,
    at: datetime,
    messages: Sequence[Message],
    items: Sequence[NewMemory],
    searchable: bool,
    text_search_config: str,
    audit_method: str | None,
) -> Saved:
    """Write the interaction and everything in it, unless the user or the agent is missing (then nothing)."""
    contrary = [item for item in items if item.supersedes is not None]
    params = {
        "org_id": org_id,
        "user_id": user_id,
        "agent_id": agent_id,
        "interaction_id": interaction_id,
        "at": at,
        "roles": [message.role for message in messages],
        "contents": [message.content for message in messages],
        "memory_ids": [item.memory_id for item in items],
        "memories": [item.text for item in items],
        "source_memory_ids": [item.memory_id for item in items for _ in sorted(set(item.positions))],
        "source_positions": [position for item in items for position in sorted(set(item.positions))],
        "new_ids": [item.memory_id for item in contrary],
        "old_ids": [item.supersedes for item in contrary],
    }
    if searchable:
        params["ts_config"] = text_search_config
        params["embeddings"] = vector_params.many([item.embedding or () for item in items])
    if audit_method is not None:
        params["event_id"] = uuid.uuid4()
        params["method"] = audit_method
        params["audit_ids"] = json.dumps(
            {"interaction_id": interaction_id, "memory_ids": [str(item.memory_id) for item in items]}
        )
    row = (await conn.execute(sql(conn, save_sql(searchable=searchable, audit=audit_method is not None)), params)).one()
    linked = set(row.linked)
    return Saved(
        user_exists=bool(row.user_exists),
        agent_exists=bool(row.agent_exists),
        unlinked=[item.memory_id for item in contrary if item.memory_id not in linked],
    )
