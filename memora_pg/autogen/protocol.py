"""The protocol's types: AutoGen's own when autogen-core is installed, compatible stand-ins otherwise.

This is the only place that decides. Every other module of the package uses these names either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from enum import Enum
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, field_serializer

__all__ = [
    "AUTOGEN_CORE",
    "CancellationToken",
    "Component",
    "Image",
    "Memory",
    "MemoryContent",
    "MemoryMimeType",
    "MemoryQueryResult",
    "ModelContext",
    "SystemMessage",
    "UpdateContextResult",
]


class ModelContext(Protocol):
    """What ``update_context`` needs of a model context: AutoGen's ``ChatCompletionContext`` or any look-alike."""

    async def get_messages(self) -> Sequence[Any]: ...

    async def add_message(self, message: Any) -> None: ...


ConfigT = TypeVar("ConfigT", bound=BaseModel)

try:
    from autogen_core import CancellationToken, Component, Image
    from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
    from autogen_core.models import SystemMessage

    AUTOGEN_CORE = True
except ImportError:
    AUTOGEN_CORE = False

    class CancellationToken:  # type: ignore[no-redef]
        """Stand-in for typing: any object with AutoGen's ``is_cancelled()`` and ``link_future()`` works."""

    class Component(Generic[ConfigT]):  # type: ignore[no-redef]
        """Stand-in for AutoGen's ``Component``: ``_to_config()``/``_from_config()`` work without autogen-core;
        ``dump_component()``/``load_component()`` are autogen-core's and need it installed."""

    class Image:  # type: ignore[no-redef]
        """Stand-in: without autogen_core an image is ``bytes`` with an ``image/*`` mime type, never this."""

    class MemoryMimeType(Enum):  # type: ignore[no-redef]
        """Supported MIME types for memory content."""

        TEXT = "text/plain"
        JSON = "application/json"
        MARKDOWN = "text/markdown"
        IMAGE = "image/*"
        BINARY = "application/octet-stream"

    class MemoryContent(BaseModel):  # type: ignore[no-redef]
        """A memory content item."""

        content: str | bytes | dict[str, Any]
        mime_type: MemoryMimeType | str
        metadata: dict[str, Any] | None = None

        model_config = ConfigDict(arbitrary_types_allowed=True)

        @field_serializer("mime_type")
        def serialize_mime_type(self, mime_type: MemoryMimeType | str) -> str:
            """Serialize the MIME type to a string."""
            return mime_type.value if isinstance(mime_type, MemoryMimeType) else mime_type

    class MemoryQueryResult(BaseModel):  # type: ignore[no-redef]
        """Result of a memory ``query()``."""

        results: list[MemoryContent]

    class UpdateContextResult(BaseModel):  # type: ignore[no-redef]
        """Result of a memory ``update_context()``."""

        memories: MemoryQueryResult

    class SystemMessage(BaseModel):  # type: ignore[no-redef]
        """A system message for the model (AutoGen's shape)."""

        content: str
        type: Literal["SystemMessage"] = "SystemMessage"

    class Memory(ABC):  # type: ignore[no-redef]
        """The memory protocol: storage that can enrich a model context."""

        component_type = "memory"

        @abstractmethod
        async def update_context(self, model_context: ModelContext) -> UpdateContextResult: ...

        @abstractmethod
        async def query(
            self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
        ) -> MemoryQueryResult: ...

        @abstractmethod
        async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None: ...

        @abstractmethod
        async def clear(self) -> None: ...

        @abstractmethod
        async def close(self) -> None: ...
