"""Integration fixtures: every test that uses the session database leaves its tables empty."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg.migrations import MigrationOptions, upgrade
from memora_pg.schema import TENANT_TABLES
from tests.conftest import TEST_SCHEMA


@pytest.fixture(autouse=True)
async def clean_tables(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Empty every tenant table of the session database after each test that uses it.

    Autouse fixtures are set up first, so this one is torn down last: after the test's stores
    and engines are closed. A test that never asks for ``database_url`` (directly or through
    another fixture) does not start the server for it.
    """
    if "database_url" not in request.fixturenames:
        yield
        return
    database_url: str = request.getfixturevalue("database_url")
    yield
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            tables = ", ".join(f"{TEST_SCHEMA}.{table}" for table in TENANT_TABLES)
            await conn.execute(text(f"TRUNCATE {tables}"))
    finally:
        await engine.dispose()


APP_ROLE = "memora_app_test"


@pytest.fixture
async def rls_database(fresh_database: str) -> AsyncIterator[tuple[str, str]]:
    """A migrated database and a URL for a non-owner role, as an application would connect: it may read
    and write the tables, and create nothing."""
    engine = create_async_engine(fresh_database)
    await upgrade(engine, MigrationOptions(schema="memora"))
    async with engine.begin() as conn:
        exists = await conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE})
        if not exists:
            await conn.execute(text(f"CREATE ROLE {APP_ROLE} LOGIN"))
        await conn.execute(text(f"GRANT USAGE ON SCHEMA memora TO {APP_ROLE}"))
        await conn.execute(text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA memora TO {APP_ROLE}"))
        await conn.execute(text(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA memora TO {APP_ROLE}"))
    await engine.dispose()
    app_url = make_url(fresh_database).set(username=APP_ROLE).render_as_string(hide_password=False)
    yield fresh_database, app_url
    engine = create_async_engine(fresh_database)
    async with engine.begin() as conn:
        await conn.execute(text(f"REASSIGN OWNED BY {APP_ROLE} TO CURRENT_USER"))
        await conn.execute(text(f"DROP OWNED BY {APP_ROLE}"))
    await engine.dispose()
