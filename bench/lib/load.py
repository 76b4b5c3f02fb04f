"""Setting up a benchmark database: migrate, COPY the data in, build the HNSW index.

The data is loaded the fastest raw way there is (asyncpg's binary ``copy_records_to_table``)
with the HNSW index dropped, then the index is built once. The two steps on the memories
table are timed: they are the raw floor of the bulk-import figure.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import create_async_engine

from bench.lib import data
from bench.lib.server import connect, sqlalchemy_url
from memora_pg import migrations
from memora_pg.config import Settings
from memora_pg.graph import versions

SCHEMA = "memora"
HNSW_INDEX = "ix_memories_embedding_hnsw"
# The package's defaults, unless a run asks for others (``--hnsw-m``, ``--hnsw-ef-construction``).
HNSW_M: int = Settings.model_fields["hnsw_m"].default
HNSW_EF_CONSTRUCTION: int = Settings.model_fields["hnsw_ef_construction"].default
BATCH = 20_000

MEMORY_COLUMNS = (
    "org_id",
    "memory_id",
    "user_id",
    "agent_id",
    "interaction_id",
    "memory",
    "obtained_at",
    "metadata",
    "embedding",
    "search_text",
)


def create_hnsw(m: int, ef_construction: int) -> str:
    """The index as the first migration creates it (same name and operator class)."""
    return (
        f'CREATE INDEX {HNSW_INDEX} ON "{SCHEMA}".memories USING hnsw (embedding vector_cosine_ops) '
        f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
    )


DROP_HNSW = f'DROP INDEX IF EXISTS "{SCHEMA}".{HNSW_INDEX}'


@dataclass
class LoadTimes:
    memories: int = 0
    copy_memories_s: float = 0.0
    build_hnsw_s: float = 0.0
    other_rows: int = 0
    other_s: float = 0.0


def _batches(rows: Iterable[tuple[Any, ...]], size: int = BATCH) -> Iterator[list[tuple[Any, ...]]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


async def migrate(url: str) -> None:
    engine = create_async_engine(sqlalchemy_url(url))
    try:
        await migrations.upgrade(
            engine,
            migrations.MigrationOptions(
                schema=SCHEMA,
                dimensions=data.DIMENSIONS,
                hnsw_m=HNSW_M,
                hnsw_ef_construction=HNSW_EF_CONSTRUCTION,
            ),
        )
    finally:
        await engine.dispose()


async def _copy(conn: asyncpg.Connection, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> int:
    count = 0
    for batch in _batches(rows):
        await conn.copy_records_to_table(table, schema_name=SCHEMA, columns=columns, records=batch)
        count += len(batch)
    return count


async def load(url: str, layout: data.Layout, space: data.VectorSpace) -> LoadTimes:
    """Migrate, drop the HNSW index and COPY the whole layout in (the index is built by :func:`build_hnsw`)."""
    await migrate(url)
    times = LoadTimes()
    conn = await connect(url)
    try:
        await conn.execute(DROP_HNSW)
        started = time.perf_counter()
        await _copy(
            conn,
            "organizations",
            ("org_id", "org_name"),
            [(data.org_id(k), data.collection(k)) for k in range(layout.orgs)],
        )
        await _copy(conn, "users", ("org_id", "user_id", "user_name", "created_at"), data.user_rows(layout))
        await _copy(
            conn,
            "agents",
            ("org_id", "agent_id", "agent_label"),
            [(data.org_id(k), data.AGENT_ID, "Bench agent") for k in range(layout.orgs)],
        )
        users = range(layout.users)
        other = await _copy(
            conn,
            "interactions",
            ("org_id", "interaction_id", "user_id", "agent_id", "created_at", "updated_at"),
            (row for u in users for row in data.interaction_rows(layout, u)),
        )
        other += await _copy(
            conn,
            "messages",
            ("org_id", "interaction_id", "msg_position", "role", "content"),
            (row for u in users for row in data.message_rows(layout, u)),
        )
        times.other_s = time.perf_counter() - started

        started = time.perf_counter()
        times.memories = await _copy(
            conn,
            "memories",
            MEMORY_COLUMNS,
            (row for u, vectors in space.all_vectors() for row in data.memory_rows(layout, u, vectors)),
        )
        times.copy_memories_s = time.perf_counter() - started

        started = time.perf_counter()
        other += await _copy(
            conn,
            "memory_sources",
            ("org_id", "memory_id", "interaction_id", "msg_position"),
            (row for u in users for row in data.source_rows(layout, u)),
        )
        other += await _copy(
            conn,
            "memory_updates",
            ("org_id", "new_memory_id", "old_memory_id"),
            (row for u in users for row in data.update_rows(layout, u)),
        )
        # The clocks' ends of the superseded versions, as memora_pg's writers keep them.
        clocks = versions.CLOCK_ORGANIZATION.replace("{schema}", f'"{SCHEMA}"').replace(":org_id", "$1")
        for (org_id,) in await conn.fetch(f'SELECT DISTINCT org_id FROM "{SCHEMA}".memory_updates'):
            await conn.execute(clocks, org_id)
        times.other_s += time.perf_counter() - started
        times.other_rows = other
        await conn.execute(f'VACUUM ANALYZE "{SCHEMA}".memories')
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return times


# maintenance_work_mem of every HNSW build the benchmark times (raw and memora_pg's import).
BUILD_MEMORY = "4GB"


async def build_hnsw(url: str, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION) -> float:
    """Build the HNSW index the way an operator would after a bulk load; returns the seconds it took."""
    conn = await connect(url)
    try:
        # Enough memory to build the graph in memory; one parallel worker on a 2-core machine.
        await conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        started = time.perf_counter()
        await conn.execute(create_hnsw(m, ef_construction))
        elapsed = time.perf_counter() - started
        await conn.execute(f'ANALYZE "{SCHEMA}".memories')
    finally:
        await conn.close()
    return elapsed


async def drop_hnsw(url: str) -> None:
    conn = await connect(url)
    try:
        await conn.execute(DROP_HNSW)
    finally:
        await conn.close()
