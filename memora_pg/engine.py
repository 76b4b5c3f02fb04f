"""Engines: a URL in any of the spellings people have, the embedded server when there is none, and an
asyncpg engine with memora_pg's pool, statement cache and connection checks."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import embedded, pool
from memora_pg.config import Settings
from memora_pg.errors import ConfigurationError

__all__ = [
    "CACHEABLE_STATEMENT_BYTES",
    "asyncpg_url",
    "create_engine",
    "create_engine_from_settings",
    "resolve_url",
    "scoped",
]

# The longest statement a connection's statement cache keeps (asyncpg's default is 15 KB).
CACHEABLE_STATEMENT_BYTES = 128 * 1024


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
        # asyncpg keeps no statement longer than 15 KB by default; a search's is about that long, and one
        # not kept is prepared and planned anew on every call.
        "max_cacheable_statement_size": CACHEABLE_STATEMENT_BYTES,
        "server_settings": {"application_name": "memora_pg"},
        "connection_class": pool.PeekableConnection,
    }
    if settings.statement_timeout_ms is not None:
        connect_args["server_settings"]["statement_timeout"] = str(settings.statement_timeout_ms)
    if settings.statement_cache_size == 0:
        # Behind pgbouncer in transaction mode no prepared statement may outlive its transaction.
        # With both caches off, asyncpg (>= 0.29) prepares SQLAlchemy's statements unnamed, so no
        # name can collide on a shared server connection and none is left behind there; unique
        # names (``prepared_statement_name_func``) would instead leave one named statement per
        # query on pgbouncer's server connections.
        connect_args["prepared_statement_cache_size"] = 0
    engine = create_async_engine(
        url,
        pool_size=settings.pool_size,
        max_overflow=settings.max_overflow,
        pool_timeout=settings.pool_timeout,
        pool_recycle=settings.pool_recycle,
        connect_args=connect_args,
    )
    if settings.pool_pre_ping:
        # A connection just opened, or just back in the pool, has just talked to the server.
        event.listen(engine.sync_engine, "connect", pool.note_checkin)
        event.listen(engine.sync_engine, "checkin", pool.note_checkin)
        event.listen(engine.sync_engine, "checkout", pool.pinger(settings.pool_pre_ping_idle))
    else:
        event.listen(engine.sync_engine, "checkout", pool.drop_closed_connection)
    return engine


async def create_engine_from_settings(settings: Settings) -> AsyncEngine:
    return create_engine(await resolve_url(settings), settings)


def scoped(engine: AsyncEngine, schema: str) -> AsyncEngine:
    """The same pool, with memora_pg's tables mapped into ``schema``."""
    return engine.execution_options(schema_translate_map={None: schema})
