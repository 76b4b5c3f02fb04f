"""Export and import: one organization, or all of them, as JSON Lines.

An export is one JSON object per line, each with a ``"type"``:

* line 1, the header: ``{"type": "memora_pg_export", "version": 1, "schema_revision": ...,
  "embedding_dimensions": N, "exported_at": ...}``;
* then the rows, one per line, table by table in :data:`EXPORTED_TABLES` order (every table
  after the tables its foreign keys point to), ``"type"`` being the table's name and the
  other keys its columns;
* last, ``{"type": "memora_pg_export_end", "counts": {table: rows}}``, so that a file cut
  anywhere, even between two lines, is recognised as incomplete.

Values: ids as stored (memory ids as canonical UUID strings), timestamps as ISO 8601 in UTC
with their offset (``2026-01-01T12:00:00.000000+00:00``), embeddings as lists of floats (or
null), bytes as base64, JSON columns as JSON. A memory's full-text vector is not exported:
``"searchable": true`` says it had one, and the import recomputes it from the memory's text
with the importing database's text-search configuration.

The export reads one consistent snapshot (a read-only REPEATABLE READ transaction) through
server-side cursors, a batch of rows at a time, and the server writes each row's JSON: memory
stays constant whatever the size of the database. The import replays the file with batched
multi-row inserts in ONE transaction, so a failed import leaves nothing behind; a large import
therefore holds one long transaction (and its locks) until it commits. Into an empty database
the import drops the HNSW index first and builds it once at the end, in that same transaction:
much faster than indexing the rows one by one, with ``maintenance_work_mem`` raised to
``Settings.index_build_memory`` for the build so that the graph is built in memory.

Both need the schema at head and a role that row-level security does not restrict (the
tables' owner, or a role with BYPASSRLS): policies would hide rows from an export.

File reads and writes are plain blocking calls on the event loop's thread: these are
operations for the command line, not for a server's request path.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, aclosing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache, lru_cache
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ColumnElement,
    DateTime,
    Insert,
    Integer,
    LargeBinary,
    Select,
    String,
    Table,
    Text,
    Uuid,
    bindparam,
    cast,
    func,
    insert,
    literal,
    null,
    select,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import REGCLASS, REGCONFIG, TSVECTOR
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg import migrations
from memora_pg.db import Database
from memora_pg.errors import (
    AlreadyExistsError,
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    database_errors,
    translate,
)
from memora_pg.ops.indexes import raise_build_memory
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
    users,
)
from memora_pg.statements import sql

__all__ = ["EXCLUDED_TABLES", "EXPORTED_TABLES", "FORMAT", "FORMAT_END", "VERSION", "export", "import_"]

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
    audit_log,
)

# Tables of the schema an export leaves out on purpose, each with the reason. A table that is
# in neither list makes the test suite fail, so a new table is never forgotten silently.
EXCLUDED_TABLES: dict[str, str] = {}

# Full-text columns are derived data: the import recomputes them from this text column.
SEARCH_TEXT_SOURCES: dict[tuple[str, str], str] = {("memories", "search_text"): "memory"}

# Rows fetched per round trip of the export's cursors.
EXPORT_BATCH_ROWS = 500

StrPath = str | os.PathLike[str]
Progress = Callable[[int], None]

_BY_NAME = {table.name: table for table in EXPORTED_TABLES}
_POSITION = {table.name: index for index, table in enumerate(EXPORTED_TABLES)}


# -- how each column travels -------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """One column of a table as it appears in a record: its key, and how it is written and read."""

    column: Column[Any]
    key: str
    kind: str  # text, integer, boolean, uuid, timestamp, json, bytes, vector or searchable
    source: str | None = None  # for a searchable field: the text column its vector is computed from

    @property
    def required(self) -> bool:
        return self.kind == "searchable" or not self.column.nullable


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
def record_fields(table: Table) -> tuple[_Field, ...]:
    """The record layout of ``table``; a column of a type the format does not know is a TypeError."""
    found = []
    for column in table.columns:
        kind = _kind(table, column)
        if kind == "searchable":
            found.append(_Field(column, "searchable", kind, SEARCH_TEXT_SOURCES[(table.name, column.name)]))
        else:
            found.append(_Field(column, column.name, kind))
    keys = [field.key for field in found]
    if "type" in keys or len(set(keys)) != len(keys):
        raise TypeError(f"{table.name}: its columns do not make distinct record keys besides 'type'")
    return tuple(found)


def _constant(value: str) -> ColumnElement[Any]:
    # A typed parameter: json_build_object takes arguments of any type, so asyncpg must be told.
    return literal(value, Text)


def _json_value(field: _Field) -> ColumnElement[Any]:
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


def _select_records(table: Table, org_id: str | None) -> Select[Any]:
    """Every row of ``table`` (of one organization) as the text of its JSON record, in key order."""
    pairs: list[ColumnElement[Any]] = [_constant("type"), _constant(table.name)]
    for field in record_fields(table):
        pairs += [_constant(field.key), _json_value(field)]
    statement = select(cast(func.json_build_object(*pairs), Text))
    if org_id is not None:
        statement = statement.where(table.c.org_id == org_id)
    return statement.order_by(*table.primary_key.columns)


# -- export ----------------------------------------------------------------------------------

EMBEDDING_DIMENSIONS = """
SELECT atttypmod FROM pg_attribute
WHERE attrelid = to_regclass(:table) AND attname = 'embedding' AND NOT attisdropped
"""


# Row-level security that applies to this role would hide rows from an export, or refuse an import's.
UNDER_POLICIES = """
SELECT coalesce(bool_or(row_security_active(c.oid)), false)
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = ANY(:tables)
"""


async def _schema_state(conn: AsyncConnection, database: Database) -> tuple[str, int]:
    """The database's schema revision and vector dimension, once it is known to suit an export or import.

    A schema not at head, or row-level security that applies to this role, is a ConfigurationError.
    """
    tables = list(_BY_NAME)
    if await conn.scalar(text(UNDER_POLICIES), {"schema": database.schema, "tables": tables}):
        raise ConfigurationError(
            "Row-level security applies to this database role, so it would not see or write every row: "
            "export and import as the tables' owner or a role with BYPASSRLS."
        )
    revision = await migrations.current_revision(conn, database.schema)
    head = migrations.head_revision()
    if revision != head:
        raise ConfigurationError(
            f"The schema {database.schema!r} is at revision {revision or 'none'}, not at {head}: "
            "migrate it to head first (setup() or 'alembic upgrade head')."
        )
    dimensions = await conn.scalar(sql(conn, EMBEDDING_DIMENSIONS), {"table": f'"{database.schema}".memories'})
    assert dimensions is not None  # the schema is at head, so the column exists
    return revision, int(dimensions)


async def export(
    database: Database,
    out: BinaryIO | TextIO | StrPath,
    *,
    org_id: str | None = None,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Write the organization ``org_id`` (default: every organization) to ``out`` as JSON Lines.

    ``out`` is a path (compressed with gzip when it ends in ``.gz``) or an open file, text or
    binary. ``progress`` is called with the number of rows written so far, after each batch.
    Returns the number of rows written per table. A missing organization is ``NotFoundError``
    and a database not migrated to head ``ConfigurationError``, both raised before a path is
    opened; a file left by an export that fails later has no end record, so no import takes it.
    """
    if org_id is not None and (not isinstance(org_id, str) or not org_id):
        raise InvalidInputError("`org_id` must be None or a non-empty string.")
    counts = dict.fromkeys(_BY_NAME, 0)
    written = 0
    async with aclosing(_snapshot(database, org_id)) as batches:
        _, (header,) = await anext(batches)
        with _writer(out) as write:
            write(header + "\n")
            async for table, batch in batches:
                for record in batch:
                    write(record + "\n")
                counts[table] += len(batch)
                written += len(batch)
                if progress is not None:
                    progress(written)
            write(json.dumps({"type": FORMAT_END, "counts": counts}) + "\n")
    return counts


async def _snapshot(database: Database, org_id: str | None) -> AsyncGenerator[tuple[str, Sequence[str]], None]:
    """The header line, then each table's records a batch at a time, all read from one snapshot.

    Only the reading is inside ``database_errors``: a failure of the caller's writes is
    theirs, and never comes out as a database error.
    """
    engine = await database.engine()
    with database_errors():
        async with engine.connect() as conn:
            # One snapshot for every table, so that the export is consistent under concurrent writes.
            await conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            async with conn.begin():
                revision, dimensions = await _schema_state(conn, database)
                if org_id is not None and not await _organization_exists(conn, org_id):
                    raise NotFoundError(f"Organization {org_id!r} does not exist.")
                header = {
                    "type": FORMAT,
                    "version": VERSION,
                    "schema_revision": revision,
                    "embedding_dimensions": dimensions,
                    "exported_at": datetime.now(timezone.utc).isoformat(),
                    "org_id": org_id,
                }
                yield FORMAT, [json.dumps(header)]
                for table in EXPORTED_TABLES:
                    statement = _select_records(table, org_id).execution_options(yield_per=EXPORT_BATCH_ROWS)
                    result = await conn.stream(statement)
                    async for batch in result.scalars().partitions():
                        yield table.name, batch


async def _organization_exists(conn: AsyncConnection, org_id: str) -> bool:
    found = await conn.scalar(select(organizations.c.org_id).where(organizations.c.org_id == org_id))
    return found is not None


@contextmanager
def _writer(out: BinaryIO | TextIO | StrPath) -> Iterator[Callable[[str], object]]:
    """A function that writes text to ``out``; a path is opened, and closed, here."""
    if not isinstance(out, str | os.PathLike):
        yield _write_to(out)
        return
    path = Path(out)
    with gzip.open(path, "wt", encoding="utf-8") if path.suffix == ".gz" else path.open("w", encoding="utf-8") as file:
        yield file.write


def _write_to(file: IO[Any]) -> Callable[[str], object]:
    if isinstance(file, io.TextIOBase) or "b" not in str(getattr(file, "mode", "b")):
        return file.write
    return lambda chunk: file.write(chunk.encode("utf-8"))


# -- import ----------------------------------------------------------------------------------


async def import_(
    database: Database,
    source: BinaryIO | TextIO | StrPath,
    *,
    progress: Progress | None = None,
    batch_size: int = 1000,
) -> dict[str, int]:
    """Replay an export into ``database``, all of it in one transaction; return the rows written per table.

    ``source`` is a path (read with gzip when it ends in ``.gz``) or an open file, text or
    binary. Rows go in with multi-row inserts of up to ``batch_size`` rows; ``progress`` is
    called with the number of rows written so far after each. Ids and ``seq`` values are kept
    as exported, and each identity sequence is then moved past the largest ``seq`` so that
    later writes keep counting upwards.

    The import is for a database without the exported organizations: a row whose key exists
    already is ``AlreadyExistsError``. A malformed or incomplete file is ``InvalidInputError``
    naming the line; an export of another vector dimension is ``ConfigurationError`` naming
    both; in every case nothing is written. The whole import is one transaction: a large one
    holds its locks, and keeps its rows invisible to others, until it commits.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"`batch_size` must be a positive integer, not {batch_size!r}.")
    with _reader(source) as lines:
        records = _records(lines)
        header = _header(next(records, None))
        async with database.transaction() as conn:
            _, dimensions = await _schema_state(conn, database)
            if header["embedding_dimensions"] != dimensions:
                raise ConfigurationError(
                    f"The export holds vectors of {header['embedding_dimensions']} dimensions but the database "
                    f"stores {dimensions}: import into a database created with {header['embedding_dimensions']}."
                )
            set_aside = await _set_aside_vector_indexes(conn, database.schema)
            replay = _Replay(conn, database, dimensions, batch_size, progress)
            await replay.run(records)
            if set_aside:
                # One build over every row can outlast a statement_timeout meant for the application,
                # and needs its graph in memory (see Settings.index_build_memory).
                await conn.execute(text("SET LOCAL statement_timeout = 0"))
                await raise_build_memory(conn, database.settings, local=True)
            for definition in set_aside:
                await conn.execute(text(definition))
            await _advance_identities(conn, database.schema)
    return replay.counts


@contextmanager
def _reader(source: BinaryIO | TextIO | StrPath) -> Iterator[Iterable[str | bytes]]:
    """The lines of ``source``; a path is opened, and closed, here."""
    if not isinstance(source, str | os.PathLike):
        yield source
        return
    path = Path(source)
    with ExitStack() as stack:
        try:
            if path.suffix == ".gz":
                file: Iterable[bytes] = stack.enter_context(gzip.open(path, "rb"))
            else:
                file = stack.enter_context(path.open("rb"))
        except OSError as error:
            raise InvalidInputError(f"The export {str(path)!r} cannot be read: {error}") from error
        yield file


def _records(lines: Iterable[str | bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each line; a line that is not a JSON object is InvalidInputError."""
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line, parse_float=_Number, parse_constant=_no_constant)
            except ValueError as error:
                raise InvalidInputError(f"Line {number} of the export is not JSON: {error}") from error
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                raise InvalidInputError(f"Line {number} of the export is not an object with a 'type'.")
            yield number, record
    except InvalidInputError:
        raise
    except (OSError, EOFError, UnicodeError) as error:  # a damaged gzip stream, a text file in another encoding
        raise InvalidInputError(f"The export cannot be read after line {number}: {error}") from error


def _header(first: tuple[int, dict[str, Any]] | None) -> dict[str, Any]:
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


class _Replay:
    """Rows of the export, buffered per table and written in batches on one connection."""

    def __init__(
        self, conn: AsyncConnection, database: Database, dimensions: int, batch_size: int, progress: Progress | None
    ) -> None:
        self.conn = conn
        self.text_search_config = database.settings.text_search_config
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.progress = progress
        self.counts = dict.fromkeys(_BY_NAME, 0)
        self.written = 0
        self.table: Table | None = None
        self.rows: list[dict[str, Any]] = []
        self.first_line = 0

    async def run(self, records: Iterator[tuple[int, dict[str, Any]]]) -> None:
        last = 1
        for number, record in records:
            last = number
            kind = record["type"]
            if kind == FORMAT_END:
                await self.flush()
                self._check_end(number, record)
                after = next(records, None)
                if after is not None:
                    raise InvalidInputError(f"Line {after[0]} follows the end of the export.")
                return
            table = _BY_NAME.get(kind)
            if table is None:
                raise InvalidInputError(f"Line {number}: unknown record type {kind!r}.")
            if self.table is not table:
                if self.table is not None and _POSITION[kind] < _POSITION[self.table.name]:
                    raise InvalidInputError(
                        f"Line {number}: {kind} rows come after {self.table.name} rows; "
                        f"an export lists its tables in the order {', '.join(_BY_NAME)}."
                    )
                await self.flush()
                self.table, self.first_line = table, number
            self.rows.append(_decode(table, record, number, self.dimensions))
            self.counts[kind] += 1
            if len(self.rows) >= self.batch_size:
                await self.flush()
                self.first_line = number + 1
        raise InvalidInputError(f"The export stops after line {last} without its end record: the file is incomplete.")

    def _check_end(self, number: int, record: dict[str, Any]) -> None:
        if record.get("counts") != self.counts:
            raise InvalidInputError(
                f"Line {number}: the end record counts {record.get('counts')!r} rows but the export holds "
                f"{self.counts!r}: the file is incomplete or was edited."
            )

    async def flush(self) -> None:
        if not self.rows:
            return
        assert self.table is not None
        table, rows, last_line = self.table, self.rows, self.first_line + len(self.rows) - 1
        self.rows = []
        try:
            await self.conn.execute(_insert_statement(table, self.text_search_config), rows)
        except sa_exc.DBAPIError as error:
            lines = f"Lines {self.first_line}-{last_line}"
            found = translate(error)
            if isinstance(found, AlreadyExistsError):
                raise AlreadyExistsError(
                    f"{lines}: the database already holds {table.name} rows with these keys (or the export repeats "
                    "a key). Import into a database without the exported organizations."
                ) from error
            if isinstance(error, sa_exc.IntegrityError | sa_exc.DataError):
                raise InvalidInputError(f"{lines}: the database refused these {table.name} rows. {found}") from error
            raise found from error
        self.written += len(rows)
        if self.progress is not None:
            self.progress(self.written)


@lru_cache(maxsize=64)
def _insert_statement(table: Table, text_search_config: str) -> Insert:
    """A multi-row insert of ``table``: vectors from their text, full-text vectors computed from their source."""
    computed: dict[Column[Any], ColumnElement[Any]] = {}
    for field in record_fields(table):
        given = bindparam(field.column.name, type_=Text)
        if field.kind == "vector":
            computed[field.column] = cast(given, field.column.type)
        elif field.kind == "searchable":
            # to_tsvector is strict: a null source (a memory that is not searchable) gives a null vector.
            computed[field.column] = func.to_tsvector(cast(_constant(text_search_config), REGCONFIG), given)
    return insert(table).values(computed)


def _decode(table: Table, record: dict[str, Any], number: int, dimensions: int) -> dict[str, Any]:
    """The insert parameters of one record, every value checked against its column."""
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
            if field.kind == "vector" and (not isinstance(value, list) or len(value) != dimensions):
                raise TypeError(f"expected a list of {dimensions} numbers (the header's embedding_dimensions)")
            decoded = _DECODERS[field.kind](value)
        except (ValueError, TypeError) as error:
            raise InvalidInputError(f"Line {number}: {table.name}.{field.key}: {error}") from error
        row[name] = decoded
    for field in layout:
        if field.kind == "searchable":
            # The parameter of a full-text column is its source text, or null when not searchable.
            row[field.column.name] = row[field.source] if row[field.column.name] and field.source else None
    return row


class _Number(str):
    """A JSON number with a fraction or an exponent, kept as its text.

    An embedding's numbers are the shortest decimals of float32 values: handed to pgvector as
    text they come back bit for bit, and no float is ever formatted again (the slow part).
    """

    __slots__ = ()


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, not {value!r}")
    if "\x00" in value:
        raise ValueError("text may not contain NUL characters")
    return value


def _integer(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, not {value!r}")
    return value


def _uuid(value: Any) -> uuid.UUID:
    return uuid.UUID(_text(value))


def _timestamp(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_text(value))
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset")
    return parsed


def _json(value: Any) -> Any:
    if type(value) is _Number:
        return float(value)
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json(item) for item in value]
    return value


def _bytes(value: Any) -> bytes:
    try:
        return base64.b64decode(_text(value), validate=True)
    except binascii.Error as error:
        raise ValueError(f"not base64: {error}") from error


def _vector(value: list[Any]) -> str:
    """pgvector's text form of the vector: the exported decimals, untouched."""
    kinds = set(map(type, value))
    if not kinds <= {_Number, int}:
        raise TypeError("expected a list of numbers")
    if int in kinds:  # pgvector prints integral values without a fraction: 0, 1
        value = [str(x) for x in value]
    return "[" + ",".join(value) + "]"


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "text": _text,
    "integer": _integer,
    "boolean": _boolean,
    "uuid": _uuid,
    "timestamp": _timestamp,
    "json": _json,
    "bytes": _bytes,
    "vector": _vector,
    "searchable": _boolean,
}


# The HNSW indexes of memora_pg's schema, with the statements that build them again.
VECTOR_INDEXES = """
SELECT ix.relname AS name, pg_get_indexdef(ix.oid) AS definition
FROM pg_class AS ix
JOIN pg_am AS method ON method.oid = ix.relam
JOIN pg_namespace AS space ON space.oid = ix.relnamespace
WHERE space.nspname = :schema AND ix.relkind = 'i' AND method.amname = 'hnsw'
ORDER BY ix.relname
"""

DATABASE_IS_EMPTY = "SELECT NOT EXISTS (SELECT FROM {schema}.organizations)"


async def _set_aside_vector_indexes(conn: AsyncConnection, schema: str) -> list[str]:
    """Into an empty database, drop the HNSW indexes and return the statements that rebuild them.

    Building an HNSW index once over all rows is about ten times faster than inserting the
    rows into it one by one. Every row belongs to an organization, so no organization means
    no row, and no one else's data behind the lock that DROP INDEX takes until the commit.
    """
    if not await conn.scalar(sql(conn, DATABASE_IS_EMPTY)):
        return []
    indexes = (await conn.execute(text(VECTOR_INDEXES), {"schema": schema})).all()
    for index in indexes:
        await conn.execute(text(f'DROP INDEX "{schema}"."{index.name}"'))
    return [index.definition for index in indexes]


async def _advance_identities(conn: AsyncConnection, schema: str) -> None:
    """Move each identity sequence past the largest imported value, never backwards."""
    for table in EXPORTED_TABLES:
        for column in table.columns:
            if column.identity is None:
                continue
            sequence = cast(func.pg_get_serial_sequence(f"{schema}.{table.name}", column.name), REGCLASS)
            largest = select(func.max(column)).scalar_subquery()
            await conn.execute(
                select(func.setval(sequence, largest)).where(
                    largest > func.coalesce(func.pg_sequence_last_value(sequence), 0)
                )
            )
