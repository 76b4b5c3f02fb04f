# ruff: noqa: E501  (the xfail reasons state each difference in full)
"""memora_pg's AutoGen memories inside the real AgentChat, against autogen-core's and autogen-ext's own.

An ``AssistantAgent`` runs on a scripted ``ReplayChatCompletionClient``; autogen-ext's
``Mem0Memory`` drives memora_pg's mem0-style ``Memory`` and the real mem0ai. Differences are
marked ``xfail(strict=True)``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.differential.conftest import DIMS, mem0_config, ours_config
from tests.fake_openai import FakeOpenAIServer

pytest.importorskip("autogen_agentchat", reason="runs in the differential environment (make test builds .venv-diff)")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.memory import ListMemory as CoreListMemory
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.models.replay import ReplayChatCompletionClient

from memora_pg.autogen import ListMemory, PostgresMemory
from memora_pg.embeddings import HashEmbedder

TEA = MemoryContent(content="The user likes green tea", mime_type=MemoryMimeType.TEXT)


@pytest.fixture
async def pg_memory(database_url: str) -> Any:
    memory = PostgresMemory("diff", database_url=database_url, embedder=HashEmbedder(384), k=3)
    await memory.setup()
    await memory.clear()
    yield memory
    await memory.clear()
    await memory.close()


async def _run_agent(memory: Any) -> tuple[list[Any], list[Any]]:
    agent = AssistantAgent(
        "assistant", model_client=ReplayChatCompletionClient(["You like green tea."]), memory=[memory]
    )
    result = await agent.run(task="Which tea does the user like?")
    context = await agent.model_context.get_messages()
    return result.messages, context


@pytest.mark.parametrize("kind", ["postgres", "list", "autogen-core-list"])
async def test_memory_reaches_model_context(pg_memory: PostgresMemory, kind: str) -> None:
    """The agent queries the memory, emits a MemoryQueryEvent and the model context holds the memory as a SystemMessage."""
    memory = {"postgres": pg_memory, "list": ListMemory(), "autogen-core-list": CoreListMemory()}[kind]
    await memory.add(TEA)
    messages, context = await _run_agent(memory)
    events = [m for m in messages if isinstance(m, MemoryQueryEvent)]
    assert [c.content for c in events[0].content] == ["The user likes green tea"]
    systems = [m for m in context if type(m).__name__ == "SystemMessage"]
    assert any("The user likes green tea" in m.content for m in systems)


def test_list_memory_config_shape() -> None:
    """autogen-core's ListMemory dumps provider autogen_core.memory.ListMemory with config {name, memory_contents}."""
    dumped = CoreListMemory(name="notes", memory_contents=[TEA]).dump_component().model_dump(mode="json")
    assert dumped["provider"] == "autogen_core.memory.ListMemory"
    assert dumped["component_type"] == "memory"
    assert dumped["config"] == {
        "name": "notes",
        "memory_contents": [{"content": "The user likes green tea", "mime_type": "text/plain"}],
    }


def test_list_memory_round_trip() -> None:
    """dump_component()/load_component() of memora_pg's ListMemory gives back its name and contents."""
    memory = ListMemory(name="notes", memory_contents=[TEA])
    loaded = ListMemory.load_component(memory.dump_component())
    assert loaded.name == "notes"
    assert loaded.content == [TEA]


async def test_postgres_memory_round_trip_hides_password(pg_memory: PostgresMemory) -> None:
    """PostgresMemory dumps and loads back; a password in its URL is not dumped in clear (SecretStr)."""
    memory = PostgresMemory("diff", database_url="postgresql://u:s3cret@127.0.0.1:1/db", embedder=HashEmbedder(DIMS))
    dumped = memory.dump_component()
    assert "s3cret" not in json.dumps(dumped.model_dump(mode="json"))
    loaded = PostgresMemory.load_component(dumped)
    assert loaded.name == "diff"


def test_agent_round_trip_with_core_list_memory() -> None:
    """An AssistantAgent holding autogen-core's ListMemory dumps and loads with the memory in config['memory']."""
    agent = AssistantAgent(
        "assistant",
        model_client=ReplayChatCompletionClient(["x"]),
        memory=[CoreListMemory(name="n", memory_contents=[TEA])],
    )
    dumped = agent.dump_component()
    assert dumped.config["memory"][0]["provider"] == "autogen_core.memory.ListMemory"
    loaded = AssistantAgent.load_component(dumped)
    assert loaded.name == "assistant"


def test_agent_round_trip_with_memora_memory() -> None:
    """An AssistantAgent holding memora_pg's ListMemory dumps and loads back."""
    agent = AssistantAgent(
        "assistant",
        model_client=ReplayChatCompletionClient(["x"]),
        memory=[ListMemory(name="n", memory_contents=[TEA])],
    )
    AssistantAgent.load_component(agent.dump_component())


async def test_core_list_memory_query_empty() -> None:
    """autogen-core's ListMemory.query('') returns every content (it ignores the query)."""
    memory = CoreListMemory(memory_contents=[TEA])
    assert (await memory.query("")).results == [TEA]


async def test_postgres_query_empty_returns_nothing(pg_memory: PostgresMemory) -> None:
    """query('') of a vector memory returns an empty result, never an error."""
    await pg_memory.add(TEA)
    assert (await pg_memory.query("")).results == []


async def test_zero_vector_score_not_nan(pg_memory: PostgresMemory) -> None:
    """A zero-vector embedding (no words) never yields a NaN score or similarity that slips through
    score_threshold (a threshold on the similarity)."""
    await pg_memory.add(MemoryContent(content="!!!", mime_type=MemoryMimeType.TEXT))
    everything = (await pg_memory.query("???", score_threshold=None)).results
    assert everything
    for content in everything:
        assert content.metadata is not None
        assert not math.isnan(content.metadata["score"])
        assert not math.isnan(content.metadata["similarity"])
    found = (await pg_memory.query("???", score_threshold=0.5)).results
    assert all(c.metadata is not None and c.metadata["similarity"] >= 0.5 for c in found)


async def test_query_aliases(pg_memory: PostgresMemory) -> None:
    """query(top_k=1) and query(distance_threshold=...) are accepted as the other AutoGen memories name them."""
    await pg_memory.add(TEA)
    await pg_memory.add(MemoryContent(content="The user likes black tea", mime_type=MemoryMimeType.TEXT))
    assert len((await pg_memory.query("tea", top_k=1)).results) == 1
    assert len((await pg_memory.query("tea", distance_threshold=0.99)).results) == 2


# -- autogen-ext's Mem0Memory -----------------------------------------------------------------------


def _mem0memory(monkeypatch: pytest.MonkeyPatch, client_class: Any, config: dict[str, Any]) -> Any:
    from autogen_ext.memory.mem0 import _mem0

    monkeypatch.setattr(_mem0, "Memory0", client_class)
    return _mem0.Mem0Memory(user_id="alice", is_cloud=False, config=config, limit=5)


async def test_mem0memory_on_real_mem0_finds_nothing(
    monkeypatch: pytest.MonkeyPatch,
    two_databases: tuple[str, str],
    collection: str,
    fake_openai: FakeOpenAIServer,
    tmp_path: Any,
) -> None:
    """autogen-ext 0.7.5's Mem0Memory on mem0ai 2.2 stores but never finds: search(user_id=...) raises in mem0 2.x and Mem0Memory swallows it."""
    from mem0 import Memory as Mem0

    memory = _mem0memory(
        monkeypatch, Mem0, mem0_config(two_databases[0], collection, fake_openai.base_url, str(tmp_path / "h.db"))
    )
    fake_openai.script_chat({"memory": [{"text": "Likes green tea"}]})
    await memory.add(TEA)
    assert [r["memory"] for r in memory._client.get_all(filters={"user_id": "alice"})["results"]] == ["Likes green tea"]
    assert (await memory.query("tea")).results == []
    memory._client.vector_store.delete_col()


async def test_mem0memory_on_memora_pg(
    monkeypatch: pytest.MonkeyPatch, two_databases: tuple[str, str], collection: str, fake_openai: FakeOpenAIServer
) -> None:
    """autogen-ext's Mem0Memory over memora_pg.Memory: add (inferred), query and clear work."""
    from memora_pg.mem0 import Memory

    memory = _mem0memory(monkeypatch, Memory, ours_config(two_databases[1], collection, fake_openai.base_url))
    fake_openai.script_chat(
        {"facts": ["Likes green tea"]}, {"memory": [{"id": "0", "text": "Likes green tea", "event": "ADD"}]}
    )
    try:
        await memory.add(TEA)
        found = (await memory.query("green tea")).results
        assert [c.content for c in found] == ["Likes green tea"]
        assert isinstance(found[0].metadata["score"], float)
        await memory.clear()
    finally:
        memory._client.close()
