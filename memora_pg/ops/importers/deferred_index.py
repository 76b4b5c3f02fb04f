"""The HNSW index of an import into an empty database: dropped before, built once after.

Keeping the graph up to date row by row is most of an import's cost; building it once over every row
is several times cheaper (memora-pg import of an export does the same). An import commits batch by
batch, so the index is missing between its first batch and its end: that is done only when the
memories table is empty when the import starts (no search of anyone else can miss it). A comment on
the table marks the deferral, so an import stopped half-way and run again knows the index is its to
build, and never leaves a database in exact mode that was in hnsw mode.
"""

from __future__ import annotations

from sqlalchemy import text

from memora_pg.db import Database
from memora_pg.ops import indexes
from memora_pg.sql_text import literal, qualified, quoted, render

MARK = "memora_pg: the HNSW index is deferred by an import (memora-pg import --from builds it at its end)"

MARKED = "SELECT obj_description(to_regclass(:table), 'pg_class') = :mark"
DROP = "DROP INDEX {schema}.{index}"
ANY_ROW = "SELECT EXISTS (SELECT 1 FROM {schema}.memories)"  # Citus needs the 1
COMMENT = "COMMENT ON TABLE {schema}.memories IS {comment}"


class _NotEmpty(Exception):
    pass


async def defer(database: Database) -> bool:
    """Drop the HNSW index if the import may (see above); True when the import must build it at its end."""
    schema = quoted(database.schema)
    async with database.transaction() as conn:
        if await conn.scalar(text(MARKED), {"table": qualified(database.schema, "memories"), "mark": MARK}):
            return True
    if (await indexes.state(database)).mode != "hnsw":
        return False
    try:
        async with database.transaction() as conn:
            # The drop locks the table: no row can come in between it and the check.
            await conn.execute(text(render(DROP, schema=schema, index=indexes.HNSW_INDEX)))
            if await conn.scalar(text(render(ANY_ROW, schema=schema))):
                raise _NotEmpty
            await conn.execute(text(render(COMMENT, schema=schema, comment=literal(MARK))))
    except _NotEmpty:
        return False
    return True


async def restore(database: Database) -> None:
    """Build the deferred index (without blocking writers), then take the mark away."""
    await indexes.build_hnsw(database)
    async with database.transaction() as conn:
        await conn.execute(text(render(COMMENT, schema=quoted(database.schema), comment="NULL")))
