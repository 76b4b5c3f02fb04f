"""Index modes: keep the HNSW index (``hnsw``) or drop it for fast writes (``exact``).

HNSW maintenance dominates the cost of writing a memory. Without the index, user-scoped
searches are unchanged (they never use it: they sort the user's rows exactly) and
organization-wide searches scan the organization's rows exactly. The index can be dropped
and built again at any time without blocking writers: both use ``CONCURRENTLY``, on an
autocommit connection, because PostgreSQL refuses that inside a transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy import text

from memora_pg import driver
from memora_pg.config import Settings
from memora_pg.db import Database, deployment_errors
from memora_pg.driver import Connection
from memora_pg.sql_text import quoted, render
from memora_pg.statements import in_schema

HNSW_INDEX = "ix_memories_embedding_hnsw"


@dataclass(frozen=True)
class IndexState:
    mode: str  # "hnsw" or "exact"
    valid: bool
    definition: str | None
    # The HNSW build parameters of the index (pgvector's defaults where it names none).
    m: int | None = None
    ef_construction: int | None = None

    def built_as(self, settings: Settings) -> bool:
        """Whether the index exists, is valid and was built with the settings' parameters."""
        return (
            self.mode == "hnsw"
            and self.valid
            and (self.m, self.ef_construction) == (settings.hnsw_m, settings.hnsw_ef_construction)
        )


STATE = """
SELECT i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS definition, c.reloptions AS options
FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
WHERE i.indexrelid = to_regclass(:index)
"""

# pgvector's own defaults, for an index created WITH no options.
PGVECTOR_DEFAULTS = {"m": 16, "ef_construction": 64}

# The name a rebuild gives the new index until it replaces the old one.
REBUILDING = f"{HNSW_INDEX}_rebuild"

# Index DDL, outside a transaction block: none of it blocks reads or writes for long.
CREATE_HNSW = """
CREATE INDEX CONCURRENTLY {name} ON {schema}.memories USING hnsw (embedding vector_cosine_ops)
WITH (m = {m}, ef_construction = {ef_construction})"""
DROP = "DROP INDEX CONCURRENTLY {schema}.{index}"
DROP_IF_EXISTS = "DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}"
RENAME = "ALTER INDEX {schema}.{index} RENAME TO {name}"

# How far a build has come (pgvector reports the tuples it has loaded into the graph).
PROGRESS = """
SELECT p.phase, p.tuples_done, p.tuples_total
FROM pg_stat_progress_create_index AS p
WHERE p.relid = to_regclass(:table) AND p.command = 'CREATE INDEX CONCURRENTLY'
"""

Progress = Callable[[str, int, int], None]


async def state(database: Database) -> IndexState:
    async with database.transaction() as conn:
        row = await conn.first(text(STATE), {"index": f'"{database.schema}".{HNSW_INDEX}'})
    if row is None:
        return IndexState("exact", True, None)
    options = built_parameters(row.options)
    return IndexState("hnsw", bool(row.valid), row.definition, options["m"], options["ef_construction"])


def built_parameters(reloptions: list[str] | None) -> dict[str, int]:
    """The HNSW build parameters in an index's ``pg_class.reloptions``, pgvector's defaults for the rest."""
    found = dict(PGVECTOR_DEFAULTS)
    for option in reloptions or []:
        name, _, value = option.partition("=")
        if name in PGVECTOR_DEFAULTS and value.isdigit():
            found[name] = int(value)
    return found


async def build_hnsw(database: Database, progress: Progress | None = None) -> IndexState:
    """Build the HNSW index with the settings' parameters, without blocking readers or writers.

    A missing or invalid index (an interrupted build) is built. A valid one built with other
    parameters (``hnsw_m``, ``hnsw_ef_construction``) is rebuilt: the new index is built beside
    it under another name, then the old one is dropped and the new one takes its name, every
    step ``CONCURRENTLY`` or with a lock that lets reads and writes on. Searches use the old
    index until the new one is complete. ``progress(phase, done, total)`` is called every few
    seconds while a build runs, from ``pg_stat_progress_create_index``.
    """
    schema, settings = database.schema, database.settings
    engine = await database.raw_engine()
    current = await state(database)
    if current.built_as(settings):
        return current
    rebuild = current.mode == "hnsw" and current.valid
    name = REBUILDING if rebuild else HNSW_INDEX
    with deployment_errors(engine):
        async with driver.checkout(engine, schema) as auto:
            # An interrupted build or rebuild leaves an invalid index (or a complete one under the
            # rebuild's name): start again.
            await auto.execute(in_schema(render(DROP_IF_EXISTS, index=REBUILDING), schema))
            if current.mode == "hnsw" and not current.valid:
                await auto.execute(in_schema(render(DROP_IF_EXISTS, index=HNSW_INDEX), schema))
            async with build_session(auto, settings), _reporting(database, progress):
                await auto.execute(text(create_hnsw(schema, settings, name)))
            if rebuild:
                await auto.execute(in_schema(render(DROP, index=HNSW_INDEX), schema))
                # ShareUpdateExclusiveLock: reads and writes go on while the index is renamed.
                await auto.execute(in_schema(render(RENAME, index=REBUILDING, name=HNSW_INDEX), schema))
    return await state(database)


def create_hnsw(schema: str, settings: Settings, name: str = HNSW_INDEX) -> str:
    """``CREATE INDEX CONCURRENTLY`` of the HNSW index (named ``name``) with the settings' parameters."""
    return render(
        CREATE_HNSW,
        schema=quoted(schema),
        name=name,
        m=int(settings.hnsw_m),
        ef_construction=int(settings.hnsw_ef_construction),
    )


@asynccontextmanager
async def _reporting(database: Database, progress: Progress | None, every: float = 5.0) -> AsyncIterator[None]:
    """Call ``progress`` every ``every`` seconds with the running build's phase while the block runs."""
    if progress is None:
        yield
        return
    report = progress

    async def poll() -> None:
        while True:
            await asyncio.sleep(every)
            async with database.transaction() as conn:
                row = await conn.first(text(PROGRESS), {"table": f'"{database.schema}".memories'})
            if row is not None:
                report(str(row.phase), int(row.tuples_done or 0), int(row.tuples_total or 0))

    task = asyncio.create_task(poll())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# Raised to the configured size, never lowered below what the role or database already gives.
RAISE_BUILD_MEMORY = """
SELECT set_config('maintenance_work_mem', :memory, :local)
WHERE pg_size_bytes(:memory) > pg_size_bytes(current_setting('maintenance_work_mem'))
"""


async def raise_build_memory(conn: Connection, settings: Settings, *, local: bool) -> None:
    """``maintenance_work_mem`` of at least ``settings.index_build_memory``: for the transaction when ``local``."""
    await conn.execute(text(RAISE_BUILD_MEMORY), {"memory": settings.index_build_memory, "local": local})


async def prepare_build(conn: Connection, settings: Settings, *, local: bool) -> None:
    """The settings of an index build: no statement timeout, and ``maintenance_work_mem`` of at
    least ``settings.index_build_memory``; for the transaction when ``local``, else the session's.

    A build of a large table outlasts any ``statement_timeout`` meant for the application
    (``Settings.statement_timeout_ms``), and an HNSW graph that does not fit in
    maintenance_work_mem (64MB by default) is built on disk, several times slower.
    """
    await conn.execute(text("SELECT set_config('statement_timeout', '0', :local)"), {"local": local})
    await raise_build_memory(conn, settings, local=local)


@asynccontextmanager
async def build_session(session: Connection, settings: Settings) -> AsyncIterator[None]:
    """:func:`prepare_build` for the session while the block runs, then reset, so a pooled
    connection goes back as it came. A build that failed or was cancelled may have left the
    session unusable: then nothing more is sent on it.
    """
    await prepare_build(session, settings, local=False)
    yield
    await session.execute(text("RESET maintenance_work_mem"))
    await session.execute(text("RESET statement_timeout"))


MISSING = """
SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND NOT i.indisvalid
"""


async def build_missing(database: Database) -> list[str]:
    """Create, CONCURRENTLY, every index of memora_pg's tables that is missing or invalid.

    Migrations leave an index on a large table to this call (see ``migrations.defer_index_build``),
    and an interrupted concurrent build leaves an invalid index that this replaces.
    """
    from sqlalchemy.schema import CreateIndex

    from memora_pg.schema import metadata_in

    schema = database.schema
    engine = await database.raw_engine()
    built = []
    with deployment_errors(engine):
        async with driver.checkout(engine, schema) as auto:
            present = set(
                await auto.scalars(text("SELECT indexname FROM pg_indexes WHERE schemaname = :s"), {"s": schema})
            )
            invalid = set(await auto.scalars(text(MISSING), {"schema": schema}))
            missing = [
                index
                for table in metadata_in(schema).sorted_tables
                for index in table.indexes
                if str(index.name) not in present or str(index.name) in invalid
            ]
            async with build_session(auto, database.settings):
                for index in missing:
                    name = str(index.name)
                    if name in invalid:
                        await auto.execute(in_schema(render(DROP_IF_EXISTS, index=name), schema))
                    if name == HNSW_INDEX:
                        continue  # built only on request: its absence is the exact mode
                    options = index.dialect_options["postgresql"]
                    options["concurrently"] = True
                    try:
                        await auto.script(str(CreateIndex(index).compile(dialect=engine.dialect)))
                    finally:
                        options["concurrently"] = False
                    built.append(name)
    return built


async def drop_hnsw(database: Database) -> IndexState:
    """Drop the HNSW index without blocking readers or writers: ``exact`` mode."""
    engine = await database.raw_engine()
    with deployment_errors(engine):
        async with driver.checkout(engine, database.schema) as auto:
            await auto.execute(in_schema(render(DROP_IF_EXISTS, index=HNSW_INDEX), database.schema))
    return await state(database)
