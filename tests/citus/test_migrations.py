"""A revision applied to a schema already distributed: what a cluster upgraded in place goes through."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import citus, migrations
from tests.integration.helpers import WRITE_FUNCTIONS

SCHEMA = "upgraded"

# The schema's distributed functions: the index of the argument they are distributed by, and whether a call
# is delegated in a transaction block too.
DISTRIBUTED_FUNCTIONS = """
SELECT p.proname, d.distribution_argument_index, d.force_delegation
FROM pg_dist_object AS d JOIN pg_proc AS p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE p.pronamespace = to_regnamespace(:schema) AND d.distribution_argument_index IS NOT NULL
ORDER BY p.proname
"""


async def test_0011_on_distributed_tables(database_url: str) -> None:
    """Migration 0011's CHECK constraints reach the shards of tables distributed at 0010: a row that breaks
    the rule is refused on the worker that holds it. Migration 0016's write functions are distributed."""
    engine = create_async_engine(database_url)
    options = migrations.MigrationOptions(schema=SCHEMA, dimensions=3)
    try:
        await migrations.upgrade(engine, options, "0010")
        for statement in citus.distribution_sql(SCHEMA).splitlines():
            if statement and not statement.startswith("--"):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
        async with engine.begin() as conn:
            await conn.execute(text(f"INSERT INTO {SCHEMA}.organizations (org_id, org_name) VALUES ('o', 'O')"))
            await conn.execute(text(f"INSERT INTO {SCHEMA}.users (org_id, user_id, user_name) VALUES ('o', 'u', 'U')"))
            await conn.execute(
                text(
                    f"INSERT INTO {SCHEMA}.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at,"
                    " embedding, search_text) VALUES ('o', md5('a')::uuid, 'u', 'g', 'green tea', now(), '[1,0,0]',"
                    " NULL)"
                )
            )
        await migrations.upgrade(engine, options)
        async with engine.connect() as conn:
            mended = await conn.scalar(text(f"SELECT CAST(search_text AS text) FROM {SCHEMA}.memories"))
            # Migration 0016 distributes its write functions itself on a schema distributed already.
            distributed = (await conn.execute(text(DISTRIBUTED_FUNCTIONS), {"schema": SCHEMA})).all()
        assert mended == "'green':1 'tea':2"
        assert [tuple(row) for row in distributed] == [(name, 0, True) for name in WRITE_FUNCTIONS]
        with pytest.raises(sa_exc.IntegrityError, match="ck_memories_searchable_together"):
            async with engine.begin() as conn:
                await conn.execute(text(f"UPDATE {SCHEMA}.memories SET search_text = NULL WHERE org_id = 'o'"))
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        await engine.dispose()


async def test_distribute_swaps_memories_as_of_for_the_form_citus_plans(database_url: str) -> None:
    """A schema migrated before it was distributed has memories_as_of() in SQL, which Citus cannot plan over a
    distributed table; the statements of `memora-pg db distribute` make it PL/pgSQL, and an as-of read works."""
    engine = create_async_engine(database_url)
    options = migrations.MigrationOptions(schema=SCHEMA, dimensions=3)
    language = (
        "SELECT l.lanname FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang"
        f" WHERE p.oid = to_regprocedure('{SCHEMA}.memories_as_of(timestamptz, text)')"
    )
    try:
        await migrations.upgrade(engine, options)
        async with engine.connect() as conn:
            before = await conn.scalar(text(language))
        for statement in citus.distribution_sql(SCHEMA).splitlines():
            if statement and not statement.startswith("--"):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
        async with engine.connect() as conn:
            after = await conn.scalar(text(language))
            found = await conn.scalar(text(f"SELECT count(*) FROM {SCHEMA}.memories_as_of(now()) WHERE org_id = 'o'"))
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        await engine.dispose()
    assert (before, after, found) == ("sql", "plpgsql", 0)
