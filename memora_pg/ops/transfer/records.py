"""The export format's records: which tables, in what order, and how each column is written and read.

docs/transfer-format.md specifies the file. Here the format is code: the tables in replay
order, each table's record layout (:func:`record_fields`), the statement with which the server
writes a table's records (:func:`select_records`), and the reading side: lines into records
(:func:`read_records`), the header's checks (:func:`check_header`), a record into insert
parameters (:func:`decode`) and the COPY route those parameters go in by (:func:`staged`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ColumnElement,
    DateTime,
    Integer,
    LargeBinary,
    Select,
    String,
    Table,
    Text,
    Uuid,
    cast,
    func,
    literal,
    null,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.sql.elements import Null

from memora_pg import catalog, migrations
from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.errors import ConfigurationError, InvalidInputError
from memora_pg.ops.transfer.values import DECODERS, Number, VectorText, no_constant, vector_length
from memora_pg.schema import (
    agents,
    audit_log,
    autogen_contents,
    interactions,
    memories,
    memory_history,
    memory_sources,
    memory_updates,
    messages,
    organizations,
    store_items,
    users,
)
from memora_pg.sql_text import quoted, render

FORMAT = "memora_pg_export"
FORMAT_END = "memora_pg_export_end"
VERSION = 1

# The order rows are written and replayed in: each table after those its foreign keys point to.
EXPORTED_TABLES: tuple[Table, ...] = (
    organizations,
    users,
    agents,
    interactions,
    messages,
    memories,
    memory_sources,
    memory_updates,
    memory_history,
    autogen_contents,
    store_items,
    audit_log,
)

# Tables of the schema an export leaves out on purpose, each with the reason. A table that is
# in neither list makes the test suite fail, so a new table is never forgotten silently.
EXCLUDED_TABLES: dict[str, str] = {
    "access_tokens": "credentials of the MCP server, not memories: a restored organization gets new tokens",
}

# Full-text columns are derived data: the import recomputes them from the first of these columns
# that holds a value (an AutoGen JSON entry by its serialized text).
SEARCH_TEXT_SOURCES: dict[tuple[str, str], tuple[str, ...]] = {
    ("memories", "search_text"): ("memory",),
    ("autogen_contents", "search_text"): ("content_text", "content_json"),
    ("store_items", "search_text"): ("indexed_text",),
}

StrPath = str | os.PathLike[str]
Progress = Callable[[int], None]

BY_NAME = {table.name: table for table in EXPORTED_TABLES}
POSITION = {table.name: index for index, table in enumerate(EXPORTED_TABLES)}


# -- how each column travels -------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One column of a table as it appears in a record: its key, and how it is written and read."""

    column: Column[Any]
    key: str
    kind: str  # text, integer, boolean, uuid, timestamp, json, bytes, vector or searchable
    # for a searchable field: the columns its vector is computed from, the first that holds a value
    source: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        # 'searchable' may be absent: exports before an AutoGen entry had a full-text vector lack it,
        # and a row is searchable exactly when it has an embedding.
        return self.kind != "searchable" and not self.column.nullable


def _kind(table: Table, column: Column[Any]) -> str:
    kind = column.type
    if isinstance(kind, TSVECTOR):
        if (table.name, column.name) not in SEARCH_TEXT_SOURCES:
            raise TypeError(f"{table.name}.{column.name}: a full-text column without a source in SEARCH_TEXT_SOURCES")
        return "searchable"
    kinds: tuple[tuple[type[Any], str], ...] = (
        (VECTOR, "vector"),
        (Uuid, "uuid"),
        (DateTime, "timestamp"),
        (JSON, "json"),
        (LargeBinary, "bytes"),
        (Boolean, "boolean"),
        (Integer, "integer"),
        (String, "text"),
    )
    for python_type, name in kinds:
        if isinstance(kind, python_type):
            return name
    raise TypeError(f"{table.name}.{column.name}: no export format for the column type {kind!r}")


@cache
def record_fields(table: Table) -> tuple[Field, ...]:
    """The record layout of ``table``; a column of a type the format does not know is a TypeError."""
    found = []
    for column in table.columns:
        kind = _kind(table, column)
        if kind == "searchable":
            found.append(Field(column, "searchable", kind, SEARCH_TEXT_SOURCES[(table.name, column.name)]))
        else:
            found.append(Field(column, column.name, kind))
    keys = [field.key for field in found]
    if "type" in keys or len(set(keys)) != len(keys):
        raise TypeError(f"{table.name}: its columns do not make distinct record keys besides 'type'")
    return tuple(found)


# -- writing: the server renders each record -------------------------------------------------


def _constant(value: str) -> ColumnElement[Any]:
    # A typed parameter: json_build_object takes arguments of any type, so asyncpg must be told.
    return literal(value, Text)


def _json_value(field: Field) -> ColumnElement[Any]:
    """The SQL expression that renders ``field`` as the record's JSON value."""
    column = field.column
    if field.kind == "timestamp":
        # Always six fractional digits: Python 3.10's fromisoformat reads no other length.
        return func.to_char(func.timezone("UTC", column), _constant('YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'))
    if field.kind == "bytes":
        # encode() wraps base64 every 76 characters; a record is one line.
        return func.translate(func.encode(column, _constant("base64")), _constant("\n"), _constant(""))
    if field.kind == "vector":
        # pgvector prints the shortest decimal of each float32: already a JSON array, and exact.
        return cast(cast(column, Text), JSON)
    if field.kind == "searchable":
        return column.is_not(None)
    return column


def select_records(table: Table, org_id: str | None) -> Select[Any]:
    """Every row of ``table`` (of one organization) as the text of its JSON record, in key order."""
    pairs: list[ColumnElement[Any]] = [_constant("type"), _constant(table.name)]
    for field in record_fields(table):
        pairs += [_constant(field.key), _json_value(field)]
    statement = select(cast(func.json_build_object(*pairs), Text))
    if org_id is not None:
        statement = statement.where(table.c.org_id == org_id)
    return statement.order_by(*table.primary_key.columns)


# -- reading: lines, the header, records ---------------------------------------------------


def read_records(lines: Iterable[str | bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each line; a line that is not a JSON object is InvalidInputError."""
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            try:
                record = _parse(line)
            except ValueError as error:
                raise InvalidInputError(f"Line {number} of the export is not JSON: {error}") from error
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                raise InvalidInputError(f"Line {number} of the export is not an object with a 'type'.")
            yield number, record
    except InvalidInputError:
        raise
    except (OSError, EOFError, UnicodeError) as error:  # a damaged gzip stream, a text file in another encoding
        raise InvalidInputError(f"The export cannot be read after line {number}: {error}") from error


# An embedding is written as pgvector's text form, which is a JSON array too: "[0.1,-2.5e-05,...]".
# Its numbers are most of a memory's line, and parsing them one by one is most of the time a line
# takes in Python, so an array of nothing but digits, signs, points, exponents and commas is cut
# out of the line as its text. pgvector parses it on the server (a number malformed there fails the
# import naming the batch's lines); :func:`decode` checks its length. Any other line is parsed whole.
_EMBEDDING = re.compile(r'"embedding"\s*:\s*\[([0-9.,eE+-]*)\]')
# What the array is replaced with while the rest of the line is parsed: NUL is never valid text.
_CUT = '"\\u0000"'


def _parse(line: str | bytes) -> Any:
    text = line.decode() if isinstance(line, bytes) else line
    found = _EMBEDDING.search(text)
    if found is not None and _EMBEDDING.search(text, found.end()) is None:
        record = json.loads(
            text[: found.start(1) - 1] + _CUT + text[found.end() :], parse_float=Number, parse_constant=no_constant
        )
        # The array was the record's own embedding, not a value inside one of its JSON columns.
        if isinstance(record, dict) and record.get("embedding") == "\x00":
            record["embedding"] = VectorText(f"[{found.group(1)}]")
            return record
    return json.loads(text, parse_float=Number, parse_constant=no_constant)


def check_header(first: tuple[int, dict[str, Any]] | None) -> dict[str, Any]:
    """The header, the first of :func:`read_records`; one this version cannot read is InvalidInputError."""
    if first is None:
        raise InvalidInputError("The export is empty: line 1 should be its header.")
    _, header = first
    if header["type"] != FORMAT:
        raise InvalidInputError(f"Line 1 is not a memora_pg export header (type {header['type']!r}).")
    if header.get("version") != VERSION:
        raise InvalidInputError(
            f"Line 1: export format version {header.get('version')!r} is not supported "
            f"(this memora_pg reads version {VERSION})."
        )
    dimensions = header.get("embedding_dimensions")
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise InvalidInputError(f"Line 1: embedding_dimensions must be a positive integer, not {dimensions!r}.")
    return header


@dataclass(frozen=True)
class Staging:
    """The temporary table a table with derived columns is copied into, and the move out of it."""

    name: str
    create: tuple[str, ...]  # the statements that create it
    move: str


@dataclass(frozen=True)
class Staged:
    """How rows of a table go in through COPY.

    A table whose columns all travel as they are stored is copied straight into. A table with
    derived columns (an embedding, a full-text vector) is copied into a temporary table of the
    same columns (vectors and full-text sources as text), then moved into the table by one
    ``INSERT ... SELECT`` that casts the vectors and computes the full-text vectors with the
    schema's rule (migration 0006; it is strict: a null source, a row that is not searchable,
    gives a null vector).
    """

    table: Table
    columns: tuple[str, ...]
    json_columns: frozenset[str]
    staging: Staging | None = None

    def records(self, rows: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
        """Rows as :func:`decode` gives them, as tuples for COPY (JSON as its text)."""
        return [tuple(self._value(name, row[name]) for name in self.columns) for row in rows]

    def _value(self, name: str, value: Any) -> Any:
        if name not in self.json_columns:
            return value
        return None if value is None or isinstance(value, Null) else json.dumps(value, allow_nan=False)


# The staging table of a table whose rows need converting on the way in. A vector's text is kilobytes:
# stored as it is, never compressed (pglz made the COPY of a memory's row several times slower), and in
# the row while the row fits a page.
CREATE_STAGING = "CREATE TEMPORARY TABLE {staging} ({definitions}) WITH (toast_tuple_target = 8160) ON COMMIT DROP"
COLUMN = "{column} {type}"
STORE_EXTERNAL = "ALTER TABLE {staging} {columns}"
EXTERNAL = "ALTER COLUMN {column} SET STORAGE EXTERNAL"
AS_VECTOR = "CAST({column} AS {type})"
AS_SEARCH_TEXT = "{schema}.to_search_text({column})"
# The staged rows into the table, converted.
MOVE = "INSERT INTO {schema}.{table} ({columns}) SELECT {selected} FROM {staging}"


@lru_cache(maxsize=32)
def staged(table: Table, schema: str) -> Staged:
    """The COPY route of ``table`` in ``schema`` (a validated identifier)."""
    fields = record_fields(table)
    columns = tuple(field.column.name for field in fields)
    json_columns = frozenset(field.column.name for field in fields if field.kind == "json")
    if not any(field.kind in ("vector", "searchable") for field in fields):
        return Staged(table, columns, json_columns)
    dialect = postgresql.dialect()
    name = f"memora_pg_import_{table.name}"
    definitions, selected, texts = [], [], []
    for field in fields:
        column = quoted(field.column.name)
        declared = field.column.type.compile(dialect=dialect)
        if field.kind in ("vector", "searchable"):
            definitions.append(render(COLUMN, column=column, type="text"))
            texts.append(render(EXTERNAL, column=column))
        else:
            definitions.append(render(COLUMN, column=column, type=declared))
        if field.kind == "vector":
            selected.append(render(AS_VECTOR, column=column, type=declared))
        elif field.kind == "searchable":
            selected.append(render(AS_SEARCH_TEXT, column=column, schema=quoted(schema)))
        else:
            selected.append(column)
    parts = {"staging": quoted(name), "schema": quoted(schema), "table": quoted(table.name)}
    return Staged(
        table,
        columns,
        json_columns,
        Staging(
            name=name,
            create=(
                render(CREATE_STAGING, staging=parts["staging"], definitions=", ".join(definitions)),
                render(STORE_EXTERNAL, staging=parts["staging"], columns=", ".join(texts)),
            ),
            move=render(
                MOVE,
                **parts,
                columns=", ".join(quoted(column) for column in columns),
                selected=", ".join(selected),
            ),
        ),
    )


def decode(table: Table, record: dict[str, Any], number: int, dimensions: int) -> dict[str, Any]:
    """The values of one record for :func:`staged`'s COPY, every value checked against its column."""
    layout = record_fields(table)
    unknown = set(record) - {"type"} - {field.key for field in layout}
    if unknown:
        raise InvalidInputError(f"Line {number}: {table.name} has no field {sorted(unknown)[0]!r}.")
    row: dict[str, Any] = {}
    for field in layout:
        value = record.get(field.key)
        name = field.column.name
        if value is None:
            if field.required:
                raise InvalidInputError(f"Line {number}: {table.name}.{field.key} is missing or null.")
            # SQL NULL, where SQLAlchemy would otherwise store None in a JSON column as JSON's null.
            row[name] = null() if field.kind == "json" else None
            continue
        try:
            if field.kind == "vector" and vector_length(value) != dimensions:
                raise TypeError(f"expected a list of {dimensions} numbers (the header's embedding_dimensions)")
            decoded = DECODERS[field.kind](value)
        except (ValueError, TypeError) as error:
            raise InvalidInputError(f"Line {number}: {table.name}.{field.key}: {error}") from error
        row[name] = decoded
    for field in layout:
        if field.kind == "searchable":
            # The parameter of a full-text column is its source text, or null when not searchable.
            searchable = row[field.column.name]
            if searchable is None:
                searchable = row.get("embedding") is not None
            row[field.column.name] = _source_text(row, field.source) if searchable else None
    return row


def _source_text(row: dict[str, Any], source: tuple[str, ...]) -> str | None:
    for column in source:
        value = row.get(column)
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
    return None


# -- the database at either end --------------------------------------------------------------


async def schema_state(conn: Connection, database: Database) -> tuple[str, int]:
    """The schema revision and vector dimension a header records, once the database suits a transfer.

    A schema not at head, or row-level security that applies to this role (it would hide rows
    from an export, or refuse an import's), is a ConfigurationError.
    """
    if await catalog.row_security_applies(conn, database.schema, BY_NAME):
        raise ConfigurationError(
            "Row-level security applies to this database role, so it would not see or write every row: "
            "export and import as the tables' owner or a role with BYPASSRLS."
        )
    revision = await migrations.require_head(conn, database.schema)
    dimensions = await catalog.vector_dimensions(conn, database.schema)
    assert dimensions is not None  # the schema is at head, so the column exists
    return revision, dimensions
