"""Reading another store's PostgreSQL tables without touching them: one read-only REPEATABLE READ
transaction (a snapshot: a SELECT's share lock and nothing more), rows in batches through a cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import make_url

from memora_pg import catalog
from memora_pg.db import Database
from memora_pg.embeddings import Embedder
from memora_pg.errors import ConfigurationError, InvalidInputError, NotFoundError

S = TypeVar("S", bound="Snapshot")

# The rows of a source's table (a qualified name, quoted).
COUNT = "SELECT count(*) FROM {table}"


class Snapshot:
    """A connection to the source holding one read-only snapshot, rolled back (never committed) at the end.

    ``tables`` must exist (else ``NotFoundError`` naming ``what``); their names are SQL identifiers,
    quoted, optionally schema-qualified.
    """

    def __init__(self, url: str, *tables: str, what: str) -> None:
        self.url = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.tables = tables
        self.what = what

    async def __aenter__(self: S) -> S:
        try:
            self.conn = await asyncpg.connect(self.url)
        except (OSError, asyncpg.PostgresError) as error:
            raise ConfigurationError(f"cannot connect to the {self.what}'s database: {error}") from error
        self.transaction = self.conn.transaction(isolation="repeatable_read", readonly=True)
        await self.transaction.start()
        for table in self.tables:
            if not await self.conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
                await self.__aexit__()
                raise NotFoundError(f"the {self.what} has no table {table}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.transaction.rollback()
        finally:
            await self.conn.close()

    async def dimensions(self, table: str, column: str) -> int | None:
        """The declared dimension of a vector column, None without one."""
        kind = await self.conn.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass($1) AND attname = $2",
            table,
            column,
        )
        digits = "".join(c for c in str(kind or "") if c.isdigit())
        return int(digits) if digits else None

    async def count(self, query: str) -> int:
        return int(await self.conn.fetchval(query))

    async def batches(self, query: str, batch_size: int) -> AsyncIterator[list[Any]]:
        batch: list[Any] = []
        async for row in self.conn.cursor(query, prefetch=batch_size):
            batch.append(row)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


async def target_ready(database: Database, embedder: Embedder, *, dry_run: bool, table: str) -> bool:
    """Whether the target holds memora_pg's schema, with the embedder's dimension in ``table``.

    An import brings the schema to head first; a dry run writes nothing, not even the schema, so
    into a database without it every row is new (False).
    """
    if dry_run:
        async with database.transaction(read_only=True) as conn:
            if await catalog.vector_dimensions(conn, database.schema, table) is None:
                return False
    else:
        await database.ensure_schema(embedder.dimensions)
    await database.check_embedder(embedder.dimensions, table=table)
    return True


@dataclass(frozen=True)
class Refused:
    """A source row that cannot be imported, named by its key in the source."""

    source: str
    key: str
    reason: str


@dataclass
class Counts:
    """What an import did (or, dry, would do): its counters (a subclass's fields) and its refusals."""

    refused: list[Refused] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        counts = {k: v for k, v in vars(self).items() if k != "refused"}
        return {**counts, "refused": [vars(r) for r in self.refused]}


def check_batch_size(batch_size: object) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10_000:
        raise InvalidInputError(f"batch_size must be an integer from 1 to 10,000, not {batch_size!r}")
