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

from typing import TYPE_CHECKING, Any

from memora_pg.db import Database
from memora_pg.embeddings import Embedder, default_embedder, dimensions_for_new_database

if TYPE_CHECKING:
    from typing_extensions import Self


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
