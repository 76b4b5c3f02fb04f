"""The error names of the durag/mem0 ``Memory`` API, as members of memora_pg's family."""

from __future__ import annotations

from memora_pg.errors import (
    DatabaseError,
    EmbeddingError,
    InvalidInputError,
    LLMError,
    MemoraPGError,
    NotFoundError,
)


class DuragValidationError(InvalidInputError):
    """Invalid input to the Memory API (a bad filter, a missing entity id, a bad memory_type)."""


class VectorStoreError(MemoraPGError):
    """The vector store (the memories table in PostgreSQL) could not be used as configured."""


class MemoryNotFoundError(NotFoundError, ValueError):
    """No memory with that id in this collection (a ValueError too, as mem0 raises one)."""


__all__ = [
    "DatabaseError",
    "DuragValidationError",
    "EmbeddingError",
    "LLMError",
    "MemoryNotFoundError",
    "VectorStoreError",
]
