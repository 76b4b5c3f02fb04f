"""The hybrid ranking's formula on candidates as the search statement returns them (no server)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


def test_below_the_gate_the_dense_arm_counts_nothing_and_words_still_do() -> None:
    """A query whose best candidate is no nearer than the gate gets no dense score for any row, even one
    above the floor; a row sharing its rare word still scores. Above the gate, the floor alone counts."""
    rows = [_row(1, 0.80, neighbourhood="i:a"), _row(2, 0.78, {"zeppelin": 1}, neighbourhood="i:b")]
    gated = scoring.Weights(cosine_floor=0.75, cosine_gate=0.80)
    scores = {row["memory_id"]: score for row, score in scoring.rank(rows, k=10, weights=gated)}
    assert scores["m1"] == 0.0
    assert scores["m2"] == pytest.approx(0.4 * (2.2 / 2.2) / 1.3)
    opened = scoring.Weights(cosine_floor=0.75, cosine_gate=0.79)
    scores = {row["memory_id"]: score for row, score in scoring.rank(rows, k=10, weights=opened)}
    assert scores["m1"] == pytest.approx(0.6 * 0.2 / 1.3)


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


def test_rows_that_score_0_keep_the_embedders_order() -> None:
    """Below the floor (or for a gated query) every row scores 0, and the nearer comes first."""
    rows = [_row(1, 0.70, neighbourhood="i:a"), _row(2, 0.74, neighbourhood="i:b"), _row(3, 0.72, neighbourhood="i:c")]
    ranked = scoring.rank(rows, k=3, weights=WEIGHTS)
    assert [(row["seq"], score) for row, score in ranked] == [(2, 0.0), (3, 0.0), (1, 0.0)]


def test_a_query_of_no_words_ranks_by_the_dense_arm_alone() -> None:
    rows = [_row(1, 0.9, dfs={}, neighbourhood="i:a"), _row(2, 0.95, dfs={}, neighbourhood="i:b")]
    assert [row["seq"] for row, _ in scoring.rank(rows, k=2, weights=WEIGHTS)] == [2, 1]


# -- the formula written out row by row, as the module's docstring states it ----------------------------


def _by_the_formula(rows: list[dict[str, Any]], k: int, w: scoring.Weights) -> list[tuple[int, float]]:
    """(seq, score) of the k best rows, computed one row at a time with dictionaries."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["neighbourhood"] or "", rows[i]["seq"]))
    before: dict[int, int] = {}
    after: dict[int, int] = {}
    for a, b in itertools.pairwise(order):
        if rows[a]["neighbourhood"] == rows[b]["neighbourhood"]:
            after[a], before[b] = b, a
    own = [dict(zip(r["term_lexemes"], r["term_counts"], strict=True)) if r["term_lexemes"] else {} for r in rows]
    window: list[dict[str, float]] = []
    for i in range(len(rows)):
        counts: dict[str, float] = dict(own[i])
        for j in (before.get(i), after.get(i)):
            for lexeme, tf in own[j].items() if j is not None else ():
                counts[lexeme] = counts.get(lexeme, 0.0) + w.neighbour_terms * tf
        window.append(counts)
    n = rows[0]["n"]
    idf = {}
    for lexeme, df in zip(rows[0]["query_lexemes"], rows[0]["query_dfs"], strict=True):
        holders = sum(lexeme in counts for counts in own)
        windows = sum(lexeme in counts for counts in window)
        spread = min(df * (windows / holders if holders else 1.0), n)
        idf[lexeme] = math.log(1 + (n - spread + 0.5) / (spread + 0.5))
    bm25 = [sum(idf[t] * tf * (w.k1 + 1) / (tf + w.k1) for t, tf in counts.items()) for counts in window]
    scale = max(max(bm25), w.lexical_floor * (w.k1 + 1) * sum(idf.values()))
    gated = w.cosine_gate is not None and max(r["cosine"] for r in rows) <= w.cosine_gate
    fused = [
        (0.0 if gated else w.dense_weight * max(0.0, r["cosine"] - w.cosine_floor) / (1 - w.cosine_floor))
        + ((1 - w.dense_weight) * b / scale if scale > 0 else 0.0)
        for r, b in zip(rows, bm25, strict=True)
    ]

    def lift(i: int) -> float:
        sides = [fused[j] for j in (before.get(i), after.get(i)) if j is not None]
        return max(sides, default=0.0)

    scores = [(fused[i] + w.neighbour_boost * lift(i)) / (1 + w.neighbour_boost) for i in range(len(rows))]
    best = sorted(range(len(rows)), key=lambda i: (-scores[i], -rows[i]["cosine"], rows[i]["seq"]))[:k]
    return [(rows[i]["seq"], scores[i]) for i in best]


LEXEMES = ["zeppelin", "tea", "lisbon", "move", "sister"]


@st.composite
def _candidates(draw: st.DrawFn) -> tuple[list[dict[str, Any]], scoring.Weights]:
    query = draw(st.lists(st.sampled_from(LEXEMES), unique=True, max_size=len(LEXEMES)))
    n = draw(st.integers(1, 5000))
    dfs = {lexeme: draw(st.integers(1, n)) for lexeme in query}
    rows = []
    for seq in draw(st.lists(st.integers(1, 10_000), unique=True, min_size=1, max_size=40)):
        held = draw(st.dictionaries(st.sampled_from(query), st.integers(1, 4))) if query else {}
        row = _row(
            seq,
            draw(st.floats(-1.0, 1.0)),
            held or None,
            neighbourhood=draw(st.sampled_from(["i:a", "i:b", "i:c", None])),
            dfs=dfs,
            n=n,
        )
        rows.append(row)
    weights = scoring.Weights(
        dense_weight=draw(st.floats(0.0, 1.0)),
        cosine_floor=draw(st.floats(0.0, 0.9)),
        k1=draw(st.floats(0.1, 3.0)),
        neighbour_terms=draw(st.sampled_from([0.0, 0.25, 0.5, 1.0])),
        neighbour_boost=draw(st.floats(0.0, 1.0)),
        lexical_floor=draw(st.floats(0.0, 1.0)),
        cosine_gate=draw(st.one_of(st.none(), st.floats(-1.0, 1.0))),
    )
    return rows, weights


@settings(max_examples=300, deadline=None)
@given(_candidates(), st.integers(1, 12))
# A lexical floor so small that the scale rounds to almost nothing: no row may score NaN.
@example(([_row(1, 0.0, dfs={"zeppelin": 1}, n=1)], scoring.Weights(0.0, 0.0, 1.0, 0.0, 0.0, 5e-324)), 1)
def test_the_ranking_is_the_formula_row_by_row(found: tuple[list[dict[str, Any]], scoring.Weights], k: int) -> None:
    """The ranking's arrays give the scores the formula gives one row at a time, and the same order
    wherever two scores are not equal to the last bits."""
    rows, weights = found
    expected = _by_the_formula(rows, k, weights)
    ranked = [(row["seq"], score) for row, score in scoring.rank(rows, k=k, weights=weights)]
    assert [score for _, score in ranked] == pytest.approx([score for _, score in expected], abs=1e-12)
    # The same row at each place, unless the formula's own scores there tie to within rounding.
    scores = dict(_by_the_formula(rows, len(rows), weights))
    for (seq, _), (expected_seq, _) in zip(ranked, expected, strict=True):
        assert seq == expected_seq or scores[seq] == pytest.approx(scores[expected_seq], abs=1e-12)
