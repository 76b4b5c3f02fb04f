"""Import: replay an export into a database, all of it in one transaction.

The rows go in through COPY, in ONE transaction, so a failed import leaves nothing behind; a
large import therefore holds one long transaction (and its locks) until it commits. A table
with derived columns (embeddings, full-text vectors) is copied into a temporary table and moved
into its own by one statement per batch, which computes them; the others are copied straight
in. Into an empty database the HNSW index is dropped first and built once at the end, in that
same transaction: much faster than indexing the rows one by one, with ``maintenance_work_mem``
raised to ``Settings.index_build_memory`` so that the graph is built in memory. The file is
read, and its records checked, in a worker thread, one batch ahead of the writes."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
from collections.abc import AsyncGenerator, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Table, cast, func, select, text
from sqlalchemy.dialects.postgresql import REGCLASS

from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.errors import AlreadyExistsError, ConfigurationError, InvalidInputError, NotFoundError, translate
from memora_pg.graph import versions
from memora_pg.ops.indexes import prepare_build
from memora_pg.ops.statistics import SEARCHED, analyze_searched
from memora_pg.ops.transfer.records import (
    BY_NAME,
    EXPORTED_TABLES,
    FORMAT_END,
    POSITION,
    Progress,
    Staged,
    StrPath,
    check_header,
    decode,
    read_records,
    schema_state,
    staged,
)
from memora_pg.sql_text import quoted, render
from memora_pg.statements import in_schema

__all__ = ["import_"]

# The columns an export made before migration 0008 lacks, which follow from the version chains.
CLOCKS_ENDS = frozenset({"valid_until", "superseded_at"})


async def import_(
    database: Database,
    source: BinaryIO | TextIO | StrPath,
    *,
    progress: Progress | None = None,
    batch_size: int = 10_000,
) -> dict[str, int]:
    """Replay an export into ``database``, all of it in one transaction; return the rows written per table.

    ``source`` is a path (read with gzip when it ends in ``.gz``) or an open file, text or
    binary. Rows go in through COPY in batches of up to ``batch_size`` rows; ``progress`` is
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
        records = read_records(lines)
        header = check_header(next(records, None))
        async with database.transaction() as conn:
            _, dimensions = await schema_state(conn, database)
            if header["embedding_dimensions"] != dimensions:
                raise ConfigurationError(
                    f"The export holds vectors of {header['embedding_dimensions']} dimensions but the database "
                    f"stores {dimensions}: import into a database created with {header['embedding_dimensions']}."
                )
            set_aside = await _set_aside_vector_indexes(conn, database.schema)
            batches = _Batches(records, database.schema, dimensions, batch_size)
            writer = _Writer(conn, database.schema, progress)
            # Closed here, so that a failed write waits for the read under way before the file closes.
            async with contextlib.aclosing(_read_ahead(batches)) as ahead:
                async for batch in ahead:
                    await writer.write(batch)
            # The clocks' ends follow from the chains: an export written before they existed has none. They
            # are set before the vector indexes are built again, so that no row is indexed twice.
            for org_id in sorted(batches.unclocked):
                await versions.clock_organization(conn, org_id=org_id)
            if set_aside:
                await prepare_build(conn, database.settings, local=True)
            for definition in set_aside:
                await conn.execute(text(definition))
            await _advance_identities(conn, database.schema)
            await analyze_searched(database, *SEARCHED, conn=conn)
    return batches.counts


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


@dataclass(frozen=True)
class _Batch:
    """Rows of one table, ready for COPY, from consecutive lines of the export."""

    route: Staged
    records: list[tuple[Any, ...]]
    lines: str  # "Lines 12-10011", for the errors that name them


class _Batches:
    """The export's records checked, decoded and grouped into batches of one table each.

    Iterating reads the file to its end record; any fault of the file is InvalidInputError
    naming its line. The counts and the organizations without clocks are complete once the
    iteration is.
    """

    def __init__(self, records: Iterator[tuple[int, dict[str, Any]]], schema: str, dimensions: int, size: int) -> None:
        self.records = records
        self.schema = schema
        self.dimensions = dimensions
        self.size = size
        self.counts = dict.fromkeys(BY_NAME, 0)
        # The organizations whose memories came without their clocks' ends (an export made before them).
        self.unclocked: set[str] = set()

    def __iter__(self) -> Iterator[_Batch]:
        table: Table | None = None
        rows: list[dict[str, Any]] = []
        first = last = 1
        for number, record in self.records:
            last = number
            kind = record["type"]
            if kind == FORMAT_END:
                if rows:
                    yield self._batch(table, rows, first)
                self._check_end(number, record)
                after = next(self.records, None)
                if after is not None:
                    raise InvalidInputError(f"Line {after[0]} follows the end of the export.")
                return
            found = BY_NAME.get(kind)
            if found is None:
                raise InvalidInputError(f"Line {number}: unknown record type {kind!r}.")
            if found is not table:
                if table is not None and POSITION[kind] < POSITION[table.name]:
                    raise InvalidInputError(
                        f"Line {number}: {kind} rows come after {table.name} rows; "
                        f"an export lists its tables in the order {', '.join(BY_NAME)}."
                    )
                if rows:
                    yield self._batch(table, rows, first)
                table, rows, first = found, [], number
            row = decode(found, record, number, self.dimensions)
            if kind == "memories" and CLOCKS_ENDS.isdisjoint(record):
                self.unclocked.add(row["org_id"])
            rows.append(row)
            self.counts[kind] += 1
            if len(rows) >= self.size:
                yield self._batch(found, rows, first)
                rows, first = [], number + 1
        raise InvalidInputError(f"The export stops after line {last} without its end record: the file is incomplete.")

    def _batch(self, table: Table | None, rows: list[dict[str, Any]], first: int) -> _Batch:
        assert table is not None
        route = staged(table, self.schema)
        return _Batch(route, route.records(rows), f"Lines {first}-{first + len(rows) - 1}")

    def _check_end(self, number: int, record: dict[str, Any]) -> None:
        if record.get("counts") != self.counts:
            raise InvalidInputError(
                f"Line {number}: the end record counts {record.get('counts')!r} rows but the export holds "
                f"{self.counts!r}: the file is incomplete or was edited."
            )


async def _read_ahead(batches: Iterable[_Batch]) -> AsyncGenerator[_Batch, None]:
    """The batches, each read in a worker thread while the one before it is written.

    Reading (the file, its JSON, each value's check) and writing (the server's COPY and moves)
    then take turns on two cores instead of one: the event loop's thread only waits on the
    server while a batch is written. At most one batch is read ahead.
    """
    source = iter(batches)
    reading = asyncio.ensure_future(asyncio.to_thread(next, source, None))
    try:
        while (batch := await reading) is not None:
            reading = asyncio.ensure_future(asyncio.to_thread(next, source, None))
            yield batch
    finally:
        if not reading.done():
            # A write failed (or the import was cancelled): let the read finish before the file closes.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(reading)


class _Writer:
    """Batches into their tables, on the connection (and in the transaction) of the import."""

    def __init__(self, conn: Connection, schema: str, progress: Progress | None) -> None:
        self.conn = conn
        self.schema = schema
        self.progress = progress
        self.written = 0
        # The temporary tables of the COPY routes created in this transaction.
        self.created: set[str] = set()

    async def write(self, batch: _Batch) -> None:
        staging = batch.route.staging
        if staging is None:
            await self._copy(batch, batch.route.table.name, self.schema)
        else:
            if staging.name not in self.created:
                for statement in staging.create:
                    await self.conn.script(statement)
                self.created.add(staging.name)
            await self._copy(batch, staging.name, None)
            try:
                await self.conn.script(staging.move)
            except asyncpg.PostgresError as error:
                raise self._refused(batch, error) from error
            await self.conn.script(f'TRUNCATE "{staging.name}"')
        self.written += len(batch.records)
        if self.progress is not None:
            self.progress(self.written)

    async def _copy(self, batch: _Batch, table: str, schema: str | None) -> None:
        """COPY on the driver's connection of this same transaction."""
        try:
            await self.conn.raw.copy_records_to_table(
                table, schema_name=schema, records=batch.records, columns=list(batch.route.columns)
            )
        except asyncpg.PostgresError as error:
            raise self._refused(batch, error) from error
        except (asyncpg.InterfaceError, ValueError, TypeError) as error:  # a value the driver cannot encode
            raise InvalidInputError(
                f"{batch.lines}: the database refused these {batch.route.table.name} rows. {error}"
            ) from error

    @staticmethod
    def _refused(batch: _Batch, error: asyncpg.PostgresError) -> Exception:
        """The error of a batch the database refused, naming its lines."""
        name = batch.route.table.name
        found = translate(error)
        if isinstance(found, AlreadyExistsError):
            return AlreadyExistsError(
                f"{batch.lines}: the database already holds {name} rows with these keys (or the export repeats "
                "a key). Import into a database without the exported organizations."
            )
        if isinstance(found, InvalidInputError | NotFoundError):  # a malformed value, a row the file lacks
            return InvalidInputError(f"{batch.lines}: the database refused these {name} rows. {error}")
        return found


# The HNSW indexes of memora_pg's schema, with the statements that build them again.
VECTOR_INDEXES = """
SELECT ix.relname AS name, pg_get_indexdef(ix.oid) AS definition
FROM pg_class AS ix
JOIN pg_am AS method ON method.oid = ix.relam
JOIN pg_namespace AS space ON space.oid = ix.relnamespace
WHERE space.nspname = :schema AND ix.relkind = 'i' AND method.amname = 'hnsw'
ORDER BY ix.relname
"""

# SELECT 1 ... LIMIT 1, not an empty target list: Citus cannot deparse "SELECT FROM" on a distributed table.
DATABASE_IS_EMPTY = "SELECT NOT EXISTS (SELECT 1 FROM {schema}.organizations LIMIT 1)"


async def _set_aside_vector_indexes(conn: Connection, schema: str) -> list[str]:
    """Into an empty database, drop the HNSW indexes and return the statements that rebuild them.

    Building an HNSW index once over all rows is about ten times faster than inserting the
    rows into it one by one. Every row belongs to an organization, so no organization means
    no row, and no one else's data behind the lock that DROP INDEX takes until the commit.
    """
    if not await conn.scalar(DATABASE_IS_EMPTY):
        return []
    indexes = await conn.fetch(text(VECTOR_INDEXES), {"schema": schema})
    for index in indexes:
        await conn.execute(in_schema(render("DROP INDEX {schema}.{index}", index=quoted(str(index.name))), schema))
    return [index.definition for index in indexes]


async def _advance_identities(conn: Connection, schema: str) -> None:
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
