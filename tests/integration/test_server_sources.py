"""The server-side code a migrated database holds is its current source: every function and view of the
schema is the newest file of its name in memora_pg/sql, and every such file is installed.

Each source is created again beside the installed object, under another name, in a transaction that is
rolled back; PostgreSQL's own rendering of the two (``pg_get_functiondef``, ``pg_get_viewdef``) must then
be the same. So a body, an argument list, a volatility or a view's query that differs from its file is
seen, and text the server normalizes (a SQL function's ``RETURN``, a view) is compared as the server reads
it, not as it was typed."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg.sql import FUNCTIONS, VIEWS, current_sources, installed, replacing
from memora_pg.sql_text import literal, parts_of
from tests.integration.helpers import argument_names

SCHEMA = "memora"
COPY = "_from_source"

# The schema's own functions and views: not an extension's (pgvector's may live in the schema).
INSTALLED_FUNCTIONS = """
SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
FROM pg_proc AS p
WHERE p.pronamespace = CAST(:schema AS regnamespace) AND p.prokind = 'f'
  AND NOT EXISTS (SELECT FROM pg_depend AS d WHERE d.objid = p.oid AND d.deptype = 'e')
"""
INSTALLED_VIEWS = """
SELECT c.relname AS name, pg_get_viewdef(c.oid) AS definition
FROM pg_class AS c
WHERE c.relnamespace = CAST(:schema AS regnamespace) AND c.relkind = 'v'
"""
FUNCTION_OF = "SELECT pg_get_functiondef(CAST(:name AS regproc))"
VIEW_OF = "SELECT pg_get_viewdef(CAST(:name AS regclass))"


async def _parts(conn: AsyncConnection) -> dict[str, str]:
    """What a revision filled in besides the schema: the database's text-search configuration."""
    config = await conn.scalar(text(f'SELECT CAST("{SCHEMA}".search_config() AS text)'))
    return {"config": literal(str(config))}


def _renamed(source: str, name: str) -> str:
    """``source`` creating ``name`` + COPY instead of ``name``."""
    declared = re.compile(r"(\{schema\}\." + re.escape(name) + r")\b(?=\s*(\(|AS\b))")
    assert declared.search(source), f"the source of {name} does not create {{schema}}.{name}"
    return declared.sub(r"\1" + COPY, replacing(source), count=1)


async def _installed(conn: AsyncConnection, query: str) -> dict[str, str]:
    return {row.name: row.definition for row in await conn.execute(text(query), {"schema": SCHEMA})}


async def _as_created(conn: AsyncConnection, kind: str, name: str, source: str, parts: dict[str, str]) -> str:
    """How PostgreSQL renders ``source``, created beside the installed object, with the copy's name taken out."""
    filled = installed(_renamed(source, name), SCHEMA, **{k: v for k, v in parts.items() if k in parts_of(source)})
    await conn.execute(text(filled.replace(":", r"\:")))
    query = FUNCTION_OF if kind == FUNCTIONS else VIEW_OF
    rendered = str(await conn.scalar(text(query), {"name": f'"{SCHEMA}".{name}{COPY}'}))
    return rendered.replace(f"{name}{COPY}", name)


@pytest.mark.parametrize(("kind", "listing"), [(FUNCTIONS, INSTALLED_FUNCTIONS), (VIEWS, INSTALLED_VIEWS)])
async def test_every_function_and_view_is_its_current_source(engine: AsyncEngine, kind: str, listing: str) -> None:
    sources = current_sources(kind)
    async with engine.connect() as conn:
        held = await _installed(conn, listing)
        assert sorted(held) == sorted(sources), f"{kind}: an object without a source file, or a source not installed"
        parts = await _parts(conn)
        for name, (revision, source) in sources.items():
            created = await _as_created(conn, kind, name, source, parts)
            assert created == held[name], f"{name} differs from {kind}/{name}.{revision}.sql"
        await conn.rollback()  # the copies go


async def test_a_changed_body_is_seen(engine: AsyncEngine) -> None:
    """The comparison above could not pass by comparing nothing: a source changed by one word differs."""
    _, source = current_sources()["checked_clock"]
    changed = source.replace("IMMUTABLE", "STABLE", 1)
    assert changed != source
    async with engine.connect() as conn:
        held = await _installed(conn, INSTALLED_FUNCTIONS)
        assert await _as_created(conn, FUNCTIONS, "checked_clock", source, {}) == held["checked_clock"]
        assert await _as_created(conn, FUNCTIONS, "checked_clock", changed, {}) != held["checked_clock"]
        await conn.rollback()


def test_a_write_function_declares_its_arguments() -> None:
    revision, source = current_sources()["append_messages"]
    assert revision == "0018"
    assert argument_names(source) == ["p_org_id", "p_interaction_id", "p_start", "p_roles", "p_contents"]
