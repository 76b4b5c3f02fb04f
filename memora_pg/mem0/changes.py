"""The changes a mem0-style call makes to existing memories, each with the history event mem0 keeps for it.

A memory changed in place gets an UPDATE event, a memory deleted a DELETE event, each carrying the
``actor_id`` and ``role`` of the memory's metadata (mem0 keeps them on every event). A change in place
is one call of the schema's ``update_memories``, which records its events itself; a deletion's events
are returned, and the caller records them with the rest of its work (``history.record``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memora_pg.driver import Connection
from memora_pg.errors import LLMError
from memora_pg.graph import audit, history, memories
from memora_pg.mem0.shapes import EXPIRATION, caller_metadata, expires_at_of, json_metadata, now_iso


def session_of(metadata: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The actor_id and role a history event of the memory carries."""
    metadata = metadata or {}
    actor, role = metadata.get("actor_id"), metadata.get("role")
    return (actor if isinstance(actor, str) else None, role if isinstance(role, str) else None)


def edit(
    *, memory_id: uuid.UUID, text: str | None, embedding: Sequence[float] | None, given: dict[str, Any]
) -> memories.Change:
    """``update()``'s change: the caller's metadata ``given`` merged into the memory's own (identity keys and
    the keys this API sets left out; the time of the update set), its text and vector replaced when ``text``
    is given, and its expiry when ``given`` names its expiration date."""
    clean = caller_metadata(given, given, "update()")  # an identity key is dropped here and warned of after
    merged = json_metadata({**clean, "updated_at": now_iso()})
    return memories.Change(
        memory_id,
        text,
        embedding,
        merged,
        set_expiry=EXPIRATION in merged,
        expires_at=expires_at_of(merged),
    )


def warn_of_identity_keys(given: dict[str, Any], before: memories.Before) -> None:
    """mem0's warning for each identity key of ``given`` that would have changed the memory's."""
    caller_metadata(given, before.metadata, "update()")


@dataclass(frozen=True)
class Deleted:
    memory_id: uuid.UUID
    user_id: str
    text: str

    def result(self) -> dict[str, Any]:
        """mem0's result entry of the deletion."""
        return {"id": str(self.memory_id), "memory": self.text, "event": "DELETE"}


async def delete(
    conn: Connection,
    *,
    org_id: str,
    memory_ids: Sequence[uuid.UUID],
    metadata: Mapping[uuid.UUID, Mapping[str, Any] | None],
) -> tuple[list[Deleted], list[history.Event]]:
    """The memories deleted (those that existed) and their DELETE events; ``metadata`` gives each one's."""
    gone = await memories.delete_by_ids(conn, org_id=org_id, memory_ids=list(memory_ids))
    deleted = [Deleted(memory_id, user_id, text) for memory_id, user_id, text in gone]
    events = [
        history.Event(d.memory_id, d.user_id, "DELETE", d.text, None, *session_of(metadata.get(d.memory_id)))
        for d in deleted
    ]
    return deleted, events


def audit_entry(
    enabled: bool, method: str, user_id: str | None, results: Sequence[dict[str, Any]]
) -> audit.Entry | None:
    """The audit row of a public call (None when auditing is off); ``user_id`` only when the call
    wrote that user's row for sure."""
    return audit.entry(
        enabled,
        f"mem0.{method}",
        user_id=(user_id or None) if results else None,
        ids={"memories": [{"id": r["id"], "event": r["event"]} for r in results]},
    )


async def apply_decisions(
    conn: Connection,
    *,
    org_id: str,
    updates: Sequence[tuple[Mapping[str, Any], str]],
    update_vectors: Sequence[Sequence[float]],
    deletions: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The language model's UPDATE and DELETE decisions of an inferred add (each a memory's row as it was
    shown, with the new text of an update), in the caller's transaction with their history events; mem0's
    result entries. A memory updated that is gone meanwhile is an LLMError, and the transaction rolls back."""
    results: list[dict[str, Any]] = []
    if updates:
        stamp = {"updated_at": now_iso()}
        planned = [
            memories.Change(row["memory_id"], new_text, vector, stamp)
            for (row, new_text), vector in zip(updates, update_vectors, strict=True)
        ]
        before = memories.updated(await conn.run(memories.update_in_place(org_id, planned, None)))
        if len(before) != len(planned):
            raise LLMError("A memory the language model updated was deleted meanwhile; nothing was changed.")
        results += [
            {"id": str(was.memory_id), "memory": change.text, "event": "UPDATE", "previous_memory": was.text}
            for was, change in zip(before, planned, strict=True)
        ]
    deleted, deletion_events = await delete(
        conn,
        org_id=org_id,
        memory_ids=[row["memory_id"] for row in deletions],
        metadata={row["memory_id"]: row["metadata"] for row in deletions},
    )
    results += [d.result() for d in deleted]
    await history.record(conn, org_id=org_id, events=deletion_events)
    return results
