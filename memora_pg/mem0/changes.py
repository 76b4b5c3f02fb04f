"""The changes a mem0-style call makes to existing memories, each with the history event mem0 keeps for it.

A memory rewritten gets an UPDATE event, a memory deleted a DELETE event, each carrying the
``actor_id`` and ``role`` of the memory's metadata (mem0 keeps them on every event). The functions
take the caller's transaction and return the events; the caller records them with the rest of its
work, in one statement (``history.record``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memora_pg.driver import Connection
from memora_pg.errors import LLMError
from memora_pg.graph import audit, history, memories
from memora_pg.mem0.shapes import caller_metadata, expires_at_of, json_metadata, now_iso


def session_of(metadata: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The actor_id and role a history event of the memory carries."""
    metadata = metadata or {}
    actor, role = metadata.get("actor_id"), metadata.get("role")
    return (actor if isinstance(actor, str) else None, role if isinstance(role, str) else None)


@dataclass(frozen=True)
class Rewritten:
    previous: str
    user_id: str
    event: history.Event

    def result(self) -> dict[str, Any]:
        """mem0's result entry of the rewrite."""
        return {
            "id": str(self.event.memory_id),
            "memory": self.event.new_memory,
            "event": "UPDATE",
            "previous_memory": self.previous,
        }


async def rewrite(
    conn: Connection,
    *,
    org_id: str,
    memory_id: uuid.UUID,
    text: str,
    embedding: Sequence[float],
    metadata: dict[str, Any],
) -> Rewritten | None:
    """The memory's new text, vector and metadata (its expiry read from the metadata); None when it is gone."""
    changed = await memories.rewrite(
        conn,
        org_id=org_id,
        memory_id=memory_id,
        text=text,
        embedding=embedding,
        metadata=metadata,
        expires_at=expires_at_of(metadata),
    )
    if changed is None:
        return None
    previous, user_id = changed
    event = history.Event(memory_id, user_id, "UPDATE", previous, text, *session_of(metadata))
    return Rewritten(previous, user_id, event)


async def edit(
    conn: Connection,
    *,
    org_id: str,
    memory_id: uuid.UUID,
    text: str | None,
    embedding: Sequence[float] | None,
    given: dict[str, Any],
) -> tuple[history.Event, str] | None:
    """``update()``'s change: the memory locked as it is read (a concurrent delete cannot slip in before the
    write), the caller's metadata ``given`` merged into its own (identity keys left out), and its text and
    vector replaced when ``text`` is given. Its UPDATE event and user; None when it is gone."""
    current = await memories.lock_metadata(conn, org_id=org_id, memory_id=memory_id)
    if current is None:
        return None
    merged = json_metadata({**current, **caller_metadata(given, current, "update()"), "updated_at": now_iso()})
    if text is not None and embedding is not None:
        rewritten = await rewrite(
            conn, org_id=org_id, memory_id=memory_id, text=text, embedding=embedding, metadata=merged
        )
        return None if rewritten is None else (rewritten.event, rewritten.user_id)
    changed = await memories.set_metadata(
        conn, org_id=org_id, memory_id=memory_id, metadata=merged, expires_at=expires_at_of(merged)
    )
    if changed is None:
        return None
    unchanged, user_id = changed
    return history.Event(memory_id, user_id, "UPDATE", unchanged, unchanged, *session_of(merged)), user_id


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
    events: list[history.Event] = []
    results: list[dict[str, Any]] = []
    for (row, new_text), vector in zip(updates, update_vectors, strict=True):
        metadata = {**row["metadata"], "updated_at": now_iso()}
        rewritten = await rewrite(
            conn, org_id=org_id, memory_id=row["memory_id"], text=new_text, embedding=vector, metadata=metadata
        )
        if rewritten is None:
            raise LLMError("A memory the language model updated was deleted meanwhile; nothing was changed.")
        events.append(rewritten.event)
        results.append(rewritten.result())
    deleted, deletion_events = await delete(
        conn,
        org_id=org_id,
        memory_ids=[row["memory_id"] for row in deletions],
        metadata={row["memory_id"]: row["metadata"] for row in deletions},
    )
    events += deletion_events
    results += [d.result() for d in deleted]
    await history.record(conn, org_id=org_id, events=events)
    return results
