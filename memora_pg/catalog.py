"""What PostgreSQL's catalog says about memora_pg's tables: vector dimensions and row-level security.

The statements take the schema as a parameter rather than through ``db.sql()``, so this
module imports nothing of memora_pg and ``db.py`` can use it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text

from memora_pg.driver import Connection

__all__ = [
    "VECTOR_TABLES",
    "VectorColumn",
    "row_security_applies",
    "row_security_bypass",
    "vector_columns",
    "vector_dimensions",
]

# The tables that hold an ``embedding`` vector column.
VECTOR_TABLES = ("memories", "autogen_contents", "store_items")

# The named columns of the named tables, with a vector column's dimension (its type modifier) and comment.
VECTOR_COLUMNS = text("""
SELECT c.relname AS table_name, a.attname AS column_name, a.atttypmod AS dimensions,
       col_description(a.attrelid, a.attnum) AS comment
FROM pg_attribute AS a
JOIN pg_class AS c ON c.oid = a.attrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = ANY(:tables) AND a.attname = ANY(:columns)
  AND a.attnum > 0 AND NOT a.attisdropped
""")

# Row-level security that applies to this role hides rows from it, and refuses some of its writes.
ROW_SECURITY_ACTIVE = text("""
SELECT coalesce(bool_or(row_security_active(c.oid)), false)
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = ANY(:tables)
""")

# Why row-level security does not restrict this role on a table, or NULL when it does. A superuser and a
# BYPASSRLS role skip every policy; the owner (or a member of the owning role) skips them unless the
# table forces row security.
ROW_SECURITY_BYPASS = text("""
SELECT CASE
         WHEN r.rolsuper THEN 'a superuser'
         WHEN r.rolbypassrls THEN 'a BYPASSRLS role'
         WHEN NOT c.relrowsecurity THEN 'on a table without row-level security'
         WHEN pg_has_role(current_user, c.relowner, 'USAGE') AND NOT c.relforcerowsecurity
           THEN 'the owner of the tables'
       END
FROM pg_roles AS r, pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE r.rolname = current_user AND n.nspname = :schema AND c.relname = :table
""")


@dataclass(frozen=True)
class VectorColumn:
    table: str
    column: str
    dimensions: int
    comment: str | None


async def vector_columns(
    conn: Connection,
    schema: str,
    *,
    tables: Iterable[str] = VECTOR_TABLES,
    columns: Iterable[str] = ("embedding",),
) -> dict[tuple[str, str], VectorColumn]:
    """The columns of ``tables`` named in ``columns`` that exist, keyed by (table, column)."""
    rows = await conn.fetch(VECTOR_COLUMNS, {"schema": schema, "tables": list(tables), "columns": list(columns)})
    return {
        (row.table_name, row.column_name): VectorColumn(
            row.table_name, row.column_name, int(row.dimensions), row.comment
        )
        for row in rows
    }


async def vector_dimensions(conn: Connection, schema: str, table: str = "memories") -> int | None:
    """The dimension of ``table``'s ``embedding`` column; None when the schema has no such table."""
    found = await vector_columns(conn, schema, tables=[table])
    column = found.get((table, "embedding"))
    return column.dimensions if column is not None else None


async def row_security_applies(conn: Connection, schema: str, tables: Iterable[str]) -> bool:
    """Whether row-level security restricts this role on any of ``tables`` (it is not the owner, nor BYPASSRLS)."""
    return bool(await conn.scalar(ROW_SECURITY_ACTIVE, {"schema": schema, "tables": list(tables)}))


async def row_security_bypass(conn: Connection, schema: str, table: str = "memories") -> str | None:
    """Why row-level security does not restrict this role on ``table`` ("a superuser", "the owner of the
    tables", ...), or None when it does (or the table does not exist)."""
    found = await conn.scalar(ROW_SECURITY_BYPASS, {"schema": schema, "table": table})
    return str(found) if found is not None else None
