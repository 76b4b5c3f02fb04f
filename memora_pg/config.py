"""Settings: typed, with the environment as an override only.

Nothing here runs at import time; the CLI and the stores build a ``Settings`` when asked.
Initialiser arguments win over ``MEMORA_PG_*`` variables, which win over the defaults. The
plain ``DATABASE_URL`` variable is honoured too, because most platforms set it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def default_data_dir() -> Path:
    """Where the embedded server keeps its data: ``$XDG_DATA_HOME/memora_pg`` or ``~/.local/share/memora_pg``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memora_pg"


class Settings(BaseSettings):
    """Everything memora_pg can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORA_PG_",
        env_nested_delimiter="__",
        extra="ignore",
        populate_by_name=True,
    )

    database_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORA_PG_DATABASE_URL", "DATABASE_URL", "database_url"),
        description="postgresql:// URL of the server; unset means the embedded server.",
    )
    db_schema: str = Field(
        default="memora",
        validation_alias=AliasChoices("MEMORA_PG_SCHEMA", "db_schema"),
        description="PostgreSQL schema that holds memora_pg's tables and alembic's version table.",
    )
    embedding_dimensions: int = Field(
        default=384, gt=0, le=16000, description="Dimension of the vector column on a new database."
    )

    pool_size: int = Field(default=5, ge=1)
    max_overflow: int = Field(default=10, ge=0)
    pool_timeout: float = Field(default=30.0, gt=0)
    pool_recycle: int = Field(default=1800, description="Seconds after which a pooled connection is replaced.")
    pool_pre_ping: bool = True
    statement_cache_size: int = Field(
        default=100, ge=0, description="asyncpg prepared-statement cache; 0 behind pgbouncer in transaction mode."
    )
    statement_timeout_ms: int | None = Field(default=None, ge=0)

    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000)
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    text_search_config: str = Field(default="simple", description="Full-text configuration of the lexical arm.")
    search_mode: Literal["hybrid", "dense"] = "hybrid"

    embedded_data_dir: Path = Field(default_factory=default_data_dir)
    embedded_postgres_version: Literal[16, 18] = 18

    openai_api_key: SecretStr | None = None

    @field_validator("db_schema", "text_search_config")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        if not _IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not a plain lower-case SQL identifier")
        return value

    def url(self) -> str | None:
        """The configured database URL, or None for the embedded server."""
        return self.database_url.get_secret_value() if self.database_url else None
