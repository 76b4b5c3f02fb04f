"""The hybrid ranking's formula on candidates as the search statement returns them (no server)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memora_pg.graph import scoring

WEIGHTS = scoring.Weights(cosine_floor=0.75)


def _row(
    seq: int,
    cosine: float,
    terms: dict[str, int] | None = None,
    *,
    neighbourhood: str | None = "i:a",
    dfs: dict[str, int] | None = None,
    n: int = 1000,
) -> dict[str, Any]:
    dfs = dfs if dfs is not None else {"zeppelin": 2, "tea": 400}
    return {
        "seq": seq,
        "neighbourhood": neighbourhood,
        "cosine": cosine,
        "term_lexemes": list(terms) if terms else None,
        "term_counts": list(terms.values()) if terms else None,
        "query_lexemes": list(dfs),
        "query_dfs": list(dfs.values()),
        "n": n,
        "memory_id": f"m{seq}",
    }


def _scores(rows: list[dict[str, Any]], k: int = 10) -> dict[str, float]:
    return {row["memory_id"]: score for row, score in scoring.rank(rows, k=k, weights=WEIGHTS)}


def test_a_row_best_on_both_arms_alone_scores_one_over_one_plus_the_boost() -> None:
    """Dense 1 and the best lexical score give a fused 1, and with no neighbour 1 / 1.3: about 0.77."""
    scores = _scores([_row(1, 1.0, {"zeppelin": 1, "tea": 1}, neighbourhood="i:a")])
    assert scores["m1"] == pytest.approx(1 / 1.3)


def test_the_dense_arm_is_rescaled_from_the_cosine_floor() -> None:
    scores = _scores([_row(1, 0.75, neighbourhood="i:a"), _row(2, 0.875, neighbourhood="i:b")])
    assert scores["m1"] == 0.0
    assert scores["m2"] == pytest.approx(0.6 * 0.5 / 1.3)


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    rare = _row(1, 0.8, {"zeppelin": 1}, neighbourhood="i:a")
    common = _row(2, 0.8, {"tea": 1}, neighbourhood="i:b")
    scores = _scores([rare, common])
    assert scores["m1"] > scores["m2"]


def test_lexical_scores_are_relative_to_the_best_row_or_what_the_query_could_reach() -> None:
    """One weak match alone does not score as the best: the scale is at least 0.3 of what every term
    of the query would give."""
    ((_, score),) = scoring.rank([_row(1, 0.75, {"tea": 1})], k=1, weights=WEIGHTS)
    n, k1 = 1000, 1.2

    def idf(df: int) -> float:
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    bm25 = idf(400) * 1 * (k1 + 1) / (1 + k1)
    possible = (idf(2) + idf(400)) * (k1 + 1)
    assert score == pytest.approx(0.4 * bm25 / (0.3 * possible) / 1.3)


def test_a_neighbour_lends_its_terms_at_half_weight_and_its_score_at_the_boost() -> None:
    """The row after a strong match in the same interaction is lifted by it; a row of another
    interaction is not."""
    strong = _row(1, 0.95, {"zeppelin": 1}, neighbourhood="i:a")
    after = _row(2, 0.8, neighbourhood="i:a")
    elsewhere = _row(3, 0.8, neighbourhood="i:b")
    scores = _scores([strong, after, elsewhere])
    assert scores["m2"] > scores["m3"]
    alone = _scores([after])["m2"]
    assert alone < scores["m2"]


def test_best_first_ties_by_write_order_and_k_kept() -> None:
    rows = [_row(seq, 0.9, neighbourhood=f"i:{seq}") for seq in (5, 3, 4)]
    ranked = scoring.rank(rows, k=2, weights=WEIGHTS)
    assert [row["seq"] for row, _ in ranked] == [3, 4]
    assert scoring.rank([], k=5, weights=WEIGHTS) == []


def test_a_query_of_no_words_ranks_by_the_dense_arm_alone() -> None:
    rows = [_row(1, 0.9, dfs={}, neighbourhood="i:a"), _row(2, 0.95, dfs={}, neighbourhood="i:b")]
    assert [row["seq"] for row, _ in scoring.rank(rows, k=2, weights=WEIGHTS)] == [2, 1]
