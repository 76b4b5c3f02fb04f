"""The nearest rows of a search, and what every search statement is built on.

:class:`Corpus` is what a search ranks (the memories, the AutoGen entries); :func:`number` and
:func:`similarity` are how a statement writes its constants and its cosine similarities;
:func:`scope_rows` counts a search's scope, and :func:`nearest_branches` finds the nearest rows, by an
exact sort of a small scope or by the HNSW index. The hybrid statement (:mod:`memora_pg.graph.ranking`)
and the dense one (:mod:`memora_pg.graph.search`) both take their nearest rows from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy import CTE, Float, Integer, Select, Subquery, bindparam, func, literal_column, select, true
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.schema import Table
from sqlalchemy.sql.sqltypes import JSON, Text
from sqlalchemy.sql.util import ClauseAdapter


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
    # The leading columns of the btree that finds a search's scope (a user's rows, a namespace's): a
    # search reads its scope in that order, so that its plan walks that index whatever the planner guesses.
    scope_index: tuple[str, ...] = ("org_id",)

    def c(self, name: str) -> ColumnElement[Any]:
        found: ColumnElement[Any] = self.table.c[name]
        return found

    def scope_order(self) -> list[ColumnElement[Any]]:
        return [self.c(name) for name in self.scope_index]

    @cached_property
    def json_columns(self) -> frozenset[str]:
        """The returned columns of a JSON type, which a search statement returns as their text."""
        return frozenset(name for name in self.returned if isinstance(self.table.c[name].type, JSON))

    def decode(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A candidate's returned columns as the faces read a row, its JSON decoded."""
        found = {name: row[name] for name in self.returned}
        for name in self.json_columns:
            if found[name] is not None:
                found[name] = json.loads(found[name])
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


# A search that pins a user (or a namespace) sorts that scope's rows exactly while they are at most this
# many; beyond, the HNSW index delivers the nearest. The scope's rows are counted no further than one
# more, and that count is also the row count of the lexical arm's rarity (BENCHMARKS.md, search scaling).
EXACT_ROWS = 2000
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


def scope_rows(corpus: Corpus, scope: ColumnElement[bool]) -> CTE:
    """The rows of ``corpus`` matching ``scope``, counted up to one more than :data:`EXACT_ROWS`: ``n``.
    They are counted in the order of the scope's btree (``Corpus.scope_index``), where a user's rows are
    counted in the index alone (an index-only scan): so the count does not ask whether each row has its
    embedding, and a row without one (made unsearchable) still counts, as a row of the scope."""
    counted = (
        select(number(1)).where(scope).order_by(*corpus.scope_order()).limit(number(EXACT_ROWS + 1)).subquery("counted")
    )
    return select(func.count().label("n")).select_from(counted).cte("scope_rows")


def is_small(size: CTE) -> ColumnElement[bool]:
    """Whether the scope counted by ``size`` (:func:`scope_rows`) has at most :data:`EXACT_ROWS` rows: a
    one-time filter, evaluated once per statement."""
    return select(size.c.n <= number(EXACT_ROWS)).scalar_subquery()


def small_scope(
    corpus: Corpus, searchable: ColumnElement[bool], small: ColumnElement[bool], *columns: Any, name: str
) -> Subquery:
    """``columns`` of the rows matching ``searchable`` in a scope of at most :data:`EXACT_ROWS` rows (``small``:
    :func:`is_small`), read in the order of the scope's btree (``Corpus.scope_index``) and no further than one
    more: whatever the planner guesses of the scope's size, it never scans the table for a small scope. No
    rows in a larger one."""
    return (
        select(*columns)
        .where(searchable, small)
        .order_by(*corpus.scope_order())
        .limit(number(EXACT_ROWS + 1))
        .subquery(name)
    )


def nearest_branches(
    columns: Sequence[ColumnElement[Any]],
    *,
    corpus: Corpus,
    searchable: ColumnElement[bool],
    distance: ColumnElement[Any],
    limit: int,
    size: CTE | None,
) -> list[Select[Any]]:
    """The ``limit`` rows of ``corpus`` nearest by ``distance`` among those matching ``searchable``: by
    the HNSW index (iterative scans, so a selective condition still fills the list); for a search of a
    scope whose ``size`` (:func:`scope_rows`) is at most :data:`EXACT_ROWS`, by an exact sort of the
    scope's rows instead (ties by write order), read in the order of its btree (``Corpus.scope_index``)
    and no further than EXACT_ROWS + 1 of them: whatever the planner guesses of the scope's size, it
    never scans the table for a small scope. The two are branches of one statement, one of them gated off
    by the size, so each call runs one. Without a ``size``, the index alone. Each branch also returns the
    ``distance``, computed once per row (its sort key is that column)."""
    indexed = distance.label("distance")
    by_index = select(*columns, indexed).where(searchable, hnsw_options()).order_by(indexed).limit(number(limit))
    if size is None:
        return [by_index]
    small = is_small(size)
    rows = small_scope(corpus, searchable, small, corpus.table, name="scope")
    adapt = ClauseAdapter(rows).traverse
    sorted_ = adapt(distance).label("distance")
    exact = (
        select(*(adapt(column) for column in columns), sorted_)
        .order_by(sorted_, adapt(corpus.c("seq")))
        .limit(number(limit))
    )
    return [exact, by_index.where(small.is_(False))]
