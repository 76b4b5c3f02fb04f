"""``memora-pg import --from mem0``: data written by the real mem0ai 2.2.1 (its pgvector store and SQLite
history), imported, then read back through both libraries' own ``get_all`` and ``history``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import make_url

from memora_pg import Settings
from memora_pg.db import Database
from memora_pg.embeddings import OpenAIEmbedder
from memora_pg.errors import ConfigurationError, EmbeddingError
from memora_pg.mem0 import Memory
from memora_pg.ops import indexes
from memora_pg.ops.importers.mem0 import Mem0Source, import_mem0
from memora_pg.ops.importers.mem0_verify import verify_mem0
from tests.conftest import _create_database, _drop_database
from tests.differential.conftest import DIMS, mem0_config, ours_config
from tests.fake_openai import FakeOpenAIServer

pytest.importorskip("mem0", reason="runs in the differential environment (make test builds .venv-diff)")

YESTERDAY = (date.today() - timedelta(days=1)).isoformat()
NEXT_YEAR = (date.today() + timedelta(days=365)).isoformat()


def _plain(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def source(two_databases: tuple[str, str], fake_openai: FakeOpenAIServer, tmp_path: Path) -> Any:
    """A mem0ai Memory with a bit of everything: users, an agent alone, odd metadata, an expired memory,
    one updated twice, one deleted."""
    from mem0 import Memory as Mem0Memory

    collection = f"src{uuid.uuid4().hex[:10]}"
    history = tmp_path / "history.db"
    theirs = Mem0Memory.from_config(mem0_config(two_databases[0], collection, fake_openai.base_url, str(history)))

    def add(text: str, **kwargs: Any) -> str:
        return str(theirs.add(text, infer=False, **kwargs)["results"][0]["id"])

    ids = {
        "tea": add("Likes green tea", user_id="alice", metadata={"topic": "drinks", "level": 3}),
        "paris": add("Lives in Paris", user_id="alice", agent_id="concierge", run_id="r1"),
        "cold": add("Has a cold", user_id="alice", expiration_date=YESTERDAY),
        "trip": add("Trip to Oslo", user_id="bob", expiration_date=NEXT_YEAR, metadata={"nested": {"a": [1, "ü"]}}),
        "style": add("Answers tersely", agent_id="concierge"),
        "gone": add("Owns a bike", user_id="bob"),
    }
    theirs.update(ids["paris"], "Lives in Lyon")
    theirs.update(ids["paris"], "Lives in Berlin")
    theirs.delete(ids["gone"])
    yield theirs, Mem0Source(url=two_databases[0], collection=collection, history_db=history), ids
    theirs.vector_store.delete_col()
    theirs.close()


@pytest.fixture
def target(server_url: str) -> Any:
    name = f"diff_import_{uuid.uuid4().hex[:8]}"
    url = asyncio.run(_create_database(server_url, name))
    yield url
    asyncio.run(_drop_database(server_url, name))


def _embedder(fake_openai: FakeOpenAIServer) -> OpenAIEmbedder:
    return OpenAIEmbedder("fake-model", base_url=fake_openai.base_url, api_key="test", dimensions=DIMS)


async def _checksum(source: Mem0Source) -> tuple[str, str]:
    conn = await asyncpg.connect(_plain(source.url))
    try:
        rows = await conn.fetchval(f"SELECT md5(string_agg(t::text, '|' ORDER BY id)) FROM \"{source.collection}\" t")
    finally:
        await conn.close()
    assert source.history_db is not None
    return str(rows), hashlib.sha256(source.history_db.read_bytes()).hexdigest()


def _items(memory: Any, **filters: Any) -> list[tuple[Any, ...]]:
    found = memory.get_all(filters=filters, top_k=100, show_expired=True)["results"]
    return sorted(
        (m["id"], m["memory"], m.get("user_id"), m.get("agent_id"), m.get("run_id"), m.get("metadata")) for m in found
    )


async def _analyzed(target: str) -> bool:
    """Whether the target's memories have statistics (the search of a large scope reads them)."""
    conn = await asyncpg.connect(_plain(target))
    try:
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_stats WHERE schemaname = 'memora' AND tablename = 'memories'"
        )
    finally:
        await conn.close()
    return bool(found)


async def test_import_is_whole_verified_and_idempotent(source: Any, target: str, fake_openai: FakeOpenAIServer) -> None:
    theirs, mem0_source, ids = source
    before = await _checksum(mem0_source)
    database = Database(target, settings=Settings(database_url=target))
    try:
        dry = await import_mem0(database, mem0_source, _embedder(fake_openai), dry_run=True)
        assert (dry.memories_added, dry.refused) == (5, [])
        assert (dry.events_added, dry.events_of_deleted_skipped) == (7, 2)  # the deleted memory's, by default
        assert not await _analyzed(target)
        done = await import_mem0(database, mem0_source, _embedder(fake_openai), batch_size=2, deleted_history=True)
        assert await _analyzed(target)  # the import's last step: not left to autovacuum
        assert (done.memories_added, done.memories_updated, done.vectors_embedded) == (5, 0, 5)
        assert done.events_added == 9  # 6 ADD, 2 UPDATE, 1 DELETE
        assert await verify_mem0(database, mem0_source, _embedder(fake_openai), deleted_history=True) == []
        again = await import_mem0(database, mem0_source, _embedder(fake_openai), deleted_history=True)
        assert (again.memories_added, again.memories_updated, again.memories_unchanged) == (0, 0, 5)
        assert (again.events_added, again.events_present, again.vectors_embedded) == (0, 9, 0)
    finally:
        await database.close()
    assert await _checksum(mem0_source) == before  # the source is only read

    # both libraries' own reads agree
    ours = Memory.from_config(ours_config(target, mem0_source.collection, fake_openai.base_url))
    try:
        for filters in ({"user_id": "alice"}, {"user_id": "bob"}, {"agent_id": "concierge"}):
            assert _items(ours, **filters) == _items(theirs, **filters), filters
        for memory_id in ids.values():
            mine = [(e["event"], e["old_memory"], e["new_memory"]) for e in ours.history(memory_id)]
            assert mine == [(e["event"], e["old_memory"], e["new_memory"]) for e in theirs.history(memory_id)]
        # expired is hidden as mem0 hides it, searchable otherwise
        assert "Has a cold" not in [m["memory"] for m in ours.get_all(filters={"user_id": "alice"})["results"]]
        assert ours.search("Berlin", filters={"user_id": "alice"})["results"][0]["memory"] == "Lives in Berlin"
    finally:
        ours.close()


async def test_source_changes_come_over_on_the_next_run(
    source: Any, target: str, fake_openai: FakeOpenAIServer
) -> None:
    theirs, mem0_source, ids = source
    database = Database(target, settings=Settings(database_url=target))
    try:
        await import_mem0(database, mem0_source, _embedder(fake_openai))
        theirs.update(ids["tea"], "Likes black tea")
        theirs.add("Plays chess", user_id="bob", infer=False)
        later = await import_mem0(database, mem0_source, _embedder(fake_openai))
        assert (later.memories_added, later.memories_updated, later.memories_unchanged) == (1, 1, 4)
        assert later.events_added == 2
        assert await verify_mem0(database, mem0_source, _embedder(fake_openai)) == []
        # changes made here after the import are kept by the next one: an edit stays, a delete stays
        ours = Memory.from_config(ours_config(target, mem0_source.collection, fake_openai.base_url))
        try:
            ours.update(ids["trip"], "Trip to Bergen")
            ours.delete(ids["style"])
        finally:
            ours.close()
        after = await import_mem0(database, mem0_source, _embedder(fake_openai))
        assert (after.memories_added, after.memories_updated, after.memories_deleted_here) == (0, 0, 1)
        ours = Memory.from_config(ours_config(target, mem0_source.collection, fake_openai.base_url))
        try:
            assert ours.get(ids["trip"])["memory"] == "Trip to Bergen"
            assert ours.get(ids["style"]) is None
        finally:
            ours.close()
    finally:
        await database.close()


async def test_an_interrupted_import_resumes_to_the_same_end(
    source: Any, target: str, fake_openai: FakeOpenAIServer
) -> None:
    _, mem0_source, _ = source

    class Failing(OpenAIEmbedder):
        calls = 0

        async def embed_documents(self, texts: Any) -> list[list[float]]:
            Failing.calls += 1
            if Failing.calls == 2:
                raise EmbeddingError("the embedding service went away")
            return await super().embed_documents(texts)

    database = Database(target, settings=Settings(database_url=target))
    try:
        failing = Failing("fake-model", base_url=fake_openai.base_url, api_key="test", dimensions=DIMS)
        with pytest.raises(EmbeddingError):
            await import_mem0(database, mem0_source, failing, batch_size=2)
        # the index of the empty database, deferred to the import's end, is built even when it fails
        assert (await indexes.state(database)).mode == "hnsw"
        resumed = await import_mem0(database, mem0_source, _embedder(fake_openai), batch_size=2)
        assert (await indexes.state(database)).mode == "hnsw"
        assert (resumed.memories_added, resumed.memories_unchanged) == (3, 2)
        assert await verify_mem0(database, mem0_source, _embedder(fake_openai)) == []
        async with database.transaction(read_only=True) as conn:
            count = await conn.one("SELECT count(*), count(DISTINCT memory_id) FROM {schema}.memories")
            assert tuple(count) == (5, 5)
    finally:
        await database.close()


async def test_vectors_are_kept_only_when_the_embedder_makes_them(
    source: Any, target: str, fake_openai: FakeOpenAIServer
) -> None:
    _, mem0_source, _ = source

    class Other(OpenAIEmbedder):
        async def embed_documents(self, texts: Any) -> list[list[float]]:
            return [[1.0 if i == n % DIMS else 0.0 for i in range(DIMS)] for n, _ in enumerate(texts)]

    database = Database(target, settings=Settings(database_url=target))
    try:
        other = Other("other-model", base_url=fake_openai.base_url, api_key="test", dimensions=DIMS)
        with pytest.raises(ConfigurationError, match="another model"):
            await import_mem0(database, mem0_source, other, keep_vectors=True)
        kept = await import_mem0(database, mem0_source, _embedder(fake_openai), keep_vectors=True)
        assert (kept.vectors_kept, kept.vectors_embedded) == (5, 0)
        assert await verify_mem0(database, mem0_source, _embedder(fake_openai)) == []
    finally:
        await database.close()


async def test_ten_thousand_memories_through_the_batch_path(
    two_databases: tuple[str, str], target: str, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """10,000 memories and their ADD events, written by mem0's own store and history classes."""
    from mem0 import Memory as Mem0Memory

    collection = f"big{uuid.uuid4().hex[:10]}"
    history = tmp_path / "history.db"
    theirs = Mem0Memory.from_config(mem0_config(two_databases[0], collection, fake_openai.base_url, str(history)))
    try:
        ids = [str(uuid.uuid4()) for _ in range(10_000)]
        texts = [f"memory number {n} of user {n % 50}" for n in range(10_000)]
        vectors = await _embedder(fake_openai).embed_documents(texts)
        payloads = [
            {
                "data": t,
                "hash": hashlib.md5(t.encode()).hexdigest(),  # noqa: S324 (mem0's own hash)
                "user_id": f"user-{n % 50}",
                "created_at": "2026-01-01T00:00:00+00:00",
                "updated_at": "2026-01-01T00:00:00+00:00",
                "n": n,
            }
            for n, t in enumerate(texts)
        ]
        theirs.vector_store.insert(vectors, payloads, ids)
        for memory_id, text in zip(ids[:2000], texts[:2000], strict=True):
            theirs.db.add_history(memory_id, None, text, "ADD", created_at="2026-01-01T00:00:00+00:00")
        mem0_source = Mem0Source(url=two_databases[0], collection=collection, history_db=history)
        database = Database(target, settings=Settings(database_url=target))
        try:
            done = await import_mem0(database, mem0_source, _embedder(fake_openai), keep_vectors=True)
            assert (done.memories_added, done.vectors_kept, done.events_added, done.refused) == (
                10_000,
                10_000,
                2000,
                [],
            )
            assert await verify_mem0(database, mem0_source, _embedder(fake_openai)) == []
        finally:
            await database.close()
    finally:
        theirs.vector_store.delete_col()
        theirs.close()


def test_the_command_line(source: Any, target: str, fake_openai: FakeOpenAIServer) -> None:
    """memora-pg import --from mem0: dry run, import, verify (exit 0, no difference)."""
    _, mem0_source, _ = source
    assert mem0_source.history_db is not None
    base = [
        sys.executable, "-m", "memora_pg", "import", "--from", "mem0", "--database-url", target,
        "--source-url", mem0_source.url, "--collection", mem0_source.collection,
        "--history-db", str(mem0_source.history_db), "--embedder", f"openai:fake-model:{DIMS}",
        "--base-url", fake_openai.base_url, "--json",
    ]  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": "test"}

    def run(*extra: str) -> Any:
        done = subprocess.run([*base, *extra], env=env, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert run("--dry-run")["memories_added"] == 5
    assert run("--deleted-history")["events_added"] == 9
    assert run("--verify", "--deleted-history") == []
