"""How the hybrid search scores its candidates: the one ranking behind every face's search.

The search statement (:mod:`memora_pg.graph.ranking`) returns, for each query, its candidate rows
with what the score needs: the cosine similarity, the write order and neighbourhood, the query
terms each row holds and how often, and each term's document frequency among the searched rows.
:func:`rank` scores them here, in one pass over those few rows. The score, in [0, 1], fuses two arms:

* **dense**: the cosine similarity of the row's embedding and the query's, rescaled so that
  similarities at or below ``cosine_floor`` (where an unrelated text lands with e5-style
  embedders) score 0 and an identical vector scores 1;
* **lexical**: BM25 over the rows' full-text vectors (stemming and stop words of the database's
  text-search configuration), with ``k1`` saturation and no length normalisation (memories are
  short; normalising by length lost recall). A row's term counts include its neighbours' at
  ``neighbour_terms`` (a fact is often split over two turns). The BM25 score is divided by the
  larger of the best row's score and ``lexical_floor`` times the best score the query's terms could
  reach, so one weak word match does not make an unrelated row look relevant.

The fused score is ``dense_weight · dense + (1 − dense_weight) · lexical``, then lifted by the
better neighbour's: ``(score + neighbour_boost · max(neighbours)) / (1 + neighbour_boost)``.
Neighbours are the scored rows just before and after a row in its neighbourhood (the statement
scores the rows around every candidate, so a candidate's neighbours are its own).

**Rarity.** A term's document frequency counts the rows whose window (the row and its neighbours)
holds it, as BM25 over the windows would: the statement counts the rows holding the term, and the
count is scaled by the scored rows' windows per row holding it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memora_pg import config
from memora_pg.config import Settings


@dataclass(frozen=True)
class Weights:
    """The ranking's constants (``Settings.search_*``); the defaults were chosen on the LoCoMo
    development set with leave-one-conversation-out, where every fold chose the same ones."""

    dense_weight: float = config.default("search_dense_weight")
    # The settings leave it to the embedder; without one, multilingual-e5's (the offline default's).
    cosine_floor: float = 0.75
    k1: float = config.default("search_bm25_k1")
    neighbour_terms: float = config.default("search_neighbour_terms")
    neighbour_boost: float = config.default("search_neighbour_boost")
    lexical_floor: float = config.default("search_lexical_floor")
    candidates: int = config.default("search_candidates")

    @classmethod
    def from_settings(cls, settings: Settings, unrelated_similarity: float) -> Weights:
        """The settings' weights; the cosine floor is the embedder's unless the settings set one."""
        floor = settings.search_cosine_floor
        return cls(
            dense_weight=settings.search_dense_weight,
            cosine_floor=unrelated_similarity if floor is None else floor,
            k1=settings.search_bm25_k1,
            neighbour_terms=settings.search_neighbour_terms,
            neighbour_boost=settings.search_neighbour_boost,
            lexical_floor=settings.search_lexical_floor,
            candidates=settings.search_candidates,
        )


# A scored row as the search statement returns it (a row's mapping): ``seq``, ``neighbourhood``,
# ``cosine``, ``term_lexemes`` and ``term_counts`` (the query terms it holds, None for none), the
# query's ``query_lexemes`` and their ``query_dfs``, the searched rows' count ``n``, and the hit's columns.
Candidate = Mapping[str, Any]


def rank(candidates: Sequence[Candidate], *, k: int, weights: Weights) -> list[tuple[Candidate, float]]:
    """The ``k`` best of one query's candidates, best first (ties by write order), with their scores."""
    if not candidates:
        return []
    w, rows = weights, candidates
    before, after = _neighbours(rows)
    own = [_held(row) for row in rows]
    window = [_window(own[i], own, before[i], after[i], w.neighbour_terms) for i in range(len(rows))]
    idf = _rarity(rows[0], own, window)
    saturated = w.k1 + 1
    bm25 = [
        sum(idf.get(lexeme, 0.0) * tf * saturated / (tf + w.k1) for lexeme, tf in counts.items()) if counts else 0.0
        for counts in window
    ]
    scale = max(max(bm25), w.lexical_floor * saturated * sum(idf.values()))
    lexical = (1 - w.dense_weight) / scale if scale > 0 else 0.0
    dense = w.dense_weight / (1 - w.cosine_floor)
    fused = [
        dense * max(0.0, row["cosine"] - w.cosine_floor) + lexical * score
        for row, score in zip(rows, bm25, strict=True)
    ]
    boost = w.neighbour_boost
    scores = [
        (score + boost * max(_at(fused, before[i]), _at(fused, after[i]))) / (1 + boost)
        for i, score in enumerate(fused)
    ]
    best = heapq.nsmallest(k, range(len(rows)), key=lambda i: (-scores[i], rows[i]["seq"]))
    return [(rows[i], scores[i]) for i in best]


def _held(row: Candidate) -> dict[str, int] | None:
    """The query terms a row holds, with their counts; None for none."""
    lexemes = row["term_lexemes"]
    return dict(zip(lexemes, row["term_counts"], strict=True)) if lexemes else None


def _window(
    mine: dict[str, int] | None,
    own: Sequence[dict[str, int] | None],
    before: int | None,
    after: int | None,
    share: float,
) -> Mapping[str, float] | None:
    """A row's term counts with its neighbours' at ``share`` (``neighbour_terms``)."""
    sides = [side for side in (own[i] for i in (before, after) if i is not None) if side]
    if not sides:
        return mine
    counts: dict[str, float] = dict(mine) if mine else {}
    for side in sides:
        for lexeme, tf in side.items():
            counts[lexeme] = counts.get(lexeme, 0.0) + share * tf
    return counts


def _neighbours(rows: Sequence[Candidate]) -> tuple[list[int | None], list[int | None]]:
    """For each row, the row just before and just after it in its neighbourhood (by write order)."""
    before: list[int | None] = [None] * len(rows)
    after: list[int | None] = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["neighbourhood"] or "", rows[i]["seq"]))
    for a, b in itertools.pairwise(order):
        if rows[a]["neighbourhood"] == rows[b]["neighbourhood"]:
            after[a], before[b] = b, a
    return before, after


def _rarity(
    first: Candidate, own: Sequence[Mapping[str, int] | None], window: Sequence[Mapping[str, float] | None]
) -> dict[str, float]:
    """Each query term's BM25 weight: its document frequency among the searched rows, scaled from
    rows to windows by the scored rows' windows per row holding it."""
    n = first["n"]
    holders = Counter(lexeme for counts in own if counts for lexeme in counts)
    windows = Counter(lexeme for counts in window if counts for lexeme in counts)
    weights = {}
    for lexeme, df in zip(first["query_lexemes"] or (), first["query_dfs"] or (), strict=True):
        per_row = windows[lexeme] / holders[lexeme] if holders[lexeme] else 1.0
        spread = min(df * per_row, n)
        weights[lexeme] = math.log(1 + (n - spread + 0.5) / (spread + 0.5))
    return weights


def _at(scores: Sequence[float], i: int | None) -> float:
    return 0.0 if i is None else scores[i]
