"""Migrations are the schema: no drift, reversible, scriptable offline, safe to run concurrently."""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
import textwrap

import pytest
from sqlalchemy import Connection, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from alembic import command
from memora_pg import PostgresGraphDB, Settings, driver, migrations
from memora_pg.embeddings import HashEmbedder
from memora_pg.migrations import MigrationOptions


def _check(connection: Connection, options: MigrationOptions) -> None:
    command.check(migrations.alembic_config(options, connection))


async def test_models_and_migrations_do_not_drift(database_url: str) -> None:
    """alembic check finds no difference between schema.py and the migrated database."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_check, MigrationOptions(schema="memora"))
    finally:
        await engine.dispose()


async def _tables(url: str, schema: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"), {"s": schema}
            )
            return {r[0] for r in rows}
    finally:
        await engine.dispose()


async def _column_type(url: str, schema: str) -> str:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            found = await conn.scalar(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = to_regclass(:table) AND attname = 'embedding'"
                ),
                {"table": f"{schema}.memories"},
            )
    finally:
        await engine.dispose()
    return str(found)


async def test_upgrade_downgrade_upgrade(fresh_database: str) -> None:
    """The first migration can be undone and redone on an empty database."""
    engine = create_async_engine(fresh_database)
    options = MigrationOptions(schema="roundtrip")
    try:
        await migrations.upgrade(engine, options)
        assert "memories" in await _tables(fresh_database, "roundtrip")
        await migrations.downgrade(engine, options, "base")
        assert await _tables(fresh_database, "roundtrip") == {"alembic_version"}
        await migrations.upgrade(engine, options)
        assert {"organizations", "memories", "memory_updates"} <= await _tables(fresh_database, "roundtrip")
        async with driver.checkout(engine, "roundtrip") as conn:
            assert await migrations.current_revision(conn, "roundtrip") == migrations.head_revision()
    finally:
        await engine.dispose()


async def test_schema_name_and_dimension_are_deployment_settings(fresh_database: str) -> None:
    """Without a vector store, setup() creates the tables and vector(N) of the configured dimension."""
    settings = Settings(database_url=fresh_database, db_schema="agent_memory", embedding_dimensions=1536)
    graph = PostgresGraphDB(settings=settings, associated_vector_db=None)
    await graph.setup()
    await graph.setup()  # idempotent
    org = await graph.create_organization("Acme")
    await graph.close()
    assert await _column_type(fresh_database, "agent_memory") == "vector(1536)"
    assert await _tables(fresh_database, "agent_memory") >= {"organizations", "alembic_version"}
    assert org.org_id


async def test_new_database_takes_the_embedders_dimension(fresh_database: str) -> None:
    """On a new database the vector column gets the embedder's dimension (§15.9)."""
    graph = PostgresGraphDB(fresh_database, embedder=HashEmbedder(768), schema="by_embedder")
    await graph.setup()
    await graph.close()
    assert await _column_type(fresh_database, "by_embedder") == "vector(768)"


def test_offline_sql_script_is_reviewable() -> None:
    """alembic upgrade head --sql prints the whole schema without a database."""
    out = io.StringIO()
    config = migrations.alembic_config(MigrationOptions(schema="dba_review", dimensions=768))
    config.stdout = out
    with contextlib.redirect_stdout(out):
        command.upgrade(config, "head", sql=True)
    script = out.getvalue()
    assert "CREATE EXTENSION IF NOT EXISTS vector" in script
    assert 'CREATE SCHEMA IF NOT EXISTS "dba_review"' in script
    assert "CREATE TABLE dba_review.memories" in script
    assert "VECTOR(768)" in script
    assert "USING hnsw" in script
    assert "dba_review.alembic_version" in script
    # Memory through time (0008): the clocks, the report function and view, the chains' backfill.
    assert 'CREATE FUNCTION "dba_review".memories_as_of(at timestamptz' in script
    assert 'CREATE VIEW "dba_review".memory_timeline' in script
    assert "WITH RECURSIVE later(org_id, ancestor, memory_id)" in script


def test_alembic_command_line_uses_package_settings(fresh_database: str) -> None:
    """The repository's alembic.ini works with the plain alembic CLI, configured by MEMORA_PG_* variables."""
    env = {"MEMORA_PG_DATABASE_URL": fresh_database, "MEMORA_PG_SCHEMA": "cli_schema", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "memories" in asyncio.run(_tables(fresh_database, "cli_schema"))
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "current"], env=env, capture_output=True, text=True, check=False
    )
    assert migrations.head_revision() in result.stdout


SETUP_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from memora_pg import PostgresGraphDB, Settings
    async def main():
        graph = PostgresGraphDB(settings=Settings(database_url=sys.argv[1], db_schema="raced"))
        await graph.setup()
        await graph.create_organization("from " + sys.argv[2])
        await graph.close()
    asyncio.run(main())
    """
)


def test_concurrent_setup_from_several_processes(fresh_database: str) -> None:
    """Four processes calling setup() at once on an empty database all succeed; the schema is made once."""
    procs = [
        subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", SETUP_SCRIPT, fresh_database, str(i)], stderr=subprocess.PIPE, text=True
        )
        for i in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors

    async def count() -> int:
        engine = create_async_engine(fresh_database)
        try:
            async with engine.connect() as conn:
                return int(await conn.scalar(text("SELECT count(*) FROM raced.organizations")) or 0)
        finally:
            await engine.dispose()

    assert asyncio.run(count()) == 4


@pytest.mark.parametrize("bad", ["Robert'; DROP", "UPPER", "", "a" * 70])
def test_schema_names_must_be_plain_identifiers(bad: str) -> None:
    """The schema name is interpolated as an identifier, so only plain lower-case names are accepted."""
    with pytest.raises(ValueError, match=r"identifier|at least"):
        Settings(db_schema=bad)


async def test_constraint_names_follow_the_convention_once(database_url: str) -> None:
    """Every constraint of the schema is named by the convention, with its prefix exactly once."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            names = (
                (
                    await conn.execute(
                        text(
                            "SELECT conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                            "WHERE n.nspname = 'memora' AND c.contype IN ('p', 'f', 'c', 'u') "
                            "AND c.conrelid <> 'memora.alembic_version'::regclass"
                        )
                    )
                )
                .scalars()
                .all()
            )
    finally:
        await engine.dispose()
    assert names
    for name in names:
        prefix = name.split("_", 1)[0]
        assert prefix in ("pk", "fk", "ck", "uq"), name
        assert name.count(prefix + "_") == 1 or prefix == "fk", name


async def _upgrade_through(engine: AsyncEngine, options: MigrationOptions, revision: str, seed: str) -> None:
    """Migrate to ``revision``, write ``seed`` (statements split on ';') as that revision's code would, then
    migrate to head: what a database written by an older version goes through."""
    await migrations.upgrade(engine, options, revision)
    async with engine.begin() as conn:
        for statement in seed.split(";"):
            await conn.execute(text(statement))
    await migrations.upgrade(engine, options)


async def test_0008_clocks_the_chains_already_stored(fresh_database: str) -> None:
    """Upgrading a database with chains and mem0 expiration dates gives every version its clocks' ends."""
    engine = create_async_engine(fresh_database)
    options = MigrationOptions(schema="older")
    seed = """
    INSERT INTO older.organizations (org_id, org_name) VALUES ('o', 'O');
    INSERT INTO older.users (org_id, user_id, user_name) VALUES ('o', 'u', 'U');
    INSERT INTO older.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at, metadata) VALUES
      ('o', md5('a')::uuid, 'u', 'g', 'a', '2026-01-01Z', '{}'),
      ('o', md5('b')::uuid, 'u', 'g', 'b', '2026-01-10Z', '{}'),
      ('o', md5('c')::uuid, 'u', 'g', 'c', '2026-01-05Z', '{"expiration_date": "2026-02-01"}');
    INSERT INTO older.memory_updates (org_id, new_memory_id, old_memory_id) VALUES
      ('o', md5('b')::uuid, md5('a')::uuid), ('o', md5('c')::uuid, md5('b')::uuid)
    """
    try:
        await _upgrade_through(engine, options, "0007", seed)
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT memory, stored_at, valid_until, superseded_at, expires_at FROM older.memories"
                        " ORDER BY memory"
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    by_text = {row.memory: row for row in rows}
    assert all(row.stored_at is None for row in rows)
    assert str(by_text["a"].valid_until.date()) == "2026-01-05"
    assert str(by_text["a"].superseded_at.date()) == "2026-01-05"  # the earliest later version's, from its obtained_at
    assert str(by_text["b"].valid_until.date()) == "2026-01-05"
    assert by_text["c"].valid_until is None
    assert by_text["c"].expires_at.isoformat() == "2026-02-02T00:00:00+00:00"


async def test_0011_mends_then_keeps_search_text_and_embedding_together(fresh_database: str) -> None:
    """Rows that broke the rule before 0011 are mended (a full-text vector without an embedding cleared, an
    embedding without one given its text's), then the database refuses a row that breaks it."""
    engine = create_async_engine(fresh_database)
    options = MigrationOptions(schema="older", dimensions=3)
    seed = """
    INSERT INTO older.organizations (org_id, org_name) VALUES ('o', 'O');
    INSERT INTO older.users (org_id, user_id, user_name) VALUES ('o', 'u', 'U');
    INSERT INTO older.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text)
    VALUES ('o', md5('a')::uuid, 'u', 'g', 'green tea', '2026-01-01Z', '[1,0,0]', NULL),
           ('o', md5('b')::uuid, 'u', 'g', 'black tea', '2026-01-01Z', NULL, to_tsvector('english', 'black tea')),
           ('o', md5('c')::uuid, 'u', 'g', 'white tea', '2026-01-01Z', '[0,1,0]', to_tsvector('english', 'white tea'));
    INSERT INTO older.autogen_contents (org_id, content_id, namespace, mime_type, content_json, embedding)
    VALUES ('o', md5('j')::uuid, 'notes', 'application/json', '{"drink": "oolong"}', '[0,0,1]')
    """
    try:
        await _upgrade_through(engine, options, "0010", seed)
        async with engine.connect() as conn:
            rows = (
                await conn.execute(text("SELECT memory, CAST(search_text AS text) AS words FROM older.memories"))
            ).all()
            entry = await conn.scalar(text("SELECT CAST(search_text AS text) FROM older.autogen_contents"))
        with pytest.raises(sa_exc.IntegrityError, match="ck_memories_searchable_together"):
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE older.memories SET search_text = NULL WHERE memory = 'white tea'"))
        with pytest.raises(sa_exc.IntegrityError, match="ck_autogen_contents_searchable_together"):
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE older.autogen_contents SET embedding = NULL"))
    finally:
        await engine.dispose()
    texts = {row.memory: row.words for row in rows}
    assert texts["green tea"] == "'green':1 'tea':2"
    assert texts["black tea"] is None
    assert texts["white tea"] == "'tea':2 'white':1"
    assert "'oolong'" in entry
