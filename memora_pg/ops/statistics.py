"""The statistics a search reads, brought up to date at the end of a bulk import.

A search of a large scope (a user, or an organization, of more than 2,000 memories) skips the query
words that ANALYZE's statistics show common in it, and sizes the scope from the same statistics
(``common_terms()``, migrations 0010, 0013 and 0014). Right after an import those statistics describe the
table as it was, until autovacuum's next analyze (a minute or more on a large table); meanwhile each
common word of a query is probed through the GIN index, its whole posting list read. So every import
analyzes the searched tables it wrote as its last step.

Not on Citus: there the search reads no statistics (the coordinator keeps none of a distributed table).
"""

from __future__ import annotations

from sqlalchemy import text

from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.sql_text import quoted, render

__all__ = ["SEARCHED", "analyze_searched"]

# The tables a search reads the statistics of.
SEARCHED = ("memories", "autogen_contents", "store_items")


async def analyze_searched(database: Database, *tables: str, conn: Connection | None = None) -> None:
    """Analyze ``tables`` (of :data:`SEARCHED`, those an import wrote), in ``conn``'s transaction (an import's
    own, so that the statistics commit with its rows), or else in one of their own."""
    if await database.citus():
        return
    schema = quoted(database.schema)
    statement = text("ANALYZE " + ", ".join(render("{schema}.{table}", schema=schema, table=t) for t in tables))
    if conn is not None:
        await conn.execute(statement)
        return
    async with database.transaction() as own:
        await own.execute(statement)
