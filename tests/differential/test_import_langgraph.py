"""``memora-pg import --from langgraph``: items written by LangGraph's own ``PostgresStore`` (langgraph-checkpoint-
postgres 3.2), imported as MemoraStore's items (the default) and read back unchanged, or as AutoGen-face entries
found by namespace, key and search through ``PostgresMemory``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import asyncpg
import pytest
from sqlalchemy import make_url

from memora_pg import PostgresMemory, Settings
from memora_pg.db import Database
from memora_pg.embeddings import OpenAIEmbedder
from memora_pg.langgraph import MemoraStore
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


def _cli(*args: str) -> Any:
    command = [sys.executable, "-m", "memora_pg", "import", "--from", "langgraph", "--json", *args]
    done = subprocess.run(  # noqa: S603 - our own command line
        command, env={**os.environ, "OPENAI_API_KEY": "test"}, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _as_read(item: Any) -> tuple[Any, ...]:
    return (item.namespace, item.key, item.value, item.created_at, item.updated_at)


async def test_what_langgraph_wrote_memora_store_reads_back_unchanged(
    databases: list[str], fake_openai: FakeOpenAIServer
) -> None:
    source_url, target_url = databases
    index = {"dims": 8, "embed": _field_vectors, "fields": ["text", "tags[*]"]}
    with PostgresStore.from_conn_string(_plain(source_url), index=index, ttl={"default_ttl": 60}) as theirs:
        theirs.setup()
        theirs.put(("users", "alice", "memories"), "m1", {"text": "Alice likes hiking in the Alps", "tags": ["a", "b"]})
        theirs.put(("users", "alice", "memories"), "m2", {"text": "not indexed", "n": 2}, index=False)
        theirs.put(("users", "bob", "prefs"), "theme", {"rev": 1, "text": "light"})
        theirs.put(("users", "bob", "prefs"), "theme", {"rev": 2, "text": "dark"}, ttl=None)
        theirs.put(("docs",), "key.with.dots", {"text": "dotted", "meta": {"tags": ["a", "ü"]}}, ttl=None)
        theirs.put(("docs",), "gone", {"text": "deleted"})
        theirs.delete(("docs",), "gone")
        theirs.put(("tmp",), "flash", {"text": "short-lived"}, ttl=0.01)
        await asyncio.sleep(1.0)  # flash is past its TTL (still in the table: nothing swept it)
        # PostgresStore still returns the expired item (nothing swept it); the import leaves it out, by design
        wanted = sorted(_as_read(item) for item in theirs.search((), limit=100) if item.key != "flash")
        namespaces = [namespace for namespace in theirs.list_namespaces() if namespace != ("tmp",)]
        assert len(wanted) == 4

        target = ["--database-url", target_url, "--source-url", source_url]
        embedding = ["--embedder", f"openai:fake-model:{DIMS}", "--base-url", fake_openai.base_url]
        assert _cli(*target, *embedding, "--dry-run")["added"] == 4
        first = _cli(*target, *embedding, "--batch-size", "2")
        assert (first["added"], first["updated"], first["unchanged"], first["expired"]) == (4, 0, 0, 1)
        assert _cli(*target, *embedding)["unchanged"] == 4

        embedder = OpenAIEmbedder("fake-model", base_url=fake_openai.base_url, api_key="test", dimensions=DIMS)
        with MemoraStore.from_conn_string(target_url, embedder=embedder) as ours:
            assert sorted(_as_read(item) for item in ours.search((), limit=100)) == wanted
            assert sorted(ours.list_namespaces()) == sorted(namespaces)
            m1 = ours.get(("users", "alice", "memories"), "m1")
            assert m1 is not None
            assert _as_read(m1) == _as_read(theirs.get(("users", "alice", "memories"), "m1", refresh_ttl=False))
            # embedded as LangGraph indexed them: m1's fields (text and each tag), m2 not at all
            hits = ours.search(("users", "alice"), query="hiking in the Alps")
            assert [hit.key for hit in hits] == ["m1"]
            before = ours.get(("users", "bob", "prefs"), "theme")
            assert before is not None

            # a change in the source becomes a new version; the one it replaces stays, as of its time
            theirs.put(("users", "bob", "prefs"), "theme", {"rev": 3, "text": "solarized"})
            later = _cli(*target, *embedding)
            assert (later["added"], later["updated"], later["unchanged"]) == (0, 1, 3)
            after = ours.get(("users", "bob", "prefs"), "theme")
            assert after is not None
            assert after.value == {"rev": 3, "text": "solarized"}
            assert after.created_at == before.created_at
            was = ours.get(("users", "bob", "prefs"), "theme", as_of=before.updated_at)
            assert was is not None
            assert was.value == {"rev": 2, "text": "dark"}

    rows = await _target_rows(target_url)
    # each item's time to live, and the text of the fields LangGraph embedded of it (in the order of their
    # names; a list's texts are one field), none for the item it did not index
    hour = 3_600_000
    assert rows == {
        ("docs", "key.with.dots"): (None, "dotted"),
        ("users.alice.memories", "m1"): (hour, "a\nb\nAlice likes hiking in the Alps"),
        ("users.alice.memories", "m2"): (hour, None),
        ("users.bob.prefs", "theme"): (hour, "solarized"),
    }


async def _target_rows(url: str) -> dict[tuple[str, str], tuple[Any, str | None]]:
    """The current items' time to live and the text each was embedded by."""
    conn = await asyncpg.connect(_plain(url))
    try:
        rows = await conn.fetch(
            "SELECT namespace, key, ttl_ms, indexed_text FROM memora.store_items WHERE superseded_at IS NULL"
        )
    finally:
        await conn.close()
    return {(r["namespace"], r["key"]): (r["ttl_ms"], r["indexed_text"]) for r in rows}
