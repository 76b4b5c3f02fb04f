"""Alembic, driven by memora_pg's settings: the schema name, the embedding dimension, HNSW parameters.

Migrations are the schema. ``upgrade()`` brings a database to head from a running program
(what ``setup()`` calls); the ``alembic`` command line and ``alembic upgrade head --sql``
use the same ``env.py`` through :func:`run_env`.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from alembic import command
from memora_pg import config, driver
from memora_pg import schema as tables
from memora_pg.config import Settings
from memora_pg.errors import SchemaNotMigratedError
from memora_pg.sql_text import qualified, quoted, render
from memora_pg.statements import in_schema

# The schema every revision creates its objects in, made before the first one runs.
CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"


@dataclass(frozen=True)
class MigrationOptions:
    """What a migration script may depend on besides the SQL it runs."""

    schema: str = config.default("db_schema")
    dimensions: int = config.default("embedding_dimensions")
    hnsw_m: int = config.default("hnsw_m")
    hnsw_ef_construction: int = config.default("hnsw_ef_construction")
    # The text-search configuration of a new database; None: migration 0006 decides.
    text_search_config: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, dimensions: int | None = None) -> MigrationOptions:
        return cls(
            schema=settings.db_schema,
            dimensions=dimensions or settings.embedding_dimensions,
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            text_search_config=settings.text_search_config,
        )


_OPTIONS_KEY = "memora_pg_options"


def script_location() -> Path:
    """The migration scripts: shipped inside the wheel, or the repository's ``alembic/`` in a checkout."""
    packaged = Path(__file__).parent / "_alembic"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "alembic"


def alembic_config(options: MigrationOptions, connection: Connection | None = None) -> Config:
    # Alembic's default stdout is bound when alembic is imported; take the current one.
    config = Config(stdout=sys.stdout)
    config.set_main_option("script_location", str(script_location()))
    config.attributes[_OPTIONS_KEY] = options
    if connection is not None:
        config.attributes["connection"] = connection
    return config


# Above this many rows, building an index inside the migration's transaction would block writes to
# the table for too long: the migration leaves it to ``memora-pg index build`` (CONCURRENTLY).
LARGE_TABLE_ROWS = 100_000


def defer_index_build(schema: str, table: str) -> bool:
    """True when ``table`` is large enough that its new index should be built CONCURRENTLY, later.

    Offline (``--sql``) there is no table to measure: the script builds the index in place and a
    DBA can edit it into ``CREATE INDEX CONCURRENTLY``.
    """
    from alembic import context, op

    if context.is_offline_mode():
        return False
    rows = op.get_bind().scalar(
        text("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(:t)"), {"t": qualified(schema, table)}
    )
    return bool(rows and rows > LARGE_TABLE_ROWS)


def deployment_dimensions(schema: str, default: int) -> int:
    """The deployment's embedding dimension: the memories column's when a database is at hand, else
    ``default`` (offline, or a database whose memories have no dimension yet)."""
    from alembic import context, op

    if context.is_offline_mode():
        return default
    found = op.get_bind().scalar(
        text("SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(:table) AND attname = 'embedding'"),
        {"table": qualified(schema, "memories")},
    )
    return int(found) if found and found > 0 else default


def tenant_column() -> sa.Column[str]:
    """A tenant table's first column: the organization its row belongs to (row-level security's key and,
    on Citus, the distribution column)."""
    return sa.Column("org_id", sa.Text(), nullable=False)


def write_order_column() -> sa.Column[int]:
    """``seq``: the order rows were written in, which breaks ties of equal times."""
    return sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False)


def created_at_column() -> sa.Column[object]:
    """``created_at``: when the row was written, by the server's clock."""
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def cascading_key(
    schema: str, table: str, columns: list[str], referred: str, referred_columns: list[str] | None = None
) -> sa.ForeignKeyConstraint:
    """The foreign key of ``table``'s ``columns`` to ``referred`` (its same-named columns, unless
    ``referred_columns``), deleted with the row it refers to, and named ``fk_<table>_<columns>_<referred>``.

    Revisions that ran build their tables with these helpers: their output must never change.
    """
    targets = referred_columns or columns
    return sa.ForeignKeyConstraint(
        columns,
        [f"{schema}.{referred}.{column}" for column in targets],
        name=f"fk_{table}_{'_'.join(columns)}_{referred}",
        ondelete="CASCADE",
    )


def options() -> MigrationOptions:
    """The options of the running migration; called by the scripts in ``alembic/versions``."""
    from alembic import context

    found = context.config.attributes.get(_OPTIONS_KEY)
    return found if isinstance(found, MigrationOptions) else MigrationOptions()


def _advisory_key(schema: str) -> str:
    return f"memora_pg migrations {schema}"


async def upgrade(engine: AsyncEngine, options: MigrationOptions, revision: str = "head") -> None:
    """Bring the database to ``revision`` in one transaction; safe from several processes at once.

    A transaction-scoped advisory lock serialises concurrent callers: the second waits, then
    finds the schema at head and does nothing. ``CREATE EXTENSION`` and ``CREATE SCHEMA``
    would otherwise race.
    """
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": _advisory_key(options.schema)})
        await conn.run_sync(_run_command, options, "upgrade", revision)


async def downgrade(engine: AsyncEngine, options: MigrationOptions, revision: str = "base") -> None:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": _advisory_key(options.schema)})
        await conn.run_sync(_run_command, options, "downgrade", revision)


def _run_command(connection: Connection, options: MigrationOptions, name: str, revision: str) -> None:
    config = alembic_config(options, connection)
    getattr(command, name)(config, revision)


async def current_revision(conn: driver.Connection, schema: str) -> str | None:
    """The alembic revision the database is at, or None for a database without the schema."""
    exists = await conn.scalar(
        text("SELECT to_regclass(:name) IS NOT NULL"), {"name": qualified(schema, "alembic_version")}
    )
    if not exists:
        return None
    version: str | None = await conn.scalar(in_schema("SELECT version_num FROM {schema}.alembic_version", schema))
    return version


async def require_head(conn: driver.Connection, schema: str) -> str:
    """The schema's revision, which must be head: else :class:`SchemaNotMigratedError`."""
    revision = await current_revision(conn, schema)
    head = head_revision()
    if revision != head:
        raise SchemaNotMigratedError(schema, revision, head)
    return revision


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(MigrationOptions())).get_current_head()
    assert head is not None
    return head


# --- env.py ---------------------------------------------------------------------------------


def _compare_type(context: Any, inspected: Any, metadata: Any, inspected_type: Any, metadata_type: Any) -> bool | None:
    # The model's vector column has no dimension (a deployment setting): compare only the kind.
    if isinstance(metadata_type, VECTOR):
        return not isinstance(inspected_type, VECTOR)
    return None


def run_env(context: EnvironmentContext) -> None:
    """The body of ``alembic/env.py``: online with a shared connection or a URL, or offline (--sql)."""
    opts = context.config.attributes.get(_OPTIONS_KEY)
    if not isinstance(opts, MigrationOptions):
        opts = MigrationOptions.from_settings(Settings())
        context.config.attributes[_OPTIONS_KEY] = opts
    configure: dict[str, Any] = {
        "target_metadata": tables.metadata_in(opts.schema),
        "version_table_schema": opts.schema,
        "include_schemas": True,
        "include_name": lambda name, type_, parents: type_ != "schema" or name == opts.schema,
        "compare_type": _compare_type,
    }

    def run(connection: Connection | None) -> None:
        if connection is not None:
            context.configure(connection=connection, **configure)
        else:
            context.configure(
                url="postgresql://", literal_binds=True, dialect_opts={"paramstyle": "named"}, **configure
            )
        with context.begin_transaction():
            context.execute(render(CREATE_SCHEMA, schema=quoted(opts.schema)))
            context.run_migrations()

    if context.is_offline_mode():
        run(None)
        return
    shared = context.config.attributes.get("connection")
    if shared is not None:
        run(shared)
        return
    asyncio.run(_run_online_from_settings(run))


async def _run_online_from_settings(run: Any) -> None:
    from memora_pg.engine import create_engine_from_settings

    settings = Settings()
    engine = await create_engine_from_settings(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": _advisory_key(settings.db_schema)}
            )
            await conn.run_sync(run)
    finally:
        await engine.dispose()
