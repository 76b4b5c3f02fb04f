"""The shapes of the mem0-style API: its arguments checked and scoped, its results as mem0 returns them."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import ColumnElement

from memora_pg.graph import filters as filter_language
from memora_pg.graph import validate as check
from memora_pg.graph.memories import NewMemory
from memora_pg.ids import parse_memory_id
from memora_pg.mem0.errors import DuragValidationError, MemoryNotFoundError

NO_USER = ""
NO_AGENT = ""
PROCEDURAL = "procedural_memory"
# Keys mem0 keeps beside the metadata in its payload; here they live in the metadata column.
SESSION_KEYS = ("run_id", "actor_id", "role")
INTERNAL_KEYS = ("updated_at", "hash", "data", "created_at")
SIMILAR_PER_FACT = 5
MAX_TOP_K = 1000


@dataclass(frozen=True)
class Scope:
    user_id: str
    agent_id: str
    run_id: str | None

    def where(self) -> ColumnElement[bool]:
        """Memories of exactly this user/agent/run scope (an absent id does not narrow)."""
        given = {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}
        return filter_language.compile_filters({key: value for key, value in given.items() if value})


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def optional_id(name: str, value: object) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise DuragValidationError(f"{name} must be a string.")
    check.no_nul(value, name)
    if len(value) > check.MAX_NAME_LENGTH:
        raise DuragValidationError(f"{name} is limited to {check.MAX_NAME_LENGTH} characters.")
    return value


def scope_of(user_id: object, agent_id: object, run_id: object) -> Scope:
    scope = Scope(
        optional_id("user_id", user_id) or NO_USER,
        optional_id("agent_id", agent_id) or NO_AGENT,
        optional_id("run_id", run_id) or None,
    )
    if not (scope.user_id or scope.agent_id or scope.run_id):
        raise DuragValidationError("At least one of 'user_id', 'agent_id', or 'run_id' must be provided.")
    return scope


def combined_filters(
    filters: dict[str, Any] | None, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], ColumnElement[bool]]:
    """The filters, with mem0 1.x's ``user_id=``/``agent_id=``/``run_id=`` keywords folded in, and
    their compiled WHERE condition."""
    if filters is not None and not isinstance(filters, dict):
        raise DuragValidationError("filters must be a dict.")
    combined = dict(filters or {})
    for key in ("user_id", "agent_id", "run_id"):
        if kwargs.get(key):
            combined[key] = kwargs.pop(key)
    if "limit" in kwargs:
        raise DuragValidationError("Use top_k instead of limit.")
    where = filter_language.compile_filters(combined)
    if not filter_language.pinned_ids(combined):
        raise DuragValidationError("filters must contain at least one of 'user_id', 'agent_id' or 'run_id'.")
    return combined, where


def check_top_k(top_k: object) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 0 < top_k <= MAX_TOP_K:
        raise DuragValidationError(f"top_k must be an integer from 1 to {MAX_TOP_K}.")


def messages_of(messages: object) -> list[dict[str, str]]:
    if isinstance(messages, str):
        found: list[Any] = [{"role": "user", "content": messages}]
    elif isinstance(messages, dict):
        found = [messages]
    elif isinstance(messages, list):
        found = messages
    else:
        raise DuragValidationError("messages must be a string, a message dict or a list of message dicts.")
    checked = []
    for message in found:
        if not isinstance(message, dict) or not isinstance(message.get("content", ""), str):
            raise DuragValidationError("Each message must be a dict with a string 'content'.")
        for value in message.values():
            if isinstance(value, str):
                check.no_nul(value, "messages")
        checked.append({k: v for k, v in message.items() if isinstance(v, str)})
    return checked


def actor_of(message: dict[str, str]) -> dict[str, str]:
    return {"actor_id": message["name"]} if message.get("name") else {}


def new_memory(text: str, metadata: dict[str, Any]) -> NewMemory:
    check.memory_text(text)
    return NewMemory(memory_id=uuid.uuid4(), text=text, positions=(), metadata=json_metadata(metadata))


def json_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata``, refused with DuragValidationError unless it is JSON (no datetimes, no NaN)."""
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise DuragValidationError(f"metadata must be JSON: {error}") from error
    return metadata


def with_vector(item: NewMemory, vector: list[float]) -> NewMemory:
    return NewMemory(memory_id=item.memory_id, text=item.text, positions=(), embedding=vector, metadata=item.metadata)


def event_of(item: NewMemory, event: str) -> dict[str, Any]:
    result: dict[str, Any] = {"id": str(item.memory_id), "memory": item.text, "event": event}
    for key in ("actor_id", "role"):
        if (item.metadata or {}).get(key):
            result[key] = (item.metadata or {})[key]
    return result


def number_of(value: str | int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def existing_id(memory_id: object) -> uuid.UUID:
    parsed = parse_memory_id(memory_id)
    if parsed is None:
        raise MemoryNotFoundError(f"No memory with id {memory_id!r}.")
    return parsed


def item_of(row: dict[str, Any], score: float | None = None) -> dict[str, Any]:
    """A memory as mem0 returns it: session ids promoted out of the metadata, times as ISO strings."""
    stored = dict(row["metadata"] or {})
    item: dict[str, Any] = {
        "id": str(row["memory_id"]),
        "memory": row["memory"],
        "hash": hashlib.md5(row["memory"].encode(), usedforsecurity=False).hexdigest(),
        "metadata": {k: v for k, v in stored.items() if k not in (*SESSION_KEYS, *INTERNAL_KEYS)},
        "created_at": row["obtained_at"].isoformat(),
        "updated_at": stored.get("updated_at"),
    }
    if score is not None:
        item["score"] = score
    if row["user_id"]:
        item["user_id"] = row["user_id"]
    if row["agent_id"]:
        item["agent_id"] = row["agent_id"]
    for key in SESSION_KEYS:
        if stored.get(key) is not None:
            item[key] = stored[key]
    return item
