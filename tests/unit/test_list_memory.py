"""ListMemory: AutoGen's chronological list memory, with and without autogen-core installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from memora_pg.autogen import (
    ListMemory,
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    SystemMessage,
    UpdateContextResult,
)


class ModelContext:
    """The least a model context needs: async get_messages() and add_message()."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def get_messages(self) -> list[Any]:
        return list(self.messages)

    async def add_message(self, message: Any) -> None:
        self.messages.append(message)


def note(text: str) -> MemoryContent:
    return MemoryContent(content=text, mime_type=MemoryMimeType.TEXT)


def test_name_defaults_and_is_kept() -> None:
    """Without a name the memory is "default_list_memory"; a given name is kept."""
    assert ListMemory().name == "default_list_memory"
    assert ListMemory(name="chat_history").name == "chat_history"
    assert isinstance(ListMemory(), Memory)


async def test_add_keeps_chronological_order_and_query_returns_everything() -> None:
    """Contents are kept in the order added, and query returns all of them whatever it is asked."""
    memory = ListMemory()
    for text in ["first", "second", "third"]:
        await memory.add(note(text))
    queries: list[str | MemoryContent] = ["", "second", note("unrelated")]
    for query in queries:
        result = await memory.query(query)
        assert isinstance(result, MemoryQueryResult)
        assert [m.content for m in result.results] == ["first", "second", "third"]
    assert [m.content for m in (await memory.query()).results] == ["first", "second", "third"]


async def test_initial_contents_and_the_content_property() -> None:
    """memory_contents seeds the list; content reads it and replaces it."""
    memory = ListMemory(memory_contents=[note("seeded")])
    assert [m.content for m in memory.content] == ["seeded"]
    memory.content = [note("replaced"), note("twice")]
    assert [m.content for m in (await memory.query("")).results] == ["replaced", "twice"]


async def test_update_context_appends_one_system_message_with_every_memory() -> None:
    """update_context adds all memories as one SystemMessage in AutoGen's format and returns them."""
    memory = ListMemory()
    await memory.add(note("User prefers formal language"))
    await memory.add(MemoryContent(content={"units": "metric"}, mime_type=MemoryMimeType.JSON))
    context = ModelContext()
    result = await memory.update_context(context)
    assert isinstance(result, UpdateContextResult)
    assert [m.content for m in result.memories.results] == ["User prefers formal language", {"units": "metric"}]
    assert context.messages == [
        SystemMessage(
            content="\nRelevant memory content (in chronological order):\n"
            "1. User prefers formal language\n2. {'units': 'metric'}\n"
        )
    ]


async def test_update_context_of_an_empty_memory_adds_nothing() -> None:
    """With no memories, the context is left alone and the result is empty."""
    context = ModelContext()
    result = await ListMemory().update_context(context)
    assert result.memories.results == []
    assert context.messages == []


async def test_clear_empties_and_close_keeps() -> None:
    """clear() removes every content; close() releases nothing and leaves the contents."""
    memory = ListMemory()
    await memory.add(note("kept"))
    await memory.close()
    assert [m.content for m in memory.content] == ["kept"]
    await memory.clear()
    assert memory.content == []
    assert (await memory.query("")).results == []


def test_mime_types_serialize_as_strings() -> None:
    """MemoryContent serializes its mime type as the plain string, enum or not."""
    assert note("x").model_dump()["mime_type"] == "text/plain"
    assert MemoryContent(content=b"x", mime_type="image/png").model_dump()["mime_type"] == "image/png"
    assert [m.value for m in MemoryMimeType] == [
        "text/plain",
        "application/json",
        "text/markdown",
        "image/*",
        "application/octet-stream",
    ]


WITHOUT_AUTOGEN = textwrap.dedent(
    """
    import asyncio, sys
    for name in ("autogen_core", "autogen_core.memory", "autogen_core.models"):
        sys.modules[name] = None  # makes "import autogen_core" raise ImportError

    from memora_pg.autogen import (
        AUTOGEN_CORE, ListMemory, MemoryContent, MemoryMimeType, SystemMessage, to_entry, to_memory_content,
    )
    from memora_pg.graph.autogen_contents import StoredContent
    import uuid

    class Context:
        def __init__(self): self.messages = []
        async def get_messages(self): return list(self.messages)
        async def add_message(self, message): self.messages.append(message)

    async def main():
        assert not AUTOGEN_CORE
        memory = ListMemory(name="m")
        await memory.add(MemoryContent(content="likes tea", mime_type=MemoryMimeType.TEXT))
        context = Context()
        result = await memory.update_context(context)
        assert context.messages == [
            SystemMessage(content="\\nRelevant memory content (in chronological order):\\n1. likes tea\\n")
        ]
        assert context.messages[0].type == "SystemMessage"
        assert result.memories.results[0].model_dump() == {
            "content": "likes tea", "mime_type": "text/plain", "metadata": None,
        }
        entry, embedded = to_entry(MemoryContent(content=b"png", mime_type=MemoryMimeType.IMAGE))
        assert (entry.data, entry.mime_type, embedded) == (b"png", "image/*", None)
        back = to_memory_content(StoredContent(uuid.uuid4(), "image/*", None, None, b"png", {}))
        assert (back.content, back.mime_type) == (b"png", MemoryMimeType.IMAGE)
        print("ok")

    asyncio.run(main())
    """
)


def test_without_autogen_core_the_stand_ins_work() -> None:
    """Without autogen-core, the compatible stand-ins carry ListMemory, and images are bytes."""
    done = subprocess.run(  # noqa: S603 - this interpreter, running the script above
        [sys.executable, "-c", WITHOUT_AUTOGEN], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("name", [None, ""])
def test_a_falsy_name_is_the_default(name: str | None) -> None:
    """None or an empty name falls back to "default_list_memory", as AutoGen's ListMemory."""
    assert ListMemory(name=name).name == "default_list_memory"
