"""``memora-pg import --from langgraph``: a LangGraph ``PostgresStore``'s items (tables ``store`` and
``store_vectors``) as the items of ``memora_pg.langgraph.MemoraStore``, in one transaction per batch, as often
as you like.

What LangGraph wrote, ``MemoraStore`` reads back unchanged: each item keeps its namespace, key and value, its
``created_at`` and ``updated_at``, and its time to live (``ttl_minutes``, ``expires_at``). The organization is
the store's default unless given (``--org-id``), the one a ``MemoraStore(org_id=...)`` reads.

* **What is embedded.** The fields LangGraph embedded for each item, read from ``store_vectors`` (a field
  whose value held several texts is stored there as ``path.0``, ``path.1``, ...; those are one field here);
  an item without vectors there (``put(..., index=False)``) is stored without one, as LangGraph stored it. A
  source without ``store_vectors`` (a store without an index) gets the whole value embedded, as a
  ``MemoraStore`` without ``index`` fields does. Vectors are always made again: LangGraph's are one per
  field, memora_pg's one per item, of the fields' text joined.
* **Again and again.** An item whose ``updated_at`` equals that of its current version here is unchanged and
  skipped before embedding; one whose time differs becomes a new version (the one it replaces stays, as of
  its time); a second run adds no duplicate.
* **Expired items** (``expires_at`` past) are left out and counted: PostgresStore keeps them until a sweep,
  but a reader that omits expired items no longer sees them, and memora_pg never returns one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memora_pg.db import Database
from memora_pg.embeddings import Embedder, embed_checked
from memora_pg.errors import ConfigurationError
from memora_pg.graph import store_items
from memora_pg.ops.importers.langgraph import ImportedItems, LangGraphSource, each_batch, live_value
from memora_pg.ops.importers.source import Refused, Snapshot
from memora_pg.sql_text import qualified, render

Progress = Callable[[int, int], None]
WHOLE_VALUE = "$"

# The source's items in key order, each with the fields LangGraph embedded of it ({vectors}: NULL without).
ITEMS = """
SELECT item.prefix, item.key, item.value::text AS value, item.created_at, item.updated_at, item.expires_at,
       item.ttl_minutes::float8 AS ttl_minutes, {fields} AS fields
FROM {table} AS item
ORDER BY item.prefix, item.key
"""
FIELDS = (
    "ARRAY(SELECT vector.field_name FROM {vectors} AS vector"
    " WHERE vector.prefix = item.prefix AND vector.key = item.key ORDER BY vector.field_name)"
)
# LangGraph's name of the n-th text of a field that held several.
_NTH_TEXT = re.compile(r"^(?P<field>.+)\.\d+$")


@dataclass(frozen=True)
class SourceItem:
    namespace: str
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl_ms: int | None
    fields: tuple[str, ...]  # empty: not embedded


def fields_of(names: Sequence[str] | None) -> tuple[str, ...]:
    """The fields LangGraph embedded of an item, from its ``store_vectors`` names (None: the whole value)."""
    if names is None:
        return (WHOLE_VALUE,)
    found: dict[str, None] = {}
    for name in names:
        matched = _NTH_TEXT.match(name)
        found[matched["field"] if matched else name] = None
    return tuple(found)


def source_item(row: Any, *, now: datetime) -> SourceItem | Refused | None:
    """One row of ``store``; None when it has expired."""
    value = live_value(row, now=now)
    if value is None or isinstance(value, Refused):
        return value
    updated = row["updated_at"] or row["created_at"] or now
    minutes = row["ttl_minutes"]
    return SourceItem(
        namespace=row["prefix"],
        key=row["key"],
        value=value,
        created_at=row["created_at"] or updated,
        updated_at=updated,
        expires_at=row["expires_at"],
        ttl_ms=None if minutes is None else max(1, round(minutes * 60_000)),
        fields=fields_of(row["fields"]),
    )


@functools.cache
def _store_index() -> Any:
    """``MemoraStore``'s index rule (memora_pg.langgraph.index), which needs LangGraph's store base."""
    try:
        from memora_pg.langgraph.index import index
    except ImportError as error:  # pragma: no cover - the extra is part of the dev install
        raise ConfigurationError(
            "importing LangGraph items needs LangGraph's store base: pip install 'memora-pg[langgraph]'"
        ) from error
    return index(None)


def _text_of(value: dict[str, Any], fields: Sequence[str]) -> str | None:
    """The text ``MemoraStore`` embeds of the value at these fields."""
    return _store_index().text(value, list(fields)) if fields else None


async def import_langgraph_items(
    database: Database,
    source: LangGraphSource,
    embedder: Embedder,
    *,
    dry_run: bool = False,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> ImportedItems:
    """Bring ``source``'s items into ``store_items`` of ``source.org_id``."""

    async def query(snapshot: Snapshot, table: str) -> str:
        vectors = qualified(source.schema, "store_vectors")
        has_vectors = await snapshot.conn.fetchval("SELECT to_regclass($1) IS NOT NULL", vectors)
        return render(ITEMS, table=table, fields=render(FIELDS, vectors=vectors) if has_vectors else "NULL::text[]")

    return await each_batch(
        database,
        source,
        embedder,
        target="store_items",
        query=query,
        convert=source_item,
        write=_write,
        dry_run=dry_run,
        batch_size=batch_size,
        progress=progress,
    )


async def _write(
    database: Database,
    source: LangGraphSource,
    embedder: Embedder,
    batch: list[SourceItem],
    done: ImportedItems,
    *,
    dry_run: bool,
    migrated: bool,
) -> None:
    if not batch:
        return
    present: dict[int, datetime] = {}
    if migrated:
        keys = [(item.namespace, item.key) for item in batch]
        rows = await database.execute_one(
            store_items.get(org_id=source.org_id, keys=keys), read_only=True, org_id=source.org_id
        )
        present = {place: row["updated_at"] for place, row in store_items.got(rows).items()}
    fresh = [item for n, item in enumerate(batch) if n not in present]
    changed = [item for n, item in enumerate(batch) if n in present and present[n] != item.updated_at]
    done.added += len(fresh)
    done.updated += len(changed)
    done.unchanged += len(batch) - len(fresh) - len(changed)
    writes = fresh + changed
    if dry_run or not writes:
        return
    texts = [_text_of(item.value, item.fields) for item in writes]
    embedded = [text for text in texts if text is not None]
    made = iter(await embed_checked(embedder, embedded, query=False) if embedded else [])
    org_name = source.org_id
    statement = store_items.put(
        org_id=source.org_id,
        org_name=org_name,
        writes=[
            store_items.Write(
                namespace=item.namespace,
                key=item.key,
                value=item.value,
                embedding=next(made) if text is not None else None,
                text=text,
                ttl_ms=item.ttl_ms,
                created_at=item.created_at,
                updated_at=item.updated_at,
                expires_at=item.expires_at,
            )
            for item, text in zip(writes, texts, strict=True)
        ],
    )
    await database.execute_one(statement, org_id=source.org_id, writes=True)
