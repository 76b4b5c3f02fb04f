"""The durag/mem0-style ``Memory`` API on PostgreSQL: memories, vectors and history in one database."""

from __future__ import annotations

from memora_pg.mem0.config import EmbedderConfig, LlmConfig, MemoryConfig, RerankerConfig, VectorStoreConfig
from memora_pg.mem0.errors import (
    DatabaseError,
    DuragValidationError,
    EmbeddingError,
    LLMError,
    MemoryNotFoundError,
    VectorStoreError,
)
from memora_pg.mem0.llm import LLMReranker, OpenAILLM, Reranker
from memora_pg.mem0.memory import AsyncMemory
from memora_pg.mem0.sync import Memory

__all__ = [
    "AsyncMemory",
    "DatabaseError",
    "DuragValidationError",
    "EmbedderConfig",
    "EmbeddingError",
    "LLMError",
    "LLMReranker",
    "LlmConfig",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "OpenAILLM",
    "Reranker",
    "RerankerConfig",
    "VectorStoreConfig",
    "VectorStoreError",
]
