"""Where a memory is searched: the one ranking behind every face's search.

A search scores the candidate rows of a corpus (the memories, or the AutoGen entries) for
one or more queries, in one statement, and keeps the best ``k`` per query. The score, in
[0, 1], fuses two arms:

* **dense**: the cosine similarity of the row's embedding and the query's, rescaled so that
  similarities at or below ``cosine_floor`` (where an unrelated text lands with e5-style
  embedders) score 0 and an identical vector scores 1;
* **lexical**: BM25 over the rows' full-text vectors (the schema's ``to_search_text``:
  stemming and stop words of the database's text-search configuration), with term weights by
  rarity among the candidate rows, ``k1`` saturation and no length normalisation (memories
  are short; normalising by length lost recall). A row's term counts include its neighbours'
  at ``neighbour_terms`` (a fact is often split over two turns). The BM25 score is divided by
  the larger of the best row's score and ``lexical_floor`` times the best score the query's
  terms could reach, so one weak word match does not make an unrelated row look relevant.

The fused score is ``dense_weight · dense + (1 − dense_weight) · lexical``, then lifted by the
better neighbour's: ``(score + neighbour_boost · max(neighbours)) / (1 + neighbour_boost)``.
Neighbours are the rows written just before and after a row in the same interaction (rows of
no interaction, as the mem0-style and AutoGen faces write them, neighbour by write order).

**Candidates.** A user's rows (or an AutoGen namespace) are all scored: the btree on
``(org_id, user_id, …)`` finds them and the ranking is exact. A search over a whole
organization, or under a condition that pins no user, scores the ``candidates`` nearest rows
by HNSW (iterative scans: a selective condition still fills the list) together with the
``candidates`` best full-text matches by GIN; its term rarities are measured among those.

The statement's CTEs are named for what they hold: ``queries``, ``corpus_rows``, ``scope``,
``query_terms``, ``term_counts``, ``spread_counts``, ``window_counts``, ``term_rarity``,
``scope_size``, ``bm25``, ``lexical_scale``, ``fused``, ``smoothed``, ``ranked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    CTE,
    Float,
    Integer,
    Select,
    Text,
    and_,
    column,
    func,
    literal,
    select,
    text,
    true,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import TSQUERY, TSVECTOR
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.schema import Table

from memora_pg import vector_params
from memora_pg.config import Settings


@dataclass(frozen=True)
class Weights:
    """The ranking's constants (``Settings.search_*``); the defaults were chosen on the LoCoMo
    development set with leave-one-conversation-out, where every fold chose the same ones."""

    dense_weight: float = 0.6
    cosine_floor: float = 0.75
    k1: float = 1.2
    neighbour_terms: float = 0.5
    neighbour_boost: float = 0.3
    lexical_floor: float = 0.3
    candidates: int = 100

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


@dataclass(frozen=True, eq=False)
class Corpus:
    """What a search ranks: a table with an id, a write order, an embedding, a full-text vector,
    a column whose equal values make rows neighbours, and the columns a hit returns."""

    table: Table
    id_column: str
    neighbourhood: str | None
    returned: tuple[str, ...]

    def c(self, name: str) -> ColumnElement[Any]:
        found: ColumnElement[Any] = self.table.c[name]
        return found


# One row per query: its number, its vector, its terms (the schema's full-text rule) and the
# tsquery matching any of them (a sparse retriever's "any word", not a phrase).
QUERIES = """
SELECT given.query_no, given.embedding, parsed.terms,
       CAST(array_to_string(
           ARRAY(SELECT quote_literal(word) FROM unnest(tsvector_to_array(parsed.terms)) AS word), ' | '
       ) AS tsquery) AS any_term
FROM unnest(CAST(:query_nos AS int[]), CAST(:embeddings AS vector[]), CAST(:queries AS text[]))
     AS given(query_no, embedding, query)
CROSS JOIN LATERAL (SELECT "{schema}".to_search_text(given.query) AS terms) AS parsed
"""


def query_params(vectors: Sequence[Sequence[float]], texts: Sequence[str]) -> dict[str, Any]:
    """The parameters of :func:`statement`: the queries, their vectors and their numbers."""
    return {"query_nos": list(range(len(texts))), "embeddings": vector_params.many(vectors), "queries": list(texts)}


def _queries(schema: str) -> CTE:
    columns = (
        column("query_no", Integer),
        column("embedding", VECTOR()),
        column("terms", TSVECTOR),
        column("any_term", TSQUERY),
    )
    return text(QUERIES.replace("{schema}", schema)).columns(*columns).cte("queries")


def _neighbours(corpus: Corpus, *partition: ColumnElement[Any]) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """The write order of the rows just before and after each row, among rows of the same ``partition``."""
    seq = corpus.c("seq")
    by = [*partition, corpus.c(corpus.neighbourhood)] if corpus.neighbourhood else list(partition)
    return (
        func.lag(seq).over(partition_by=by or None, order_by=seq).label("prev_seq"),
        func.lead(seq).over(partition_by=by or None, order_by=seq).label("next_seq"),
    )


def _neighbourhood(corpus: Corpus) -> ColumnElement[Any]:
    """The column whose equal values make rows neighbours (a constant when every row neighbours every row)."""
    if corpus.neighbourhood is None:
        return literal(None, Text).label("neighbourhood")
    return corpus.c(corpus.neighbourhood).label("neighbourhood")


def _exact_scope(corpus: Corpus, queries: CTE, where: ColumnElement[bool]) -> CTE:
    """Every row matching ``where``, for every query: cosine, neighbours and whether a term matches."""
    prev_seq, next_seq = _neighbours(corpus)
    rows = (
        select(
            corpus.c(corpus.id_column).label("row_id"),
            _neighbourhood(corpus),
            corpus.c("seq"),
            corpus.c("embedding"),
            corpus.c("search_text"),
            prev_seq,
            next_seq,
        )
        .where(where, corpus.c("embedding").is_not(None))
        .cte("corpus_rows")
    )
    return (
        select(
            queries.c.query_no,
            rows.c.row_id,
            rows.c.neighbourhood,
            rows.c.seq,
            rows.c.prev_seq,
            rows.c.next_seq,
            rows.c.search_text,
            rows.c.search_text.op("@@")(queries.c.any_term).label("matches"),
            (1 - rows.c.embedding.cosine_distance(queries.c.embedding)).label("cosine"),
        )
        .select_from(queries.join(rows, true()))
        .cte("scope")
    )


def _candidate_scope(corpus: Corpus, queries: CTE, where: ColumnElement[bool], candidates: int) -> CTE:
    """For each query, the ``candidates`` nearest rows (HNSW) and the ``candidates`` best full-text
    matches (GIN) among the rows matching ``where``: cosine, neighbours among them, term match."""
    embedding, search_text = corpus.c("embedding"), corpus.c("search_text")
    searchable = and_(where, embedding.is_not(None))
    nearest = (
        select(corpus.c(corpus.id_column).label("row_id"))
        .where(searchable)
        .order_by(embedding.cosine_distance(queries.c.embedding))
        .limit(candidates)
        .lateral("nearest")
    )
    lexical = (
        select(corpus.c(corpus.id_column).label("row_id"))
        .where(searchable, search_text.op("@@")(queries.c.any_term))
        .order_by(func.ts_rank(search_text, queries.c.any_term).desc())
        .limit(candidates)
        .lateral("lexical")
    )
    chosen = union(
        select(queries.c.query_no, nearest.c.row_id).select_from(queries.join(nearest, true())),
        select(queries.c.query_no, lexical.c.row_id).select_from(queries.join(lexical, true())),
    ).cte("candidates")
    prev_seq, next_seq = _neighbours(corpus, chosen.c.query_no)
    return (
        select(
            chosen.c.query_no,
            chosen.c.row_id,
            _neighbourhood(corpus),
            corpus.c("seq"),
            prev_seq,
            next_seq,
            search_text,
            search_text.op("@@")(queries.c.any_term).label("matches"),
            (1 - embedding.cosine_distance(queries.c.embedding)).label("cosine"),
        )
        .select_from(
            chosen.join(queries, queries.c.query_no == chosen.c.query_no).join(
                corpus.table, and_(where, corpus.c(corpus.id_column) == chosen.c.row_id)
            )
        )
        .cte("scope")
    )


def statement(
    corpus: Corpus,
    *,
    schema: str,
    where: ColumnElement[bool],
    k: int,
    exact: bool,
    weights: Weights,
) -> Select[Any]:
    """Up to ``k`` rows per query, best first: ``query_no``, ``score`` and the corpus's returned columns.

    ``where`` must pin the organization (and, for an ``exact`` search, the user or namespace:
    every matching row is scored). Takes :func:`query_params`' parameters.
    """
    queries = _queries(schema)
    scope = (
        _exact_scope(corpus, queries, where) if exact else _candidate_scope(corpus, queries, where, weights.candidates)
    )
    w = weights

    query_terms = (
        select(queries.c.query_no, column("lexeme"))
        .select_from(queries.join(func.unnest(queries.c.terms).table_valued("lexeme").lateral("term"), true()))
        .distinct()
        .cte("query_terms")
    )
    # How often each query term occurs in each row that matches one (only those are unnested).
    occurrence = func.unnest(scope.c.search_text).table_valued("lexeme", "positions", "weights").lateral("occurrence")
    term_counts = (
        select(
            scope.c.query_no,
            scope.c.seq,
            scope.c.prev_seq,
            scope.c.next_seq,
            occurrence.c.lexeme,
            func.coalesce(func.array_length(occurrence.c.positions, 1), 1).label("tf"),
        )
        .select_from(
            scope.join(occurrence, true()).join(
                query_terms,
                and_(query_terms.c.query_no == scope.c.query_no, query_terms.c.lexeme == occurrence.c.lexeme),
            )
        )
        .where(scope.c.matches)
        .cte("term_counts")
    )
    # A row's counts include its neighbours' at ``neighbour_terms``.
    tc = term_counts.c
    spread_counts = union_all(
        select(tc.query_no, tc.seq, tc.lexeme, (tc.tf * 1.0).label("tf")),
        select(tc.query_no, tc.prev_seq, tc.lexeme, tc.tf * w.neighbour_terms).where(tc.prev_seq.is_not(None)),
        select(tc.query_no, tc.next_seq, tc.lexeme, tc.tf * w.neighbour_terms).where(tc.next_seq.is_not(None)),
    ).cte("spread_counts")
    window_counts = (
        select(
            spread_counts.c.query_no,
            spread_counts.c.seq,
            spread_counts.c.lexeme,
            func.sum(spread_counts.c.tf).label("tf"),
        )
        .group_by(spread_counts.c.query_no, spread_counts.c.seq, spread_counts.c.lexeme)
        .cte("window_counts")
    )
    wc = window_counts.c
    term_rarity = (
        select(wc.query_no, wc.lexeme, func.count().label("df")).group_by(wc.query_no, wc.lexeme).cte("term_rarity")
    )
    scope_size = select(scope.c.query_no, func.count().label("n")).group_by(scope.c.query_no).cte("scope_size")

    def idf(df: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.ln(1 + (scope_size.c.n - df + 0.5) / (df + 0.5))

    bm25 = (
        select(
            wc.query_no,
            wc.seq,
            func.sum(idf(term_rarity.c.df) * wc.tf * (w.k1 + 1) / (wc.tf + w.k1)).label("score"),
        )
        .select_from(
            window_counts.join(
                term_rarity, and_(term_rarity.c.query_no == wc.query_no, term_rarity.c.lexeme == wc.lexeme)
            ).join(scope_size, scope_size.c.query_no == wc.query_no)
        )
        .group_by(wc.query_no, wc.seq)
        .cte("bm25")
    )
    best = select(bm25.c.query_no, func.max(bm25.c.score).label("best")).group_by(bm25.c.query_no).subquery("best")
    df = func.coalesce(term_rarity.c.df, 0)
    possible = (
        select(query_terms.c.query_no, func.sum(idf(df) * (w.k1 + 1)).label("possible"))
        .select_from(
            query_terms.join(scope_size, scope_size.c.query_no == query_terms.c.query_no).outerjoin(
                term_rarity,
                and_(term_rarity.c.query_no == query_terms.c.query_no, term_rarity.c.lexeme == query_terms.c.lexeme),
            )
        )
        .group_by(query_terms.c.query_no)
        .subquery("possible")
    )
    lexical_scale = (
        select(
            possible.c.query_no,
            func.greatest(func.coalesce(best.c.best, 0), w.lexical_floor * possible.c.possible).label("scale"),
        )
        .select_from(possible.outerjoin(best, best.c.query_no == possible.c.query_no))
        .cte("lexical_scale")
        # one row per query, computed once (inlined, it would be computed again for every row)
        .prefix_with("MATERIALIZED")
    )
    # The fused score, as a sum of each arm's part per row (a hash aggregate, never a join of the
    # scope with itself: the planner cannot estimate these CTEs' sizes, and a nested loop over them
    # is quadratic in the user's rows).
    dense = func.greatest(0, (scope.c.cosine - w.cosine_floor) / (1 - w.cosine_floor))
    parts = union_all(
        select(
            scope.c.query_no,
            scope.c.seq,
            scope.c.neighbourhood,
            (w.dense_weight * dense).label("part"),
        ),
        select(
            bm25.c.query_no,
            bm25.c.seq,
            literal(None, Text).label("neighbourhood"),
            ((1 - w.dense_weight) * func.coalesce(bm25.c.score / func.nullif(lexical_scale.c.scale, 0), 0)).label(
                "part"
            ),
        ).select_from(bm25.join(lexical_scale, lexical_scale.c.query_no == bm25.c.query_no)),
    ).subquery("parts")
    fused = (
        select(
            parts.c.query_no,
            parts.c.seq,
            func.max(parts.c.neighbourhood).label("neighbourhood"),
            func.sum(parts.c.part).label("score"),
        )
        .group_by(parts.c.query_no, parts.c.seq)
        .cte("fused")
    )
    # Neighbours are the rows just before and after in the same neighbourhood: a window, as for the terms.
    by = (fused.c.query_no, fused.c.neighbourhood)
    before = func.coalesce(func.lag(fused.c.score).over(partition_by=by, order_by=fused.c.seq), 0)
    after = func.coalesce(func.lead(fused.c.score).over(partition_by=by, order_by=fused.c.seq), 0)
    smoothed = select(
        fused.c.query_no,
        fused.c.seq,
        ((fused.c.score + w.neighbour_boost * func.greatest(before, after)) / (1 + w.neighbour_boost)).label("score"),
    ).cte("smoothed")
    ranked = (
        select(
            smoothed.c.query_no,
            smoothed.c.seq,
            smoothed.c.score,
            func.row_number()
            .over(partition_by=smoothed.c.query_no, order_by=(smoothed.c.score.desc(), smoothed.c.seq))
            .label("place"),
        )
    ).cte("ranked")
    hit = corpus.table
    return (
        select(ranked.c.query_no, ranked.c.score.cast(Float).label("score"), *(hit.c[name] for name in corpus.returned))
        .select_from(ranked.join(hit, and_(where, hit.c["seq"] == ranked.c.seq)))
        .where(ranked.c.place <= k)
        .order_by(ranked.c.query_no, ranked.c.place)
    )


def dense_statement(corpus: Corpus, *, schema: str, where: ColumnElement[bool], k: int, exact: bool) -> Select[Any]:
    """Up to ``k`` rows per query by cosine similarity alone (``search_mode="dense"``), best first."""
    queries = _queries(schema)
    distance = corpus.c("embedding").cosine_distance(queries.c.embedding)
    # "+ 0" hides the ordering from the HNSW index, so an exact search sorts every matching row.
    order = (distance + literal(0, Float), corpus.c("seq")) if exact else (distance,)
    nearest = (
        select((1 - distance).label("score"), *(corpus.c(name) for name in corpus.returned))
        .where(where, corpus.c("embedding").is_not(None))
        .order_by(*order)
        .limit(k)
        .lateral("nearest")
    )
    return (
        select(queries.c.query_no, nearest.c.score, *(nearest.c[name] for name in corpus.returned))
        .select_from(queries.join(nearest, true()))
        .order_by(queries.c.query_no, nearest.c.score.desc())
    )
