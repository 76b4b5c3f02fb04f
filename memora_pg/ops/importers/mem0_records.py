"""A mem0 2.x deployment's rows as memora_pg's: pure conversions, no I/O.

mem0 keeps a memory as one row of its collection table (``id uuid, vector vector(N), payload jsonb``):
the text under ``data``, its ``hash``, ``created_at``/``updated_at`` as ISO strings, the session ids
(``user_id``, ``agent_id``, ``run_id``, ``actor_id``, ``role``), ``expiration_date`` and the caller's
metadata beside them, and ``text_lemmatized`` for its keyword search. The mem0-style face keeps the
same memory as a row of ``memories`` in the organization ``mem0:<collection>``: the user and agent
as columns, the rest of the payload in ``metadata`` (where its ``get`` finds ``run_id``,
``updated_at`` and the expiry, as mem0's does). Its history is a row of mem0's SQLite ``history``
table per ADD, UPDATE or DELETE, which becomes a row of ``memory_history``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memora_pg.mem0.shapes import NO_AGENT, NO_USER, expires_at_of
from memora_pg.ops.importers.source import Refused as Refused  # the refusal of a row, named here with the rows

# Payload keys that become columns, or that memora_pg derives rather than keeps.
COLUMN_KEYS = ("data", "user_id", "agent_id", "created_at", "hash", "text_lemmatized")
EVENTS = ("ADD", "UPDATE", "DELETE")
# Event ids of a history without UUIDs (never written by mem0 2.x) are derived from them, stably.
EVENT_NAMESPACE = uuid.UUID("0b6f6a52-3f3c-4c0f-9d43-0f1e6a1d2c77")
MAX_TEXT = 100_000


@dataclass(frozen=True)
class Memory:
    memory_id: uuid.UUID
    user_id: str
    agent_id: str
    text: str
    created_at: datetime
    metadata: dict[str, Any]
    expires_at: datetime | None
    vector: str | None  # pgvector's text form, as the source printed it

    @property
    def version(self) -> str:
        """What tells a later import that the source changed the memory: its ``updated_at`` (else its creation)."""
        value = self.metadata.get("updated_at")
        return str(value) if value is not None else self.created_at.isoformat()


@dataclass(frozen=True)
class Event:
    event_id: uuid.UUID
    memory_id: uuid.UUID
    event: str
    old_memory: str | None
    new_memory: str | None
    at: datetime
    is_deleted: bool
    actor_id: str | None
    role: str | None


def timestamp(value: object) -> datetime | None:
    """An ISO 8601 string (mem0 writes them with an offset; a naive one is UTC), or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r}")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} is missing or empty")
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character")
    if len(value) > MAX_TEXT:
        raise ValueError(f"{what} is longer than {MAX_TEXT:,} characters")
    return value


def _entity(payload: dict[str, Any], key: str, default: str) -> str:
    value = payload.get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError(f"{key} is not a string: {value!r}")
    return str(value)


def memory(memory_id: object, payload: object, vector: str | None, *, imported_at: datetime) -> Memory | Refused:
    """One row of mem0's collection as a memory of the mem0-style face, or why it cannot be one."""
    key = str(memory_id)
    try:
        parsed_id = memory_id if isinstance(memory_id, uuid.UUID) else uuid.UUID(key)
        if not isinstance(payload, dict):
            raise ValueError("the payload is not a JSON object")
        text = _text(payload.get("data"), "the text (data)")
        created = timestamp(payload.get("created_at")) or timestamp(payload.get("updated_at")) or imported_at
        metadata = {k: v for k, v in payload.items() if k not in COLUMN_KEYS}
        if metadata.get("updated_at") is not None:
            timestamp(metadata["updated_at"])  # checked: get() shows it
        return Memory(
            memory_id=parsed_id,
            user_id=_entity(payload, "user_id", NO_USER),
            agent_id=_entity(payload, "agent_id", NO_AGENT),
            text=text,
            created_at=created,
            metadata=metadata,
            expires_at=expires_at_of(metadata),
            vector=vector,
        )
    except ValueError as error:
        return Refused("memory", key, str(error))


def event(row: dict[str, Any]) -> Event | Refused:
    """One row of mem0's SQLite ``history`` table as a history event, or why it cannot be one."""
    key = str(row.get("id"))
    try:
        raw_id = str(row["id"])
        try:
            event_id = uuid.UUID(raw_id)
        except ValueError:
            event_id = uuid.uuid5(EVENT_NAMESPACE, raw_id)
        name = str(row.get("event") or "").upper()
        if name not in EVENTS:
            raise ValueError(f"unknown event {row.get('event')!r}")
        # mem0's created_at is the memory's creation, updated_at the event's time (none for an ADD).
        at = timestamp(row.get("updated_at")) or timestamp(row.get("created_at"))
        if at is None:
            raise ValueError("the event has no time")
        for text in (row.get("old_memory"), row.get("new_memory")):
            if isinstance(text, str) and "\x00" in text:
                raise ValueError("a text contains a NUL character")
        return Event(
            event_id=event_id,
            memory_id=uuid.UUID(str(row["memory_id"])),
            event=name,
            old_memory=row.get("old_memory"),
            new_memory=row.get("new_memory"),
            at=at,
            is_deleted=bool(row.get("is_deleted")),
            actor_id=row.get("actor_id"),
            role=row.get("role"),
        )
    except (KeyError, ValueError, TypeError) as error:
        return Refused("history", key, str(error))
