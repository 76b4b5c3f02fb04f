"""AutoGen's memory protocol: ``ListMemory`` in a list, ``PostgresMemory`` in PostgreSQL.

Both implement the protocol's ``Memory`` (``update_context``, ``query``, ``add``, ``clear``,
``close``). With autogen-core installed (``pip install 'memora-pg[autogen]'``) the protocol's
classes *are* AutoGen's, so AutoGen's agents and model contexts take these memories and their
results as their own. Without it, compatible stand-ins with the same names and fields are
defined here, and images are plain bytes with an ``image/*`` mime type.

``PostgresMemory`` is a thin face over ``memora_pg.graph.autogen_contents``: it validates and
converts, embeds before the transaction opens, and runs one transaction per call.

The package: ``protocol`` (the protocol's types), ``list_memory``, ``convert`` (contents in and
out), ``arguments`` (checks and limits) and ``memory`` (``PostgresMemory`` and its configuration).
"""

from __future__ import annotations

from memora_pg.autogen.convert import to_entry, to_memory_content
from memora_pg.autogen.list_memory import ListMemory, ListMemoryConfig
from memora_pg.autogen.memory import PostgresMemory, PostgresMemoryConfig
from memora_pg.autogen.protocol import (
    AUTOGEN_CORE,
    CancellationToken,
    Component,
    Image,
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    ModelContext,
    SystemMessage,
    UpdateContextResult,
)

__all__ = [
    "AUTOGEN_CORE",
    "CancellationToken",
    "Component",
    "Image",
    "ListMemory",
    "ListMemoryConfig",
    "Memory",
    "MemoryContent",
    "MemoryMimeType",
    "MemoryQueryResult",
    "ModelContext",
    "PostgresMemory",
    "PostgresMemoryConfig",
    "SystemMessage",
    "UpdateContextResult",
    "to_entry",
    "to_memory_content",
]
