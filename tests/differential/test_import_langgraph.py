"""``memora-pg import --from langgraph``: items written by LangGraph's own ``PostgresStore`` (langgraph-checkpoint-
postgres 3.2), imported as AutoGen-face entries, then found by namespace, key and search through ``PostgresMemory``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from sqlalchemy import make_url

from memora_pg import PostgresMemory, Settings
from memora_pg.db import Database
from memora_pg.embeddings import OpenAIEmbedder
from memora_pg.ops.importers.langgraph import LangGraphSource, import_langgraph
from tests.conftest import _create_database, _drop_database
from tests.differential.conftest import DIMS
from tests.fake_openai import FakeOpenAIServer

pytest.importorskip("langgraph.store.postgres", reason="runs in the differential environment (make test builds it)")

from langgraph.store.postgres import PostgresStore


def _plain(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _field_vectors(texts: list[str]) -> list[list[float]]:
    """LangGraph's own embedding of indexed fields (any model would do: the import embeds again)."""
    return [[float((hash(t) >> i) & 1) + 0.1 for i in range(8)] for t in texts]


@pytest.fixture
def databases(server_url: str) -> Any:
    names = [f"lg_src_{uuid.uuid4().hex[:8]}", f"lg_dst_{uuid.uuid4().hex[:8]}"]
    urls = [asyncio.run(_create_database(server_url, name)) for name in names]
    yield urls
    for name in names:
        asyncio.run(_drop_database(server_url, name))


async def _checksum(url: str) -> str:
    conn = await asyncpg.connect(_plain(url))
    try:
        return str(
            await conn.fetchval(
                "SELECT md5(coalesce((SELECT string_agg(s::text, '|' ORDER BY prefix, key) FROM store s), '') || "
                "coalesce((SELECT string_agg(v::text, '|' ORDER BY prefix, key, field_name) FROM store_vectors v), ''))"
            )
        )
    finally:
        await conn.close()


async def test_langgraph_items_are_findable_by_namespace_key_and_search(
    databases: list[str], fake_openai: FakeOpenAIServer
) -> None:
    source_url, target_url = databases
    with PostgresStore.from_conn_string(
        _plain(source_url), index={"dims": 8, "embed": _field_vectors, "fields": ["text"]}
    ) as store:
        store.setup()
        store.put(("users", "alice", "memories"), "m1", {"text": "Alice likes hiking in the Alps"})
        store.put(("users", "alice", "memories"), "m2", {"text": "not indexed", "n": 2}, index=False)
        store.put(("users", "bob", "prefs"), "theme", {"rev": 1, "text": "light"})
        store.put(("users", "bob", "prefs"), "theme", {"rev": 2, "text": "dark"})
        store.put(("docs",), "key.with.dots", {"text": "dotted", "meta": {"tags": ["a", "ü"], "score": 4.5}})
        store.put(("docs",), "gone", {"text": "deleted"})
        store.delete(("docs",), "gone")
        store.put(("tmp",), "flash", {"text": "short-lived"}, ttl=0.01)
        await asyncio.sleep(1.0)  # flash is past its TTL (still in the table: nothing swept it)

        before = await _checksum(source_url)
        embedder = OpenAIEmbedder("fake-model", base_url=fake_openai.base_url, api_key="test", dimensions=DIMS)
        database = Database(target_url, settings=Settings(database_url=target_url))
        try:
            source = LangGraphSource(source_url)
            dry = await import_langgraph(database, source, embedder, dry_run=True)
            assert (dry.added, dry.expired, dry.refused) == (4, 1, [])
            done = await import_langgraph(database, source, embedder, batch_size=2)
            assert (done.added, done.updated, done.unchanged, done.expired) == (4, 0, 0, 1)
            again = await import_langgraph(database, source, embedder)
            assert (again.added, again.updated, again.unchanged) == (0, 0, 4)
            store.put(("users", "bob", "prefs"), "theme", {"rev": 3, "text": "solarized"})
            later = await import_langgraph(database, source, embedder)
            assert (later.added, later.updated, later.unchanged) == (0, 1, 3)
        finally:
            await database.close()
        assert await _checksum(source_url) != before  # only the put above changed the source
        after_put = await _checksum(source_url)

    # by namespace and key, through the AutoGen face
    memory = PostgresMemory("users.alice.memories", database_url=target_url, embedder=embedder)
    bob = PostgresMemory("users.bob.prefs", database_url=target_url, embedder=embedder)
    docs = PostgresMemory("docs", database_url=target_url, embedder=embedder)
    try:
        listed = {c.metadata["langgraph_key"]: c.content for c in await memory.list() if c.metadata}
        assert listed == {"m1": {"text": "Alice likes hiking in the Alps"}, "m2": {"text": "not indexed", "n": 2}}
        (theme,) = await bob.list()
        assert theme.content == {"rev": 3, "text": "solarized"}
        assert theme.metadata is not None
        assert theme.metadata["langgraph_namespace"] == ["users", "bob", "prefs"]
        (dotted,) = await docs.list()
        assert dotted.content == {"text": "dotted", "meta": {"tags": ["a", "ü"], "score": 4.5}}
        # and by search
        found = await memory.query("hiking in the Alps")
        assert found.results[0].content == {"text": "Alice likes hiking in the Alps"}
    finally:
        for face in (memory, bob, docs):
            await face.close()
    assert await _checksum(source_url) == after_put  # reading never writes
