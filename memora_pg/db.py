"""Engines and units of work.

Every public method of the stores runs inside exactly one ``unit_of_work``: one
transaction on one pooled connection, committed when the block ends and rolled back
when anything raises, with driver errors translated into the package's family.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
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
