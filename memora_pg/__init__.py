"""memora_pg: an AI agent's long-term memory in one PostgreSQL database."""

from __future__ import annotations

from memora_pg.autogen import ListMemory, PostgresMemory
from memora_pg.config import SearchMode, Settings
from memora_pg.contract import BaseGraphDB, BaseVectorDB, MemorySearchScope
from memora_pg.errors import (
    AlreadyExistsError,
    CommitOutcomeUnknownError,
    ConfigurationError,
    ConnectionLostError,
    DatabaseError,
    EmbeddingError,
    InvalidInputError,
    LLMError,
    MemoraPGError,
    NotFoundError,
    SchemaNotMigratedError,
    SettingsError,
    TransientDatabaseError,
)
from memora_pg.mem0 import AsyncMemory, Memory, MemoryConfig
from memora_pg.models import (
    Agent,
    ContraryMemoryToStore,
    Interaction,
    MemoriesAndInteraction,
    MemoryToStore,
    MessageBlock,
    Organization,
    User,
)
from memora_pg.store import PostgresGraphDB
from memora_pg.vector import PgVectorDB

# ``Memory`` is the mem0-style API (as the seed names it); the Memora contract's memory model is
# ``memora_pg.models.Memory``.
__all__ = [
    "Agent",
    "AlreadyExistsError",
    "AsyncMemory",
    "BaseGraphDB",
    "BaseVectorDB",
    "CommitOutcomeUnknownError",
    "ConfigurationError",
    "ConnectionLostError",
    "ContraryMemoryToStore",
    "DatabaseError",
    "EmbeddingError",
    "Interaction",
    "InvalidInputError",
    "LLMError",
    "ListMemory",
    "MemoraPGError",
    "MemoriesAndInteraction",
    "Memory",
    "MemoryConfig",
    "MemorySearchScope",
    "MemoryToStore",
    "MessageBlock",
    "NotFoundError",
    "Organization",
    "PgVectorDB",
    "PostgresGraphDB",
    "PostgresMemory",
    "SchemaNotMigratedError",
    "SearchMode",
    "Settings",
    "SettingsError",
    "TransientDatabaseError",
    "User",
]
