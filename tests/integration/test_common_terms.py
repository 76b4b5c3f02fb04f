"""``common_terms()`` sizes a scope from ANALYZE's statistics, listed or not (migrations 0013 and 0014).

A search of a scope of more than 2,000 rows skips the GIN probe of a word the statistics show common in
a scope of that size. In a table of many users of about the same size, ANALYZE lists none of them in
``most_common_vals``; such a user is sized as the planner sizes an unlisted value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import TEST_SCHEMA

USERS = 300
ROWS_PER_USER = 100

FILL = f"""
CREATE TABLE "{TEST_SCHEMA}".common_terms_probe AS
SELECT 'u' || (g % {USERS}) AS user_id,
       to_tsvector('english', 'a note' || CASE WHEN g % 5 < 2 THEN ' about tea' ELSE '' END
                              || CASE WHEN g % 100 = 1 THEN ' with a kite' ELSE '' END) AS search_text
FROM generate_series(0, {USERS * ROWS_PER_USER} - 1) AS g;
ANALYZE "{TEST_SCHEMA}".common_terms_probe;
"""


@pytest.fixture
async def probe(engine: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    async with engine.begin() as conn:
        for statement in FILL.strip().split(";\n"):
            await conn.execute(text(statement))
    try:
        yield engine
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP TABLE "{TEST_SCHEMA}".common_terms_probe'))


async def _common(engine: AsyncEngine, user: str, *, scope_rows: int, common_rows: int) -> set[str]:
    async with engine.connect() as conn:
        found = await conn.execute(
            text(f"SELECT \"{TEST_SCHEMA}\".common_terms('common_terms_probe', 'user_id', :user, :rows, :common)"),
            {"user": user, "rows": scope_rows, "common": common_rows},
        )
        return {row[0] for row in found}


# A user that ANALYZE's most_common_vals does not list (it lists at most 100 of the 300).
UNLISTED = f"""
SELECT users.user_id
FROM (SELECT 'u' || g AS user_id FROM generate_series(0, {USERS - 1}) AS g) AS users, pg_stats AS s
WHERE s.schemaname = '{TEST_SCHEMA}' AND s.tablename = 'common_terms_probe' AND s.attname = 'user_id'
  AND users.user_id <> ALL (coalesce(CAST(CAST(s.most_common_vals AS text) AS text[]), '{{}}'))
LIMIT 1
"""


async def test_an_unlisted_user_is_sized_as_the_planner_sizes_it(probe: AsyncEngine) -> None:
    """300 users of 100 rows each. A user the statistics do not list is sized as 100 rows, so "note" (every
    row) and "tea" (two rows in five) are common at 20 rows of the user, and "kite" (one in a hundred) is not."""
    async with probe.connect() as conn:
        user = await conn.scalar(text(UNLISTED))
    assert user is not None
    assert await _common(probe, user, scope_rows=1, common_rows=20) == {"note", "tea"}
    # Never smaller than the scope the search counted.
    assert await _common(probe, user, scope_rows=5_000, common_rows=20) == {"note", "tea", "kite"}


async def test_no_user_no_size_from_the_statistics(probe: AsyncEngine) -> None:
    """Without a scope value the scope is sized as ``scope_rows`` alone."""
    async with probe.connect() as conn:
        found = await conn.execute(
            text(f"SELECT \"{TEST_SCHEMA}\".common_terms('common_terms_probe', NULL, NULL, 10, 20)")
        )
        assert {row[0] for row in found} == set()
