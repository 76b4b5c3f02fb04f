"""History events of memories changed through the mem0-style API (ADD, UPDATE, DELETE).

Events are written in the transaction of the change they describe, by the schema's ``record_history``
(migration 0018): the ADD events of new memories by the function that writes the memories
(``add_memories``, :data:`memora_pg.graph.saves.ADD`); the others, and an import's, by :func:`record`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from memora_pg.driver import Connection
from memora_pg.schema import memory_history
from memora_pg.statements import function_call

if TYPE_CHECKING:
    from memora_pg.graph.memories import NewMemory


def added_params(items: Sequence[NewMemory]) -> dict[str, Any]:
    """The ADD events' arguments of ``add_memories`` (migration 0016) beside the memories': event ids,
    actors and roles."""
    metadata = [item.metadata or {} for item in items]
    return {
        "event_ids": [uuid.uuid4() for _ in items],
        "actor_ids": [value.get("actor_id") for value in metadata],
        "roles": [value.get("role") for value in metadata],
    }


@dataclass(frozen=True)
class Event:
    memory_id: uuid.UUID
    user_id: str
    event: str
    old_memory: str | None
    new_memory: str | None
    actor_id: str | None = None
    role: str | None = None
    # An event copied from elsewhere (an import) keeps its id, time and deleted flag; None: a new id, now,
    # and a DELETE event is a deletion.
    event_id: uuid.UUID | None = None
    at: datetime | None = None
    deleted: bool | None = None


# Events are written by the schema's ``record_history``, as ``add_memories`` writes the ADD events: on Citus
# every event of an organization takes its ``seq`` on the same node.
RECORD = function_call(
    "record_history",
    (
        "org_id",
        "event_ids",
        "memory_ids",
        "user_ids",
        "events",
        "old_memories",
        "new_memories",
        "actor_ids",
        "roles",
        "at",
        "deleted",
    ),
)


async def record(conn: Connection, *, org_id: str, events: Sequence[Event]) -> int:
    """Write events in the caller's transaction, so they commit with the change they describe; their
    ``seq`` follows the order given. An event whose id is recorded already is skipped (an import run
    again); the number recorded."""
    if not events:
        return 0
    recorded = await conn.scalar(
        RECORD,
        {
            "org_id": org_id,
            "event_ids": [event.event_id or uuid.uuid4() for event in events],
            "memory_ids": [event.memory_id for event in events],
            "user_ids": [event.user_id for event in events],
            "events": [event.event for event in events],
            "old_memories": [event.old_memory for event in events],
            "new_memories": [event.new_memory for event in events],
            "actor_ids": [event.actor_id for event in events],
            "roles": [event.role for event in events],
            "at": [event.at for event in events],
            "deleted": [event.deleted for event in events],
        },
    )
    return int(recorded or 0)


async def for_memory(
    conn: Connection, *, org_id: str, memory_id: uuid.UUID, user_id: str | None = None
) -> list[dict[str, Any]]:
    """The memory's events, oldest first (none unless it is ``user_id``'s, when given)."""
    stmt = (
        select(memory_history)
        .where(memory_history.c.org_id == org_id, memory_history.c.memory_id == memory_id)
        .order_by(memory_history.c.seq)
    )
    if user_id is not None:
        stmt = stmt.where(memory_history.c.user_id == user_id)
    return [row._asdict() for row in await conn.fetch(stmt)]
