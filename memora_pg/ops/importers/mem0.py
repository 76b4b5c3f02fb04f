"""``memora-pg import --from mem0``: a mem0 2.x deployment (pgvector collection + SQLite history) into the
mem0-style face's tables, in one transaction per batch, as often as you like.

The source is only read: the collection in one read-only REPEATABLE READ transaction (a snapshot; a
SELECT's share lock and nothing more), the history file opened read-only. Ids are kept (a mem0 memory
id is the memory's id here too, a history event's id its event's), so a second run writes only what
is new: a memory whose ``updated_at`` changed is rewritten, an unchanged one is skipped before it is
embedded, and an event already there is left alone. An import stopped anywhere (each batch commits
whole or not at all) and run again ends where one uninterrupted run would have.

Vectors: re-embedded with the target's embedder, in batches; or, with ``keep_vectors``, copied as they
are, once a sample has shown that the target's embedder makes the same vectors (same dimension, and
a cosine of at least 0.98 on every sampled memory): a model is never assumed. The full-text vectors
are always computed here.
"""

from __future__ import annotations

import json
import math
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from memora_pg import vector_params
from memora_pg.db import Database
from memora_pg.embeddings import Embedder, embed_checked
from memora_pg.errors import ConfigurationError, InvalidInputError, NotFoundError
from memora_pg.graph import history, orgs, saves
from memora_pg.graph.memories import NewMemory
from memora_pg.mem0.shapes import NO_USER
from memora_pg.ops.importers import deferred_index
from memora_pg.ops.importers import mem0_records as records
from memora_pg.ops.importers.source import COUNT, Counts, Snapshot, check_batch_size, target_ready
from memora_pg.ops.statistics import analyze_searched
from memora_pg.sql_text import qualified, render

Progress = Callable[[int, int], None]

# The metadata key of the source's version an import copied (hidden by get, as mem0 hides its own keys).
IMPORTED_VERSION = "imported_version"
# The cosine a kept vector must reach against the target embedder's own vector of the same text.
SAME_MODEL = 0.98
SAMPLE = 8
# The collection's points in id order, each with its vector as text (``{vector}``) or NULL.
POINTS = "SELECT id, {vector} AS vector, payload::text AS payload FROM {table} ORDER BY id"


@dataclass(frozen=True)
class Mem0Source:
    """Where a mem0 deployment keeps its memories: ``url`` (PostgreSQL), ``collection`` (its table, in
    ``schema``), and ``history_db``, the SQLite file of its history (optional)."""

    url: str
    collection: str
    schema: str = "public"
    history_db: Path | None = None

    @property
    def org_id(self) -> str:
        return f"mem0:{self.collection}"


@dataclass
class Imported(Counts):
    """What a mem0 import did (or, dry, would do)."""

    memories_added: int = 0
    memories_updated: int = 0
    memories_unchanged: int = 0
    memories_deleted_here: int = 0
    events_added: int = 0
    events_present: int = 0
    events_of_deleted_skipped: int = 0
    vectors_kept: int = 0
    vectors_embedded: int = 0


# -- reading the source -----------------------------------------------------------------------------


class Collection(Snapshot):
    """The collection, in one read-only snapshot."""

    def __init__(self, source: Mem0Source) -> None:
        self.table = qualified(source.schema, source.collection)
        super().__init__(source.url, self.table, what="mem0 deployment")

    async def rows(self, batch_size: int, *, vectors: bool) -> AsyncIterator[list[asyncpg.Record]]:
        vector = "vector::text" if vectors else "NULL::text"
        query = render(POINTS, vector=vector, table=self.table)
        async for batch in self.batches(query, batch_size):
            yield batch


def _open_history(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise NotFoundError(f"no mem0 history file at {path}")
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)


def check_history(path: Path | None) -> None:
    """Refuse a history file that cannot be read, before anything is written."""
    if path is None:
        return
    conn = _open_history(path)
    try:
        conn.execute("SELECT id, memory_id, event, created_at, updated_at FROM history LIMIT 1").fetchall()
    except sqlite3.Error as error:
        raise InvalidInputError(f"{path} is not a mem0 history database: {error}") from error
    finally:
        conn.close()


def history_rows(path: Path | None) -> Iterator[dict[str, Any]]:
    """mem0's history events, oldest first, from its SQLite file opened read-only."""
    if path is None:
        return
    conn = _open_history(path)
    conn.row_factory = sqlite3.Row
    try:
        cursor = conn.execute(
            "SELECT id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted, actor_id, role "
            "FROM history ORDER BY DATETIME(coalesce(updated_at, created_at)), rowid"
        )
        while rows := cursor.fetchmany(1000):
            yield from (dict(row) for row in rows)
    except sqlite3.Error as error:
        raise InvalidInputError(f"{path} is not a mem0 history database: {error}") from error
    finally:
        conn.close()


# -- writing --------------------------------------------------------------------------------------

# What an earlier import wrote of each memory (the source's version it copied), and which of them were
# deleted here since: those stay deleted.
VERSIONS = """
SELECT memory_id, metadata ->> 'imported_version' AS version, false AS deleted
FROM {schema}.memories
WHERE org_id = :org_id AND memory_id = ANY(CAST(:memory_ids AS uuid[]))
UNION ALL
SELECT DISTINCT h.memory_id, NULL, true
FROM {schema}.memory_history AS h
WHERE h.org_id = :org_id AND h.memory_id = ANY(CAST(:memory_ids AS uuid[])) AND h.event = 'DELETE'
  AND NOT EXISTS (SELECT 1 FROM {schema}.memories AS m WHERE m.org_id = h.org_id AND m.memory_id = h.memory_id)
"""

EVENTS_PRESENT = """
SELECT count(*) FROM {schema}.memory_history
WHERE org_id = :org_id AND event_id = ANY(CAST(:ids AS uuid[]))
"""


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def _check_kept_vectors(
    embedder: Embedder, dimensions: int | None, batch: list[records.Memory], wanted: int
) -> int:
    """Refuse to keep vectors that the target's embedder would not have made; the number compared."""
    if dimensions != embedder.dimensions:
        raise ConfigurationError(
            f"--keep-vectors: the source's vectors have {dimensions} dimensions, the embedder {embedder.dimensions}: "
            "import without it to re-embed"
        )
    with_vectors = [m for m in batch if m.vector][:wanted]
    ours = await embed_checked(embedder, [m.text for m in with_vectors], query=False)
    for kept, made in zip(with_vectors, ours, strict=True):
        theirs = vector_params.parse(kept.vector or "[]")
        similarity = _cosine(theirs, made)
        if similarity < SAME_MODEL:
            raise ConfigurationError(
                f"--keep-vectors: memory {kept.memory_id}'s vector is not the embedder's (cosine {similarity:.3f} "
                f"< {SAME_MODEL}): the source used another model; import without --keep-vectors to re-embed"
            )
    return len(with_vectors)


async def import_mem0(
    database: Database,
    source: Mem0Source,
    embedder: Embedder,
    *,
    keep_vectors: bool = False,
    deleted_history: bool = False,
    dry_run: bool = False,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> Imported:
    """Bring ``source`` into the mem0-style face's organization ``mem0:<collection>`` of ``database``.

    ``deleted_history``: also import the history of memories that are no longer in the collection
    (mem0 deleted them). mem0's history file names no collection, and several collections may share
    one: only say so when the file is this collection's alone.
    """
    check_batch_size(batch_size)
    done = Imported()
    check_history(source.history_db)
    imported_at = datetime.now(timezone.utc)
    users_of: dict[uuid.UUID, str] = {}
    index_after = False
    try:
        async with Collection(source) as snapshot:
            # The target is brought to head once the source answers: a source that cannot be read
            # leaves the target as it was.
            migrated = await target_ready(database, embedder, dry_run=dry_run, table="memories")
            total, seen = await snapshot.count(render(COUNT, table=snapshot.table)), 0
            dimensions = await snapshot.dimensions(snapshot.table, "vector")
            compared = 0
            index_after = not dry_run and await deferred_index.defer(database)
            async for rows in snapshot.rows(batch_size, vectors=keep_vectors):
                batch: list[records.Memory] = []
                for row in rows:
                    payload = json.loads(row["payload"] or "null")
                    converted = records.memory(row["id"], payload, row["vector"], imported_at=imported_at)
                    if isinstance(converted, records.Refused):
                        done.refused.append(converted)
                    else:
                        batch.append(converted)
                        users_of[converted.memory_id] = converted.user_id
                if keep_vectors and compared < SAMPLE:
                    compared += await _check_kept_vectors(embedder, dimensions, batch, SAMPLE - compared)
                kept = {"keep_vectors": keep_vectors}
                await _write_memories(
                    database, source, embedder, batch, done, dry_run=dry_run, migrated=migrated, **kept
                )
                seen += len(rows)
                if progress is not None:
                    progress(seen, total)
        await _write_events(
            database,
            source,
            users_of,
            done,
            batch_size=batch_size,
            dry_run=dry_run,
            migrated=migrated,
            deleted_history=deleted_history,
        )
    finally:
        # Even when the import failed: a database left without its index would search exactly. After the
        # source's snapshot is closed: the build waits for every older transaction of its database, and the
        # source may be the same database.
        if index_after:
            await deferred_index.restore(database)
    if not dry_run:
        await analyze_searched(database, "memories")
    return done


async def _write_memories(
    database: Database,
    source: Mem0Source,
    embedder: Embedder,
    batch: list[records.Memory],
    done: Imported,
    *,
    keep_vectors: bool,
    dry_run: bool,
    migrated: bool,
) -> None:
    if not batch:
        return
    present: dict[uuid.UUID, str | None] = {}
    deleted_here: set[uuid.UUID] = set()
    if migrated:
        async with database.transaction(read_only=dry_run, org_id=source.org_id) as conn:
            ids = [m.memory_id for m in batch]
            for row in await conn.fetch(VERSIONS, {"org_id": source.org_id, "memory_ids": ids}):
                if row.deleted:
                    deleted_here.add(row.memory_id)
                else:
                    present[row.memory_id] = row.version
    # A memory deleted here since an earlier import stays deleted; one changed here (not in the source)
    # keeps the change: only a new version in the source is copied again.
    kept = [m for m in batch if m.memory_id not in deleted_here]
    fresh = [m for m in kept if m.memory_id not in present]
    changed = [m for m in kept if m.memory_id in present and present[m.memory_id] != m.version]
    done.memories_deleted_here += len(batch) - len(kept)
    done.memories_unchanged += len(kept) - len(fresh) - len(changed)
    done.memories_added += len(fresh)
    done.memories_updated += len(changed)
    writes = fresh + changed
    if dry_run or not writes:
        return
    # Kept vectors where the source has one (checked to be the embedder's); the others made here.
    vectors: list[Sequence[float] | None] = [
        vector_params.parse(m.vector) if keep_vectors and m.vector else None for m in writes
    ]
    missing = [n for n, v in enumerate(vectors) if v is None]
    made = await embed_checked(embedder, [writes[n].text for n in missing], query=False)
    for n, vector in zip(missing, made, strict=True):
        vectors[n] = vector
    done.vectors_embedded += len(missing)
    done.vectors_kept += len(writes) - len(missing)
    items = [
        NewMemory(
            memory_id=m.memory_id,
            text=m.text,
            embedding=vector,
            metadata={**m.metadata, IMPORTED_VERSION: m.version},
            expires_at=m.expires_at,
            user_id=m.user_id,
            agent_id=m.agent_id,
            obtained_at=m.created_at,
        )
        for m, vector in zip(writes, vectors, strict=True)
    ]
    # A memory is stored and known since its source created it; a changed one gets the new version.
    statement = saves.write(
        org_id=source.org_id,
        user_id=None,
        agent_id=None,
        interaction_id=None,
        at=None,
        items=items,
        link=False,
        audited=None,
        existing="rewrite",
    )
    async with database.transaction(org_id=source.org_id) as conn:
        users = sorted({m.user_id for m in writes})
        await orgs.ensure_owners(conn, org_id=source.org_id, org_name=source.collection, user_ids=users)
        await conn.run(statement)


async def _write_events(
    database: Database,
    source: Mem0Source,
    users_of: dict[uuid.UUID, str],
    done: Imported,
    *,
    batch_size: int,
    dry_run: bool,
    migrated: bool,
    deleted_history: bool,
) -> None:
    batch: list[records.Event] = []

    async def flush() -> None:
        if not batch:
            return
        if dry_run:
            present = 0
            if migrated:
                async with database.transaction(read_only=True, org_id=source.org_id) as conn:
                    ids = [e.event_id for e in batch]
                    present = int(await conn.scalar(EVENTS_PRESENT, {"org_id": source.org_id, "ids": ids}))
            done.events_present += present
            done.events_added += len(batch) - present
        else:
            events = [
                history.Event(
                    e.memory_id,
                    # mem0 keeps no user with an event; a deleted memory's events go to the collection's ''.
                    users_of.get(e.memory_id, NO_USER),
                    e.event,
                    e.old_memory,
                    e.new_memory,
                    e.actor_id,
                    e.role,
                    event_id=e.event_id,
                    at=e.at,
                    deleted=e.is_deleted,
                )
                for e in batch
            ]
            async with database.transaction(org_id=source.org_id) as conn:
                users = sorted({event.user_id for event in events})
                await orgs.ensure_owners(conn, org_id=source.org_id, org_name=source.collection, user_ids=users)
                added = await history.record(conn, org_id=source.org_id, events=events)
            done.events_added += added
            done.events_present += len(batch) - added
        batch.clear()

    for row in history_rows(source.history_db):
        converted = records.event(row)
        if isinstance(converted, records.Refused):
            done.refused.append(converted)
            continue
        if converted.memory_id not in users_of and not deleted_history:
            done.events_of_deleted_skipped += 1
            continue
        batch.append(converted)
        if len(batch) == batch_size:
            await flush()
    await flush()
