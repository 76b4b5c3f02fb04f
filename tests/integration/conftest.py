"""Integration fixtures: every test that uses the session database leaves its tables empty."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

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
