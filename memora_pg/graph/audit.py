"""The audit log: who changed what, and when, recorded in the same transaction as the change.

One row per public call that changes something, written by the schema's ``record_audit`` (migration
0018): a call that writes new memories or a turn has its row written by the write function it calls, given
:func:`arguments`; others call :func:`record`. Both take an :class:`Entry`, or None when auditing is off
(``Settings.audit``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from memora_pg.driver import Connection
from memora_pg.statements import function_call


@dataclass(frozen=True)
class Entry:
    """What one audit row says. Give ``user_id`` only when the change is about that user (erasing
    the user then erases the row too)."""

    method: str
    user_id: str | None = None
    agent_id: str | None = None
    ids: dict[str, Any] = field(default_factory=dict)


def entry(enabled: bool, method: str, **fields: Any) -> Entry | None:
    """The entry of a call, or None when auditing is off."""
    return Entry(method, **fields) if enabled else None


# The audit row's arguments of a write function.
ARGUMENTS = ("audit_event_id", "audit_user_id", "audit_agent_id", "audit_method", "audit_ids")


RECORD_NAMES = ("event_id", "user_id", "agent_id", "method", "ids")
RECORD = function_call("record_audit", ("org_id", *RECORD_NAMES))


def arguments(audited: Entry | None) -> dict[str, Any]:
    """The values of :data:`ARGUMENTS`: without a method, the function writes no row."""
    if audited is None:
        return dict.fromkeys(ARGUMENTS)
    return {
        "audit_event_id": uuid.uuid4(),
        "audit_user_id": audited.user_id,
        "audit_agent_id": audited.agent_id,
        "audit_method": audited.method,
        "audit_ids": json.dumps(audited.ids),
    }


async def record(conn: Connection, *, org_id: str, audited: Entry | None) -> None:
    """The audit row of a call that is not one statement, in the caller's transaction."""
    if audited is None:
        return
    given = arguments(audited)
    await conn.execute(RECORD, {"org_id": org_id, **{name: given[f"audit_{name}"] for name in RECORD_NAMES}})
