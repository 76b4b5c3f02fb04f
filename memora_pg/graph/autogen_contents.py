"""Entries of the AutoGen memory protocol (``PostgresMemory``) in the ``autogen_contents`` table.

An entry belongs to a scope: an organization, a namespace (the memory's name), and a user and
an agent that may each be absent (NULL). Exactly one of ``content_text`` (text, markdown),
``content_json`` (JSON objects) and ``content_bytes`` (bytes, images) holds the content;
``embedding`` is set for the searchable kinds only, so bytes and images are listed but never
returned by a similarity search. ``seq`` orders the entries of a scope chronologically.

Plain async functions that take a connection and never commit, like the rest of ``graph/``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, bindparam, delete, insert, select

from memora_pg import vector_params
from memora_pg.driver import Connection, Row
from memora_pg.errors import InvalidInputError
from memora_pg.graph.validate import no_nul
from memora_pg.schema import autogen_contents
from memora_pg.statements import function_call, to_search_text

c = autogen_contents.c

# Limits, checked before anything is written.
MAX_TEXT_CHARS = 1_000_000  # text, markdown, serialized JSON and metadata, queries
MAX_BYTES = 10 * 1024 * 1024  # bytes and images
MAX_MIME_TYPE_CHARS = 255


@dataclass(frozen=True)
class Scope:
    """The rows one memory object sees: those it could have written.

    ``user_id`` and ``agent_id`` of None select the rows where that column IS NULL (written
    without one), so a memory without a user never sees a user's entries, and vice versa.
    """

    org_id: str
    namespace: str
    user_id: str | None = None
    agent_id: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        # "= value" or "IS NULL" (not IS NOT DISTINCT FROM), so every term can use the btree
        # ix_autogen_contents_namespace (org_id, namespace, user_id, agent_id, seq).
        return [
            c.org_id == self.org_id,
            c.namespace == self.namespace,
            c.user_id.is_(None) if self.user_id is None else c.user_id == self.user_id,
            c.agent_id.is_(None) if self.agent_id is None else c.agent_id == self.agent_id,
        ]


@dataclass(frozen=True)
class NewContent:
    """One entry to write; exactly one of ``text``, ``json`` and ``data`` is set."""

    mime_type: str
    text: str | None = None
    json: dict[str, Any] | None = None
    data: bytes | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class StoredContent:
    """One entry as read back; for a search result, ``score`` is the search's score (the hybrid
    ranking's, or the cosine similarity in dense mode) and ``similarity`` the cosine similarity of
    the entry and the query; both None otherwise."""

    content_id: uuid.UUID
    mime_type: str
    text: str | None
    json: dict[str, Any] | None
    data: bytes | None
    metadata: dict[str, Any]
    score: float | None = None
    similarity: float | None = None


# What an entry returns, to a listing and to a search.
RETURNED = ("content_id", "mime_type", "content_text", "content_json", "content_bytes", "metadata")
_COLUMNS = tuple(c[name] for name in RETURNED)


def stored(row: Row | dict[str, Any], score: float | None = None) -> StoredContent:
    """An entry as read back (``score`` and the row's ``cosine`` for a search hit)."""
    score = row.get("score", score)
    similarity = row.get("cosine")
    return StoredContent(
        content_id=row["content_id"],
        mime_type=row["mime_type"],
        text=row["content_text"],
        json=row["content_json"],
        data=row["content_bytes"],
        metadata=dict(row["metadata"] or {}),
        score=float(score) if score is not None else None,
        similarity=float(similarity) if similarity is not None else None,
    )


# -- what an entry may hold ------------------------------------------------------------------


def mime_kind(mime_type: str) -> str:
    """How an entry of this mime type is stored: "text" (any ``text/*``), "json", "image" or "binary"."""
    if not isinstance(mime_type, str) or not mime_type:
        raise InvalidInputError("`mime_type` must be a MemoryMimeType or a non-empty string.")
    no_nul(mime_type, "`mime_type`")
    base = mime_type.split(";", 1)[0].strip().lower()
    major, _, minor = base.partition("/")
    if len(mime_type) > MAX_MIME_TYPE_CHARS or not major or not minor:
        raise InvalidInputError(f"`mime_type` must look like 'type/subtype', not {mime_type!r}.")
    if base == "application/json":
        return "json"
    if major in ("text", "image"):
        return major
    return "binary"


def check_text(text: str, what: str = "Text content") -> str:
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"{what} is limited to {MAX_TEXT_CHARS:,} characters, not {len(text):,}.")
    no_nul(text, what)
    return text


def check_bytes(data: bytes) -> bytes:
    if len(data) > MAX_BYTES:
        raise InvalidInputError(f"Binary and image content is limited to {MAX_BYTES:,} bytes, not {len(data):,}.")
    return data


def _strings(value: object) -> Iterator[str]:
    """Every str in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def canonical_json(value: object, what: str) -> str:
    """The one serialized text of a JSON value: what is embedded and, parsed back, what is stored."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{what} must be JSON-serializable (finite numbers, str keys): {error}") from error
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"{what} is limited to {MAX_TEXT_CHARS:,} characters once serialized.")
    if any("\x00" in s for s in _strings(value)):
        # json.dumps escapes NUL as \u0000, which jsonb refuses
        raise InvalidInputError(f"{what} must not contain NUL characters (PostgreSQL jsonb cannot store them).")
    return text


# -- writing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonEntry:
    """A JSON entry under an id the caller chose (an import's)."""

    content_id: uuid.UUID
    namespace: str
    text: str  # the canonical JSON text: the content, and what was embedded
    metadata: dict[str, Any]
    created_at: datetime


# Added under new ids, rewritten under stored ones (migration 0018's ``write_contents``).
WRITE_JSON = function_call(
    "write_contents",
    ("org_id", "org_name", "content_ids", "namespaces", "contents", "metadata", "embeddings", "created_at"),
)


async def write_json(
    conn: Connection,
    *,
    org_id: str,
    org_name: str,
    entries: Sequence[JsonEntry],
    embeddings: Sequence[Sequence[float]],
) -> None:
    """Write ``entries`` with their vectors, the organization made on first sight: a new id is added, a stored
    one gets the new content, metadata and vectors (its time stays)."""
    await conn.execute(
        WRITE_JSON,
        {
            "org_id": org_id,
            "org_name": org_name,
            "content_ids": [e.content_id for e in entries],
            "namespaces": [e.namespace for e in entries],
            "contents": [e.text for e in entries],
            "metadata": [json.dumps(e.metadata) for e in entries],
            "embeddings": vector_params.many(embeddings),
            "created_at": [e.created_at for e in entries],
        },
    )


async def insert_one(
    conn: Connection, *, scope: Scope, entry: NewContent, embedding: Sequence[float] | None, text: str | None
) -> uuid.UUID:
    """Write one entry; a missing organization or user is a foreign-key violation (NotFoundError).

    ``text`` is what was embedded (None for bytes and images): its full-text vector is stored too.
    """
    content_id = uuid.uuid4()
    # Only the one content column is set: a None given to a JSONB column would be JSON null, not NULL.
    content = {"content_text": entry.text, "content_json": entry.json, "content_bytes": entry.data}
    await conn.execute(
        insert(autogen_contents).values(
            org_id=scope.org_id,
            content_id=content_id,
            namespace=scope.namespace,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            mime_type=entry.mime_type,
            metadata=entry.metadata or {},
            embedding=bindparam("embedding", vector_params.one(embedding), type_=vector_params.BinaryVector()),
            search_text=None if text is None else to_search_text(conn.schema, bindparam("searchable", text)),
            **{column: value for column, value in content.items() if value is not None},
        )
    )
    return content_id


async def clear(conn: Connection, *, scope: Scope) -> int:
    """Delete every entry of the scope; other namespaces and scopes are untouched."""
    return await conn.execute(delete(autogen_contents).where(*scope.conditions()))


async def clear_namespace(conn: Connection, *, org_id: str, namespace: str) -> int:
    """Delete every entry of the namespace in the organization, of every user and agent."""
    return await conn.execute(delete(autogen_contents).where(c.org_id == org_id, c.namespace == namespace))


# -- reading ---------------------------------------------------------------------------------


async def list_all(conn: Connection, *, scope: Scope) -> list[StoredContent]:
    """Every entry of the scope, searchable or not, oldest first."""
    stmt = select(*_COLUMNS).where(*scope.conditions()).order_by(c.seq)
    return [stored(row) for row in await conn.fetch(stmt)]
