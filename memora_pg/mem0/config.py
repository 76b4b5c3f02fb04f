"""``MemoryConfig``: the seed's fields, accepting mem0's own configuration dictionaries unchanged.

Only what makes sense on PostgreSQL is used: the vector store is always memora_pg's memories
table (provider ``pgvector``), reached by ``connection_string`` or ``host``/``port``/``user``/
``password``/``dbname``, or the embedded server when nothing is configured. The LLM and the
embedder go through the official ``openai`` client, so any OpenAI-compatible endpoint works.
``history_db_path`` is accepted and unused: history lives in PostgreSQL, in the same
transactions as the memories.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memora_pg.config import Settings
from memora_pg.embeddings import Embedder, HashEmbedder, LocalEmbedder, default_embedder
from memora_pg.mem0.errors import DuragValidationError, VectorStoreError

logger = logging.getLogger(__name__)

_COLLECTION = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class _ProviderConfig(BaseModel):
    """mem0's shape of a component's configuration: a provider and its options."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    config: dict[str, Any] = Field(default_factory=dict)


class VectorStoreConfig(_ProviderConfig):
    provider: str = "pgvector"

    @model_validator(mode="after")
    def _postgres_only(self) -> VectorStoreConfig:
        if self.provider != "pgvector":
            raise VectorStoreError(
                "memora_pg keeps vectors in PostgreSQL: "
                f"vector_store provider must be 'pgvector', not {self.provider!r}"
            )
        return self


class LlmConfig(_ProviderConfig):
    provider: str = "openai"


class EmbedderConfig(_ProviderConfig):
    provider: str = "local"


class RerankerConfig(_ProviderConfig):
    provider: str = "llm"


class MemoryConfig(BaseModel):
    """The seed's ``MemoryConfig``. Keys of mem0's config that have no meaning here are ignored with a warning."""

    model_config = ConfigDict(extra="allow")

    vector_store: VectorStoreConfig = Field(default_factory=VectorStoreConfig)
    llm: LlmConfig = Field(default_factory=LlmConfig)
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    history_db_path: str = Field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), ".durag", "history.db"),
        description="Accepted for compatibility and unused: history is kept in PostgreSQL.",
    )
    reranker: RerankerConfig | None = None
    version: str = "v1.1"
    custom_instructions: str | None = None
    # mem0's names for the two prompts.
    custom_fact_extraction_prompt: str | None = None
    custom_update_memory_prompt: str | None = None

    @model_validator(mode="after")
    def _warn_unused(self) -> MemoryConfig:
        for key in self.model_extra or {}:
            logger.warning("MemoryConfig: %r has no meaning for memora_pg and is ignored", key)
        return self

    # -- what the configuration builds ---------------------------------------------------------

    @property
    def collection_name(self) -> str:
        name = str(self.vector_store.config.get("collection_name") or "mem0")
        if not _COLLECTION.match(name):
            raise DuragValidationError(f"collection_name {name!r} must be 1-200 letters, digits, '_', '.', ':' or '-'")
        return name

    def settings(self) -> Settings:
        """memora_pg settings from the vector store's configuration (the environment fills the rest)."""
        store = self.vector_store.config
        values: dict[str, Any] = {}
        url = _database_url(store)
        if url:
            values["database_url"] = url
        if store.get("embedding_model_dims"):
            values["embedding_dimensions"] = int(store["embedding_model_dims"])
        if store.get("schema"):
            values["db_schema"] = store["schema"]
        # Every search is hybrid unless MEMORA_PG_SEARCH_MODE (or memora_pg's own "search_mode" key
        # here) says otherwise; mem0's flag asks for hybrid too.
        if store.get("search_mode"):
            values["search_mode"] = store["search_mode"]
        elif store.get("hybrid_search"):
            values["search_mode"] = "hybrid"
        return Settings(**values)

    def build_embedder(self) -> Embedder:
        provider, options = self.embedder.provider, self.embedder.config
        dims = options.get("embedding_dims") or self.vector_store.config.get("embedding_model_dims")
        if provider == "openai":
            from memora_pg.embeddings.openai import OpenAIEmbedder  # imports the SDK: only when configured

            return OpenAIEmbedder(
                options.get("model") or "text-embedding-3-small",
                base_url=options.get("openai_base_url") or options.get("base_url"),
                api_key=options.get("api_key"),
                dimensions=int(dims) if dims else None,
                query_prefix=options.get("query_prefix", ""),
                document_prefix=options.get("document_prefix", ""),
            )
        if provider == "local":
            return LocalEmbedder() if options else default_embedder()
        if provider == "hash":
            return HashEmbedder(int(dims or 384))
        raise DuragValidationError(f"embedder provider must be 'openai', 'local' or 'hash', not {provider!r}")


def _database_url(store: dict[str, Any]) -> str | None:
    if store.get("connection_string"):
        return str(store["connection_string"])
    if not any(store.get(key) for key in ("host", "port", "user", "password", "dbname")):
        return None
    user = quote(str(store.get("user") or "postgres"), safe="")
    password = store.get("password")
    auth = f"{user}:{quote(str(password), safe='')}" if password else user
    host = store.get("host") or "localhost"
    port = store.get("port") or 5432
    dbname = quote(str(store.get("dbname") or "postgres"), safe="")
    url = f"postgresql://{auth}@{host}:{port}/{dbname}"
    if store.get("sslmode"):
        url += f"?sslmode={quote(str(store['sslmode']), safe='')}"
    return url
