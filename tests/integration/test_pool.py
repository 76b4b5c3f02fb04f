"""The connection pool: its settings reach the engine, exhaustion is a typed error, dead connections are replaced."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, ValidationError
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import DatabaseError, PostgresGraphDB, Settings, pool
from memora_pg import driver as memora_driver
from memora_pg.embeddings import HashEmbedder
from memora_pg.ops.indexes import raise_build_memory
from memora_pg.pool import needs_ping, socket_has_news

SCALING_DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def _graph(settings: Settings, **pool: Any) -> PostgresGraphDB:
    """A graph that builds its own engine (and pool) from the settings."""
    return PostgresGraphDB(settings=settings.model_copy(update=pool), embedder=HashEmbedder(384))


async def test_an_exhausted_pool_is_a_database_error_about_the_pool(settings: Settings) -> None:
    """With the only connection held, the next call fails after pool_timeout with a DatabaseError naming the pool."""
    graph = _graph(settings, pool_size=1, max_overflow=0, pool_timeout=0.5)
    try:
        async with graph.database.transaction() as held:
            with pytest.raises(DatabaseError, match="MEMORA_PG_POOL_SIZE") as caught:
                await graph.get_all_organizations()
            assert await held.scalar(text("SELECT 1")) == 1
        assert isinstance(caught.value.__cause__, sa_exc.TimeoutError)
        assert "Pool size: 1" in str(caught.value)
        # The connection is back: the call succeeds (whatever other tests left in the shared database).
        assert isinstance(await graph.get_all_organizations(), list)
    finally:
        await graph.close()


async def _backend_pid(graph: PostgresGraphDB) -> int:
    async with graph.database.transaction() as conn:
        pid = await conn.scalar(text("SELECT pg_backend_pid()"))
    assert isinstance(pid, int)
    return pid


async def _terminate(database_url: str, pid: int) -> None:
    admin = create_async_engine(database_url)
    try:
        async with admin.connect() as conn:
            assert await conn.scalar(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
    finally:
        await admin.dispose()


async def test_pre_ping_replaces_a_connection_the_server_closed(database_url: str, settings: Settings) -> None:
    """With pool_pre_ping, a pooled connection the server has closed is replaced before use, unseen by the caller."""
    graph = _graph(settings, pool_size=1, max_overflow=0, pool_pre_ping=True)
    try:
        first = await _backend_pid(graph)
        await _terminate(database_url, first)
        assert await graph.get_all_organizations() == []
        assert await _backend_pid(graph) != first
    finally:
        await graph.close()


async def test_without_pre_ping_a_terminated_connection_is_replaced(database_url: str, settings: Settings) -> None:
    """Without pool_pre_ping, a connection the server terminated (asyncpg saw it close) is replaced at checkout."""
    graph = _graph(settings, pool_size=1, max_overflow=0, pool_pre_ping=False)
    try:
        before = await _backend_pid(graph)
        await _terminate(database_url, before)
        assert await graph.get_all_organizations() == []
        assert await _backend_pid(graph) != before
    finally:
        await graph.close()


def _environment_names() -> dict[str, str]:
    """Each MEMORA_PG_* variable and the setting it fills."""
    names = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [f"MEMORA_PG_{field_name.upper()}"]
        names.update({choice: field_name for choice in choices if isinstance(choice, str) and choice.isupper()})
    return names


def test_documented_defaults_are_the_settings_defaults() -> None:
    """Every variable docs/scaling.md lists with a default has exactly that default in Settings."""
    rows = re.findall(r"^\| `(MEMORA_PG_[A-Z_]+)` \| `([^`]*)` \|", SCALING_DOC.read_text(), flags=re.MULTILINE)
    assert len(rows) >= 10
    names = _environment_names()
    for variable, documented in rows:
        field = Settings.model_fields[names[variable]]
        default = "unset" if field.default is None else str(field.default)
        default = default.lower() if isinstance(field.default, bool) else default
        assert documented == default, variable


class _Record:
    def __init__(self) -> None:
        self.info: dict[str, Any] = {}


def test_a_connection_back_in_the_pool_just_now_is_not_pinged() -> None:
    """needs_ping: a connection never checked in, or idle for POOL_PRE_PING_IDLE seconds or more, is pinged."""
    record = _Record()
    assert needs_ping(record, 0.5, now=100.0)
    record.info["memora_pg_checked_in"] = 100.0
    assert not needs_ping(record, 0.5, now=100.4)
    assert needs_ping(record, 0.5, now=100.5)
    assert needs_ping(record, 0.0, now=100.0)
    assert needs_ping(None, 0.5, now=100.0)


async def test_pings_are_sent_only_after_the_idle_window(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Back-to-back calls send no ping; a call after the idle window sends one (and it still works)."""
    pings: list[object] = []
    original = pool._ping

    def counting(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        pings.append(record)
        original(dbapi_connection, record, proxy)

    monkeypatch.setattr(pool, "_ping", counting)
    graph = _graph(settings, pool_size=1, max_overflow=0, pool_pre_ping=True, pool_pre_ping_idle=0.3)
    try:
        for _ in range(3):  # a new connection, then one back in the pool just now
            await graph.get_all_organizations()
        assert pings == []
        await asyncio.sleep(0.35)
        assert await graph.get_all_organizations() == []
        assert len(pings) == 1
    finally:
        await graph.close()


async def test_a_connection_closed_by_the_server_shows_on_its_socket(database_url: str, settings: Settings) -> None:
    """socket_has_news: silent for a live idle connection; true once the server has closed it."""
    graph = _graph(settings, pool_size=1, max_overflow=0)
    try:
        async with graph.database.transaction() as conn:
            driver = conn.raw
            pid = await conn.scalar(text("SELECT pg_backend_pid()"))
        assert not socket_has_news(driver)
        await _terminate(database_url, pid)
        assert socket_has_news(driver)
        assert await graph.get_all_organizations() == []
    finally:
        await graph.close()


@pytest.mark.parametrize(("configured", "expected"), [("256MB", "256MB"), ("1MB", "64MB")])
async def test_index_builds_get_their_memory_and_never_less(
    engine: AsyncEngine, settings: Settings, configured: str, expected: str
) -> None:
    """raise_build_memory: maintenance_work_mem of INDEX_BUILD_MEMORY for the transaction, never below the server's."""
    own = settings.model_copy(update={"index_build_memory": configured})
    async with memora_driver.transaction(engine, "memora") as conn:
        await conn.execute(text("SET LOCAL maintenance_work_mem = '64MB'"))
        await raise_build_memory(conn, own, local=True)
        assert await conn.scalar(text("SHOW maintenance_work_mem")) == expected
    async with engine.connect() as conn:
        assert await conn.scalar(text("SHOW maintenance_work_mem")) != "256MB"


def test_index_build_memory_must_be_a_postgresql_size() -> None:
    """A size PostgreSQL accepts (a number and kB, MB, GB or TB), or a ValidationError."""
    for bad in ("1gb", "lots", "0GB", "1.5GB"):
        with pytest.raises(ValidationError):
            Settings(index_build_memory=bad)
