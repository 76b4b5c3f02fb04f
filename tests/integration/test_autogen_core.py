"""ListMemory and PostgresMemory inside AutoGen itself: its types, its model contexts, its tokens."""

from __future__ import annotations

import asyncio

import pytest

autogen_core = pytest.importorskip("autogen_core")

from autogen_core import CancellationToken  # noqa: E402
from autogen_core import memory as autogen_memory  # noqa: E402
from autogen_core.model_context import (  # noqa: E402
    BufferedChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import AssistantMessage, SystemMessage, UserMessage  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from memora_pg import Settings  # noqa: E402
from memora_pg.autogen import AUTOGEN_CORE, ListMemory, MemoryContent, PostgresMemory  # noqa: E402
from memora_pg.embeddings import HashEmbedder  # noqa: E402


def postgres_memory(engine: AsyncEngine, settings: Settings, k: int = 5) -> PostgresMemory:
    return PostgresMemory("chat_history", engine=engine, settings=settings, embedder=HashEmbedder(384), k=k)


def test_the_protocol_types_are_autogens_own() -> None:
    """With autogen-core installed, memora_pg's protocol classes are AutoGen's, not look-alikes."""
    import memora_pg.autogen as face

    assert AUTOGEN_CORE
    assert face.MemoryContent is autogen_memory.MemoryContent
    assert face.MemoryMimeType is autogen_memory.MemoryMimeType
    assert face.MemoryQueryResult is autogen_memory.MemoryQueryResult
    assert face.UpdateContextResult is autogen_memory.UpdateContextResult
    assert face.Memory is autogen_memory.Memory
    assert face.SystemMessage is SystemMessage
    assert face.Image is autogen_core.Image


async def test_memories_are_autogen_memories(engine: AsyncEngine, settings: Settings) -> None:
    """Both memories are instances of autogen_core.memory.Memory, where AutoGen's agents expect one."""
    assert isinstance(ListMemory(), autogen_memory.Memory)
    memory = postgres_memory(engine, settings)
    assert isinstance(memory, autogen_memory.Memory)
    assert memory.component_type == "memory"
    await memory.close()


async def test_the_seed_example_with_list_memory() -> None:
    """The protocol's ListMemory example: the buffered context ends with the one system message."""
    memory = ListMemory(name="chat_history")
    await memory.add(MemoryContent(content="User prefers formal language", mime_type="text/plain"))
    memory.content = [MemoryContent(content="New preference", mime_type="text/plain")]
    model_context = BufferedChatCompletionContext(buffer_size=10)
    result = await memory.update_context(model_context)
    assert await model_context.get_messages() == [
        SystemMessage(content="\nRelevant memory content (in chronological order):\n1. New preference\n")
    ]
    assert [m.content for m in result.memories.results] == ["New preference"]


async def test_list_memory_matches_autogens_own() -> None:
    """memora_pg's ListMemory leaves a model context exactly as AutoGen's ListMemory does."""
    ours, theirs = ListMemory(name="m"), autogen_memory.ListMemory(name="m")
    ours_context, theirs_context = UnboundedChatCompletionContext(), UnboundedChatCompletionContext()
    for memory in (ours, theirs):
        await memory.add(MemoryContent(content="likes tea", mime_type="text/plain"))
        await memory.add(MemoryContent(content={"city": "Lisbon"}, mime_type="application/json"))
    ours_result = await ours.update_context(ours_context)
    theirs_result = await theirs.update_context(theirs_context)
    assert await ours_context.get_messages() == await theirs_context.get_messages()
    assert ours_result == theirs_result
    assert ours.name == theirs.name


async def test_the_seed_example_with_postgres_memory(engine: AsyncEngine, settings: Settings) -> None:
    """The same flow on PostgresMemory: the last user message finds the stored preference."""
    memory = postgres_memory(engine, settings)
    await memory.add(MemoryContent(content="User prefers formal language", mime_type="text/plain"))
    await memory.add(MemoryContent(content="User lives in Lisbon", mime_type="text/plain"))
    model_context = BufferedChatCompletionContext(buffer_size=10)
    await model_context.add_message(UserMessage(content="which language register do I prefer?", source="user"))
    result = await memory.update_context(model_context)
    messages = await model_context.get_messages()
    assert len(messages) == 2
    assert isinstance(messages[-1], SystemMessage)
    assert messages[-1].content.startswith("\nRelevant memory content:\n1. User prefers formal language\n")
    assert result.memories.results[0].content == "User prefers formal language"
    assert isinstance(result.memories.results[0], autogen_memory.MemoryContent)
    await memory.close()


async def test_postgres_memory_with_an_unbounded_context(engine: AsyncEngine, settings: Settings) -> None:
    """With UnboundedChatCompletionContext, the last UserMessage (multimodal list content too) is the query."""
    memory = postgres_memory(engine, settings, k=1)
    await memory.add(MemoryContent(content="The user is allergic to peanuts", mime_type="text/markdown"))
    await memory.add(MemoryContent(content={"pet": "cat", "name": "Tom"}, mime_type="application/json"))
    model_context = UnboundedChatCompletionContext(
        initial_messages=[
            SystemMessage(content="You are helpful."),
            UserMessage(content="tell me about my pet cat", source="user"),
            AssistantMessage(content="Sure.", source="assistant"),
            UserMessage(content=["anything about", "peanuts allergic?"], source="user"),
        ]
    )
    result = await memory.update_context(model_context)
    assert [m.content for m in result.memories.results] == ["The user is allergic to peanuts"]
    messages = await model_context.get_messages()
    assert len(messages) == 5
    assert messages[-1] == SystemMessage(content="\nRelevant memory content:\n1. The user is allergic to peanuts\n")
    # The results serialize as AutoGen serializes them (mime types as strings).
    assert result.model_dump()["memories"]["results"][0]["mime_type"] == "text/markdown"


async def test_a_cancelled_token_cancels_the_call_and_writes_nothing(engine: AsyncEngine, settings: Settings) -> None:
    """An already-cancelled CancellationToken cancels add() and query(); nothing is written."""
    memory = postgres_memory(engine, settings)
    token = CancellationToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await memory.add(MemoryContent(content="tea", mime_type="text/plain"), cancellation_token=token)
    with pytest.raises(asyncio.CancelledError):
        await memory.query("tea", cancellation_token=token)
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM memora.autogen_contents")) == 0
    live = CancellationToken()
    await memory.add(MemoryContent(content="tea", mime_type="text/plain"), cancellation_token=live)
    assert [m.content for m in (await memory.query("tea", cancellation_token=live)).results] == ["tea"]
