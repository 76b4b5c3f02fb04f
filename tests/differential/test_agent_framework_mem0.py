"""Agent Framework's own ``Mem0ContextProvider`` (agent-framework-mem0) with memora_pg's ``AsyncMemory`` as
its ``mem0_client``, unchanged, inside a real ``Agent`` with a scripted chat client.

memora_pg's ``AsyncMemory`` is not mem0's class, so the provider takes its platform-client path:
``search(query=..., filters={"user_id": ...})`` and ``add(messages=..., filters={...})``, which the
mem0-style face accepts as mem0's platform client does.
"""

from __future__ import annotations

import pytest

from tests.differential.conftest import ours_config
from tests.fake_openai import FakeOpenAIServer

pytest.importorskip("agent_framework_mem0", reason="runs in the differential environment (make test builds .venv-diff)")

from agent_framework import Agent
from agent_framework_mem0 import Mem0ContextProvider

from memora_pg.mem0 import AsyncMemory
from tests.scripted_chat import ScriptedChat


async def test_mem0_context_provider_on_memora_pg(
    two_databases: tuple[str, str], collection: str, fake_openai: FakeOpenAIServer
) -> None:
    memory = AsyncMemory.from_config(ours_config(two_databases[1], collection, fake_openai.base_url))
    fake_openai.script_chat(
        {"facts": ["Prefers window seats"]},
        {"memory": [{"id": "0", "text": "Prefers window seats", "event": "ADD"}]},
        {"facts": []},
    )
    try:
        provider = Mem0ContextProvider(mem0_client=memory, user_id="ines", agent_id="travel", search_user_id="ines")
        chat = ScriptedChat("Noted.", "A window seat, as you like.")
        agent = Agent(chat, context_providers=[provider])
        await agent.run("I always take a window seat", session=agent.create_session())
        stored = (await memory.get_all(filters={"user_id": "ines"}))["results"]
        assert [(m["memory"], m["agent_id"]) for m in stored] == [("Prefers window seats", "travel")]

        # the fake embedder hashes words: the query shares one ("window") with the memory, as a model's would in meaning
        await agent.run("Which seats do I prefer: window seats?", session=agent.create_session())
        context = "\n".join(m.text for m in chat.requests[-1])
        assert "Prefers window seats" in context
    finally:
        await memory.close()


async def test_application_id_is_kept_and_found(
    two_databases: tuple[str, str], collection: str, fake_openai: FakeOpenAIServer
) -> None:
    """The platform path's ``app_id`` filter is kept in the metadata, where the provider's search finds it."""
    memory = AsyncMemory.from_config(ours_config(two_databases[1], collection, fake_openai.base_url))
    try:
        await memory.add(
            [{"role": "user", "content": "likes jazz"}], filters={"user_id": "u", "app_id": "music"}, infer=False
        )
        await memory.add(
            [{"role": "user", "content": "likes jazz too"}], filters={"user_id": "u", "app_id": "other"}, infer=False
        )
        found = await memory.search("jazz", filters={"user_id": "u", "app_id": "music"}, threshold=0)
        assert [hit["memory"] for hit in found["results"]] == ["likes jazz"]
    finally:
        await memory.close()
