"""``import --from mem0`` into a distributed schema: the same memories and history, verified, rerun idempotent."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import make_url

from memora_pg import Settings
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.ops.importers.mem0 import Mem0Source, import_mem0
from memora_pg.ops.importers.mem0_verify import verify_mem0


async def test_mem0_import_on_the_cluster(database_url: str, tmp_path: Path) -> None:
    source_url = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    collection = f"mem0_{uuid.uuid4().hex[:8]}"
    ids = [uuid.uuid4() for _ in range(30)]
    conn = await asyncpg.connect(source_url)
    try:
        # mem0's own table, a plain table of the coordinator (the source may live anywhere)
        await conn.execute(f"CREATE TABLE public.{collection} (id uuid PRIMARY KEY, vector vector(384), payload jsonb)")
        await conn.executemany(
            f"INSERT INTO public.{collection} (id, payload) VALUES ($1, $2::jsonb)",
            [
                (
                    memory_id,
                    json.dumps({"data": f"fact {n}", "user_id": f"u{n % 3}", "created_at": "2026-01-01T00:00:00Z"}),
                )
                for n, memory_id in enumerate(ids)
            ],
        )
    finally:
        await conn.close()
    history = tmp_path / "history.db"
    with sqlite3.connect(history) as db:
        db.execute(
            "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT,"
            " created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)"
        )
        db.executemany(
            "INSERT INTO history VALUES (?, ?, NULL, ?, 'ADD', '2026-01-01T00:00:00Z', NULL, 0, NULL, NULL)",
            [(str(uuid.uuid4()), str(m), f"fact {n}") for n, m in enumerate(ids)],
        )
    source = Mem0Source(url=database_url, collection=collection, history_db=history)
    database = Database(database_url, settings=Settings(database_url=database_url, db_schema="memora"))
    try:
        done = await import_mem0(database, source, HashEmbedder(384), batch_size=7)
        assert (done.memories_added, done.events_added, done.refused) == (30, 30, [])
        assert await verify_mem0(database, source, HashEmbedder(384)) == []
        again = await import_mem0(database, source, HashEmbedder(384), batch_size=7)
        assert (again.memories_added, again.memories_unchanged, again.events_added) == (0, 30, 0)
    finally:
        await database.close()
        conn = await asyncpg.connect(source_url)
        try:
            await conn.execute(f"DROP TABLE public.{collection}")
        finally:
            await conn.close()
