"""How the hybrid search scores its candidates: the one ranking behind every face's search.

The search statement (:mod:`memora_pg.graph.ranking`) returns, for each query, its candidate rows
with what the score needs: the cosine similarity, the write order and neighbourhood, the query
terms each row holds and how often, and each term's document frequency among the searched rows.
:func:`rank` scores them here, in one pass over those few rows. The score, in [0, 1], fuses two arms:

* **dense**: the cosine similarity of the row's embedding and the query's, rescaled so that
  similarities at or below ``cosine_floor`` (where an unrelated text lands with e5-style
  embedders) score 0 and an identical vector scores 1. The arm counts nothing for a query whose
  best candidate is no nearer than ``cosine_gate``: no memory stands out from where unrelated text
  lands, so the embedder says nothing about which one answers;
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

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

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
    # The cosine similarity the query's best candidate must exceed for the dense arm to count at all
    # (measured per query, as the floor is); None: no query is gated beyond the floor.
    cosine_gate: float | None = None

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
    """The ``k`` best of one query's candidates, best first, with their scores. Ties go to the nearer row,
    then by write order: rows that score 0 (none related, as for a gated query) keep the embedder's order
    for a caller that asks for every ranked row."""
    if not candidates:
        return []
    w, rows, first = weights, candidates, candidates[0]
    lexemes = first["query_lexemes"] or ()
    # One row of counts per candidate and a column per query term; row ``len(rows)`` holds zeros, the
    # counts of "no neighbour".
    before, after = _neighbours(rows)
    own = _term_counts(rows, lexemes)
    sides = own[before] + own[after]
    window = own[:-1] + w.neighbour_terms * sides
    holds = own[:-1] > 0
    in_window = holds | (sides > 0)
    idf = _rarity(first, holds.sum(axis=0), in_window.sum(axis=0))
    saturated = w.k1 + 1
    bm25 = np.divide(window * saturated, window + w.k1, out=np.zeros_like(window), where=in_window) @ idf
    scale = max(float(bm25.max()), w.lexical_floor * saturated * float(idf.sum()))
    # In [0, 1]: divided first, so that a scale near 0 (a tiny lexical_floor) never makes 0 × inf.
    lexical = bm25 / scale if scale > 0 else np.zeros_like(bm25)
    dense = w.dense_weight / (1 - w.cosine_floor)
    cosine = np.fromiter((row["cosine"] for row in rows), dtype=float, count=len(rows))
    if w.cosine_gate is not None and float(cosine.max()) <= w.cosine_gate:
        dense = 0.0
    fused = np.append(dense * np.maximum(0.0, cosine - w.cosine_floor) + (1 - w.dense_weight) * lexical, 0.0)
    boost = w.neighbour_boost
    scores = (fused[:-1] + boost * np.maximum(fused[before], fused[after])) / (1 + boost)
    seq = np.fromiter((row["seq"] for row in rows), dtype=np.int64, count=len(rows))
    best = np.lexsort((seq, -cosine, -scores))[:k]
    return [(rows[i], float(scores[i])) for i in best]


def _term_counts(rows: Sequence[Candidate], lexemes: Sequence[str]) -> npt.NDArray[np.float64]:
    """How often each row holds each query term (a row per candidate, then a row of zeros)."""
    column = {lexeme: j for j, lexeme in enumerate(lexemes)}
    counts = np.zeros((len(rows) + 1, len(lexemes)))
    for i, row in enumerate(rows):
        if row["term_lexemes"]:
            for lexeme, tf in zip(row["term_lexemes"], row["term_counts"], strict=True):
                if lexeme in column:  # a term of no weight otherwise
                    counts[i, column[lexeme]] = tf
    return counts


def _neighbours(rows: Sequence[Candidate]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """For each row, the row just before and just after it in its neighbourhood (by write order);
    ``len(rows)`` where there is none."""
    before = np.full(len(rows), len(rows), dtype=np.intp)
    after = np.full(len(rows), len(rows), dtype=np.intp)
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["neighbourhood"] or "", rows[i]["seq"]))
    for a, b in itertools.pairwise(order):
        if rows[a]["neighbourhood"] == rows[b]["neighbourhood"]:
            after[a], before[b] = b, a
    return before, after


def _rarity(
    first: Candidate, holders: npt.NDArray[np.int64], windows: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Each query term's BM25 weight: its document frequency among the searched rows, scaled from
    rows to windows by the scored rows' windows per row holding it (``holders``, ``windows``: how
    many scored rows hold the term, and whose window does)."""
    n = first["n"]
    df = np.asarray(first["query_dfs"] or (), dtype=float)
    per_row = np.divide(windows, holders, out=np.ones(len(df)), where=holders > 0)
    spread = np.minimum(df * per_row, n)
    weights: npt.NDArray[np.float64] = np.log(1 + (n - spread + 0.5) / (spread + 0.5))
    return weights
