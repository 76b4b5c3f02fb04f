"""Index modes: keep the HNSW index (``hnsw``) or drop it for fast writes (``exact``).

HNSW maintenance dominates the cost of writing a memory. Without the index, user-scoped
searches are unchanged (they never use it: they sort the user's rows exactly) and
organization-wide searches scan the organization's rows exactly. The index can be dropped
and built again at any time without blocking writers: both use ``CONCURRENTLY``, on an
autocommit connection, because PostgreSQL refuses that inside a transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from memora_pg.db import Database, deployment_errors

HNSW_INDEX = "ix_memories_embedding_hnsw"


@dataclass(frozen=True)
class IndexState:
    mode: str  # "hnsw" or "exact"
    valid: bool
    definition: str | None


STATE = """
SELECT i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index AS i
WHERE i.indexrelid = to_regclass(:index)
"""


async def state(database: Database) -> IndexState:
    async with database.transaction() as conn:
        row = (await conn.execute(text(STATE), {"index": f'"{database.schema}".{HNSW_INDEX}'})).one_or_none()
    if row is None:
        return IndexState("exact", True, None)
    return IndexState("hnsw", bool(row.valid), row.definition)


async def build_hnsw(database: Database) -> IndexState:
    """Build the HNSW index without blocking writers (replacing an invalid one left by an interrupted build)."""
    schema, settings = database.schema, database.settings
    engine = await database.raw_engine()
    current = await state(database)
    with deployment_errors(engine):
        async with engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            if current.mode == "hnsw" and not current.valid:
                await auto.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{schema}".{HNSW_INDEX}'))
            if current.mode == "exact" or not current.valid:
                await auto.execute(
                    text(
                        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS {HNSW_INDEX} ON "{schema}".memories '
                        f"USING hnsw (embedding vector_cosine_ops) "
                        f"WITH (m = {int(settings.hnsw_m)}, ef_construction = {int(settings.hnsw_ef_construction)})"
                    )
                )
    return await state(database)


async def drop_hnsw(database: Database) -> IndexState:
    """Drop the HNSW index without blocking readers or writers: ``exact`` mode."""
    engine = await database.raw_engine()
    with deployment_errors(engine):
        async with engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{database.schema}".{HNSW_INDEX}'))
    return await state(database)
