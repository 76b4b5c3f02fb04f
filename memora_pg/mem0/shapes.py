"""The shapes of the mem0-style API: its arguments checked and scoped, its results as mem0 returns them."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, true

from memora_pg.errors import InvalidInputError
from memora_pg.graph import search, timeline
from memora_pg.graph import validate as check
from memora_pg.graph.memories import NewMemory
from memora_pg.ids import parse_memory_id
from memora_pg.mem0 import filters as filter_language
from memora_pg.mem0.errors import DuragValidationError, MemoryNotFoundError

NO_USER = ""
NO_AGENT = ""
PROCEDURAL = "procedural_memory"
# Keys mem0 keeps beside the metadata in its payload; here they live in the metadata column.
SESSION_KEYS = ("run_id", "actor_id", "role")
# What mem0 promotes out of the payload to the top level of a returned memory (besides the
# user and agent, which are columns here).
EXPIRATION = "expiration_date"
PROMOTED_KEYS = (*SESSION_KEYS, EXPIRATION)
# imported_version: the source's version that `memora-pg import --from mem0` copied.
INTERNAL_KEYS = ("updated_at", "hash", "data", "created_at", "text_lemmatized", "attributed_to", "imported_version")
# Identity keys a caller's metadata cannot set: the entity parameters decide the scope (mem0).
IDENTITY_KEYS = ("user_id", "agent_id", "run_id", "actor_id")
SIMILAR_PER_FACT = 5
MAX_TOP_K = 1000

logger = logging.getLogger("memora_pg.mem0")


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
    """An entity id as mem0 2.x takes it: an int becomes its str, the rest is trimmed; empty,
    whitespace-only and inner-whitespace ids are DuragValidationError. None is "not given" ('')."""
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise DuragValidationError(f"{name} must be a string (or an int), not {type(value).__name__}.")
    trimmed = value.strip()
    if not trimmed:
        raise DuragValidationError(f"Invalid {name}: cannot be empty or whitespace-only. Provide a valid identifier.")
    if any(c.isspace() for c in trimmed):
        raise DuragValidationError(
            f"Invalid {name}: cannot contain whitespace. Provide a valid identifier without spaces."
        )
    check.no_nul(trimmed, name)
    if len(trimmed) > check.MAX_NAME_LENGTH:
        raise DuragValidationError(f"{name} is limited to {check.MAX_NAME_LENGTH} characters.")
    return trimmed


def scope_of(user_id: object, agent_id: object, run_id: object) -> Scope:
    scope = Scope(
        optional_id("user_id", user_id) or NO_USER,
        optional_id("agent_id", agent_id) or NO_AGENT,
        optional_id("run_id", run_id) or None,
    )
    if not (scope.user_id or scope.agent_id or scope.run_id):
        raise DuragValidationError("At least one of 'user_id', 'agent_id', or 'run_id' must be provided.")
    return scope


def add_scope(
    filters: object, ids: dict[str, Any], metadata: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """An add's entity ids and metadata, with those of ``filters`` folded in.

    mem0's platform client takes an add's ids in ``filters`` (Agent Framework's Mem0ContextProvider
    passes them so); any other key there (``app_id``) is kept in the memories' metadata, where a
    search's filters find it.
    """
    if not isinstance(filters, dict):
        raise DuragValidationError("filters must be a dict.")
    ids, extra = dict(ids), dict(metadata or {})
    for key, value in filters.items():
        if key in ("AND", "OR", "NOT") or (isinstance(value, dict) and key in ids):
            raise DuragValidationError(f"add(filters=...) takes plain values, not the filter language ({key!r}).")
        target = ids if key in ids else extra
        if target.get(key) is not None and target[key] != value:
            raise DuragValidationError(f"{key} is given twice, as {target[key]!r} and in filters as {value!r}.")
        target[key] = value
    return ids, extra or metadata


def combined_filters(
    filters: dict[str, Any] | None, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], ColumnElement[bool]]:
    """The filters, with mem0 1.x's ``user_id=``/``agent_id=``/``run_id=`` keywords folded in, and
    their compiled WHERE condition."""
    if filters is not None and not isinstance(filters, dict):
        raise DuragValidationError("filters must be a dict.")
    combined = dict(filters or {})
    # A deliberate difference from mem0 2.x (which raises): autogen-ext's Mem0Memory passes user_id=.
    for key in ("user_id", "agent_id", "run_id"):
        if kwargs.get(key) is not None:
            combined[key] = kwargs.pop(key)
    # Entity ids in the filters are trimmed and checked as mem0 does (an int becomes its str).
    for key in ("user_id", "agent_id", "run_id"):
        value = combined.get(key)
        if value is not None and value != filter_language.WILDCARD and not isinstance(value, dict | list):
            combined[key] = optional_id(key, value)
    where = filter_language.compile_filters(combined)
    if not filter_language.pinned_ids(combined):
        raise DuragValidationError("filters must contain at least one of 'user_id', 'agent_id' or 'run_id'.")
    return combined, where


# The messages of a bad query or top_k are mem0's own words, which its users' code and tests match on.


def search_query(query: object) -> str:
    """A search query as mem0 takes it: a string, trimmed before it is embedded, not empty once trimmed."""
    if not isinstance(query, str):
        raise DuragValidationError("Invalid query: must be a non-empty string.")
    trimmed = query.strip()
    if not trimmed:
        raise DuragValidationError("Invalid query: cannot be empty or whitespace-only.")
    check.no_nul(trimmed, "queries")
    return trimmed


def check_top_k(top_k: object) -> int:
    """``top_k`` as mem0 takes it: an integer from 0 (no results), here at most MAX_TOP_K."""
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise DuragValidationError("top_k must be a valid integer")
    if top_k < 0:
        raise DuragValidationError(f"Invalid top_k: {top_k}. Must be a non-negative integer.")
    if top_k > MAX_TOP_K:
        raise DuragValidationError(f"Invalid top_k: {top_k}. Must be a non-negative integer of at most {MAX_TOP_K}.")
    return top_k


def top_k_of(top_k: object, kwargs: dict[str, Any], default: int = 20) -> int:
    """``top_k``, or ``limit=`` (autogen-ext's Mem0Memory's name for it) when only that is given."""
    limit = kwargs.pop("limit", None)
    if limit is not None and top_k is not None and limit != top_k:
        raise DuragValidationError("Pass top_k or its alias limit, not both.")
    chosen = top_k if top_k is not None else limit
    return check_top_k(default if chosen is None else chosen)


def check_threshold(threshold: object) -> float | None:
    """The score floor: a number from 0 to 1 as mem0 takes it, or None (the default: a hit must score
    above 0, i.e. be related to the query at all; see ``AsyncMemory.search``)."""
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise DuragValidationError("threshold must be a valid number")
    if not 0 <= threshold <= 1:
        raise DuragValidationError(f"Invalid threshold: {threshold}. Must be between 0 and 1 (inclusive).")
    return float(threshold)


def kept(score: float, threshold: float | None) -> bool:
    """Whether a hit of this score passes the threshold: above 0 by default (None), at least the
    threshold otherwise, so that 0 keeps every ranked memory."""
    return score > 0 if threshold is None else score >= threshold


def expiration_of(value: object) -> str | None:
    """An ``expiration_date`` as mem0 keeps it: YYYY-MM-DD from a date, a datetime or an ISO date string."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError as error:
            raise DuragValidationError("expiration_date must be a valid date in YYYY-MM-DD format.") from error
    raise DuragValidationError("expiration_date must be a date string in YYYY-MM-DD format.")


def created_at_of(value: object) -> datetime:
    """A caller's ``metadata["created_at"]`` as the memory's creation time (an ISO 8601 timestamp,
    UTC when it names no zone)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as error:
            raise DuragValidationError(
                f"metadata['created_at'] must be an ISO 8601 timestamp, not {value!r}."
            ) from error
    else:
        raise DuragValidationError("metadata['created_at'] must be an ISO 8601 timestamp string.")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def caller_metadata(metadata: dict[str, Any] | None, existing: dict[str, Any], context: str) -> dict[str, Any]:
    """The caller's metadata without identity keys (a warning for each changed one, as mem0 does)
    and without the keys this API sets itself."""
    clean: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        if key in IDENTITY_KEYS:
            if value != existing.get(key):
                logger.warning(
                    "%s: ignoring metadata[%r] - identity fields cannot be set through metadata", context, key
                )
        elif key not in (*INTERNAL_KEYS, "role"):
            clean[key] = value
    return clean


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
    return NewMemory(
        memory_id=uuid.uuid4(),
        text=text,
        positions=(),
        metadata=json_metadata(metadata),
        expires_at=expires_at_of(metadata),
    )


def expires_at_of(metadata: dict[str, Any] | None) -> datetime | None:
    """When a memory with this metadata stops being current: the end (UTC) of its ``expiration_date``,
    the last day mem0 shows it."""
    expiration = (metadata or {}).get(EXPIRATION)
    if not isinstance(expiration, str):
        return None
    try:
        return datetime.combine(date.fromisoformat(expiration) + timedelta(days=1), time(), tzinfo=timezone.utc)
    except OverflowError:  # 9999-12-31: the last day there is, which never ends
        return None


def timestamp_of(value: object) -> datetime:
    """``add(timestamp=...)``: when the memories were created, as Unix seconds or a datetime (naive: UTC)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DuragValidationError("timestamp must be a Unix timestamp (seconds) or a datetime.")
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    except (OverflowError, OSError, ValueError) as error:
        raise DuragValidationError(f"timestamp is out of range: {value!r}") from error


def json_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata``, refused with DuragValidationError unless it is JSON (no datetimes, no NaN)."""
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise DuragValidationError(f"metadata must be JSON: {error}") from error
    return metadata


def with_vector(item: NewMemory, vector: list[float]) -> NewMemory:
    return replace(item, positions=(), embedding=vector)


def event_of(item: NewMemory, event: str, *, raw: bool = False) -> dict[str, Any]:
    """An add result; ``raw`` (infer=False) ones always carry actor_id (None without a name) and role, as mem0's."""
    result: dict[str, Any] = {"id": str(item.memory_id), "memory": item.text, "event": event}
    metadata = item.metadata or {}
    if raw:
        result["actor_id"] = metadata.get("actor_id") or None
        result["role"] = metadata.get("role")
        return result
    for key in ("actor_id", "role"):
        if metadata.get(key):
            result[key] = metadata[key]
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


def item_of(
    row: dict[str, Any], kind: Literal["get", "list", "search"] = "get", score: float | None = None
) -> dict[str, Any]:
    """A memory as mem0 2.x returns it from ``get`` (with ``score: None``), ``get_all`` (no score)
    or ``search``: session ids and the expiration date promoted out of the metadata, the rest
    of the metadata under ``metadata`` (None when there is none), times as ISO strings, and
    ``updated_at`` equal to ``created_at`` until the memory changes."""
    stored = dict(row["metadata"] or {})
    created = row["obtained_at"].isoformat()
    extra = {k: v for k, v in stored.items() if k not in (*PROMOTED_KEYS, *INTERNAL_KEYS)}
    item: dict[str, Any] = {
        "id": str(row["memory_id"]),
        "memory": row["memory"],
        "hash": hashlib.md5(row["memory"].encode(), usedforsecurity=False).hexdigest(),
        "metadata": extra or None,
        "created_at": created,
        "updated_at": stored.get("updated_at") or created,
    }
    if kind != "list":
        item["score"] = score
    if row["user_id"]:
        item["user_id"] = row["user_id"]
    if row["agent_id"]:
        item["agent_id"] = row["agent_id"]
    for key in PROMOTED_KEYS:
        if key in stored:
            item[key] = stored[key]
    return item


def new_metadata(metadata: dict[str, Any] | None, scope: Scope, expiration_date: object) -> dict[str, Any]:
    """The metadata ``add`` gives each new memory: the caller's (identity keys left out, with a
    warning), the expiration date and the run."""
    if metadata is not None and not isinstance(metadata, dict):
        raise DuragValidationError("metadata must be a dict.")
    base = caller_metadata(metadata, {}, "add()")
    expiration = expiration_of(expiration_date)
    if expiration is not None:
        base[EXPIRATION] = expiration
    if scope.run_id:
        base["run_id"] = scope.run_id
    return json_metadata(base)


def added_at(metadata: dict[str, Any] | None, timestamp: object) -> datetime:
    """When ``add``'s memories were created: ``timestamp``, else ``metadata["created_at"]``, else now."""
    if timestamp is not None:
        return timestamp_of(timestamp)
    stamp = (metadata or {}).get("created_at")
    return created_at_of(stamp) if stamp is not None else datetime.now(timezone.utc)


def history_item(event: Mapping[str, Any], created: datetime | None) -> dict[str, Any]:
    """One event of ``history()``, as mem0 shows it: ``created_at`` is the memory's creation time,
    ``updated_at`` the event's (the creation time for the ADD)."""
    created_at = created or event["created_at"]
    return {
        "id": str(event["event_id"]),
        "memory_id": str(event["memory_id"]),
        "old_memory": event["old_memory"],
        "new_memory": event["new_memory"],
        "event": event["event"],
        "created_at": created_at.isoformat(),
        "updated_at": (created_at if event["event"] == "ADD" else event["created_at"]).isoformat(),
        "is_deleted": event["is_deleted"],
        "actor_id": event["actor_id"],
        "role": event["role"],
    }


def shown_at(schema: str, as_of: object, clock: object, show_expired: bool) -> ColumnElement[bool]:
    """The memories a read shows: unexpired ones now, or those current at ``as_of`` by ``clock``
    (expired ones too with ``show_expired``)."""
    try:
        at, checked = timeline.check_as_of(as_of), timeline.check_clock(clock)
    except InvalidInputError as error:
        raise DuragValidationError(str(error)) from error
    if at is None:
        return true() if show_expired else timeline.unexpired_condition()
    return timeline.current_condition(schema, checked, at=at, expiry=not show_expired)


@dataclass(frozen=True)
class AddRequest:
    """What an ``add`` remembers: the conversation, for whom, the new memories' metadata and creation time."""

    conversation: list[dict[str, str]]
    scope: Scope
    metadata: dict[str, Any]
    at: datetime


def searched(
    org_id: str,
    schema: str,
    filters: dict[str, Any] | None,
    kwargs: dict[str, Any],
    as_of: object,
    clock: object,
    show_expired: bool,
) -> tuple[dict[str, Any], search.Where]:
    """A search's filters (:func:`combined_filters`) and the memories it looks at: those the filters match
    and :func:`shown_at` shows. Filters that pin the user and nothing else, searched now (mem0's usual
    search), are the user's memories less the expired ones: a scope the table's statistics size as the
    user's (``memories_where``'s ``also_leaves_few``)."""
    combined, where = combined_filters(filters, kwargs)
    shown = shown_at(schema, as_of, clock, show_expired)
    pinned = filter_language.pinned_ids(combined)
    if as_of is None and combined.keys() == {"user_id"} and "user_id" in pinned:
        return combined, search.memories_where(org_id, user_id=pinned["user_id"], also=shown, also_leaves_few=True)
    return combined, search.memories_where(org_id, also=and_(where, shown))
