"""What bringing a mem0 deployment over costs, against memora_pg's own import of the same memories.

A mem0 collection (mem0's own table: ``id uuid, vector vector(384), payload jsonb``, payloads as mem0
2.x writes them) and its SQLite history of one ADD per memory are made on the embedded server; then,
timed, in the same run:

* ``import --from mem0 --keep-vectors`` into an empty database (what a user with the same embedder gets);
* ``import --from mem0`` re-embedding every memory (the default), with the hashing embedder, so the
  figure is the import's own cost and not a model's;
* memora_pg's own import (``memora-pg import``) of an export of the same memories into an empty database;

then ``--verify`` of the first import against the source (its time is not in the figures).

    python -m bench.import_rate --memories 10000
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

from bench.lib.server import Server
from memora_pg import Settings
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.ops import transfer
from memora_pg.ops.importers.mem0 import Mem0Source, import_mem0
from memora_pg.ops.importers.mem0_verify import verify_mem0

DIMS = 384


async def make_source(url: str, path: Path, memories: int) -> None:
    embedder = HashEmbedder(DIMS)
    texts = [f"memory {n}: user {n % 100} said something about topic {n % 37}" for n in range(memories)]
    vectors = await embedder.embed_documents(texts)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(f"CREATE TABLE mem0 (id uuid PRIMARY KEY, vector vector({DIMS}), payload jsonb)")
        rows = []
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            payload = {
                "data": text,
                "hash": hashlib.md5(text.encode()).hexdigest(),  # noqa: S324 (mem0's own hash)
                "user_id": f"user-{n % 100}",
                "created_at": "2026-01-01T00:00:00+00:00",
                "updated_at": "2026-01-01T00:00:00+00:00",
                "topic": n % 37,
            }
            rows.append(
                (uuid.uuid5(uuid.NAMESPACE_OID, str(n)), "[" + ",".join(map(str, vector)) + "]", json.dumps(payload))
            )
        await conn.executemany("INSERT INTO mem0 VALUES ($1, $2::vector, $3::jsonb)", rows)
    finally:
        await conn.close()
    history = sqlite3.connect(path)
    history.execute(
        "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT,"
        " created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)"
    )
    history.executemany(
        "INSERT INTO history VALUES (?, ?, NULL, ?, 'ADD', '2026-01-01T00:00:00+00:00', NULL, 0, NULL, NULL)",
        [(str(uuid.uuid4()), str(r[0]), texts[n]) for n, r in enumerate(rows)],
    )
    history.commit()
    history.close()


async def timed_import(url: str, source: Mem0Source, *, keep_vectors: bool) -> tuple[float, int, int]:
    """Seconds, events kept, and the differences ``--verify`` then finds."""
    database = Database(url, settings=Settings(database_url=url))
    try:
        start = time.perf_counter()
        done = await import_mem0(database, source, HashEmbedder(DIMS), keep_vectors=keep_vectors)
        seconds = time.perf_counter() - start
        assert not done.refused
        differences = await verify_mem0(database, source, HashEmbedder(DIMS))
        return seconds, done.events_added, len(differences)
    finally:
        await database.close()


async def main(memories: int) -> None:
    with Server() as server, tempfile.TemporaryDirectory() as scratch:
        source_url = await server.create_database("mem0_source")
        history = Path(scratch) / "history.db"
        await make_source(source_url, history, memories)
        source = Mem0Source(url=source_url, collection="mem0", history_db=history)

        kept_url = await server.create_database("kept")
        kept, events, differences = await timed_import(kept_url, source, keep_vectors=True)
        embedded, _, _ = await timed_import(await server.create_database("embedded"), source, keep_vectors=False)

        exported = Path(scratch) / "export.jsonl"
        exporting = Database(kept_url, settings=Settings(database_url=kept_url))
        try:
            await transfer.export(exporting, exported, org_id=source.org_id)
        finally:
            await exporting.close()
        own_url = await server.create_database("own")
        own = Database(own_url, settings=Settings(database_url=own_url))
        try:
            await own.migrate(DIMS)
            start = time.perf_counter()
            counts = await transfer.import_(own, exported)
            native = time.perf_counter() - start
        finally:
            await own.close()

    rows = counts["memories"]
    print(f"{memories:,} mem0 memories with {memories:,} history events, one server, the same run")
    print(f"import --from mem0 --keep-vectors: {kept:.2f} s, {memories / kept:,.0f} memories/s")
    print(
        f"import --from mem0 (re-embedded, hashing embedder): {embedded:.2f} s, {memories / embedded:,.0f} memories/s"
    )
    print(f"memora-pg import of an export: {native:.2f} s, {rows / native:,.0f} memories/s")
    print(f"--keep-vectors ÷ memora_pg's own import: {(memories / kept) / (rows / native):.2f}")
    print(f"history events kept: {events:,} of {memories:,}; --verify: {differences} differences")


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.import_rate", description=__doc__)
    parser.add_argument("--memories", type=int, default=10_000)
    args = parser.parse_args(argv)
    asyncio.run(main(args.memories))


if __name__ == "__main__":
    run()
