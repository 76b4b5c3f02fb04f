"""memora_pg's quoters, read back by the server: a constant is the value it was made of whatever
``standard_conforming_strings`` says, and a quoted name is the name."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg.sql_text import literal, qualified, quoted, render

VALUES = ["plain", "it's", "back\\slash", "\\' both", "ünïcødé", "new\nline"]


@pytest.mark.parametrize("conforming", ["on", "off"])
async def test_a_literal_reads_back_as_its_value(engine: AsyncEngine, conforming: str) -> None:
    async with engine.connect() as conn:
        await conn.execute(text(f"SET standard_conforming_strings = {conforming}"))
        for value in VALUES:
            assert await conn.scalar(text(render("SELECT {value}", value=literal(value)))) == value
        await conn.rollback()


async def test_a_quoted_name_is_the_name(engine: AsyncEngine) -> None:
    name = 'odd "name"-1'
    async with engine.connect() as conn:
        await conn.execute(text(render("CREATE TEMPORARY TABLE {table} (x int)", table=quoted(name))))
        found = await conn.scalar(text("SELECT relname FROM pg_class WHERE oid = to_regclass(:t)"), {"t": quoted(name)})
        assert found == name
        assert await conn.scalar(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": qualified("pg_catalog", "pg_class")})
        await conn.rollback()
