"""Fixtures of the differential tests: the real mem0ai and memora_pg side by side on one server.

These tests run in ``.venv-diff`` (``make test`` builds it), where mem0ai 2.2.x, AutoGen
AgentChat and autogen-ext are installed beside memora_pg. Both sides embed through the same
local fake OpenAI server, so they see identical vectors; neither reaches the network.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import make_url

from tests.conftest import _create_database, _drop_database
from tests.fake_openai import FakeOpenAIServer

# mem0 reads these when it is imported: no telemetry, and its config folder in a temporary place.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="mem0-dir-"))

DIMS = 64
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?$")


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """One fake OpenAI server for the session: hashed embeddings, scripted chat answers."""
    with FakeOpenAIServer(DIMS) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_script(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reset()


def _psycopg(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def two_databases(server_url: str) -> Iterator[tuple[str, str]]:
    """A database for mem0's pgvector store and one for memora_pg, on the same test server."""
    names = (f"diff_mem0_{uuid.uuid4().hex[:8]}", f"diff_ours_{uuid.uuid4().hex[:8]}")
    urls = tuple(asyncio.run(_create_database(server_url, name)) for name in names)
    yield urls[0], urls[1]
    for name in names:
        asyncio.run(_drop_database(server_url, name))


@pytest.fixture
def store_urls(server_url: str) -> Iterator[tuple[str, str]]:
    """Two new databases of the test server: one for LangGraph's PostgresStore, one for MemoraStore."""
    names = [f"lg_theirs_{uuid.uuid4().hex[:8]}", f"lg_ours_{uuid.uuid4().hex[:8]}"]
    made = [asyncio.run(_create_database(server_url, name)) for name in names]
    yield made[0], made[1]
    for name in names:
        asyncio.run(_drop_database(server_url, name))


def _llm(base_url: str) -> dict[str, Any]:
    return {"provider": "openai", "config": {"model": "fake-model", "api_key": "test", "openai_base_url": base_url}}


def _embedder(base_url: str) -> dict[str, Any]:
    return {
        "provider": "openai",
        "config": {"model": "fake-model", "api_key": "test", "openai_base_url": base_url, "embedding_dims": DIMS},
    }


def mem0_config(url: str, collection: str, base_url: str, history: str) -> dict[str, Any]:
    """mem0ai's own configuration: its pgvector store on ``url``, its SQLite history at ``history``."""
    return {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_string": _psycopg(url),
                "collection_name": collection,
                "embedding_model_dims": DIMS,
                "hnsw": False,
                "diskann": False,
            },
        },
        "embedder": _embedder(base_url),
        "llm": _llm(base_url),
        "history_db_path": history,
    }


def ours_config(url: str, collection: str, base_url: str) -> dict[str, Any]:
    """The same configuration for memora_pg.Memory (its history lives in PostgreSQL)."""
    return {
        "vector_store": {
            "provider": "pgvector",
            "config": {"connection_string": url, "collection_name": collection, "embedding_model_dims": DIMS},
        },
        "embedder": _embedder(base_url),
        "llm": _llm(base_url),
    }


@pytest.fixture
def collection() -> str:
    return f"c{uuid.uuid4().hex[:12]}"


@pytest.fixture
def theirs(two_databases: tuple[str, str], collection: str, fake_openai: FakeOpenAIServer, tmp_path: Any) -> Any:
    """mem0ai's ``Memory`` on its pgvector store, a collection of its own per test."""
    from mem0 import Memory as Mem0Memory

    memory = Mem0Memory.from_config(
        mem0_config(two_databases[0], collection, fake_openai.base_url, str(tmp_path / "history.db"))
    )
    yield memory
    memory.vector_store.delete_col()
    memory.close()


@pytest.fixture
def ours(two_databases: tuple[str, str], collection: str, fake_openai: FakeOpenAIServer) -> Any:
    """memora_pg's ``Memory`` with the same configuration, a collection of its own per test."""
    from memora_pg.mem0 import Memory

    memory = Memory.from_config(ours_config(two_databases[1], collection, fake_openai.base_url))
    yield memory
    memory.close()


@pytest.fixture
def both(theirs: Any, ours: Any) -> tuple[Any, Any]:
    return theirs, ours


# -- normalising results -----------------------------------------------------------------------


class Ids:
    """Maps each side's memory ids to stable names (m0, m1, ...) in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        return self.names.setdefault(value, f"m{len(self.names)}")


def norm(value: Any, ids: Ids | None = None, *, scores: bool = True) -> Any:
    """A result with ids renamed, ISO times replaced by ``"<time>"`` and, unless ``scores``, scores dropped."""
    ids = ids or Ids()
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("id", "memory_id") and isinstance(item, str):
                out[key] = ids(item)
            elif key == "score" and not scores:
                continue
            elif key == "score" and isinstance(item, float):
                out[key] = round(item, 4)
            else:
                out[key] = norm(item, ids, scores=scores)
        return out
    if isinstance(value, list):
        return [norm(item, ids, scores=scores) for item in value]
    if isinstance(value, str) and ISO.match(value):
        return "<time>"
    return value


def outcome(call: Any) -> Any:
    """The call's result, or ``("raises", ExceptionKind)`` with ValueError's family folded together."""
    try:
        return call()
    except ValueError:
        return ("raises", "ValueError")
    except Exception as error:  # the kind is what the comparison is about
        return ("raises", type(error).__name__)
