"""memora_pg's Agent Framework providers, under a real ``Agent`` with a scripted chat client (offline)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agent_framework import Agent, AgentSession, Message
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.agent_framework import MemoraContextProvider, MemoraHistoryProvider
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import InvalidInputError
from memora_pg.mem0.llm import OpenAILLM
from memora_pg.mem0.memory import AsyncMemory
from tests.fake_openai import FakeOpenAIServer
from tests.integration.helpers import chat, payload
from tests.scripted_chat import ScriptedChat


def _memory(database_url: str, llm: OpenAILLM | None = None) -> AsyncMemory:
    settings = Settings(database_url=database_url, db_schema="memora")
    return AsyncMemory(settings=settings, embedder=HashEmbedder(384), llm=llm)


@pytest.fixture
async def memory(database_url: str) -> AsyncIterator[AsyncMemory]:
    store = _memory(database_url)
    yield store
    await store.close()


async def test_context_provider_recalls_across_sessions_with_extraction(database_url: str) -> None:
    """Session 1 tells a fact; the model extracts it after the run; session 2's run is given it."""
    with FakeOpenAIServer() as llm:
        llm.script_chat(
            {"facts": ["Is allergic to peanuts"]},
            {"memory": [{"id": "0", "text": "Is allergic to peanuts", "event": "ADD"}]},
            {"facts": []},  # the second turn tells nothing new
        )
        store = _memory(database_url, OpenAILLM("fake", api_key="sk-test", base_url=llm.base_url, timeout=2))
        try:
            chat = ScriptedChat("Noted.", "Try the apple slices.")
            # the hashing embedder of the tests knows words, not meaning: every hit is recalled
            agent = Agent(chat, context_providers=[MemoraContextProvider(store, user_id="rae", threshold=0)])
            await agent.run("I'm allergic to peanuts", session=agent.create_session())
            assert [m["memory"] for m in (await store.get_all(filters={"user_id": "rae"}))["results"]] == [
                "Is allergic to peanuts"
            ]
            await agent.run("Which snack should I take, peanuts or apples?", session=agent.create_session())
            recalled = "\n".join(chat.seen())
            assert "Is allergic to peanuts" in recalled
            assert chat.seen(0)[0] == "I'm allergic to peanuts"  # nothing to recall on the first turn
        finally:
            await store.close()


async def test_context_provider_without_a_model_stores_what_the_user_said(
    memory: AsyncMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a model, the user's messages are kept as they are and the assistant's replies are not."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = ScriptedChat("Lovely!", "You said you bake sourdough.")
    provider = MemoraContextProvider(memory, user_id="kai", agent_id="baker-bot", threshold=0)
    assert provider.infer is False
    agent = Agent(chat, context_providers=[provider])
    session = agent.create_session()
    await agent.run("I bake sourdough on Sundays", session=session)
    stored = (await memory.get_all(filters={"user_id": "kai"}))["results"]
    assert [m["memory"] for m in stored] == ["I bake sourdough on Sundays"]
    assert {m["run_id"] for m in stored} == {session.session_id}
    assert {m["agent_id"] for m in stored} == {"baker-bot"}
    await agent.run("What do I bake on Sundays?", session=agent.create_session())
    assert any("I bake sourdough on Sundays" in line for line in chat.seen())


async def test_history_survives_a_restart_in_order(database_url: str, engine: AsyncEngine) -> None:
    """Two turns in one process; a new process (new memory, provider and agent) continues the session."""
    first = _memory(database_url)
    chat = ScriptedChat("Hi Lee.", "Blue, you said.")
    try:
        agent = Agent(chat, context_providers=[MemoraHistoryProvider(first, user_id="lee")])
        session = agent.create_session()
        await agent.run("Hello, I'm Lee. My favourite colour is blue.", session=session)
        await agent.run("What's my favourite colour?", session=session)
        assert chat.seen() == [
            "Hello, I'm Lee. My favourite colour is blue.",
            "Hi Lee.",
            "What's my favourite colour?",
        ]
    finally:
        await first.close()

    restarted = _memory(database_url)
    later = ScriptedChat("Yes: blue.")
    try:
        agent = Agent(later, context_providers=[MemoraHistoryProvider(restarted, user_id="lee")])
        await agent.run("Still blue?", session=AgentSession(session_id=session.session_id))
        assert later.seen() == [
            "Hello, I'm Lee. My favourite colour is blue.",
            "Hi Lee.",
            "What's my favourite colour?",
            "Blue, you said.",
            "Still blue?",
        ]
    finally:
        await restarted.close()

    # the conversation is a Memora interaction like any other
    graph = PostgresGraphDB(engine, settings=Settings(database_url=database_url, db_schema="memora"))
    try:
        interaction = await graph.get_interaction("mem0:mem0", "lee", session.session_id)
        messages = interaction.messages or []
        assert [m.content for m in messages][-2:] == ["Still blue?", "Yes: blue."]
        assert [m.role for m in messages] == ["user", "assistant"] * 3
    finally:
        await graph.close()


async def test_a_session_is_an_interaction_the_memora_face_extends(memory: AsyncMemory, engine: AsyncEngine) -> None:
    """The history provider's turn opens a Memora interaction, with an audit row; the Memora face's
    update_interaction_and_memories then carries on that same conversation."""
    provider = MemoraHistoryProvider(memory, user_id="ivy")
    await provider.save_messages("ivy-session", [Message("user", ["I drink tea"]), Message("assistant", ["Noted."])])
    graph = PostgresGraphDB(engine, settings=Settings(database_url=memory.database.settings.database_url))
    try:
        agent = await graph.create_agent("mem0:mem0", "helper")
        updated = payload(chat("I drink tea", "Noted.", "Green, mostly", "Green it is."), [("Drinks green tea", [2])])
        await graph.update_interaction_and_memories("mem0:mem0", agent.agent_id, "ivy", "ivy-session", updated)
        interaction = await graph.get_interaction("mem0:mem0", "ivy", "ivy-session")
    finally:
        await graph.close()
    assert [m.content for m in interaction.messages or []] == ["I drink tea", "Noted.", "Green, mostly", "Green it is."]
    assert [m.memory for m in interaction.memories or []] == ["Drinks green tea"]
    async with engine.connect() as conn:
        audited = (
            await conn.execute(
                text(
                    "SELECT user_id, agent_id, ids ->> 'interaction_id' FROM memora.audit_log"
                    " WHERE org_id = 'mem0:mem0' AND method = 'agent_framework.save_messages'"
                )
            )
        ).all()
    assert [tuple(row) for row in audited] == [("ivy", "agent-framework", "ivy-session")]


async def test_tenants_and_users_do_not_meet(memory: AsyncMemory, engine: AsyncEngine) -> None:
    """tenant_id names the organization: the same user id and session id in two tenants are two histories."""
    a = MemoraHistoryProvider(memory, user_id="sam", tenant_id="tenant-a")
    b = MemoraHistoryProvider(memory, user_id="sam", tenant_id="tenant-b")
    await a.save_messages("s-1", [Message("user", ["A's secret plan"])])
    await b.save_messages("s-1", [Message("user", ["B's own plan"])])
    assert [m.text for m in await a.get_messages("s-1")] == ["A's secret plan"]
    assert [m.text for m in await b.get_messages("s-1")] == ["B's own plan"]
    # another user of the tenant cannot read or append to sam's session
    other = MemoraHistoryProvider(memory, user_id="eve", tenant_id="tenant-a")
    assert await other.get_messages("s-1") == []
    with pytest.raises(InvalidInputError, match="another user's"):
        await other.save_messages("s-1", [Message("user", ["intrusion"])])
    with pytest.raises(InvalidInputError, match="NUL"):
        await a.save_messages("s-1", [Message("user", ["bad \x00 byte"])])
    async with engine.connect() as conn:
        rows = (await conn.execute(text("SELECT org_id, content FROM memora.messages ORDER BY org_id"))).all()
    assert [tuple(r) for r in rows] == [("tenant-a", "A's secret plan"), ("tenant-b", "B's own plan")]

    recall_a = MemoraContextProvider(memory, user_id="sam", tenant_id="tenant-a", infer=False)
    await recall_a.memory.add("A's launch is in May", user_id="sam", infer=False)
    recall_b = MemoraContextProvider(memory, user_id="sam", tenant_id="tenant-b", infer=False)
    found = await recall_b.memory.search("launch", filters={"user_id": "sam"})
    assert found["results"] == []


async def test_providers_refuse_what_they_cannot_keep(memory: AsyncMemory) -> None:
    with pytest.raises(InvalidInputError):
        MemoraContextProvider(memory, user_id="")
    with pytest.raises(InvalidInputError):
        MemoraHistoryProvider(memory, user_id=" ")
    history = MemoraHistoryProvider(memory, user_id="u")
    with pytest.raises(InvalidInputError, match="session"):
        await history.get_messages(None)
    # tool calls and empty messages are not history
    await history.save_messages("s", [Message("tool", ["42"]), Message("assistant", [""])])
    assert await history.get_messages("s") == []
