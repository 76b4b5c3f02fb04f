"""``memora-pg import --from langgraph --into autogen``: LangGraph's ``PostgresStore`` (tables ``store`` and
``store_vectors``) into the AutoGen face's entries, in one transaction per batch, as often as you like. (By
default the import writes the items of memora_pg's own LangGraph store: :mod:`.langgraph_items`.)

Each item becomes an AutoGen-face JSON entry, not a mem0-style memory: an item is a JSON document
under a namespace and a key of the caller's choosing, which is what an AutoGen entry is (a JSON
content in a namespace, with metadata, no user required), while a mem0 memory is one short text of
a user, agent or run with an id of its own. So:

* the namespace ``("users", "alice", "memories")`` (stored by LangGraph as ``users.alice.memories``)
  is the entry's namespace: ``PostgresMemory("users.alice.memories")`` lists and searches the items;
* the value is the entry's JSON content, its key and times in the entry's metadata
  (``langgraph_key``, ``langgraph_namespace``, ``langgraph_updated_at``, ``langgraph_expires_at``);
* the entry's id is derived from the namespace and the key (a UUID v5), so a second run rewrites an
  item whose ``updated_at`` changed, skips the others before embedding them, and adds no duplicate.

Vectors are always made again: LangGraph embeds chosen fields of a value one by one, the AutoGen face
embeds the whole entry (its canonical JSON text), and a search here ranks those. Items past their TTL
(``expires_at``) are left out and counted: PostgresStore keeps them until a sweep, but they are gone
for its reader that omits expired items. Organization: the AutoGen face's default unless given.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

from memora_pg.autogen.arguments import DEFAULT_ORG_ID, DEFAULT_ORG_NAME
from memora_pg.db import Database
from memora_pg.embeddings import Embedder, embed_checked
from memora_pg.errors import InvalidInputError
from memora_pg.graph.autogen_contents import JsonEntry, canonical_json, write_json
from memora_pg.ops.importers.source import (
    COUNT,
    Counts,
    Refused,
    Snapshot,
    check_batch_size,
    target_ready,
)
from memora_pg.ops.statistics import analyze_searched
from memora_pg.sql_text import qualified, render

Progress = Callable[[int, int], None]
T = TypeVar("T")
ITEM_NAMESPACE = uuid.UUID("5f0c1a3e-8d2b-4c61-a7e4-3b9d0f2c6a18")
# The source's items, in the order of their keys (``{table}``: its store table, qualified).
ITEMS = "SELECT prefix, key, value::text AS value, created_at, updated_at, expires_at FROM {table} ORDER BY prefix, key"


@dataclass(frozen=True)
class LangGraphSource:
    """Where a ``PostgresStore`` keeps its items: ``url``, in ``schema`` (LangGraph's default: public)."""

    url: str
    schema: str = "public"
    org_id: str = DEFAULT_ORG_ID


@dataclass
class ImportedItems(Counts):
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    expired: int = 0


@dataclass(frozen=True)
class Item(JsonEntry):
    key: str = ""

    @property
    def version(self) -> str:
        return str(self.metadata["langgraph_updated_at"])


def content_id(prefix: str, key: str) -> uuid.UUID:
    """The entry's id of the item ``key`` in the namespace ``prefix``: the same on every run."""
    return uuid.uuid5(ITEM_NAMESPACE, f"{prefix}\x00{key}")


def live_value(row: Any, *, now: datetime) -> dict[str, Any] | Refused | None:
    """The value of a row of ``store``: None when the item has expired, Refused unless a JSON object."""
    expires = row["expires_at"]
    if expires is not None and expires <= now:
        return None
    try:
        value = json.loads(row["value"])
    except ValueError as error:
        return Refused("item", f"{row['prefix']}/{row['key']}", str(error))
    if not isinstance(value, dict):
        return Refused("item", f"{row['prefix']}/{row['key']}", "the value is not a JSON object")
    return value


def item(row: Any, *, now: datetime) -> Item | Refused | None:
    """One row of ``store`` as an entry; None when it has expired."""
    value = live_value(row, now=now)
    if value is None or isinstance(value, Refused):
        return value
    prefix, key, expires = row["prefix"], row["key"], row["expires_at"]
    try:
        text = canonical_json(value, "the value")
    except InvalidInputError as error:
        return Refused("item", f"{prefix}/{key}", str(error))
    updated = row["updated_at"] or row["created_at"] or now
    metadata: dict[str, Any] = {
        "langgraph_namespace": prefix.split("."),
        "langgraph_key": key,
        "langgraph_updated_at": updated.isoformat(),
    }
    if expires is not None:
        metadata["langgraph_expires_at"] = expires.isoformat()
    return Item(content_id(prefix, key), prefix, text, metadata, row["created_at"] or updated, key=key)


VERSIONS = """
SELECT content_id, metadata ->> 'langgraph_updated_at' AS version
FROM {schema}.autogen_contents
WHERE org_id = :org_id AND content_id = ANY(CAST(:content_ids AS uuid[]))
"""


async def import_langgraph(
    database: Database,
    source: LangGraphSource,
    embedder: Embedder,
    *,
    dry_run: bool = False,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> ImportedItems:
    """Bring ``source``'s items into the AutoGen face's entries of ``source.org_id``."""
    return await each_batch(
        database,
        source,
        embedder,
        target="autogen_contents",
        query=_items_query,
        convert=item,
        write=_write,
        dry_run=dry_run,
        batch_size=batch_size,
        progress=progress,
    )


async def _items_query(_snapshot: Snapshot, table: str) -> str:
    return render(ITEMS, table=table)


async def each_batch(
    database: Database,
    source: LangGraphSource,
    embedder: Embedder,
    *,
    target: str,
    query: Callable[[Snapshot, str], Awaitable[str]],
    convert: Callable[..., T | Refused | None],
    write: Callable[..., Awaitable[None]],
    dry_run: bool,
    batch_size: int,
    progress: Progress | None,
) -> ImportedItems:
    """The source's items (the rows of ``query``, given the snapshot and the ``store`` table), a batch at a
    time: each row ``convert``-ed (None: expired, counted; Refused: listed) and the batch handed to ``write``
    (with the counts, and whether the target held the schema already), then ``target`` analyzed."""
    check_batch_size(batch_size)
    done = ImportedItems()
    now = datetime.now(timezone.utc)
    table = qualified(source.schema, "store")
    async with Snapshot(source.url, table, what="LangGraph store") as snapshot:
        # Once the source answers, as for mem0: a source that cannot be read leaves the target as it was.
        migrated = await target_ready(database, embedder, dry_run=dry_run, table=target)
        total, seen = await snapshot.count(render(COUNT, table=table)), 0
        async for rows in snapshot.batches(await query(snapshot, table), batch_size):
            batch: list[T] = []
            for row in rows:
                converted = convert(row, now=now)
                if converted is None:
                    done.expired += 1
                elif isinstance(converted, Refused):
                    done.refused.append(converted)
                else:
                    batch.append(converted)
            await write(database, source, embedder, batch, done, dry_run=dry_run, migrated=migrated)
            seen += len(rows)
            if progress is not None:
                progress(seen, total)
    if not dry_run:
        await analyze_searched(database, target)
    return done


async def _write(
    database: Database,
    source: LangGraphSource,
    embedder: Embedder,
    batch: list[Item],
    done: ImportedItems,
    *,
    dry_run: bool,
    migrated: bool,
) -> None:
    if not batch:
        return
    present: dict[uuid.UUID, str] = {}
    if migrated:
        async with database.transaction(read_only=dry_run, org_id=source.org_id) as conn:
            ids = [i.content_id for i in batch]
            rows = await conn.fetch(VERSIONS, {"org_id": source.org_id, "content_ids": ids})
            present = {r.content_id: r.version for r in rows}
    fresh = [i for i in batch if i.content_id not in present]
    changed = [i for i in batch if i.content_id in present and present[i.content_id] != i.version]
    done.added += len(fresh)
    done.updated += len(changed)
    done.unchanged += len(batch) - len(fresh) - len(changed)
    writes = fresh + changed
    if dry_run or not writes:
        return
    vectors = await embed_checked(embedder, [i.text for i in writes], query=False)
    org_name = DEFAULT_ORG_NAME if source.org_id == DEFAULT_ORG_ID else source.org_id
    async with database.transaction(org_id=source.org_id) as conn:
        await write_json(conn, org_id=source.org_id, org_name=org_name, entries=writes, embeddings=vectors)
