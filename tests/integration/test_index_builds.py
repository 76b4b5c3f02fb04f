"""Index builds run without the application's statement timeout, and give their session back as it came."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import Settings, migrations
from memora_pg.db import Database
from memora_pg.ops import indexes

# Far shorter than the build below, which waits on a writer for a second.
TIMEOUT_MS = 300


@pytest.fixture
async def timed_out(fresh_database: str) -> AsyncIterator[tuple[Database, AsyncEngine]]:
    """A migrated database in exact mode, opened with a statement timeout, and a plain engine beside it."""
    engine = create_async_engine(fresh_database)
    await migrations.upgrade(engine, migrations.MigrationOptions())
    database = Database(
        settings=Settings(database_url=fresh_database, statement_timeout_ms=TIMEOUT_MS, pool_size=1, max_overflow=0)
    )
    await indexes.drop_hnsw(database)
    yield database, engine
    await database.close()
    await engine.dispose()


async def _outlast_the_timeout(engine: AsyncEngine, build: asyncio.Task[object]) -> None:
    """Hold a writer's lock on memories, which CREATE INDEX CONCURRENTLY waits for, past the timeout."""
    async with engine.begin() as writer:
        await writer.execute(text("LOCK TABLE memora.memories IN ROW EXCLUSIVE MODE"))
        await asyncio.sleep(TIMEOUT_MS * 3 / 1000)
        assert not build.done(), "the build did not wait for the writer"
    await build


async def test_index_build_outlasts_the_statement_timeout(timed_out: tuple[Database, AsyncEngine]) -> None:
    """`index build` (build_hnsw) is not cut short by Settings.statement_timeout_ms, which the session keeps after."""
    database, engine = timed_out
    await _outlast_the_timeout(engine, asyncio.create_task(indexes.build_hnsw(database)))
    assert (await indexes.state(database)).built_as(database.settings)
    async with database.transaction() as conn:
        assert await conn.scalar(text("SHOW statement_timeout")) == f"{TIMEOUT_MS}ms"
        assert await conn.scalar(text("SHOW maintenance_work_mem")) == "64MB"


async def test_missing_indexes_outlast_the_statement_timeout(timed_out: tuple[Database, AsyncEngine]) -> None:
    """build_missing (after a migration that deferred an index) is not cut short by the statement timeout."""
    database, engine = timed_out
    async with engine.begin() as conn:
        await conn.execute(text("DROP INDEX memora.ix_memories_user_recent"))
    await _outlast_the_timeout(engine, asyncio.create_task(indexes.build_missing(database)))
    async with engine.connect() as conn:
        found = await conn.scalar(text("SELECT to_regclass('memora.ix_memories_user_recent') IS NOT NULL"))
    assert found
