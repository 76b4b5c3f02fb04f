"""A LangGraph agent with LangMem's memory tools, on MemoraStore and on LangGraph's own stores.

``create_react_agent`` compiles a graph with ``store=...``; LangMem's ``create_manage_memory_tool`` and
``create_search_memory_tool`` reach the store through ``get_store()`` from inside the graph's tool node. A
scripted chat model (tests/differential: no network, no model) drives one conversation: it stores a
preference in one thread, finds and updates it in the same thread, and finds the updated one from another
thread. The same script runs on ``InMemoryStore``, ``PostgresStore``, ``MemoraStore`` and (awaited)
``AsyncMemoraStore``, and every tool answer is compared.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import make_url

from memora_pg import Settings
from memora_pg.embeddings import HashEmbedder

pytest.importorskip("langmem", reason="runs in the differential environment (make test builds it)")

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from langmem import create_manage_memory_tool, create_search_memory_tool

from memora_pg.langgraph import AsyncMemoraStore, MemoraStore

Step = Callable[[Sequence[BaseMessage]], AIMessage]
ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ScriptedModel(BaseChatModel):
    """A chat model that answers each call with the next step of its script (a step sees the messages)."""

    script: list[Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        step: Step = self.script.pop(0)
        return ChatResult(generations=[ChatGeneration(message=step(messages))])


def _call(name: str, **arguments: Any) -> Step:
    return lambda _: AIMessage(content="", tool_calls=[{"name": name, "args": arguments, "id": uuid.uuid4().hex}])


def _update_found(content: str) -> Step:
    """Update the memory the last search found, by the id in its answer."""

    def step(messages: Sequence[BaseMessage]) -> AIMessage:
        found = [m for m in messages if isinstance(m, ToolMessage)][-1]
        memory_id = ID.findall(str(found.content))[0]
        return _call("manage_memory", content=content, action="update", id=memory_id)(messages)

    return step


def _say(text: str) -> Step:
    return lambda _: AIMessage(content=text)


def _script() -> list[tuple[str, str, list[Step]]]:
    """(thread, user message, the model's steps) of the conversation."""
    return [
        (
            "t1",
            "Remember that I love hiking.",
            [_call("manage_memory", content="The user loves hiking", action="create"), _say("Noted.")],
        ),
        (
            "t1",
            "I prefer rock climbing to hiking now.",
            [
                _call("search_memory", query="hiking"),
                _update_found("The user prefers rock climbing to hiking"),
                _say("Updated."),
            ],
        ),
        ("t2", "What do I like doing?", [_call("search_memory", query="what the user likes doing"), _say("Climbing.")]),
    ]


def _tool_answers(messages: Sequence[BaseMessage]) -> list[Any]:
    """What each tool answered, ids and times taken out (each store makes its own)."""
    answers = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        text = ID.sub("<id>", str(message.content))
        try:
            found = json.loads(text)
        except ValueError:
            answers.append(text)
            continue
        answers.append(sorted(item["value"]["content"] for item in found))
    return answers


def _agent(store: BaseStore, script: list[Step]) -> Any:
    namespace = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)]
    return create_react_agent(ScriptedModel(script=script), tools, store=store)


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "langgraph_user_id": "alice"}}


def _converse(store: BaseStore) -> list[Any]:
    answers: list[Any] = []
    for thread, text, steps in _script():
        result = _agent(store, steps).invoke({"messages": [("user", text)]}, _config(thread))
        answers.append(_tool_answers(result["messages"]))
    return answers


async def _converse_async(store: BaseStore) -> list[Any]:
    answers: list[Any] = []
    for thread, text, steps in _script():
        result = await _agent(store, steps).ainvoke({"messages": [("user", text)]}, _config(thread))
        answers.append(_tool_answers(result["messages"]))
    return answers


def test_langmem_tools_give_the_same_answers_on_every_store(store_urls: tuple[str, str]) -> None:
    theirs_url, ours_url = store_urls
    in_memory = _converse(InMemoryStore())
    plain = make_url(theirs_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with PostgresStore.from_conn_string(plain) as postgres:
        postgres.setup()
        on_postgres = _converse(postgres)
    settings = Settings(database_url=ours_url)
    with MemoraStore.from_conn_string(ours_url, settings=settings, embedder=HashEmbedder(64)) as memora:
        ours = _converse(memora)
        # The memory itself, as memora_pg keeps it: the updated value, and the version it replaced.
        [item] = memora.search(("memories", "alice"))
        assert item.value["content"] == "The user prefers rock climbing to hiking"
        before = memora.get(("memories", "alice"), item.key, as_of=item.created_at)
        assert before is not None
        assert before.value["content"] == "The user loves hiking"
    assert ours == on_postgres == in_memory
    assert ours[1][0] == ["The user loves hiking"]
    assert ours[2] == [["The user prefers rock climbing to hiking"]]


async def test_a_graph_reads_and_writes_the_async_store_through_get_store(store_urls: tuple[str, str]) -> None:
    _, ours_url = store_urls
    expected = _converse(InMemoryStore())
    store = AsyncMemoraStore(settings=Settings(database_url=ours_url), embedder=HashEmbedder(64))
    try:
        assert await _converse_async(store) == expected
        assert [i.key for i in await store.asearch(("memories", "alice"))] != []
    finally:
        await store.close()
