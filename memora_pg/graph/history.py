"""History events of memories changed through the mem0-style API (ADD, UPDATE, DELETE)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.schema import memory_history


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


async def record(conn: AsyncConnection, *, org_id: str, events: Sequence[Event]) -> None:
    """Write events in the caller's transaction, so they commit with the change they describe."""
    if not events:
        return
    await conn.execute(
        insert(memory_history),
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
        ],
    )


async def for_memory(conn: AsyncConnection, *, org_id: str, memory_id: uuid.UUID) -> list[dict[str, Any]]:
    """The memory's events, oldest first."""
    stmt = (
        select(memory_history)
        .where(memory_history.c.org_id == org_id, memory_history.c.memory_id == memory_id)
        .order_by(memory_history.c.seq)
    )
    return [row._asdict() for row in await conn.execute(stmt)]
