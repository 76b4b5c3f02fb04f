"""The SQL of every search statement, as it runs, compared with a file beside this test: a reviewer reads the
statement in ``tests/unit/golden/`` (and a change to it in the diff), not only the code that builds it.

``MEMORA_PG_TEST_UPDATE_GOLDEN=1 pytest tests/unit/test_search_golden.py`` writes the files again after a
deliberate change; the diff then shows what changed in the SQL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from memora_pg import Settings, driver
from memora_pg.graph import autogen_contents, nearest, search

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = "memora"


def _compiled(corpus: nearest.Corpus, where: search.Where, *, mode: str, queries: int, scoped: bool) -> str:
    statement = search.statement(
        corpus,
        schema=SCHEMA,
        where=where,
        vectors=[[0.1] * 4] * queries,
        texts=["green tea"] * queries,
        k=10,
        scoped=scoped,
        mode=mode,
        settings=Settings(),
    )
    # As the driver sends it: the schema in place and the parameters numbered.
    assert not isinstance(statement.sql, str)
    prepared = driver._compile(statement.sql, SCHEMA, PGDialect_asyncpg())
    assert prepared is not None
    return prepared.sql


def _user() -> search.Where:
    return search.memories_where("org", user_id="u1")


def _notes() -> search.Where:
    return search.autogen_where(autogen_contents.Scope(org_id="org", namespace="notes", user_id="u1"))


BUILDERS: dict[str, Callable[[], str]] = {
    "hybrid_user_one_query": lambda: _compiled(search.MEMORIES, _user(), mode="hybrid", queries=1, scoped=True),
    "hybrid_organization_queries": lambda: _compiled(
        search.MEMORIES, search.memories_where("org"), mode="hybrid", queries=3, scoped=False
    ),
    "dense_user_one_query": lambda: _compiled(search.MEMORIES, _user(), mode="dense", queries=1, scoped=True),
    "hybrid_autogen": lambda: _compiled(search.AUTOGEN_CONTENTS, _notes(), mode="hybrid", queries=1, scoped=True),
    "dense_autogen": lambda: _compiled(search.AUTOGEN_CONTENTS, _notes(), mode="dense", queries=1, scoped=True),
    "upstream_user": lambda: _compiled(search.MEMORIES, _user(), mode="upstream", queries=1, scoped=True),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_search_statement_is_the_one_in_its_golden_file(name: str) -> None:
    sql = BUILDERS[name]().strip() + "\n"
    path = GOLDEN / f"{name}.sql"
    if os.environ.get("MEMORA_PG_TEST_UPDATE_GOLDEN"):
        path.write_text(sql)
    assert path.exists(), f"no {path.name}: run with MEMORA_PG_TEST_UPDATE_GOLDEN=1 to write it"
    assert sql == path.read_text(), f"{name}'s SQL changed: review the diff, then MEMORA_PG_TEST_UPDATE_GOLDEN=1"
