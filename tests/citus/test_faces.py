"""PgVectorDB, the mem0-style AsyncMemory and AutoGen's PostgresMemory on a Citus cluster, for several organizations."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import MemorySearchScope, PostgresGraphDB, PostgresMemory, SearchMode, Settings
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.embeddings import HashEmbedder
from memora_pg.langgraph import AsyncMemoraStore
from memora_pg.mem0 import AsyncMemory
from memora_pg.vector import PgVectorDB
from tests.citus.helpers import ORGS, memory_ids, worlds
from tests.fake_openai import FakeOpenAIServer
from tests.integration.helpers import chat, payload

USER = MemorySearchScope.USER
ORG = MemorySearchScope.ORGANIZATION

# -- PgVectorDB ------------------------------------------------------------------------------------


def _vector(graph: PostgresGraphDB, mode: str) -> PgVectorDB:
    store = graph.get_associated_vector_db()
    assert isinstance(store, PgVectorDB)
    store.search_mode = SearchMode(mode)
    return store


async def _facts(graph: PostgresGraphDB, engine: AsyncEngine, w: Any, facts: list[str]) -> list[str]:
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("x"), [(f, [0]) for f in facts])
    )
    return await memory_ids(engine, w.org_id, interaction_id)


@pytest.mark.parametrize("mode", ["hybrid", "dense", "upstream"])
@pytest.mark.parametrize("scope", [USER, ORG])
async def test_vector_search(graph: PostgresGraphDB, engine: AsyncEngine, mode: str, scope: MemorySearchScope) -> None:
    """search_memory and search_memories find each organization's own memories only."""
    ws = await worlds(graph)
    for w in ws:
        await _facts(graph, engine, w, [f"{w.org_id} loves green tea", "hiking in the alps", "the car is red"])
    vector = _vector(graph, mode)
    for w in ws:
        hits = await vector.search_memory("green tea", scope, w.org_id, w.user_id if scope is USER else None)
        assert hits
        assert {m.org_id for m, _ in hits} == {w.org_id}
        many = await vector.search_memories(["green tea", "car"], scope, w.org_id, w.user_id, w.agent_id)
        assert len(many) == 2


async def test_vector_add_memories(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """add_memories re-embeds memories the graph stored, in several organizations."""
    vector = _vector(graph, "hybrid")
    for w in await worlds(graph):
        ids = await _facts(graph, engine, w, ["likes tea", "likes hiking"])
        await vector.add_memories(
            w.org_id, w.user_id, w.agent_id, ids, ["likes green tea", "likes hiking"], "2026-01-01"
        )
        hits = await vector.search_memory("green tea", USER, w.org_id, w.user_id)
        assert hits


async def test_vector_deletes(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """delete_memory, delete_memories, delete_all_user_memories and delete_all_organization_memories."""
    vector = _vector(graph, "hybrid")
    for w in await worlds(graph):
        ids = await _facts(graph, engine, w, ["one", "two", "three", "four"])
        await vector.delete_memory(ids[0])
        await vector.delete_memories(ids[1:3])
        await vector.delete_all_user_memories(w.org_id, w.user_id)
        await vector.delete_all_organization_memories(w.org_id)
        assert await vector.search_memory("one", ORG, w.org_id) == []


# -- the mem0-style AsyncMemory ------------------------------------------------------------------------


@pytest.fixture
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def mem0s(database_url: str, llm: FakeOpenAIServer) -> AsyncIterator[list[AsyncMemory]]:
    """One AsyncMemory per organization (a collection is an organization)."""
    stores: list[AsyncMemory] = []
    run = uuid.uuid4().hex[:12]  # a fresh collection per test: a reused object id once named an old one
    for i in range(ORGS):
        config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {"connection_string": database_url, "collection_name": f"citus-{i}-{run}"},
            },
            "llm": {
                "provider": "openai",
                "config": {"model": "fake", "api_key": "sk-test", "openai_base_url": llm.base_url, "timeout": 2},
            },
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
            "history_db_path": "/nonexistent/history.db",
        }
        stores.append(AsyncMemory.from_config(config))
    yield stores
    for store in stores:
        await store.close()


async def _added(memory: AsyncMemory, *facts: str, user_id: str = "jake") -> list[str]:
    result = await memory.add([{"role": "user", "content": f} for f in facts], user_id=user_id, infer=False)
    return [r["id"] for r in result["results"]]


async def test_mem0_add_and_get(mem0s: list[AsyncMemory]) -> None:
    """add(infer=False) stores one memory per message; get returns it."""
    for memory in mem0s:
        (memory_id,) = await _added(memory, "likes green tea")
        item = await memory.get(memory_id)
        assert item is not None
        assert item["memory"] == "likes green tea"


async def test_mem0_search_with_filters(mem0s: list[AsyncMemory]) -> None:
    """search with user and metadata filters finds the collection's own memories."""
    for memory in mem0s:
        await memory.add("green tea", user_id="jake", metadata={"kind": "drink"}, infer=False)
        await memory.add("green tea too", user_id="amy", infer=False)
        found = await memory.search("green tea", filters={"user_id": "jake"}, top_k=5)
        assert [r["memory"] for r in found["results"]] == ["green tea"]
        filtered = await memory.search("tea", filters={"user_id": "jake", "kind": {"in": ["drink"]}}, threshold=0.0)
        assert len(filtered["results"]) == 1


async def test_mem0_get_all(mem0s: list[AsyncMemory]) -> None:
    """get_all lists a user's memories."""
    for memory in mem0s:
        await _added(memory, "one", "two")
        assert len((await memory.get_all(filters={"user_id": "jake"}))["results"]) == 2


async def test_mem0_update(mem0s: list[AsyncMemory]) -> None:
    """update replaces a memory's text."""
    for memory in mem0s:
        (memory_id,) = await _added(memory, "likes tea")
        await memory.update(memory_id, "likes coffee")
        item = await memory.get(memory_id)
        assert item is not None
        assert item["memory"] == "likes coffee"


async def test_mem0_history(mem0s: list[AsyncMemory]) -> None:
    """history lists a memory's events, oldest first."""
    for memory in mem0s:
        (memory_id,) = await _added(memory, "likes tea")
        await memory.update(memory_id, "likes coffee")
        assert [e["event"] for e in await memory.history(memory_id)] == ["ADD", "UPDATE"]


async def test_mem0_delete(mem0s: list[AsyncMemory]) -> None:
    """delete removes one memory."""
    for memory in mem0s:
        (memory_id,) = await _added(memory, "likes tea")
        await memory.delete(memory_id)
        assert await memory.get(memory_id) is None


async def test_mem0_delete_all(mem0s: list[AsyncMemory]) -> None:
    """delete_all removes a user's memories and keeps another user's."""
    for memory in mem0s:
        await _added(memory, "one", "two")
        await _added(memory, "amy's", user_id="amy")
        await memory.delete_all(user_id="jake")
        assert (await memory.get_all(filters={"user_id": "jake"}))["results"] == []
        assert len((await memory.get_all(filters={"user_id": "amy"}))["results"]) == 1


async def test_mem0_reset(mem0s: list[AsyncMemory]) -> None:
    """reset forgets one collection and leaves the others."""
    for memory in mem0s:
        await _added(memory, "one")
    await mem0s[0].reset()
    assert (await mem0s[0].get_all(filters={"user_id": "jake"}))["results"] == []
    assert len((await mem0s[1].get_all(filters={"user_id": "jake"}))["results"]) == 1


# -- AutoGen's PostgresMemory ------------------------------------------------------------------------


class ModelContext:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def get_messages(self) -> list[Any]:
        return list(self.messages)

    async def add_message(self, message: Any) -> None:
        self.messages.append(message)


@pytest.fixture
async def notes(engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB) -> AsyncIterator[list[PostgresMemory]]:
    """One PostgresMemory per organization."""
    orgs = [await graph.create_organization(f"AutoGen {i}") for i in range(ORGS)]
    stores = [
        PostgresMemory("notes", engine=engine, settings=settings, embedder=HashEmbedder(384), org_id=o.org_id)
        for o in orgs
    ]
    yield stores
    for store in stores:
        await store.close()


def _text(value: str) -> MemoryContent:
    return MemoryContent(content=value, mime_type=MemoryMimeType.TEXT)


async def test_autogen_add_query_list(notes: list[PostgresMemory]) -> None:
    """add then query and list, each organization its own entries."""
    for i, memory in enumerate(notes):
        await memory.add(_text(f"prefers formal language {i}"))
        await memory.add(_text("likes metric units"))
        result = await memory.query("formal language")
        assert result.results
        assert len(await memory.list()) == 2


async def test_autogen_update_context(notes: list[PostgresMemory]) -> None:
    """update_context adds the relevant entries to a model context."""
    for memory in notes:
        await memory.add(_text("prefers formal language"))
        context = ModelContext()
        context.messages.append({"role": "user", "content": "formal language please"})
        result = await memory.update_context(context)  # type: ignore[arg-type,unused-ignore]
        assert result.memories.results


async def test_autogen_clear(notes: list[PostgresMemory]) -> None:
    """clear empties one memory and leaves the others."""
    for memory in notes:
        await memory.add(_text("an entry"))
    await notes[0].clear()
    assert await notes[0].list() == []
    assert len(await notes[1].list()) == 1


# -- LangGraph's store ---------------------------------------------------------------------------------


async def test_langgraph_store_items_per_organization(engine: AsyncEngine, settings: Settings) -> None:
    """A put, a get, a filtered search and a listing, each organization its own items on its shard."""
    stores = [
        AsyncMemoraStore(engine=engine, settings=settings, embedder=HashEmbedder(384), org_id=f"lg-{i}")
        for i in range(ORGS)
    ]
    try:
        for i, store in enumerate(stores):
            await store.aput(("users", "u"), "pref", {"text": f"prefers formal language {i}", "n": i})
            await store.aput(("users", "u"), "pref", {"text": f"prefers plain language {i}", "n": i})
        for i, store in enumerate(stores):
            item = await store.aget(("users", "u"), "pref")
            assert item is not None
            assert item.value["text"] == f"prefers plain language {i}"
            [found] = await store.asearch(("users",), query="plain language", filter={"n": i})
            assert found.key == "pref"
            assert await store.asearch(("users",), filter={"n": i + 1}) == []
            assert await store.alist_namespaces() == [("users", "u")]
    finally:
        for store in stores:
            await store.close()
