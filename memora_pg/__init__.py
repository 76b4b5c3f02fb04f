"""memora_pg: an AI agent's long-term memory in one PostgreSQL database."""

from __future__ import annotations

from memora_pg.config import Settings
from memora_pg.contract import BaseGraphDB, BaseVectorDB, MemorySearchScope
from memora_pg.errors import (
    AlreadyExistsError,
    ConfigurationError,
    DatabaseError,
    EmbeddingError,
    InvalidInputError,
    LLMError,
    MemoraPGError,
    NotFoundError,
)
from memora_pg.graph.store import PostgresGraphDB
from memora_pg.models import (
    Agent,
    ContraryMemoryToStore,
    Interaction,
    MemoriesAndInteraction,
    Memory,
    MemoryToStore,
    MessageBlock,
    Organization,
    User,
)
from memora_pg.vector import PgVectorDB

__all__ = [
    "Agent",
    "AlreadyExistsError",
    "BaseGraphDB",
    "BaseVectorDB",
    "ConfigurationError",
    "ContraryMemoryToStore",
    "DatabaseError",
    "EmbeddingError",
    "Interaction",
    "InvalidInputError",
    "LLMError",
    "MemoraPGError",
    "MemoriesAndInteraction",
    "Memory",
    "MemorySearchScope",
    "MemoryToStore",
    "MessageBlock",
    "NotFoundError",
    "Organization",
    "PgVectorDB",
    "PostgresGraphDB",
    "Settings",
    "User",
]
