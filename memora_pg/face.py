"""What every face that embeds shares: its database, and its embedder chosen on first use.

``PgVectorDB`` and the AutoGen ``PostgresMemory`` take an embedder or none; with none, the offline
default (multilingual-e5-small) is made when a call first needs one, and a new database gets its
dimension (or the configured one, when the default embedder is not installed).
"""

from __future__ import annotations

from memora_pg.db import Database
from memora_pg.embeddings import Embedder, default_embedder, dimensions_for_new_database


class EmbeddingFace:
    """The database and the embedder of a face; the face sets ``_db`` and ``_embedder`` when it is made."""

    _db: Database
    _embedder: Embedder | None

    @property
    def database(self) -> Database:
        return self._db

    @property
    def embedder(self) -> Embedder:
        """The embedder; without one given, the offline default (multilingual-e5-small) on first use."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def new_database_dimensions(self) -> int:
        """The vector dimension a new database gets: the embedder's, or the configured one."""
        return dimensions_for_new_database(lambda: self.embedder, self._db.settings.embedding_dimensions)
