"""bench.search_stages cuts the default search's statement after a CTE, keeping every parameter bound."""

from __future__ import annotations

from pathlib import Path

from bench.search_stages import STAGES, stage_sql

GOLDEN = Path(__file__).parent / "golden" / "hybrid_user_one_query.sql"


def test_a_stage_counts_its_cte_and_keeps_every_parameter() -> None:
    sql = GOLDEN.read_text()
    cut = stage_sql(sql, "found", 5)
    assert cut.startswith(sql.split("\n SELECT around.query_no")[0])
    assert cut.endswith("SELECT count(*) FROM found, (SELECT $1, $2, $3, $4, $5) AS bound")
    assert "held_terms" not in cut  # the statement's last part is gone


def test_every_stage_is_a_cte_of_the_statement() -> None:
    sql = GOLDEN.read_text()
    for cte in STAGES:
        assert f"{cte} AS" in sql
