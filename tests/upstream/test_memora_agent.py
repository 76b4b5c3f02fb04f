"""The upstream Memora agent (memora-core 0.3.1) running on memora_pg, with its LLM on a local fake server.

This file runs in an environment with memora-core and its exact pins installed
(``make test`` builds it in ``.venv-memora``), which also proves that memora_pg installs
beside them. The agent's own code makes every backend call; nothing here imitates it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.vector import PgVectorDB
from tests.fake_openai import FakeOpenAIServer

memora = pytest.importorskip("memora", reason="runs in the memora-core environment (make test)")
from memora.llm_backends import OpenAIBackendLLM  # noqa: E402

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        # The upstream backend takes no base URL; the openai client reads it from the environment.
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def _extraction(*facts: tuple[str, list[int]]) -> dict[str, Any]:
    return {
        "memories_first_pass": [{"memory": text, "msg_source_ids": ids} for text, ids in facts],
        "memories_second_pass": [],
        "memories_third_pass": [],
    }


def _contradict_the_shown_memory(text: str) -> Any:
    """A comparison answer that supersedes the (only) existing memory the agent showed the model."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        shown = UUID.findall(request["messages"][-1]["content"])
        return {
            "new_memories": [],
            "contrary_memories": [{"memory": text, "source_candidate_pos_id": 0, "contradicted_memory_id": shown[0]}],
        }

    return answer


async def test_memora_agent_saves_updates_contradicts_and_recalls(
    llm: FakeOpenAIServer, engine: AsyncEngine, settings: Settings
) -> None:
    """Save, update with a contrary memory, recall: the newest version comes back once, rendered (scenario 24)."""
    graph = PostgresGraphDB(engine, settings=settings, associated_vector_db=None)
    vector = PgVectorDB(engine, embedder=HashEmbedder(384), settings=settings)
    agent_llm = OpenAIBackendLLM(api_key="not-needed", model="fake-model")
    search_llm = OpenAIBackendLLM(api_key="not-needed", model="fake-model")
    agent = memora.Memora(vector_db=vector, graph_db=graph, memory_search_model=search_llm, extraction_model=agent_llm)
    assert graph.get_associated_vector_db() is vector

    org = await graph.create_organization("Acme")
    user = await graph.create_user(org.org_id, "Jake")
    helper = await graph.create_agent(org.org_id, "Jenny")

    llm.script_chat(_extraction(("#user_#id# lives in Paris", [0])))
    conversation = [{"role": "user", "content": "I live in Paris"}, {"role": "assistant", "content": "Nice!"}]
    interaction_id, saved_at = await agent.save_or_update_interaction_and_memories(
        org.org_id, user.user_id, helper.agent_id, conversation, current_datetime=datetime(2026, 1, 1, 9, 0)
    )
    assert saved_at.tzinfo is not None

    llm.script_chat(
        _extraction(("#user_#id# lives in Paris France", [2])),
        _contradict_the_shown_memory(f"user_{user.user_id} moved to Berlin"),
    )
    conversation += [{"role": "user", "content": "I moved to Berlin"}, {"role": "assistant", "content": "Wow"}]
    updated_id, _ = await agent.save_or_update_interaction_and_memories(
        org.org_id,
        user.user_id,
        helper.agent_id,
        conversation,
        interaction_id=interaction_id,
        current_datetime=datetime(2026, 2, 1, 9, 0),
    )
    assert updated_id == interaction_id

    llm.script_chat("<< user lives in Paris >> << where does the user live >>")
    memories, ids = await agent.recall_memories_for_message(
        org.org_id, user.user_id, "Where do I live?", current_datetime=datetime(2026, 3, 1)
    )
    assert [m.memory for m in memories or []] == ["Jake moved to Berlin"]
    assert ids == [m.memory_id for m in memories or []]
    history = await graph.get_user_memory_history(org.org_id, user.user_id, (ids or [""])[0])
    assert [m.memory for m in history] == ["Jake moved to Berlin", "Jake lives in Paris"]
    stored = await graph.get_interaction(org.org_id, user.user_id, interaction_id)
    assert [m.content for m in stored.messages or []] == [c["content"] for c in conversation]
    await agent.close()
