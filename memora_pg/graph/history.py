"""History events of memories changed through the mem0-style API (ADD, UPDATE, DELETE).

Events are written in the transaction of the change they describe: the ADD events of new
memories by :data:`ADDED`, an arm of the statement that writes the memories
(:data:`memora_pg.graph.saves.ADD`); the others by :func:`record`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from memora_pg.driver import Connection
from memora_pg.graph.rows import Given, Rows
from memora_pg.schema import memory_history

if TYPE_CHECKING:
    from memora_pg.graph.memories import NewMemory

# The ADD event of each new memory (the statement's ``new_memories`` arm holds the memories),
# dated as the memory is (mem0's history gives every event the memory's creation time).
ADDED = Rows(
    "added",
    into="""{schema}.memory_history
        (org_id, event_id, memory_id, user_id, event, new_memory, actor_id, role, created_at)""",
    values="{org_id}, {event_id}, {memory_id}, {user_id}, 'ADD', {memory}, {actor_id}, {role}, {obtained_at}",
    given={
        "event_id": Given("event_ids", "uuid"),
        "memory_id": Given("memory_ids", "uuid"),
        "memory": Given("memories", "text"),
        "actor_id": Given("actor_ids", "text"),
        "role": Given("roles", "text"),
    },
)


def added_params(items: Sequence[NewMemory]) -> dict[str, Any]:
    """The parameters of :data:`ADDED` beside those of the memories: event ids, actors and roles."""
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

    @property
    def is_deleted(self) -> bool:
        return self.event == "DELETE"


async def record(conn: Connection, *, org_id: str, events: Sequence[Event]) -> None:
    """Write events in the caller's transaction, so they commit with the change they describe."""
    if not events:
        return
    # One statement of one row per event, in the order given (their seq follows it).
    await conn.execute(
        insert(memory_history).values(
            [
                {
                    "org_id": org_id,
                    "event_id": uuid.uuid4(),
                    "memory_id": e.memory_id,
                    "user_id": e.user_id,
                    "event": e.event,
                    "old_memory": e.old_memory,
                    "new_memory": e.new_memory,
                    "actor_id": e.actor_id,
                    "role": e.role,
                    "is_deleted": e.is_deleted,
                }
                for e in events
            ]
        )
    )


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
