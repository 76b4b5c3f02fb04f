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
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memora_pg import known_names
from memora_pg.config import Settings
from memora_pg.embeddings import Embedder, HashEmbedder, LocalEmbedder, default_embedder
from memora_pg.mem0.errors import DuragValidationError, VectorStoreError

logger = logging.getLogger(__name__)

_COLLECTION = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")

# The keys each component's ``config`` takes: the ones memora_pg reads, then mem0's own that have no
# meaning here and are accepted, so that a configuration written for mem0 works unchanged. Any other
# key is refused with the closest known one: a misspelt key read with ``.get`` would fall back to its
# default without a word (a ``conection_string`` writing to the embedded server).
_CONNECTION_KEYS = ("connection_string", "host", "port", "user", "password", "dbname", "sslmode")
VECTOR_STORE_KEYS = frozenset(
    {*_CONNECTION_KEYS, "collection_name", "embedding_model_dims", "schema", "search_mode", "hybrid_search"}
    | {"diskann", "hnsw", "minconn", "maxconn", "connection_pool"}
)
EMBEDDER_KEYS = frozenset(
    {"model", "api_key", "embedding_dims", "openai_base_url", "base_url", "query_prefix", "document_prefix"}
    | {"variant", "num_threads"}
    | {
        "ollama_base_url", "model_kwargs", "huggingface_base_url", "azure_kwargs", "http_client_proxies",
        "vertex_credentials_json", "memory_add_embedding_type", "memory_update_embedding_type",
        "memory_search_embedding_type", "output_dimensionality", "lmstudio_base_url", "aws_access_key_id",
        "aws_secret_access_key", "aws_session_token", "aws_region",
    }
)  # fmt: skip
LLM_KEYS = frozenset(
    {"model", "api_key", "openai_base_url", "base_url", "temperature", "max_tokens", "top_p", "timeout", "max_retries"}
    | {
        "top_k", "enable_vision", "vision_details", "reasoning_effort", "http_client_proxies", "is_reasoning_model",
        "models", "route", "openrouter_base_url", "site_url", "app_name", "store", "response_callback",
    }
)  # fmt: skip
RERANKER_KEYS = LLM_KEYS | {"scoring_prompt", "llm", "provider"}
# Top-level keys of mem0's configuration that mean nothing here (the graph store of mem0's older releases).
_MEM0_ONLY = frozenset({"graph_store"})


class _ProviderConfig(BaseModel):
    """mem0's shape of a component's configuration: a provider and its options."""

    model_config = ConfigDict(extra="forbid")
    _keys: ClassVar[frozenset[str]] = frozenset()
    _where: ClassVar[str] = ""

    provider: str
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_keys(self) -> _ProviderConfig:
        refusal = known_names.unknown(self.config, self._keys, where=f"{self._where}.config")
        if refusal:
            raise DuragValidationError(refusal)
        return self


class VectorStoreConfig(_ProviderConfig):
    _keys = VECTOR_STORE_KEYS
    _where = "vector_store"
    provider: str = "pgvector"

    @model_validator(mode="after")
    def _postgres_only(self) -> VectorStoreConfig:
        if self.provider != "pgvector":
            raise VectorStoreError(
                "memora_pg keeps vectors in PostgreSQL: "
                f"vector_store provider must be 'pgvector', not {self.provider!r}"
            )
        given = self.config.get("connection_string")
        if given is not None and (not isinstance(given, str) or not given.strip()):
            # A connection string that was asked for and is empty (an unset environment variable) must
            # not fall back to the embedded server.
            raise VectorStoreError(f"vector_store.config: connection_string must be a postgresql:// URL, not {given!r}")
        if self.config.get("connection_pool") is not None:
            # mem0 takes a psycopg pool; memora_pg opens its own (asyncpg). Ignoring it would write to
            # the embedded server instead of the database the pool reaches.
            raise VectorStoreError(
                "vector_store.config: connection_pool is a psycopg pool, which memora_pg cannot use: "
                "give the database as connection_string (or host, port, user, password, dbname)"
            )
        return self


class LlmConfig(_ProviderConfig):
    _keys = LLM_KEYS
    _where = "llm"
    provider: str = "openai"


class EmbedderConfig(_ProviderConfig):
    _keys = EMBEDDER_KEYS
    _where = "embedder"
    provider: str = "local"


class RerankerConfig(_ProviderConfig):
    _keys = RERANKER_KEYS
    _where = "reranker"
    provider: str = "llm"


class MemoryConfig(BaseModel):
    """The seed's ``MemoryConfig``. A key of mem0's configuration that has no meaning here is ignored with a
    warning; any other unknown key, at any level, is refused with the closest known name."""

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
    def _known_keys(self) -> MemoryConfig:
        extra = list(self.model_extra or {})
        refusal = known_names.unknown(
            [key for key in extra if key not in _MEM0_ONLY], type(self).model_fields, where="MemoryConfig"
        )
        if refusal:
            raise DuragValidationError(refusal)
        for key in extra:
            logger.warning("MemoryConfig: %r has no meaning for memora_pg and is ignored", key)
        return self

    @classmethod
    def parse(cls, config_dict: Mapping[str, Any]) -> MemoryConfig:
        """A configuration dict (``Memory.from_config``'s), refused as a ``DuragValidationError``: a
        refusal of memora_pg's own (an unknown key) as its one line, any other with pydantic's details."""
        try:
            return cls.model_validate(dict(config_dict))
        except ValidationError as error:
            for detail in error.errors():
                if isinstance(cause := (detail.get("ctx") or {}).get("error"), DuragValidationError):
                    raise cause from error
            raise DuragValidationError(f"Invalid configuration: {error}") from error

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
            local = {key: options[key] for key in ("variant", "num_threads") if key in options}
            return LocalEmbedder(**local) if local else default_embedder()
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
