"""``memora-pg import --from mem0 --verify``: the source as mem0's ``get`` and ``history`` show it, against
memora_pg's mem0-style face, memory by memory; every difference named.

A mem0 memory is what mem0 2.x's ``get`` makes of its payload (the text, the session ids, the expiry,
``created_at``/``updated_at`` and the rest as ``metadata``); its history is the events of the SQLite
file, oldest first. Both are compared with what ``AsyncMemory.get`` and ``history`` return here, and
every memory of the organization that the source does not have is named too.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from memora_pg.db import Database
from memora_pg.embeddings import Embedder
from memora_pg.mem0.memory import AsyncMemory
from memora_pg.ops.importers import mem0_records as records
from memora_pg.ops.importers.mem0 import Collection, Mem0Source, history_rows

# mem0's get: these payload keys are shown beside the text, the others (but its own) as metadata.
SHOWN = ("user_id", "agent_id", "run_id", "actor_id", "role", "expiration_date")
OWN = ("data", "hash", "created_at", "updated_at", "id", "text_lemmatized", "attributed_to")

ALL_IDS = "SELECT memory_id FROM {schema}.memories WHERE org_id = :org_id"


def expected(memory_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """What mem0 2.x's ``get`` returns for this row (times as datetimes, for comparison)."""
    item: dict[str, Any] = {"id": memory_id, "memory": payload.get("data")}
    for key in SHOWN:
        if payload.get(key) not in (None, ""):
            item[key] = payload[key]
    extra = {k: v for k, v in payload.items() if k not in (*SHOWN, *OWN)}
    item["metadata"] = extra or None
    created = records.timestamp(payload.get("created_at"))
    item["created_at"] = created
    item["updated_at"] = records.timestamp(payload.get("updated_at")) or created
    return item


def shown(item: dict[str, Any]) -> dict[str, Any]:
    """memora_pg's ``get``, in the same terms."""
    kept = {k: item[k] for k in ("id", "memory", *SHOWN) if item.get(k) not in (None, "")}
    kept["metadata"] = item.get("metadata") or None
    kept["created_at"] = records.timestamp(item.get("created_at"))
    kept["updated_at"] = records.timestamp(item.get("updated_at"))
    return kept


async def verify_mem0(
    database: Database, source: Mem0Source, embedder: Embedder, *, deleted_history: bool = False
) -> list[str]:
    """Every difference between ``source`` and the organization it was imported into; [] when none.

    ``deleted_history`` as the import had it: without it, the history of memories no longer in the
    collection is not expected here."""
    face = AsyncMemory(settings=database.settings, embedder=embedder).for_organization(source.org_id)
    differences: list[str] = []
    seen: set[str] = set()
    try:
        async with Collection(source) as snapshot:
            async for rows in snapshot.rows(500, vectors=False):
                for row in rows:
                    memory_id, payload = str(row["id"]), json.loads(row["payload"] or "null")
                    if not isinstance(payload, dict):
                        continue  # refused by the import, which said so
                    seen.add(memory_id)
                    theirs = expected(memory_id, payload)
                    ours = await face.get(memory_id)
                    if ours is None:
                        differences.append(f"memory {memory_id}: missing")
                        continue
                    mine = shown(ours)
                    for key in sorted(set(theirs) | set(mine)):
                        if theirs.get(key) != mine.get(key):
                            differences.append(
                                f"memory {memory_id}: {key} is {mine.get(key)!r}, the source has {theirs.get(key)!r}"
                            )
        async with database.transaction(read_only=True, org_id=source.org_id) as conn:
            present = {str(r.memory_id) for r in await conn.fetch(ALL_IDS, {"org_id": source.org_id})}
        differences += [f"memory {m}: only in memora_pg" for m in sorted(present - seen)]
        differences += await _history_differences(face, source, None if deleted_history else seen)
    finally:
        await face.close()
    return differences


async def _history_differences(face: AsyncMemory, source: Mem0Source, only: set[str] | None) -> list[str]:
    events: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for row in history_rows(source.history_db):
        event = records.event(row)
        if isinstance(event, records.Event) and (only is None or str(event.memory_id) in only):
            events.setdefault(str(event.memory_id), []).append((event.event, event.old_memory, event.new_memory))
    differences = []
    for memory_id, theirs in events.items():
        ours = [(e["event"], e["old_memory"], e["new_memory"]) for e in await face.history(str(uuid.UUID(memory_id)))]
        if ours != theirs:
            differences.append(
                f"history of {memory_id}: {len(ours)} events here, {len(theirs)} in the source, or other texts"
            )
    return differences
