"""What every face shares: its database, and one lifecycle (entered, set up, closed) for all of them.

A face is entered with ``async with``, which makes it ready: the schema checked at head (migrated
there on this database's first use, when the settings allow it: ``auto_migrate``) and the
embedder's dimension checked against the database's. A face that is not entered gets ready the
same way before its first statement. ``setup()`` migrates now, whatever ``auto_migrate`` says: the
explicit step of a deployment that migrates with its own role. ``close()`` releases the connections
of a database the face made.

``PgVectorDB`` and the AutoGen ``PostgresMemory`` take an embedder or none; with none, the offline
default (multilingual-e5-small) is made when a call first needs one, and a new database gets its
dimension (or the configured one, when the default embedder is not installed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.embeddings import Embedder, default_embedder, dimensions_for_new_database
from memora_pg.errors import NotFoundError
from memora_pg.graph import audit

if TYPE_CHECKING:
    from typing_extensions import Self

T = TypeVar("T")


class Face:
    """A face's database and lifecycle; the face sets ``_db`` (and ``_owns_db`` for a given one)."""

    _db: Database
    # False when the caller gave the Database (its owner closes it).
    _owns_db: bool = True

    @property
    def database(self) -> Database:
        """The database this face keeps its memory in."""
        return self._db

    def new_database_dimensions(self) -> int:
        """The vector dimension a new database gets."""
        return self._db.settings.embedding_dimensions

    async def check_dimensions(self) -> int | None:
        """The embedder's dimension checked against the database's (a face without one checks nothing)."""
        return None

    async def ensure_ready(self) -> None:
        """The schema at head (migrated on the database's first use, if ``auto_migrate`` allows it; else a
        ``SchemaNotMigratedError``) and the embedder checked; cheap once done."""
        await self._db.ensure_schema(self.new_database_dimensions)
        await self.check_dimensions()

    async def setup(self, *args: Any, **kwargs: Any) -> None:
        """Bring the schema to the current migration head now; idempotent and safe from several processes.

        On a new database the vector column gets the dimension of the embedder; on an existing
        one, an embedder of another dimension is a ``ConfigurationError`` naming both numbers.
        """
        await self._db.migrate(self.new_database_dimensions())
        await self.check_dimensions()

    async def close(self) -> None:
        """Release the connections of a database this face made; idempotent."""
        if self._owns_db:
            await self._db.close()

    # -- one transaction of the face's database --------------------------------------------

    async def _audited(
        self,
        org_id: str,
        write: Callable[[Connection], Awaitable[T | None]],
        *,
        method: str,
        missing: str,
        ids: Callable[[T], dict[str, Any]],
    ) -> T:
        """``write`` and its audit row (naming the ``ids`` of what it wrote) in one transaction; a
        NotFoundError saying ``missing`` when it wrote nothing (what it needed is not there)."""
        async with self._db.transaction(org_id=org_id) as conn:
            written = await write(conn)
            if written is not None:
                await self._record_audit(conn, org_id=org_id, method=method, **ids(written))
        if written is None:
            raise NotFoundError(missing)
        return written

    async def _record_audit(self, conn: Connection, *, org_id: str, method: str, **fields: Any) -> None:
        """The call's audit row, in its transaction (unless auditing is off)."""
        await audit.record(conn, org_id=org_id, audited=audit.entry(self._db.settings.audit, method, **fields))

    async def _read(self, org_id: str, read: Callable[[Connection], Awaitable[T]]) -> T:
        """What ``read`` returns, in a read-only transaction of the organization."""
        async with self._db.transaction(read_only=True, org_id=org_id) as conn:
            return await read(conn)

    async def _found(self, org_id: str, read: Callable[[Connection], Awaitable[T | None]], *, missing: str) -> T:
        """What ``read`` finds, in a read-only transaction; a NotFoundError saying ``missing`` when nothing."""
        found = await self._read(org_id, read)
        if found is None:
            raise NotFoundError(missing)
        return found

    async def __aenter__(self) -> Self:
        await self.ensure_ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class EmbeddingFace(Face):
    """A face that embeds: its embedder, chosen on first use; the face sets ``_embedder`` when it is made."""

    _embedder: Embedder | None
    # The table whose vector column the embedder writes.
    _vector_table = "memories"

    @property
    def embedder(self) -> Embedder:
        """The embedder; without one given, the offline default (multilingual-e5-small) on first use."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def new_database_dimensions(self) -> int:
        """The vector dimension a new database gets: the embedder's, or the configured one."""
        return dimensions_for_new_database(lambda: self.embedder, self._db.settings.embedding_dimensions)

    async def check_dimensions(self) -> int:
        """The database's vector dimension (read once); an embedder of another one is a ConfigurationError
        naming both."""
        return await self._db.check_embedder(self.embedder.dimensions, table=self._vector_table)
