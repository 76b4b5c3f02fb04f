"""Engines and units of work.

Every public method of the stores runs inside exactly one ``unit_of_work``: one
transaction on one pooled connection, committed when the block ends and rolled back
when anything raises, with driver errors translated into the package's family.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

from pydantic import SecretStr
from sqlalchemy import TextClause, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from memora_pg import embedded
from memora_pg.config import Settings
from memora_pg.errors import ConfigurationError, database_errors


def asyncpg_url(url: str) -> str:
    """Accept the URL spellings people have (postgres://, postgresql://, +psycopg) and use asyncpg."""
    try:
        parsed = make_url(url)
    except Exception as error:
        raise ConfigurationError("The database URL cannot be parsed.") from error
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigurationError(f"memora_pg needs PostgreSQL, not {parsed.get_backend_name()!r}.")
    query = dict(parsed.query)
    # libpq's sslmode is asyncpg's ssl
    if "sslmode" in query:
        query["ssl"] = query.pop("sslmode")
    return parsed.set(drivername="postgresql+asyncpg", query=query).render_as_string(hide_password=False)


async def resolve_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's (started if needed, off the event loop)."""
    configured = settings.url()
    if configured:
        return asyncpg_url(configured)
    return await asyncio.to_thread(
        embedded.ensure_running, settings.embedded_data_dir, settings.embedded_postgres_version
    )


def create_engine(url: str, settings: Settings) -> AsyncEngine:
    connect_args: dict[str, Any] = {
        "statement_cache_size": settings.statement_cache_size,
        "server_settings": {"application_name": "memora_pg"},
    }
    if settings.statement_timeout_ms is not None:
        connect_args["server_settings"]["statement_timeout"] = str(settings.statement_timeout_ms)
    if settings.statement_cache_size == 0:
        # Behind pgbouncer in transaction mode no prepared statement may outlive its transaction.
        connect_args["prepared_statement_cache_size"] = 0
    return create_async_engine(
        url,
        pool_size=settings.pool_size,
        max_overflow=settings.max_overflow,
        pool_timeout=settings.pool_timeout,
        pool_recycle=settings.pool_recycle,
        pool_pre_ping=settings.pool_pre_ping,
        connect_args=connect_args,
    )


async def create_engine_from_settings(settings: Settings) -> AsyncEngine:
    return create_engine(await resolve_url(settings), settings)


def scoped(engine: AsyncEngine, schema: str) -> AsyncEngine:
    """The same pool, with memora_pg's tables mapped into ``schema``."""
    return engine.execution_options(schema_translate_map={None: schema})


@asynccontextmanager
async def unit_of_work(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One transaction: committed at the end of the block, rolled back if it raises."""
    with database_errors():
        async with engine.begin() as conn:
            yield conn


def count_statements(engine: AsyncEngine) -> list[str]:
    """Record every statement sent through ``engine`` (for tests and benchmarks of round trips)."""
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    return sent


class Database:
    """One database for the graph and its vector store: the engine, created on first use.

    An engine passed in stays the caller's (``close()`` leaves it open); one made from a URL
    or the embedded server is disposed by ``close()``. The graph and the vector store it
    creates share one ``Database``, so they share the pool and the transactions.
    """

    def __init__(self, database: str | AsyncEngine | None = None, *, settings: Settings) -> None:
        if isinstance(database, str):
            settings = settings.model_copy(update={"database_url": SecretStr(database)})
        self.settings = settings
        self._given = database if isinstance(database, AsyncEngine) else None
        self._raw: AsyncEngine | None = self._given
        self._scoped: AsyncEngine | None = scoped(self._given, settings.db_schema) if self._given else None
        self._lock = asyncio.Lock()
        self._dimensions: dict[str, int] = {}
        self.closed = False

    @property
    def schema(self) -> str:
        return self.settings.db_schema

    async def engine(self) -> AsyncEngine:
        """The engine, mapped into memora_pg's schema; started (and the embedded server too) on first use."""
        if self._scoped is None:
            async with self._lock:
                if self._scoped is None:
                    self._raw = await create_engine_from_settings(self.settings)
                    self._scoped = scoped(self._raw, self.schema)
        return self._scoped

    async def raw_engine(self) -> AsyncEngine:
        await self.engine()
        assert self._raw is not None
        return self._raw

    def identity(self) -> tuple[str, str] | None:
        """Which database and schema this is, once the engine exists (to recognise a shared one)."""
        if self._raw is None:
            return None
        return (self._raw.url.render_as_string(hide_password=True), self.schema)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction on a pooled connection; driver errors come out as the package's errors."""
        engine = await self.engine()
        async with unit_of_work(engine) as conn:
            yield conn

    async def migrate(self, dimensions: int | None = None) -> None:
        """Bring the schema to head; on a new database the vector columns get ``dimensions``."""
        from memora_pg import migrations

        options = migrations.MigrationOptions.from_settings(self.settings, dimensions)
        engine = await self.raw_engine()
        with database_errors():
            await migrations.upgrade(engine, options)
        self._dimensions.clear()

    async def check_embedder(self, embedder_dimensions: int, table: str = "memories") -> int:
        """The dimension of ``table``'s vector column (read once); another dimension is a ConfigurationError."""
        stored = self._dimensions.get(table)
        if stored is None:
            async with self.transaction() as conn:
                found = await conn.scalar(
                    text(
                        "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(:t) AND attname = 'embedding'"
                    ),
                    {"t": f'"{self.schema}".{table}'},
                )
            if found is None:
                raise ConfigurationError(
                    f"The schema {self.schema!r} has no {table} table: call setup() or run 'alembic upgrade head'."
                )
            stored = self._dimensions[table] = int(found)
        if embedder_dimensions != stored:
            raise ConfigurationError(
                f"The embedder makes vectors of {embedder_dimensions} dimensions but the database stores {stored}: "
                f"use an embedder of {stored} dimensions, or re-embed the database for the new one."
            )
        return stored

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._given is None and self._raw is not None:
            await self._raw.dispose()


@lru_cache(maxsize=512)
def _in_schema(template: str, schema: str) -> TextClause:
    return text(template.replace("{schema}", f'"{schema}"'))


def sql(conn: AsyncConnection, template: str) -> TextClause:
    """A named SQL constant with ``{schema}`` set to the connection's schema (a validated identifier)."""
    schema = conn.sync_connection.get_execution_options()["schema_translate_map"][None]  # type: ignore[union-attr]
    return _in_schema(template, schema)


def from_json(value: Any) -> Any:
    """A json column's value: asyncpg through SQLAlchemy decodes it already, other drivers may not."""
    return json.loads(value) if isinstance(value, str | bytes) else value
