"""Where a memory is searched: the one statement behind every face's search.

A search ranks candidate rows of a corpus (the memories, or the AutoGen entries) for one or more
queries. One statement finds each query's candidates and what their score needs; the score itself
is computed on those few rows by :mod:`memora_pg.graph.scoring`. Its cost follows the candidates,
not the rows searched: every step after the candidates are chosen works on them alone.

**Candidates** (:func:`_candidates`), for each query:

* the nearest rows, ``NEAREST_ROWS`` or the hits asked for (:func:`memora_pg.graph.nearest.nearest_branches`):
  an exact sort of the scope's rows while the scope (a user, a namespace) has at most ``EXACT_ROWS``,
  else the HNSW index with iterative scans, its options set inside the statement;
* the rows of the query's rare words (a word that at most ``candidates`` of the searched rows
  hold): at most :data:`LEXICAL_ROWS`, those whose rare words weigh most first (:func:`_rare_rows`);
  a commoner word brings none (its rarity weight is low). In a scope of at most ``EXACT_ROWS`` they
  are found among the scope's own rows, read once (:func:`_scope_texts`); in a larger one, by the
  GIN index, whose posting list of a word holds the whole table's rows;
* the rows just before and after each of those in its neighbourhood, one index probe each
  (:func:`_neighbour_probes`). Neighbours are the rows written just before and after in the same
  interaction (rows of no interaction, as the mem0-style and AutoGen faces write them, neighbour
  by write order among the same user's, or the same AutoGen scope's).

For each candidate the statement returns its cosine similarity, its write order and
neighbourhood, the query terms it holds with their counts, and the hit's columns; for each query,
its terms' document frequencies among the searched rows, counted up to :data:`RARITY_ROWS` (in a
larger scope, by the GIN index, as far as telling whether the word is rare), and the searched rows'
count ``n``, by the scope's btree up to :data:`EXACT_ROWS` (exact for any scope a conversation fills).

The statement's CTEs are named for what they hold: ``queries``, ``scope_rows``, ``scope_texts``, ``term_rarity``,
``candidates``, ``found``, ``around``, ``frequencies``. Its limits are written into its text
(:func:`number`); a call binds its queries, its condition's values and the HNSW search width
alone, and a call of one query binds it as values, so that PostgreSQL keeps one plan for it.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    case,
    column,
    false,
    func,
    literal_column,
    null,
    or_,
    select,
    text,
    true,
    type_coerce,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, TSVECTOR
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.sqltypes import NullType

from memora_pg import vector_params
from memora_pg.graph.nearest import (
    EXACT_ROWS,
    Corpus,
    is_small,
    nearest_branches,
    nearest_count,
    number,
    scope_rows,
    similarity,
    small_scope,
)
from memora_pg.graph.scoring import Weights
from memora_pg.sql_text import quoted, render

# One row per query: its number, its vector, its terms (the schema's full-text rule) and the
# tsquery matching any of them (a sparse retriever's "any word", not a phrase).
QUERIES = """
SELECT given.query_no, given.embedding, parsed.terms, tsvector_to_array(parsed.terms) AS lexemes,
       CAST(array_to_string(
           ARRAY(SELECT quote_literal(word) FROM unnest(tsvector_to_array(parsed.terms)) AS word), ' | '
       ) AS tsquery) AS any_term
FROM ({given}) AS given(query_no, embedding, query)
CROSS JOIN LATERAL (SELECT {schema}.to_search_text(given.query) AS terms) AS parsed
"""
# The queries of a call of several, as arrays.
MANY = "SELECT * FROM unnest(CAST(:query_nos AS int[]), CAST(:embeddings AS vector[]), CAST(:queries AS text[]))"
# The query of a call of one (every face's usual call), as values: a plan made for one query, unlike one made
# for an array of unknown length, costs what a plan made for its values costs, so PostgreSQL keeps it (a
# generic plan) instead of planning every call anew. The text is a subquery's, so that no plan is made for
# its words: a plan that knew how many words a query has would cost less than the generic one for a short
# query, and PostgreSQL would plan every call anew.
ONE = "SELECT 0, CAST(:embedding AS vector), (SELECT CAST(:query AS text))"


def query_params(vectors: Sequence[Sequence[float]], texts: Sequence[str]) -> dict[str, Any]:
    """The parameters of :func:`statement` for these queries: their vectors and texts."""
    if len(texts) == 1:
        return {"embedding": vector_params.one(vectors[0]), "query": texts[0]}
    return {"query_nos": list(range(len(texts))), "embeddings": vector_params.many(vectors), "queries": list(texts)}


def queries_cte(schema: str, one_query: bool) -> CTE:
    """``queries``: one row per query of the call (:data:`QUERIES`), of :func:`query_params`' parameters."""
    columns = (
        column("query_no", Integer),
        column("embedding", VECTOR()),
        column("terms", TSVECTOR),
        column("lexemes", ARRAY(Text)),
        column("any_term", TSQUERY),
    )
    given = ONE if one_query else MANY
    statement = text(render(QUERIES, given=given, schema=quoted(schema)))
    if one_query:
        statement = statement.bindparams(bindparam("embedding", type_=vector_params.BinaryVector()))
    return statement.columns(*columns).cte("queries")


def _neighbourhood(corpus: Corpus) -> ColumnElement[Any]:
    """The value shared by rows that neighbour each other: the ``neighbourhood`` column, else the
    ``unattached`` one (a constant when every row of the scope neighbours every row)."""
    if corpus.neighbourhood is None:
        return null().cast(Text).label("neighbourhood")
    attached = literal_column("'i:'", Text) + corpus.c(corpus.neighbourhood)
    if corpus.unattached is None:
        return attached.label("neighbourhood")
    return func.coalesce(attached, literal_column("'u:'", Text) + corpus.c(corpus.unattached)).label("neighbourhood")


def by_key(corpus: Corpus, row_id: ColumnElement[Any], *columns: Any, name: str) -> Any:
    """The row of ``row_id`` (a column of an outer query: a row the search's condition chose), found
    by its primary key ``(org_id, id)`` alone: a LATERAL lookup that no other index can serve, whatever
    the planner knows of the table (with no statistics, a join of the candidates with the scope's rows
    was planned as a scan of the user's index per candidate)."""
    key = and_(corpus.c("org_id") == bindparam("where_org_id"), corpus.c(corpus.id_column) == row_id)
    return select(*columns).where(key).lateral(name)


def _scored_columns(corpus: Corpus, query: ColumnElement[Any]) -> list[ColumnElement[Any]]:
    """What a candidate's score needs, read where its row is read: its key, write order and neighbourhood
    (``attached`` and ``unattached`` find its neighbours), its cosine similarity to the ``query`` vector,
    its full-text vector, and the hit's columns."""
    return [
        corpus.c(corpus.id_column).label("row_id"),
        corpus.c("seq").label("seq"),
        _neighbourhood(corpus),
        (corpus.c(corpus.neighbourhood) if corpus.neighbourhood else null().cast(Text)).label("attached"),
        (corpus.c(corpus.unattached) if corpus.unattached else null().cast(Text)).label("unattached"),
        similarity(corpus.c("embedding").cosine_distance(query)).label("cosine"),
        corpus.c("search_text").label("search_text"),
        *(corpus.c(name).label(name) for name in corpus.returned),
    ]


def _neighbour_probes(corpus: Corpus, searchable: ColumnElement[bool], found: CTE, queries: CTE) -> list[Select[Any]]:
    """The rows just before and just after each ``found`` row in its neighbourhood, by key, with
    :func:`_scored_columns`: one index probe each way (``(org_id, interaction_id, seq)``, or
    ``(org_id, user_id, seq)`` for rows of no interaction; an AutoGen scope's own index). Each probe is
    a LATERAL of one row at most; of the alternatives for a row with and without a neighbourhood, its
    one-time filter runs one."""
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
                select(*_scored_columns(corpus, queries.c.embedding))
                .where(searchable, alternative, side)
                .order_by(*(column.desc() for column in order) if before else order)
                .limit(number(1))
                .lateral(f"{'before' if before else 'after'}_{i}")
            )
            probes.append(
                select(found.c.query_no, *neighbour.c).select_from(
                    found.join(queries, queries.c.query_no == found.c.query_no).join(neighbour, true())
                )
            )
    return probes


# How far the scope's rows holding a query term are counted: the document frequency of the term's
# rarity weight, exact up to this count.
RARITY_ROWS = 600
# The rows of rare query terms a search scores, per query: those whose rare terms weigh most.
LEXICAL_ROWS = 100


# The words of the searched table that ANALYZE's statistics show common enough that the scope holds each
# in at least ``{common_rows}`` rows: the schema's ``common_terms`` (migrations 0013, 0014), given the smallest
# large scope, and the column and value the scope is the rows of, if the statistics can size it.
COMMON_TERMS = """
SELECT listed.lexeme
FROM {schema}.common_terms('{table}', {scope_column}, {scope_value}, {scope_rows}, {common_rows}) AS listed(lexeme)
"""
# The scopes whose size the statistics estimate, by the parameter naming the scope's one value.
SIZED_BY = {"user_id": "where_user_id", "org_id": "where_org_id"}


def _common_terms(corpus: Corpus, schema: str, size: CTE, *, candidates: int, sized_by: str | None) -> CTE:
    """:data:`COMMON_TERMS` for a scope of more than :data:`EXACT_ROWS` rows (a smaller scope runs
    nothing): a word held by at least twice as many rows as a rare word may be, in a scope of as many
    rows as ANALYZE estimates the scope's value to hold (``sized_by``: ``where`` is the rows of one user,
    or of one organization, and nothing more; see :data:`SIZED_BY`), or else in the smallest large
    scope. Without statistics, none."""
    scope_column, scope_value = ("NULL", "NULL")
    if sized_by is not None:
        scope_column, scope_value = f"'{sized_by}'", f"CAST(:{SIZED_BY[sized_by]} AS text)"
    sql = render(
        COMMON_TERMS,
        schema=quoted(schema),
        table=corpus.table.name,
        scope_column=scope_column,
        scope_value=scope_value,
        scope_rows=EXACT_ROWS + 1,
        common_rows=2 * (candidates + 1),
    )
    listed = text(sql).columns(column("lexeme", Text)).subquery("listed")
    large = select(size.c.n > number(EXACT_ROWS)).scalar_subquery()
    return select(listed.c.lexeme).where(large).cte("common_terms")


def _rare_rows(rarity: CTE, size: CTE, *, candidates: int) -> Select[Any]:
    """For each query, the rows holding its rare terms (those at most ``candidates`` rows hold): at
    most :data:`LEXICAL_ROWS` of them, those whose rare terms weigh most first (the sum of their rarity
    weights, as BM25 would give them before term counts and neighbours), then the newest. A row that
    holds no rarer term than many others scores low on the lexical arm, and every row scored costs
    its neighbours' probes too."""
    held = func.unnest(rarity.c.row_ids, rarity.c.seqs).table_valued("row_id", "seq").render_derived().lateral("held")
    df = rarity.c.df
    idf = func.ln(number(1.0) + (size.c.n - df + number(0.5)) / (df + number(0.5)))
    weighed = (
        select(rarity.c.query_no, held.c.row_id, func.max(held.c.seq).label("seq"), func.sum(idf).label("weight"))
        .select_from(rarity.join(held, true()).join(size, true()))
        .where(df <= number(candidates))
        .group_by(rarity.c.query_no, held.c.row_id)
        .subquery("weighed")
    )
    place = (
        func.row_number()
        .over(partition_by=weighed.c.query_no, order_by=(weighed.c.weight.desc(), weighed.c.seq.desc()))
        .label("place")
    )
    placed = select(weighed.c.query_no, weighed.c.row_id, place).subquery("placed")
    return select(placed.c.query_no, placed.c.row_id).where(placed.c.place <= number(LEXICAL_ROWS))


def _scope_texts(corpus: Corpus, queries: CTE, searchable: ColumnElement[bool], size: CTE) -> CTE:
    """``scope_texts``: for each query, the rows of a scope of at most :data:`EXACT_ROWS` (``size``) that hold
    any of its terms, with their full-text vectors, read once in the order of the scope's btree (as the
    exact sort of the nearest rows reads them) and counted term by term from there. Never through the GIN
    index: a word's posting list holds the whole table's rows, and a common word's would cost more with
    every other user's memories, while the scope's rows are few. Empty in a larger scope (the one-time
    filter). Materialized, so that the scope is read once for all the query's terms."""
    columns = (corpus.c(corpus.id_column).label("row_id"), corpus.c("seq"), corpus.c("search_text"))
    rows = small_scope(corpus, searchable, is_small(size), *columns, name="in_scope")
    # "IS TRUE": a condition the GIN index cannot serve, so that the planner reads the scope by its btree.
    holds_any = rows.c.search_text.op("@@")(queries.c.any_term).is_(True)
    texts = select(queries.c.query_no, rows.c.row_id, rows.c.seq, rows.c.search_text).select_from(
        queries.join(rows, holds_any)
    )
    return texts.cte("scope_texts").prefix_with("MATERIALIZED")


def _candidates(
    corpus: Corpus,
    queries: CTE,
    where: ColumnElement[bool],
    *,
    schema: str,
    nearest: int,
    candidates: int,
    scoped: bool,
    sized_by: str | None,
    statistics: bool,
) -> Select[Any]:
    """For each query, its candidates among the rows matching ``where`` with what their score needs:
    the ``nearest`` rows (:func:`nearest_branches`), the rows of the query's rare terms (those at most
    ``candidates`` of the searched rows hold, found by the GIN index; :func:`_rare_rows`), and the rows
    just before and after each of them in its neighbourhood (:func:`_neighbour_probes`). A more common
    term brings no rows of its own: its rarity weight is low, and its rows may be as many as the scope's.
    Term rarity and the row count are the searched rows', counted by the indexes up to
    :data:`RARITY_ROWS` and :data:`EXACT_ROWS`."""
    embedding, search_text, row_id = corpus.c("embedding"), corpus.c("search_text"), corpus.c(corpus.id_column)
    searchable = and_(where, embedding.is_not(None))
    size = scope_rows(corpus, where)
    arms: list[Select[Any]] = []
    branches = nearest_branches(
        [row_id.label("row_id")],
        corpus=corpus,
        searchable=searchable,
        distance=embedding.cosine_distance(queries.c.embedding),
        limit=nearest,
        size=size if scoped else None,
    )
    for i, branch in enumerate(branches):
        near = branch.lateral(f"nearest_{i}")
        arms.append(select(queries.c.query_no, near.c.row_id).select_from(queries.join(near, true())))
    # Each query term's rows: counted up to one more than RARITY_ROWS in a scope of at most EXACT_ROWS, among
    # the scope's rows that hold any of the query's terms (read once, :func:`_scope_texts`); beyond (where
    # the scope's count stops), by the GIN index, only as far as telling whether they are candidates. Two
    # branches of constant limits, one gated off by the scope's count: a limit the planner cannot see is
    # planned as a scan of a tenth of the table.
    word = func.unnest(queries.c.lexemes).table_valued("lexeme").render_derived().alias("word")
    term = select(word.c.lexeme, func.quote_literal(word.c.lexeme).cast(TSQUERY).label("query")).lateral("term")
    # A term the table's statistics show to be common is not probed in a large scope (:func:`_common_terms`).
    large = size.c.n > number(EXACT_ROWS)
    common: ColumnElement[bool] = false()
    if statistics:
        listed = _common_terms(corpus, schema, size, candidates=candidates, sized_by=sized_by)
        common = term.c.lexeme.in_(select(listed.c.lexeme))
    texts = _scope_texts(corpus, queries, searchable, size)
    in_small_scope = (
        select(texts.c.row_id, texts.c.seq)
        .where(texts.c.query_no == queries.c.query_no, texts.c.search_text.op("@@")(term.c.query))
        .limit(number(RARITY_ROWS + 1))
        .correlate(term, queries)
    )
    by_index = (
        select(row_id.label("row_id"), corpus.c("seq"))
        .where(searchable, search_text.op("@@")(term.c.query), select(large).scalar_subquery(), ~common)
        .limit(number(candidates + 1))
        .correlate(term)
    )
    holding = union_all(in_small_scope, by_index).subquery("holding")
    held = (
        select(
            func.count().label("df"),
            func.array_agg(holding.c.row_id).label("row_ids"),
            func.array_agg(holding.c.seq).label("seqs"),
        )
        .select_from(holding)
        .lateral("held")
    )
    # In a scope of more rows than EXACT_ROWS, whose count stops there, a term is counted only as far as
    # deciding whether its rows are candidates; one held by more rows weighs as one held by RARITY_ROWS.
    df = case((and_(large, or_(held.c.df > number(candidates), common)), number(RARITY_ROWS + 1)), else_=held.c.df)
    rarity = (
        select(queries.c.query_no, term.c.lexeme, df.label("df"), held.c.row_ids, held.c.seqs)
        .select_from(queries.join(term, true()).join(size, true()).join(held, true()))
        .cte("term_rarity")
    )
    arms.append(_rare_rows(rarity, size, candidates=candidates))
    chosen = union(*arms).cte("candidates")
    # Each candidate's row by its key, then the rows around it by the neighbours' probes, each read once
    # with what its score needs (never by reading the scope's rows in order).
    own = by_key(corpus, chosen.c.row_id, *_scored_columns(corpus, queries.c.embedding), name="own")
    found = (
        select(chosen.c.query_no, *own.c)
        .select_from(chosen.join(queries, queries.c.query_no == chosen.c.query_no).join(own, true()))
        .cte("found")
    )
    read = union_all(select(found), *_neighbour_probes(corpus, searchable, found, queries)).subquery("read")
    # A row both a candidate and a neighbour (or two candidates' neighbour) is scored once.
    copy = func.row_number().over(partition_by=(read.c.query_no, read.c.row_id)).label("copy")
    copies = select(read, copy).subquery("copies")
    row = select(*(c for c in copies.c if c.name != "copy")).where(copies.c.copy == number(1)).cte("around")
    # The query terms each row holds, and how often (a term of no position counts once).
    occurrence = func.unnest(row.c.search_text).table_valued("lexeme", "positions", "weights").lateral("occurrence")
    held_terms = (
        select(
            func.array_agg(occurrence.c.lexeme).label("term_lexemes"),
            func.array_agg(func.coalesce(func.array_length(occurrence.c.positions, number(1)), number(1))).label(
                "term_counts"
            ),
        )
        .where(row.c.search_text.op("@@")(queries.c.any_term), occurrence.c.lexeme == func.any(queries.c.lexemes))
        .lateral("held_terms")
    )
    # Each query's terms with their document frequency among the searched rows, and that count.
    frequencies = (
        select(
            rarity.c.query_no,
            func.array_agg(rarity.c.lexeme).label("query_lexemes"),
            func.array_agg(rarity.c.df).label("query_dfs"),
        )
        .group_by(rarity.c.query_no)
        .cte("frequencies")
    )
    # Arrays as asyncpg reads them, and JSON as its text, decoded for the hits alone (Corpus.decode): a
    # search reads a few hits of many candidates.
    return (
        select(
            row.c.query_no,
            row.c.seq,
            row.c.neighbourhood,
            row.c.cosine.cast(Float).label("cosine"),
            type_coerce(held_terms.c.term_lexemes, NullType()).label("term_lexemes"),
            type_coerce(held_terms.c.term_counts, NullType()).label("term_counts"),
            type_coerce(frequencies.c.query_lexemes, NullType()).label("query_lexemes"),
            type_coerce(frequencies.c.query_dfs, NullType()).label("query_dfs"),
            size.c.n,
            *(
                row.c[name].cast(Text).label(name) if name in corpus.json_columns else row.c[name]
                for name in corpus.returned
            ),
        )
        .select_from(
            row.join(queries, queries.c.query_no == row.c.query_no)
            .join(held_terms, true())
            .join(size, true())
            .outerjoin(frequencies, frequencies.c.query_no == row.c.query_no)
        )
        .order_by(row.c.query_no)
    )


def statement(
    corpus: Corpus,
    *,
    schema: str,
    where: ColumnElement[bool],
    k: int,
    scoped: bool,
    weights: Weights,
    one_query: bool = True,
    sized_by: str | None = None,
    statistics: bool = True,
) -> Select[Any]:
    """Each query's candidates, with what :func:`memora_pg.graph.scoring.rank` scores them on: ``query_no``,
    ``seq``, ``neighbourhood``, ``cosine``, ``term_lexemes``, ``term_counts``, ``query_lexemes``,
    ``query_dfs``, ``n`` and the corpus's returned columns.

    ``where`` must pin the organization (as ``:where_org_id``, which the lookups by key reuse);
    ``scoped`` says it also pins a user or a namespace (whose rows may then be few enough to sort
    exactly); ``sized_by`` that it is the rows of one user (``'user_id'``, ``:where_user_id``) or one
    organization (``'org_id'``) and nothing more, a scope whose size the statistics estimate.
    ``statistics`` says the table's statistics may be read (:data:`COMMON_TERMS`; not on Citus, whose
    coordinator has none of a distributed table and whose workers would read them as the caller). Takes
    :func:`query_params`' parameters (of one query when ``one_query``), and ``ef``.
    """
    return _candidates(
        corpus,
        queries_cte(schema, one_query),
        where,
        schema=schema,
        nearest=nearest_count(k, weights.candidates),
        candidates=weights.candidates,
        scoped=scoped,
        sized_by=sized_by,
        statistics=statistics,
    )


def dense_statement(
    corpus: Corpus, *, schema: str, where: ColumnElement[bool], k: int, scoped: bool, one_query: bool = True
) -> Select[Any]:
    """Up to ``k`` rows per query by cosine similarity alone (``search_mode="dense"``), best first;
    ``score`` and ``cosine`` are both the similarity. Takes :func:`query_params`' parameters."""
    queries = queries_cte(schema, one_query)
    distance = corpus.c("embedding").cosine_distance(queries.c.embedding)
    searchable = and_(where, corpus.c("embedding").is_not(None))
    branches = nearest_branches(
        [corpus.c(name) for name in corpus.returned],
        corpus=corpus,
        searchable=searchable,
        distance=distance,
        limit=k,
        size=scope_rows(corpus, where) if scoped else None,
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
