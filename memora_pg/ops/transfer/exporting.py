"""Export: one organization, or all of them, from one snapshot to a JSON Lines file.

The export reads one consistent snapshot (a read-only REPEATABLE READ transaction) through
server-side cursors, a batch of rows at a time, and the server writes each row's JSON: memory
stays constant whatever the size of the database. File writes are plain blocking calls on the
event loop's thread: this is an operation for the command line, not for a request path.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from contextlib import aclosing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO

from sqlalchemy import select

from memora_pg import driver
from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.errors import InvalidInputError, NotFoundError, database_errors
from memora_pg.ops.transfer.records import (
    BY_NAME,
    EXPORTED_TABLES,
    FORMAT,
    FORMAT_END,
    VERSION,
    Progress,
    StrPath,
    schema_state,
    select_records,
)
from memora_pg.schema import organizations

__all__ = ["EXPORT_BATCH_ROWS", "export"]

# Rows fetched per round trip of the export's cursors.
EXPORT_BATCH_ROWS = 500


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
    counts = dict.fromkeys(BY_NAME, 0)
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
        # One snapshot for every table, so that the export is consistent under concurrent writes.
        async with driver.transaction(engine, database.schema, snapshot=True) as conn:
            revision, dimensions = await schema_state(conn, database)
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
                batch: list[Any] = []
                async for row in conn.stream(select_records(table, org_id), batch=EXPORT_BATCH_ROWS):
                    batch.append(row[0])
                    if len(batch) == EXPORT_BATCH_ROWS:
                        yield table.name, batch
                        batch = []
                if batch:
                    yield table.name, batch


async def _organization_exists(conn: Connection, org_id: str) -> bool:
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
