"""``ListMemory``: AutoGen's chronological list memory, in memory."""

from __future__ import annotations

import builtins
from typing import Any

from pydantic import Field

from memora_pg.autogen.convert import mime_out
from memora_pg.autogen.protocol import (
    CancellationToken,
    Component,
    Memory,
    MemoryContent,
    MemoryQueryResult,
    ModelContext,
    SystemMessage,
    UpdateContextResult,
)
from memora_pg.known_names import StrictConfig


class ListMemoryConfig(StrictConfig):
    """Configuration of a ``ListMemory`` component (autogen-core's ``ListMemoryConfig``)."""

    name: str | None = None
    memory_contents: builtins.list[MemoryContent] = Field(default_factory=builtins.list)


class ListMemory(Memory, Component[ListMemoryConfig]):
    """Simple chronological list-based memory, as AutoGen's ``ListMemory``.

    Contents are kept in a list in the order they were added. ``update_context`` appends
    all of them to the model context as one ``SystemMessage``; ``query`` returns all of them.
    The list can be read and replaced through the ``content`` property. It is an AutoGen
    component: ``dump_component()`` writes ``{name, memory_contents}``.
    """

    component_type = "memory"
    component_provider_override = "memora_pg.autogen.ListMemory"
    component_config_schema = ListMemoryConfig

    def __init__(self, name: str | None = None, memory_contents: builtins.list[MemoryContent] | None = None) -> None:
        self._name = name or "default_list_memory"
        self._contents: builtins.list[MemoryContent] = memory_contents if memory_contents is not None else []

    @property
    def name(self) -> str:
        """The memory instance identifier."""
        return self._name

    @property
    def content(self) -> builtins.list[MemoryContent]:
        """The stored contents, oldest first."""
        return self._contents

    @content.setter
    def content(self, value: builtins.list[MemoryContent]) -> None:
        self._contents = value

    async def update_context(self, model_context: ModelContext) -> UpdateContextResult:
        """Append every memory to ``model_context`` as one SystemMessage (nothing when empty)."""
        if not self._contents:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        lines = [f"{i}. {memory.content!s}" for i, memory in enumerate(self._contents, 1)]
        text = "\nRelevant memory content (in chronological order):\n" + "\n".join(lines) + "\n"
        await model_context.add_message(SystemMessage(content=text))
        return UpdateContextResult(memories=MemoryQueryResult(results=self._contents))

    async def query(
        self, query: str | MemoryContent = "", cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        """Every memory, unfiltered; the query is ignored."""
        return MemoryQueryResult(results=self._contents)

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        self._contents.append(content)

    async def clear(self) -> None:
        self._contents = []

    async def close(self) -> None:
        """Nothing to release."""

    def _to_config(self) -> ListMemoryConfig:
        return ListMemoryConfig(name=self._name, memory_contents=self._contents)

    @classmethod
    def _from_config(cls, config: ListMemoryConfig) -> ListMemory:
        # A dumped mime type is its string; the MemoryMimeType values come back as its members.
        contents = [
            c.model_copy(update={"mime_type": mime_out(c.mime_type)}) if isinstance(c.mime_type, str) else c
            for c in config.memory_contents
        ]
        return cls(name=config.name, memory_contents=contents)
