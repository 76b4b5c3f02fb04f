"""The server-side functions a migrated database holds are their current sources: the newest file of each in
memora_pg/sql/functions, body for body and argument for argument, and no write function is without one."""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg.sql import current_sources
from memora_pg.sql_text import quoted, render

SCHEMA = "memora"
_BODY = re.compile(r"\$body\$\n(.*)\$body\$", re.DOTALL)
_ARGUMENTS = re.compile(r"FUNCTION \{schema\}\.\w+\((.*?)\)\s*RETURNS", re.DOTALL)

INSTALLED = """
SELECT p.proname, p.prosrc, p.proargnames[1:p.pronargs] AS arguments  -- the input ones, not a TABLE's columns
FROM pg_proc AS p
WHERE p.pronamespace = CAST(:schema AS regnamespace) AND p.proargnames[1] = 'p_org_id'
ORDER BY p.proname
"""


def _argument_names(source: str) -> list[str]:
    declared = _ARGUMENTS.search(source)
    assert declared, "a source declares FUNCTION {schema}.name(...) RETURNS"
    return [argument.split()[0] for argument in declared[1].split(",")]


async def test_every_write_function_is_its_current_source(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        installed = {row.proname: row for row in await conn.execute(text(INSTALLED), {"schema": SCHEMA})}
    sources = current_sources()
    assert sorted(installed) == sorted(sources), "a function without a source file, or a source not installed"
    for name, (revision, source) in sources.items():
        body = _BODY.search(render(source, schema=quoted(SCHEMA)))
        assert body, f"{name}.{revision}.sql has no $body$ … $body$"
        assert installed[name].prosrc.strip() == body[1].strip(), f"{name} differs from {name}.{revision}.sql"
        assert list(installed[name].arguments) == _argument_names(source), f"{name}'s arguments"


def test_a_changed_body_is_seen() -> None:
    """The comparison above reads the body a source declares (it could not pass by comparing nothing)."""
    revision, source = current_sources()["append_messages"]
    assert revision == "0018"
    body = _BODY.search(render(source, schema=quoted(SCHEMA)))
    assert body
    assert "INSERT INTO" in body[1]
    assert _argument_names(source) == ["p_org_id", "p_interaction_id", "p_start", "p_roles", "p_contents"]
