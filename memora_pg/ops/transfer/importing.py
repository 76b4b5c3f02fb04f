"""Import: replay an export into a database, all of it in one transaction.

The rows go in through COPY (into a temporary table, then moved into theirs by one statement
per batch, which computes the derived columns) in ONE transaction, so a failed import leaves
nothing behind; a large import therefore holds one long transaction (and its locks) until it
commits. Into an empty database the HNSW index is dropped first and built once at the end, in
that same transaction: much faster than indexing the rows one by one, with
``maintenance_work_mem`` raised to ``Settings.index_build_memory`` so that the graph is built
in memory. File reads are plain blocking calls on the event loop's thread.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Table, cast, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import REGCLASS
from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.db import Database
from memora_pg.errors import AlreadyExistsError, ConfigurationError, InvalidInputError, translate
from memora_pg.graph import versions
from memora_pg.ops.indexes import raise_build_memory
from memora_pg.ops.transfer.records import (
    BY_NAME,
    EXPORTED_TABLES,
    FORMAT_END,
    POSITION,
    Progress,
    StrPath,
    check_header,
    decode,
    read_records,
    schema_state,
    staged,
)
from memora_pg.statements import sql

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
            replay = _Replay(conn, database, dimensions, batch_size, progress)
            await replay.run(records)
            # The clocks' ends follow from the chains: an export written before they existed has none. They
            # are set before the vector indexes are built again, so that no row is indexed twice.
            for org_id in sorted(replay.unclocked):
                await versions.clock_organization(conn, org_id=org_id)
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


class _Replay:
    """Rows of the export, buffered per table and written in batches on one connection."""

    def __init__(
        self, conn: AsyncConnection, database: Database, dimensions: int, batch_size: int, progress: Progress | None
    ) -> None:
        self.conn = conn
        self.schema = database.schema
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.progress = progress
        self.counts = dict.fromkeys(BY_NAME, 0)
        self.written = 0
        self.table: Table | None = None
        self.rows: list[dict[str, Any]] = []
        self.first_line = 0
        # The temporary tables of the COPY route created in this transaction.
        self.created: set[str] = set()
        # The organizations whose memories came without their clocks' ends (an export made before them).
        self.unclocked: set[str] = set()

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
            table = BY_NAME.get(kind)
            if table is None:
                raise InvalidInputError(f"Line {number}: unknown record type {kind!r}.")
            if self.table is not table:
                if self.table is not None and POSITION[kind] < POSITION[self.table.name]:
                    raise InvalidInputError(
                        f"Line {number}: {kind} rows come after {self.table.name} rows; "
                        f"an export lists its tables in the order {', '.join(BY_NAME)}."
                    )
                await self.flush()
                self.table, self.first_line = table, number
            row = decode(table, record, number, self.dimensions)
            if kind == "memories" and CLOCKS_ENDS.isdisjoint(record):
                self.unclocked.add(row["org_id"])
            self.rows.append(row)
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
        lines = f"Lines {self.first_line}-{last_line}"
        route = staged(table, self.schema)
        if route.name not in self.created:
            await self.conn.execute(text(route.create))
            self.created.add(route.name)
        # COPY into the temporary table, on the driver's connection of this same transaction.
        driver = (await self.conn.get_raw_connection()).driver_connection
        assert driver is not None
        try:
            await driver.copy_records_to_table(route.name, records=route.records(rows), columns=list(route.columns))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, ValueError, TypeError) as error:
            raise InvalidInputError(f"{lines}: the database refused these {table.name} rows. {error}") from error
        try:
            await self.conn.execute(text(route.move))
        except sa_exc.DBAPIError as error:
            found = translate(error)
            if isinstance(found, AlreadyExistsError):
                raise AlreadyExistsError(
                    f"{lines}: the database already holds {table.name} rows with these keys (or the export repeats "
                    "a key). Import into a database without the exported organizations."
                ) from error
            if isinstance(error, sa_exc.IntegrityError | sa_exc.DataError):
                raise InvalidInputError(f"{lines}: the database refused these {table.name} rows. {found}") from error
            raise found from error
        await self.conn.execute(text(f'TRUNCATE "{route.name}"'))
        self.written += len(rows)
        if self.progress is not None:
            self.progress(self.written)


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
