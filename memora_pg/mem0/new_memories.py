"""New memories of the mem0-style API, written in one statement.

The collection's organization and the user (created if missing, never changed), the memories
with their vectors and full-text vectors, one ADD event each in the history, and, when the call
is audited, its audit row: one ``INSERT`` per table, chained as data-modifying CTEs of one
statement, so an ``add`` is one round trip. The foreign keys from the new rows to the new
user are checked at the end of the statement, when the user row is there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg import vector_params
from memora_pg.db import sql
from memora_pg.graph.memories import NewMemory
from memora_pg.mem0.errors import DuragValidationError

WRITE = """
WITH organization AS (
    INSERT INTO {schema}.organizations (org_id, org_name) VALUES (:org_id, :collection)
    ON CONFLICT DO NOTHING
),
owner AS (
    INSERT INTO {schema}.users (org_id, user_id, user_name) VALUES (:org_id, :user_id, :user_name)
    ON CONFLICT DO NOTHING
),
new_memories AS (
    INSERT INTO {schema}.memories
        (org_id, memory_id, user_id, agent_id, memory, obtained_at, metadata, embedding, search_text)
    SELECT :org_id, given.memory_id, :user_id, :agent_id, given.memory, :at, CAST(given.metadata AS jsonb),
           given.embedding, to_tsvector(CAST(:ts_config AS regconfig), given.memory)
    FROM unnest(CAST(:memory_ids AS uuid[]), CAST(:memories AS text[]), CAST(:metadata AS text[]),
                CAST(:embeddings AS vector[]))
         WITH ORDINALITY AS given(memory_id, memory, metadata, embedding, n)
    ORDER BY given.n
),
added AS (
    INSERT INTO {schema}.memory_history (org_id, event_id, memory_id, user_id, event, new_memory, actor_id, role)
    SELECT :org_id, given.event_id, given.memory_id, :user_id, 'ADD', given.memory, given.actor_id, given.role
    FROM unnest(CAST(:event_ids AS uuid[]), CAST(:memory_ids AS uuid[]), CAST(:memories AS text[]),
                CAST(:actor_ids AS text[]), CAST(:roles AS text[]))
         WITH ORDINALITY AS given(event_id, memory_id, memory, actor_id, role, n)
    ORDER BY given.n
)
"""

# The statement's own result: nothing to return, every CTE runs regardless.
RESULT = "SELECT 1"

AUDIT = """,
audit AS (
    INSERT INTO {schema}.audit_log (org_id, event_id, user_id, agent_id, method, ids)
    VALUES (:org_id, :audit_event_id, :audit_user_id, NULL, :audit_method, CAST(:audit_ids AS jsonb))
)
"""


@dataclass(frozen=True)
class Audit:
    """The audit row of the call, written by the same statement."""

    method: str
    user_id: str | None
    ids: dict[str, Any]


async def write(
    conn: AsyncConnection,
    *,
    org_id: str,
    collection: str,
    user_id: str,
    agent_id: str,
    at: datetime,
    items: Sequence[NewMemory],
    text_search_config: str,
    audit: Audit | None,
) -> None:
    """Write ``items`` (each with its vector) for the user, with their ADD events and the call's audit row."""
    metadata = [item.metadata or {} for item in items]
    params: dict[str, Any] = {
        "org_id": org_id,
        "collection": collection,
        "user_id": user_id,
        "user_name": user_id or "(no user)",
        "agent_id": agent_id,
        "at": at,
        "ts_config": text_search_config,
        "memory_ids": [item.memory_id for item in items],
        "memories": [item.text for item in items],
        "metadata": [_json(value) for value in metadata],
        "event_ids": [uuid.uuid4() for _ in items],
        "actor_ids": [value.get("actor_id") for value in metadata],
        "roles": [value.get("role") for value in metadata],
        "embeddings": vector_params.many([item.embedding or () for item in items]),
    }
    template = WRITE
    if audit is not None:
        template += AUDIT
        params.update(
            audit_event_id=uuid.uuid4(),
            audit_user_id=audit.user_id,
            audit_method=audit.method,
            audit_ids=_json(audit.ids),
        )
    await conn.execute(sql(conn, template + RESULT), params)


def _json(value: dict[str, Any]) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise DuragValidationError(f"metadata must be JSON: {error}") from error
