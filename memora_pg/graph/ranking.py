"""Where a memory is searched: the one ranking behind every face's search.

A search scores candidate rows of a corpus (the memories, or the AutoGen entries) for one or
more queries, in one statement, and keeps the best ``k`` per query. Its cost follows the
candidates, not the rows searched: every step after the candidates are chosen works on them
alone. The score, in [0, 1], fuses two arms:

* **dense**: the cosine similarity of the row's embedding and the query's, rescaled so that
  similarities at or below ``cosine_floor`` (where an unrelated text lands with e5-style
  embedders) score 0 and an identical vector scores 1;
* **lexical**: BM25 over the rows' full-text vectors (the schema's ``to_search_text``:
  stemming and stop words of the database's text-search configuration), with ``k1`` saturation
  and no length normalisation (memories are short; normalising by length lost recall). A row's
  term counts include its neighbours' at ``neighbour_terms`` (a fact is often split over two
  turns). The BM25 score is divided by the larger of the best row's score and ``lexical_floor``
  times the best score the query's terms could reach, so one weak word match does not make an
  unrelated row look relevant.

The fused score is ``dense_weight · dense + (1 − dense_weight) · lexical``, then lifted by the
better neighbour's: ``(score + neighbour_boost · max(neighbours)) / (1 + neighbour_boost)``.
Neighbours are the rows written just before and after a row in the same interaction (rows of
no interaction, as the mem0-style and AutoGen faces write them, neighbour by write order among
the same user's, or the same AutoGen scope's).

**Candidates** (:func:`_candidates`), for each query:

* the nearest rows, :data:`NEAREST_ROWS` or the hits asked for (:func:`nearest_branches`): an exact sort of the
  scope's rows while the scope (a user, a namespace) has at most :data:`EXACT_ROWS`, else the
  HNSW index with iterative scans, its options set inside the statement (:func:`hnsw_options`);
* every row holding a query word that at most ``candidates`` of the searched rows hold, found by
  the GIN index; a commoner word brings none (its rarity weight is low);
* the rows just before and after each of those, one index probe each (:func:`_neighbour_probes`).

**Rarity.** A word's document frequency is counted in the searched rows by the GIN index, up to
:data:`RARITY_ROWS`, and the row count by the scope's btree, up to :data:`EXACT_ROWS` (exact for
any scope a conversation fills); it counts the rows whose window (the row and its neighbours)
holds the word, measured per row of the word among the scored rows.

The statement's CTEs are named for what they hold: ``queries``, ``scope_rows``, ``term_rarity``,
``candidates``, ``found``, ``around``, ``scope``, ``term_counts``, ``spread_counts``,
``window_counts``, ``window_rarity``, ``bm25``, ``lexical_scale``, ``fused``, ``smoothed``,
``ranked``. The constants of the ranking are written into its text (:func:`number`); a call
binds its queries, its condition's values and the HNSW search width alone.
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
    bindparam,
    column,
    func,
    literal_column,
    null,
    select,
    text,
    true,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, TSVECTOR
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
    candidates: int = 150

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
    the columns a hit returns, and what makes two rows neighbours: the same ``neighbourhood``
    (rows written just before and after in one interaction), or, for rows with none, the same
    ``unattached`` (rows of one user written just before and after). Without a ``neighbourhood``,
    the rows of a search's scope neighbour by write order."""

    table: Table
    id_column: str
    neighbourhood: str | None
    returned: tuple[str, ...]
    unattached: str | None = None
    # The columns before ``seq`` of the index that finds a row's neighbours when there is no
    # ``neighbourhood``: a probe orders by them too, so that the index delivers its order even where
    # the scope pins them with IS NULL (which the planner does not take as fixing a column's value).
    order_prefix: tuple[str, ...] = ()

    def c(self, name: str) -> ColumnElement[Any]:
        found: ColumnElement[Any] = self.table.c[name]
        return found


def number(value: float) -> ColumnElement[Any]:
    """A constant of the ranking, written into the statement's text: the planner sees its value
    (a bound LIMIT is planned as an unknown one), and the statement binds only the call's values."""
    if isinstance(value, int):
        return literal_column(str(value), Integer)
    return literal_column(f"CAST({float(value)!r} AS double precision)", Float)


def similarity(distance: ColumnElement[Any]) -> ColumnElement[Any]:
    """The cosine similarity of a cosine ``distance``; 0 where pgvector's distance is NaN (a zero vector,
    as an embedder may give a text of no words), so that no NaN reaches a score or a threshold."""
    return func.coalesce(
        func.nullif(number(1) - distance, literal_column("CAST('NaN' AS double precision)")), number(0.0)
    )


# One row per query: its number, its vector, its terms (the schema's full-text rule) and the
# tsquery matching any of them (a sparse retriever's "any word", not a phrase).
QUERIES = """
SELECT given.query_no, given.embedding, parsed.terms, tsvector_to_array(parsed.terms) AS lexemes,
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
        column("lexemes", ARRAY(Text)),
        column("any_term", TSQUERY),
    )
    return text(QUERIES.replace("{schema}", schema)).columns(*columns).cte("queries")


def _neighbourhood(corpus: Corpus) -> ColumnElement[Any]:
    """The value shared by rows that neighbour each other: the ``neighbourhood`` column, else the
    ``unattached`` one (a constant when every row of the scope neighbours every row)."""
    if corpus.neighbourhood is None:
        return null().cast(Text).label("neighbourhood")
    attached = literal_column("'i:'", Text) + corpus.c(corpus.neighbourhood)
    if corpus.unattached is None:
        return attached.label("neighbourhood")
    return func.coalesce(attached, literal_column("'u:'", Text) + corpus.c(corpus.unattached)).label("neighbourhood")


def _neighbours(
    seq: ColumnElement[Any], neighbourhood: ColumnElement[Any], query_no: ColumnElement[Any]
) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """The write order of the rows just before and after each row of the same neighbourhood, per query."""
    by = [query_no, neighbourhood]
    return (
        func.lag(seq).over(partition_by=by, order_by=seq).label("prev_seq"),
        func.lead(seq).over(partition_by=by, order_by=seq).label("next_seq"),
    )


def _by_key(corpus: Corpus, row_id: ColumnElement[Any], *columns: Any, name: str) -> Any:
    """The row of ``row_id`` (a column of an outer query: a row the search's condition chose), found
    by its primary key ``(org_id, id)`` alone: a LATERAL lookup that no other index can serve, whatever
    the planner knows of the table (with no statistics, a join of the candidates with the scope's rows
    was planned as a scan of the user's index per candidate)."""
    key = and_(corpus.c("org_id") == bindparam("where_org_id"), corpus.c(corpus.id_column) == row_id)
    return select(*columns).where(key).lateral(name)


def _neighbour_probes(corpus: Corpus, searchable: ColumnElement[bool], found: CTE) -> list[Select[Any]]:
    """The rows just before and just after each ``found`` row in its neighbourhood, by key: one index
    probe each way (``(org_id, interaction_id, seq)``, or ``(org_id, user_id, seq)`` for rows of no
    interaction; an AutoGen scope's own index). Each probe is a LATERAL of one row at most; of the
    alternatives for a row with and without a neighbourhood, its one-time filter runs one."""
    seq = corpus.c("seq")
    if corpus.neighbourhood is None:
        alternatives: list[ColumnElement[bool]] = [true()]
    else:
        own = corpus.c(corpus.neighbourhood)
        unattached: list[ColumnElement[bool]] = [own.is_(None), found.c.attached.is_(None)]
        if corpus.unattached is not None:
            unattached.append(corpus.c(corpus.unattached) == found.c.unattached)
        alternatives = [and_(found.c.attached.is_not(None), own == found.c.attached), and_(*unattached)]
    probes = []
    for before in (True, False):
        side = seq < found.c.seq if before else seq > found.c.seq
        order = [corpus.c(name) for name in corpus.order_prefix] + [seq]
        for i, alternative in enumerate(alternatives):
            neighbour = (
                select(corpus.c(corpus.id_column).label("row_id"))
                .where(searchable, alternative, side)
                .order_by(*(column.desc() for column in order) if before else order)
                .limit(number(1))
                .lateral(f"{'before' if before else 'after'}_{i}")
            )
            probes.append(select(found.c.query_no, neighbour.c.row_id).select_from(found.join(neighbour, true())))
    return probes


# A search that pins a user (or a namespace) sorts that scope's rows exactly while they are at most this
# many; beyond, the HNSW index delivers the nearest. The scope's rows are counted no further than one
# more, and that count is also the row count of the lexical arm's rarity (BENCHMARKS.md, search scaling).
EXACT_ROWS = 2000
# How far the scope's rows holding a query term are counted: the document frequency of the term's
# rarity weight, exact up to this count.
RARITY_ROWS = 600
# The nearest rows a search scores: this many, or the hits asked for if more (and at most
# ``Weights.candidates`` beyond those). With the rows around each candidate scored too, more nearest
# rows changed no LoCoMo hit, for 10 hits or for 20.
NEAREST_ROWS = 30


def nearest_count(k: int, candidates: int) -> int:
    """How many nearest rows a search of ``k`` hits scores."""
    return max(k, min(candidates, NEAREST_ROWS))


def hnsw_options() -> ColumnElement[bool]:
    """True, once this statement's transaction has pgvector's iterative scans on and ``hnsw.ef_search``
    at the bound ``:ef``. As a condition of the index scan's own query it is a one-time filter, run
    before the scan starts: the options hold for this statement alone, with no round trip of their own."""
    options = select(
        func.concat(
            func.set_config(literal_column("'hnsw.iterative_scan'"), literal_column("'relaxed_order'"), true()),
            func.set_config(literal_column("'hnsw.ef_search'"), bindparam("ef", type_=Text), true()),
        )
    ).scalar_subquery()
    return options.is_not(None)


def scope_rows(searchable: ColumnElement[bool]) -> CTE:
    """The rows matching ``searchable``, counted up to one more than :data:`EXACT_ROWS`: ``n``."""
    counted = select(number(1)).where(searchable).limit(number(EXACT_ROWS + 1)).subquery("counted")
    return select(func.count().label("n")).select_from(counted).cte("scope_rows")


def nearest_branches(
    columns: Sequence[ColumnElement[Any]],
    *,
    searchable: ColumnElement[bool],
    distance: ColumnElement[Any],
    seq: ColumnElement[Any],
    limit: int,
    size: CTE | None,
) -> list[Select[Any]]:
    """The ``limit`` rows nearest by ``distance`` among those matching ``searchable``: by the HNSW index
    (iterative scans, so a selective condition still fills the list); for a search of a scope whose
    ``size`` (:func:`scope_rows`) is at most :data:`EXACT_ROWS`, by an exact sort of the scope's rows
    instead (found by its btree; ties by write order). The two are branches of one statement, one of
    them gated off by the size, so each call runs one. Without a ``size``, the index alone. Each branch
    also returns the ``distance``, computed once per row (its sort key is that column)."""
    indexed = distance.label("distance")
    by_index = select(*columns, indexed).where(searchable, hnsw_options()).order_by(indexed).limit(number(limit))
    if size is None:
        return [by_index]
    small = select(size.c.n <= number(EXACT_ROWS)).scalar_subquery()
    # "+ 0" hides the ordering from the HNSW index: the scope's rows are sorted.
    sorted_ = (distance + number(0)).label("distance")
    exact = select(*columns, sorted_).where(searchable, small).order_by(sorted_, seq).limit(number(limit))
    return [exact, by_index.where(small.is_(False))]


@dataclass(frozen=True)
class Candidates:
    """What the ranking scores: ``scope``, each query's candidates with their cosine, neighbours and
    terms; ``rarity``, each query term's document frequency ``df`` among the searched rows; ``size``,
    the searched rows' count ``n`` (both counted up to their bounds)."""

    scope: CTE
    rarity: CTE
    size: CTE


def _candidates(
    corpus: Corpus, queries: CTE, where: ColumnElement[bool], *, nearest: int, candidates: int, scoped: bool
) -> Candidates:
    """For each query, its candidates among the rows matching ``where``: the ``nearest`` rows
    (:func:`nearest_branches`), every row holding a query term that at most ``candidates`` of those
    rows hold (found by the GIN index), and the rows just before and after each of them in its
    neighbourhood (:func:`_neighbour_probes`). A more common term brings no candidates of its own: its
    rarity weight is low, and its rows may be as many as the scope's. Term rarity and the row count
    are the searched rows', counted by the indexes up to :data:`RARITY_ROWS` and :data:`EXACT_ROWS`."""
    embedding, search_text, row_id = corpus.c("embedding"), corpus.c("search_text"), corpus.c(corpus.id_column)
    searchable = and_(where, embedding.is_not(None))
    size = scope_rows(searchable)
    arms: list[Select[Any]] = []
    branches = nearest_branches(
        [row_id.label("row_id")],
        searchable=searchable,
        distance=embedding.cosine_distance(queries.c.embedding),
        seq=corpus.c("seq"),
        limit=nearest,
        size=size if scoped else None,
    )
    for i, branch in enumerate(branches):
        near = branch.lateral(f"nearest_{i}")
        arms.append(select(queries.c.query_no, near.c.row_id).select_from(queries.join(near, true())))
    # Each query term's rows, by the GIN index, counted up to one more than RARITY_ROWS.
    term = func.unnest(queries.c.lexemes).table_valued("lexeme").render_derived().lateral("term")
    holding = (
        select(row_id.label("row_id"))
        .where(searchable, search_text.op("@@")(func.quote_literal(term.c.lexeme).cast(TSQUERY)))
        .limit(number(RARITY_ROWS + 1))
        .correlate(term)
        .subquery("holding")
    )
    held = (
        select(func.count().label("df"), func.array_agg(holding.c.row_id).label("row_ids"))
        .select_from(holding)
        .lateral("held")
    )
    rarity = (
        select(queries.c.query_no, term.c.lexeme, held.c.df, held.c.row_ids)
        .select_from(queries.join(term, true()).join(held, true()))
        .cte("term_rarity")
    )
    rare = func.unnest(rarity.c.row_ids).label("row_id")
    arms.append(select(rarity.c.query_no, rare).where(rarity.c.df <= number(candidates)))
    chosen = union(*arms).cte("candidates")
    # The candidates' neighbours join them, so that each candidate's neighbour terms and scores are
    # those of the rows around it, found by key (never by reading the scope's rows in order).
    own = _by_key(
        corpus,
        chosen.c.row_id,
        corpus.c("seq"),
        (corpus.c(corpus.neighbourhood) if corpus.neighbourhood else null().cast(Text)).label("attached"),
        (corpus.c(corpus.unattached) if corpus.unattached else null().cast(Text)).label("unattached"),
        name="own",
    )
    found = (
        select(chosen.c.query_no, own.c.seq, own.c.attached, own.c.unattached)
        .select_from(chosen.join(own, true()))
        .cte("found")
    )
    around = union(select(chosen.c.query_no, chosen.c.row_id), *_neighbour_probes(corpus, searchable, found)).cte(
        "around"
    )
    row = _by_key(
        corpus,
        around.c.row_id,
        row_id.label("row_id"),
        _neighbourhood(corpus),
        corpus.c("seq"),
        search_text,
        embedding,
        name="scored",
    )
    prev_seq, next_seq = _neighbours(row.c.seq, row.c.neighbourhood, around.c.query_no)
    scope = (
        select(
            around.c.query_no,
            row.c.row_id,
            row.c.neighbourhood,
            row.c.seq,
            prev_seq,
            next_seq,
            row.c.search_text,
            queries.c.lexemes,
            row.c.search_text.op("@@")(queries.c.any_term).label("matches"),
            similarity(row.c.embedding.cosine_distance(queries.c.embedding)).label("cosine"),
        )
        .select_from(around.join(queries, queries.c.query_no == around.c.query_no).join(row, true()))
        .cte("scope")
    )
    return Candidates(scope, rarity, size)


def statement(
    corpus: Corpus,
    *,
    schema: str,
    where: ColumnElement[bool],
    k: int,
    scoped: bool,
    weights: Weights,
) -> Select[Any]:
    """Up to ``k`` rows per query, best first: ``query_no``, ``score``, ``cosine`` and the corpus's
    returned columns.

    ``where`` must pin the organization (as ``:where_org_id``, which the lookups by key reuse);
    ``scoped`` says it also pins a user or a namespace (whose rows may then be few enough to sort
    exactly). Takes :func:`query_params`' parameters and ``ef``.
    """
    queries = _queries(schema)
    chosen = _candidates(
        corpus,
        queries,
        where,
        nearest=nearest_count(k, weights.candidates),
        candidates=weights.candidates,
        scoped=scoped,
    )
    scope, scope_size = chosen.scope, chosen.size
    w = weights

    # How often each query term occurs in each candidate that holds one (each one's terms unnested once).
    occurrence = func.unnest(scope.c.search_text).table_valued("lexeme", "positions", "weights").lateral("occurrence")
    term_counts = (
        select(
            scope.c.query_no,
            scope.c.seq,
            scope.c.prev_seq,
            scope.c.next_seq,
            occurrence.c.lexeme,
            func.coalesce(func.array_length(occurrence.c.positions, number(1)), number(1)).label("tf"),
        )
        .select_from(scope.join(occurrence, true()))
        .where(scope.c.matches, occurrence.c.lexeme == func.any(scope.c.lexemes))
        .cte("term_counts")
    )
    # A row's counts include its neighbours' at ``neighbour_terms``.
    tc = term_counts.c
    spread_counts = union_all(
        select(tc.query_no, tc.seq, tc.lexeme, (tc.tf * number(1.0)).label("tf")),
        select(tc.query_no, tc.prev_seq, tc.lexeme, tc.tf * number(w.neighbour_terms)).where(tc.prev_seq.is_not(None)),
        select(tc.query_no, tc.next_seq, tc.lexeme, tc.tf * number(w.neighbour_terms)).where(tc.next_seq.is_not(None)),
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
    # A term's document frequency counts the rows whose window holds it (the row or a neighbour), as
    # BM25 over the windows would. Among the scored rows each term's windows are counted; for a term
    # of few rows, all its rows and their neighbours are scored, so that count is the scope's own. For
    # a common one it is scaled from the term's rows in the scope, by the scored rows' windows per row.
    windows = (
        select(wc.query_no, wc.lexeme, func.count().label("windows"))
        .group_by(wc.query_no, wc.lexeme)
        .subquery("windows")
    )
    holders = (
        select(tc.query_no, tc.lexeme, func.count().label("holders"))
        .group_by(tc.query_no, tc.lexeme)
        .subquery("holders")
    )
    per_row = func.coalesce(windows.c.windows * number(1.0) / holders.c.holders, number(1.0))
    term_rarity = (
        select(
            chosen.rarity.c.query_no,
            chosen.rarity.c.lexeme,
            func.least(chosen.rarity.c.df * per_row, scope_size.c.n).label("df"),
        )
        .select_from(
            chosen.rarity.join(scope_size, true())
            .outerjoin(
                windows,
                and_(windows.c.query_no == chosen.rarity.c.query_no, windows.c.lexeme == chosen.rarity.c.lexeme),
            )
            .outerjoin(
                holders,
                and_(holders.c.query_no == chosen.rarity.c.query_no, holders.c.lexeme == chosen.rarity.c.lexeme),
            )
        )
        .cte("window_rarity")
    )

    def idf(df: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.ln(number(1.0) + (scope_size.c.n - df + number(0.5)) / (df + number(0.5)))

    bm25 = (
        select(
            wc.query_no,
            wc.seq,
            func.sum(idf(term_rarity.c.df) * wc.tf * number(w.k1 + 1) / (wc.tf + number(w.k1))).label("score"),
        )
        .select_from(
            window_counts.join(
                term_rarity, and_(term_rarity.c.query_no == wc.query_no, term_rarity.c.lexeme == wc.lexeme)
            ).join(scope_size, true())
        )
        .group_by(wc.query_no, wc.seq)
        .cte("bm25")
    )
    best = select(bm25.c.query_no, func.max(bm25.c.score).label("best")).group_by(bm25.c.query_no).subquery("best")
    possible = (
        select(term_rarity.c.query_no, func.sum(idf(term_rarity.c.df) * number(w.k1 + 1)).label("possible"))
        .select_from(term_rarity.join(scope_size, true()))
        .group_by(term_rarity.c.query_no)
        .subquery("possible")
    )
    lexical_scale = (
        select(
            possible.c.query_no,
            func.greatest(func.coalesce(best.c.best, number(0.0)), number(w.lexical_floor) * possible.c.possible).label(
                "scale"
            ),
        )
        .select_from(possible.outerjoin(best, best.c.query_no == possible.c.query_no))
        .cte("lexical_scale")
        # one row per query, computed once (inlined, it would be computed again for every row)
        .prefix_with("MATERIALIZED")
    )
    # The fused score, as a sum of each arm's part per row (a hash aggregate, never a join of the
    # scope with itself: the planner cannot estimate these CTEs' sizes, and a nested loop over them
    # is quadratic in the user's rows).
    dense = func.greatest(number(0.0), (scope.c.cosine - number(w.cosine_floor)) / number(1 - w.cosine_floor))
    parts = union_all(
        select(
            scope.c.query_no,
            scope.c.seq,
            scope.c.neighbourhood,
            (number(w.dense_weight) * dense).label("part"),
        ),
        select(
            bm25.c.query_no,
            bm25.c.seq,
            null().cast(Text).label("neighbourhood"),
            (
                number(1 - w.dense_weight)
                * func.coalesce(bm25.c.score / func.nullif(lexical_scale.c.scale, number(0.0)), number(0.0))
            ).label("part"),
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
    before = func.coalesce(func.lag(fused.c.score).over(partition_by=by, order_by=fused.c.seq), number(0.0))
    after = func.coalesce(func.lead(fused.c.score).over(partition_by=by, order_by=fused.c.seq), number(0.0))
    smoothed = select(
        fused.c.query_no,
        fused.c.seq,
        (
            (fused.c.score + number(w.neighbour_boost) * func.greatest(before, after)) / number(1 + w.neighbour_boost)
        ).label("score"),
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
    # The hits by their key (the candidates know it), never by the write order, which no index holds.
    hit = _by_key(corpus, scope.c.row_id, *(corpus.c(name) for name in corpus.returned), name="hit")
    return (
        select(
            ranked.c.query_no,
            ranked.c.score.cast(Float).label("score"),
            scope.c.cosine.cast(Float).label("cosine"),
            *(hit.c[name] for name in corpus.returned),
        )
        .select_from(
            ranked.join(scope, and_(scope.c.query_no == ranked.c.query_no, scope.c.seq == ranked.c.seq)).join(
                hit, true()
            )
        )
        .where(ranked.c.place <= number(k))
        .order_by(ranked.c.query_no, ranked.c.place)
    )


def dense_statement(corpus: Corpus, *, schema: str, where: ColumnElement[bool], k: int, scoped: bool) -> Select[Any]:
    """Up to ``k`` rows per query by cosine similarity alone (``search_mode="dense"``), best first;
    ``score`` and ``cosine`` are both the similarity."""
    queries = _queries(schema)
    distance = corpus.c("embedding").cosine_distance(queries.c.embedding)
    searchable = and_(where, corpus.c("embedding").is_not(None))
    branches = nearest_branches(
        [corpus.c(name) for name in corpus.returned],
        searchable=searchable,
        distance=distance,
        seq=corpus.c("seq"),
        limit=k,
        size=scope_rows(searchable) if scoped else None,
    )
    per_query = []
    for i, branch in enumerate(branches):
        nearest = branch.lateral(f"nearest_{i}")
        cosine = similarity(nearest.c.distance)
        per_query.append(
            select(
                queries.c.query_no,
                cosine.label("score"),
                cosine.label("cosine"),
                *(nearest.c[n] for n in corpus.returned),
            ).select_from(queries.join(nearest, true()))
        )
    found = union_all(*per_query).subquery("found")
    return select(found).order_by(found.c.query_no, found.c.score.desc())
