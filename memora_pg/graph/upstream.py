"""Upstream Memora's search, for ``PgVectorDB(search_mode="upstream")``: the fusion its Qdrant store makes,
kept for anyone who wants its scores.

It is built from the parts every other search is built from, and run the same way
(:func:`memora_pg.graph.search.find`, one statement): the queries of
:func:`memora_pg.graph.ranking.queries_cte` (the schema's full-text rule), the nearest rows of
:func:`memora_pg.graph.nearest.nearest_branches` (an exact sort of a small scope, else the HNSW index
with its options set inside the statement) and the search's condition (the organization, the user, the
agent, the current or as-of versions).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import CTE, Select, and_, func, select, true, union_all
from sqlalchemy.sql.elements import ColumnElement

from memora_pg.graph.nearest import Corpus, nearest_branches, number, scope_rows, similarity
from memora_pg.graph.ranking import by_key

# Upstream's constants: the length of each arm's list, the cosine an arm's hit needs, the score a hit needs.
DENSE_CANDIDATES = 12
LEXICAL_CANDIDATES = 12
MIN_SIMILARITY = 0.4
MIN_FUSED_SCORE = 0.35


def statement(corpus: Corpus, queries: CTE, where: ColumnElement[bool], *, k: int, scoped: bool) -> Select[Any]:
    """Up to ``k`` rows per query of ``queries`` among the rows of ``corpus`` matching ``where``, fused as
    upstream's Qdrant store fuses them: the :data:`DENSE_CANDIDATES` nearest (kept at a cosine of at least
    :data:`MIN_SIMILARITY`) and the :data:`LEXICAL_CANDIDATES` best full-text matches by ``ts_rank``; a
    row's score is the sum, over the lists holding it, of 1 / (its rank + 2), and it is a hit above
    :data:`MIN_FUSED_SCORE`. Best first, ties by the dense list's rank, then the lexical list's.

    Returns ``query_no``, the corpus's returned columns, ``score`` and ``cosine``; ``scoped`` says
    ``where`` pins a user (whose rows may be few enough to sort exactly).
    """
    dense = _dense(corpus, queries, where, scoped=scoped)
    lexical = _lexical(corpus, queries, where, scoped=scoped)
    same = and_(lexical.c.query_no == dense.c.query_no, lexical.c.row_id == dense.c.row_id)
    both = dense.outerjoin(lexical, same, full=True)

    def share(rank: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.coalesce(number(1.0) / (rank + number(2.0)), number(0.0))

    query_no = func.coalesce(dense.c.query_no, lexical.c.query_no).label("query_no")
    row_id = func.coalesce(dense.c.row_id, lexical.c.row_id).label("row_id")
    score = (share(dense.c.rank) + share(lexical.c.rank)).label("score")
    dense_rank = func.coalesce(dense.c.rank, number(DENSE_CANDIDATES)).label("dense_rank")
    lexical_rank = func.coalesce(lexical.c.rank, number(LEXICAL_CANDIDATES)).label("lexical_rank")
    fused = select(query_no, row_id, score, dense_rank, lexical_rank).select_from(both).subquery("fused")
    order = (fused.c.score.desc(), fused.c.dense_rank, fused.c.lexical_rank)
    place = func.row_number().over(partition_by=fused.c.query_no, order_by=order).label("place")
    kept = select(fused, place).where(fused.c.score > number(MIN_FUSED_SCORE)).subquery("kept")
    # Each hit's row by its key, with its cosine similarity to its query.
    cosine = similarity(corpus.c("embedding").cosine_distance(queries.c.embedding)).label("cosine")
    returned = [corpus.c(name) for name in corpus.returned]
    own = by_key(corpus, kept.c.row_id, *returned, cosine, name="own")
    return (
        select(kept.c.query_no, *(own.c[name] for name in corpus.returned), kept.c.score, own.c.cosine)
        .select_from(kept.join(queries, queries.c.query_no == kept.c.query_no).join(own, true()))
        .where(kept.c.place <= number(k))
        .order_by(kept.c.query_no, kept.c.score.desc(), kept.c.dense_rank, kept.c.lexical_rank)
    )


def _dense(corpus: Corpus, queries: CTE, where: ColumnElement[bool], *, scoped: bool) -> Any:
    """Each query's nearest rows at a cosine of at least MIN_SIMILARITY, ranked from 0 (ties by write order)."""
    embedding, seq = corpus.c("embedding"), corpus.c("seq")
    branches = nearest_branches(
        [corpus.c(corpus.id_column).label("row_id"), seq.label("seq")],
        corpus=corpus,
        searchable=and_(where, embedding.is_not(None)),
        distance=embedding.cosine_distance(queries.c.embedding),
        limit=DENSE_CANDIDATES,
        size=scope_rows(corpus, where) if scoped else None,
    )
    per_query = []
    for i, branch in enumerate(branches):
        near = branch.lateral(f"nearest_{i}")
        per_query.append(
            select(queries.c.query_no, near.c.row_id, near.c.seq, near.c.distance).select_from(
                queries.join(near, true())
            )
        )
    found = union_all(*per_query).subquery("nearest") if len(per_query) > 1 else per_query[0].subquery("nearest")
    order = (found.c.distance, found.c.seq)
    rank = (func.row_number().over(partition_by=found.c.query_no, order_by=order) - number(1)).label("rank")
    kept = similarity(found.c.distance) >= number(MIN_SIMILARITY)
    return select(found.c.query_no, found.c.row_id, rank).where(kept).subquery("dense")


def _lexical(corpus: Corpus, queries: CTE, where: ColumnElement[bool], *, scoped: bool) -> Any:
    """Each query's best full-text matches (any of its words), by ``ts_rank`` (how often the words occur; not
    ``ts_rank_cd``, whose cover density costs several times more per row), ranked from 0, ties by write order."""
    search_text, seq = corpus.c("search_text"), corpus.c("seq")
    matches = search_text.op("@@")(queries.c.any_term)
    if scoped:
        # "IS TRUE" keeps the GIN index out of a user's search: a common word matches much of the
        # organization, while the user's rows are few (and read by the dense arm anyway).
        matches = matches.is_(True)
    relevance = func.ts_rank(search_text, queries.c.any_term).label("relevance")
    best = (
        select(corpus.c(corpus.id_column).label("row_id"), seq.label("seq"), relevance)
        .where(where, corpus.c("embedding").is_not(None), matches)
        .order_by(relevance.desc(), seq)
        .limit(number(LEXICAL_CANDIDATES))
        .lateral("best")
    )
    order = (best.c.relevance.desc(), best.c.seq)
    rank = (func.row_number().over(partition_by=queries.c.query_no, order_by=order) - number(1)).label("rank")
    return select(queries.c.query_no, best.c.row_id, rank).select_from(queries.join(best, true())).subquery("lexical")
