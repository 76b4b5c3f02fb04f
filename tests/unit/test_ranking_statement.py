"""The hybrid statement as compiled: its constants in its text, the call's values bound, no table read
in full by construction (the candidates' rules); a call of one query binds it as values."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import postgresql

from memora_pg import Settings
from memora_pg.graph import nearest, ranking, scoring, search


def _compiled(scoped: bool, mode: str = "hybrid", queries: int = 1) -> tuple[str, set[str]]:
    statement = search.statement(
        search.MEMORIES,
        schema="memora",
        where=search.memories_where("org", user_id="u1" if scoped else None),
        vectors=[[0.1] * 4] * queries,
        texts=["green tea"] * queries,
        k=10,
        scoped=scoped,
        mode=mode,
        settings=Settings(),
    )
    compiled = statement.sql.compile(dialect=postgresql.asyncpg.dialect())  # type: ignore[union-attr]
    return compiled.string, set(compiled.params)


@pytest.mark.parametrize("scoped", [True, False])
def test_the_statement_binds_only_the_calls_values(scoped: bool) -> None:
    """Limits and weights are written into the text (the planner sees a LIMIT's value); what is bound is
    the queries, the condition's values and the HNSW search width."""
    sql, bound = _compiled(scoped)
    expected = {"embedding", "query", "where_org_id", "ef"}
    assert bound == (expected | {"where_user_id"} if scoped else expected)
    assert f"LIMIT {ranking.RARITY_ROWS + 1}" in sql
    assert f"LIMIT {scoring.Weights().candidates + 1}" in sql
    assert f"LIMIT {nearest.NEAREST_ROWS}" in sql
    assert f"<= {ranking.LEXICAL_ROWS}" in sql


def test_several_queries_are_bound_as_arrays_and_one_as_values() -> None:
    """A call of one query binds its vector and text as values: PostgreSQL plans the statement once for
    every such call (an array of unknown length is planned as ten rows, and replanned each call)."""
    _, one = _compiled(True)
    assert {"embedding", "query"} <= one
    assert not {"embeddings", "queries", "query_nos"} & one
    sql, many = _compiled(True, queries=3)
    assert {"embeddings", "queries", "query_nos"} <= many
    assert "unnest(CAST(" in sql


def test_a_scoped_search_has_an_exact_branch_and_an_index_branch() -> None:
    """A user's search sorts exactly up to EXACT_ROWS rows, read in the order of the user's btree and no
    further than one more (whatever the planner guesses of the user's size), and walks the index beyond,
    both gated by the one bounded count; a search of a whole organization has the index."""
    scoped, _ = _compiled(True)
    assert f"LIMIT {nearest.EXACT_ROWS + 1}" in scoped
    # the count, the sort, the rows holding the query's terms
    assert scoped.count("ORDER BY memories.org_id, memories.user_id") == 3
    assert scoped.count("set_config") == 2
    organization, _ = _compiled(False)
    assert "AS scope" not in organization
    assert "set_config" in organization


@pytest.mark.parametrize(
    ("k", "candidates", "rows"), [(10, 150, 30), (20, 150, 30), (80, 150, 80), (200, 150, 200), (10, 20, 20)]
)
def test_nearest_rows_are_thirty_or_the_hits_asked_for(k: int, candidates: int, rows: int) -> None:
    assert nearest.nearest_count(k, candidates) == rows
