"""The audit log: who changed what, and when, recorded in the same transaction as the change."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.schema import audit_log


async def record(
    conn: AsyncConnection,
    *,
    org_id: str,
    method: str,
    user_id: str | None = None,
    agent_id: str | None = None,
    ids: dict[str, Any] | None = None,
) -> None:
    """One audit row. Give ``user_id`` only when the change is about that user (erasing it erases the row)."""
    await conn.execute(
        insert(audit_log).values(
            org_id=org_id,
            event_id=uuid.uuid4(),
            user_id=user_id,
            agent_id=agent_id,
            method=method,
            ids=ids or {},
        )
    )
