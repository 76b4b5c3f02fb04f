"""Where a memory is searched: every search of every face, in one statement per call.

:func:`find` runs every search, in the mode :class:`~memora_pg.config.SearchMode` names (:func:`check_mode`
is the one check of a mode):

* ``hybrid``, every face's default: the candidates of :mod:`memora_pg.graph.ranking`, scored by
  :mod:`memora_pg.graph.scoring` (dense and BM25-style lexical arms fused, score in [0, 1]);
* ``dense``: the cosine similarity alone;
* ``upstream``: upstream Memora's Qdrant-style fusion (:mod:`memora_pg.graph.upstream`), of the memories
  alone and for the Memora vector DB alone (the other faces refuse it when they are made).

Every hit also carries its cosine similarity (``cosine``). Each search is one statement in autocommit,
whatever its scope: a scope of few rows is sorted exactly, a larger one or a whole organization walks the
HNSW index, whose options (iterative scans, the search width) the statement sets for itself.

All queries of a call go in the same statement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    DateTime,
    Integer,
    Select,
    and_,
    bindparam,
    column,
    exists,
    literal,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement

from memora_pg import vector_params
from memora_pg.config import SearchMode, Settings
from memora_pg.driver import Row
from memora_pg.embeddings import calibration
from memora_pg.embeddings.base import Embedder
from memora_pg.errors import ConfigurationError
from memora_pg.graph import autogen_contents as autogen_contents_rows
from memora_pg.graph import nearest, ranking, scoring, timeline, upstream
from memora_pg.graph import store_items as store_items_rows
from memora_pg.schema import autogen_contents, memories, memory_updates
from memora_pg.statements import FilterShape, Statement

Hit = tuple[dict[str, Any], float]

# The memories as the searches rank them; a hit returns these columns.
MEMORIES = nearest.Corpus(
    memories,
    id_column="memory_id",
    neighbourhood="interaction_id",
    returned=("org_id", "user_id", "agent_id", "memory_id", "memory", "metadata", "obtained_at"),
    unattached="user_id",
    scope_index=("org_id", "user_id"),  # ix_memories_user_stored and its siblings
)

# One row per query vector, numbered from 0.
QUERY_VECTORS = """
SELECT given.n - 1 AS query_no, given.embedding
FROM unnest(CAST(:embeddings AS vector[])) WITH ORDINALITY AS given(embedding, n)
"""


def _hits(query: ColumnElement[Any], *, where: ColumnElement[bool], k: int, scoped: bool) -> Select[Any]:
    """The ``k`` memories nearest to ``query`` among those matching ``where``, with their similarity
    (as ``score`` and ``cosine``), best first."""
    distance = memories.c.embedding.cosine_distance(query)
    searchable = and_(memories.c.embedding.is_not(None), where)
    branches = nearest.nearest_branches(
        [memories.c[name] for name in MEMORIES.returned],
        corpus=MEMORIES,
        searchable=searchable,
        distance=distance,
        limit=k,
        size=nearest.scope_rows(MEMORIES, where) if scoped else None,
    )
    # Inside a LATERAL of several queries the branches take the query's vector from outside.
    branches = [branch.correlate_except(memories) for branch in branches]
    found = union_all(*branches).subquery("found") if len(branches) > 1 else branches[0].subquery("found")
    similarity = nearest.similarity(found.c.distance)
    returned = [found.c[name] for name in MEMORIES.returned]
    return select(*returned, similarity.label("score"), similarity.label("cosine")).order_by(found.c.distance)


def nearest_statement(*, where: ColumnElement[bool], k: int, scoped: bool, queries: int) -> Select[Any]:
    """The dense search of memories for ``queries`` query vectors; it takes :func:`query_vectors`' parameters."""
    if queries == 1:
        # One query (every search): a plain select, cheaper to build and to plan than the LATERAL join below.
        query = bindparam("embedding", type_=vector_params.BinaryVector())
        return _hits(query, where=where, k=k, scoped=scoped).add_columns(literal(0, Integer).label("query_no"))
    vectors = text(QUERY_VECTORS).columns(column("query_no", Integer), column("embedding", VECTOR())).subquery("q")
    hits = _hits(vectors.c.embedding, where=where, k=k, scoped=scoped).lateral("hit")
    return (
        select(vectors.c.query_no, hits)
        .select_from(vectors.join(hits, true()))
        .order_by(vectors.c.query_no, hits.c.score.desc())
    )


def query_vectors(vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The parameters of :func:`nearest_statement`: the query vectors."""
    if len(vectors) == 1:
        return {"embedding": vector_params.one(vectors[0])}
    return {"embeddings": vector_params.many(vectors)}


# -- the faces' searches ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Where:
    """A search's condition, of a hashable ``shape`` built into SQL once per shape, its values bound
    as ``params``; or, for a condition with no shape (one SQLAlchemy cannot cache), ``condition``
    itself, with its values in it."""

    shape: tuple[Any, ...] | None
    params: dict[str, Any]
    condition: ColumnElement[bool] | None = None

    def sql(self) -> ColumnElement[bool]:
        """The condition as SQL (its values bound, for a shape, by ``params``)."""
        if self.condition is not None:
            return self.condition
        assert self.shape is not None
        return _SHAPES[self.shape[0]](*self.shape[1:])


def _memories_condition(
    user: bool,
    agent: bool,
    current_only: bool,
    clock: str | None = None,
    schema: str | None = None,
    also: FilterShape | None = None,
    also_leaves_few: bool = False,  # not a condition: what _sized_by reads of the shape
) -> ColumnElement[bool]:
    conditions = [memories.c.org_id == bindparam("where_org_id")]
    if also is not None:
        conditions.append(also.condition)
    if user:
        conditions.append(memories.c.user_id == bindparam("where_user_id"))
    if agent:
        conditions.append(memories.c.agent_id == bindparam("where_agent_id"))
    if clock is not None:
        # As of a time: the versions current then (the clocks' ends are kept on the rows).
        assert schema is not None
        conditions.append(timeline.current_condition(schema, clock))
    elif current_only:
        newer = memory_updates.alias("newer")
        conditions.append(
            ~exists().where(newer.c.org_id == bindparam("where_org_id"), newer.c.old_memory_id == memories.c.memory_id)
        )
    return and_(*conditions)


def _autogen_condition(user: bool, agent: bool, timed: bool = False) -> ColumnElement[bool]:
    c = autogen_contents.c
    return and_(
        c.org_id == bindparam("where_org_id"),
        c.namespace == bindparam("where_namespace"),
        # "= value" or "IS NULL", so every term can use ix_autogen_contents_namespace.
        c.user_id == bindparam("where_user_id") if user else c.user_id.is_(None),
        c.agent_id == bindparam("where_agent_id") if agent else c.agent_id.is_(None),
        # As of a time: the entries added by then (an entry has one time, so both clocks agree).
        c.created_at <= bindparam("where_as_of", type_=DateTime(timezone=True)) if timed else true(),
    )


def _store_condition(prefixed: bool, timed: bool, filtered: FilterShape | None = None) -> ColumnElement[bool]:
    scope = store_items_rows.scope_condition(prefixed, timed)
    return scope if filtered is None else and_(scope, filtered.condition)


_SHAPES: dict[str, Callable[..., ColumnElement[bool]]] = {
    "memories": _memories_condition,
    "autogen": _autogen_condition,
    "store": _store_condition,
}


def memories_where(
    org_id: str,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    current_only: bool = False,
    also: ColumnElement[bool] | None = None,
    as_of: datetime | None = None,
    clock: str = timeline.VALID,
    schema: str | None = None,
    also_leaves_few: bool = False,
) -> Where:
    """The memories a search looks at: the organization's, the user's and the agent's when given,
    only those no newer version supersedes when ``current_only``, and those matching ``also``.

    With ``as_of`` (and the ``schema``, whose functions hold the rule), only the versions current
    at that time by ``clock``, whatever ``current_only`` says. ``also_leaves_few`` says ``also`` leaves
    out few rows (the expired memories), so that the scope is still about as large as the user's or the
    organization's rows, as the table's statistics estimate them (:func:`_sized_by`).
    """
    params: dict[str, Any] = {"where_org_id": org_id, "where_user_id": user_id, "where_agent_id": agent_id}
    timed = as_of is not None
    if timed:
        params["where_as_of"] = as_of
    shape = (
        "memories",
        user_id is not None,
        agent_id is not None,
        current_only,
        clock if timed else None,
        schema if timed else None,
    )
    if also is None:
        return Where(shape, params)
    filtered = FilterShape(also)
    if filtered.key is None:
        return Where(None, params, and_(_memories_condition(*shape[1:]), also))
    return Where((*shape, filtered, also_leaves_few), {**params, **filtered.values})


def autogen_where(scope: autogen_contents_rows.Scope, *, as_of: datetime | None = None) -> Where:
    """The entries of an AutoGen memory's scope (its namespace, and its user and agent or none);
    with ``as_of``, those added by then."""
    params: dict[str, Any] = {
        "where_org_id": scope.org_id,
        "where_namespace": scope.namespace,
        "where_user_id": scope.user_id,
        "where_agent_id": scope.agent_id,
    }
    if as_of is not None:
        params["where_as_of"] = as_of
    return Where(("autogen", scope.user_id is not None, scope.agent_id is not None, as_of is not None), params)


def store_where(
    org_id: str, prefix: Sequence[str], *, filter: FilterShape | None = None, as_of: datetime | None = None
) -> Where:
    """LangGraph's store items under a namespace ``prefix`` (every namespace when empty), matching the
    ``filter`` (:func:`store_items.filtered`); current, or with ``as_of`` those current then."""
    params: dict[str, Any] = {"where_org_id": org_id, **store_items_rows.prefix_params(prefix)}
    if as_of is not None:
        params["where_as_of"] = as_of
    if filter is None:
        return Where(("store", bool(prefix), as_of is not None), params)
    if filter.key is None:
        return Where(None, params, _store_condition(bool(prefix), as_of is not None, filter))
    return Where(("store", bool(prefix), as_of is not None, filter), {**params, **filter.values})


# LangGraph's store items (memora_pg.langgraph), ranked like the AutoGen entries.
STORE_ITEMS = store_items_rows.STORE_ITEMS

# The AutoGen protocol's entries, ranked the same way within a namespace (neighbours by write order).
AUTOGEN_CONTENTS = nearest.Corpus(
    autogen_contents,
    id_column="content_id",
    neighbourhood=None,
    returned=autogen_contents_rows.RETURNED,
    order_prefix=("org_id", "namespace", "user_id", "agent_id"),  # ix_autogen_contents_namespace
    scope_index=("org_id", "namespace", "user_id", "agent_id"),
)


def statement(
    corpus: nearest.Corpus,
    *,
    schema: str,
    where: Where,
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    k: int,
    scoped: bool,
    mode: SearchMode | str,
    settings: Settings,
    unrelated_similarity: float = 0.0,
    statistics: bool = True,
) -> Statement:
    """The search for ``texts`` (embedded as ``vectors``) among the rows of ``corpus`` matching ``where``:
    in dense and upstream mode its hits, in hybrid mode its candidates (:func:`ranked` scores them).
    ``statistics`` says the hybrid statement may read the table's statistics (not on Citus)."""
    mode = check_mode(mode, upstream=corpus is MEMORIES)
    weights = scoring.Weights.from_settings(settings, unrelated_similarity)
    one = len(vectors) == 1
    if where.shape is not None:
        built = _built(corpus, schema, where.shape, k, scoped, mode, weights, one, statistics)
    else:
        built = _build(corpus, schema, where.sql(), k, scoped, mode, weights, one, sized_by=None, statistics=statistics)
    # The dense search of memories binds its vectors by themselves (one query: a plain select).
    dense = mode is SearchMode.DENSE
    params = query_vectors(vectors) if dense and corpus is MEMORIES else ranking.query_params(vectors, texts)
    # The HNSW scan's search width: the setting's, or the rows it is asked for if more.
    asked = {
        SearchMode.DENSE: k,
        SearchMode.HYBRID: nearest.nearest_count(k, weights.candidates),
        SearchMode.UPSTREAM: upstream.DENSE_CANDIDATES,
    }[mode]
    ef = max(settings.hnsw_ef_search, asked)
    return Statement(built, {**params, **where.params, "ef": str(ef)})


def _build(
    corpus: nearest.Corpus,
    schema: str,
    where: ColumnElement[bool],
    k: int,
    scoped: bool,
    mode: SearchMode,
    weights: scoring.Weights,
    one: bool,
    *,
    sized_by: str | None,
    statistics: bool,
) -> Select[Any]:
    if mode is SearchMode.UPSTREAM:
        return upstream.statement(corpus, ranking.queries_cte(schema, one), where, k=k, scoped=scoped)
    if mode is SearchMode.HYBRID:
        return ranking.statement(
            corpus,
            schema=schema,
            where=where,
            k=k,
            scoped=scoped,
            weights=weights,
            one_query=one,
            sized_by=sized_by,
            statistics=statistics,
        )
    if corpus is MEMORIES:
        return nearest_statement(where=where, k=k, scoped=scoped, queries=1 if one else 2)
    return ranking.dense_statement(corpus, schema=schema, where=where, k=k, scoped=scoped, one_query=one)


@lru_cache(maxsize=256)
def _built(
    corpus: nearest.Corpus,
    schema: str,
    shape: tuple[Any, ...],
    k: int,
    scoped: bool,
    mode: SearchMode,
    weights: scoring.Weights,
    one: bool,
    statistics: bool,
) -> Select[Any]:
    """A search of a usual scope, built once: building the statement costs more than running it."""
    condition = _SHAPES[shape[0]](*shape[1:])
    return _build(
        corpus, schema, condition, k, scoped, mode, weights, one, sized_by=_sized_by(shape), statistics=statistics
    )


def _sized_by(shape: tuple[Any, ...]) -> str | None:
    """The column whose one value a condition of this shape selects, and nothing more (no agent, no time,
    no filter but one that leaves out few rows): ``'user_id'`` for a user's memories, ``'org_id'`` for an
    organization's; a scope whose size the table's statistics estimate. None for any other condition."""
    if shape[0] != "memories":
        return None
    _, user, agent, current_only, clock, _, *filtered = shape  # the shape memories_where builds
    if agent or current_only or clock is not None or (filtered and not filtered[1]):
        return None
    return "user_id" if user else "org_id"


class Runner(Protocol):
    """What a search runs on: a face's ``Database``, as the data layer sees it (the layer below the faces
    names no face's class)."""

    settings: Settings

    @property
    def schema(self) -> str: ...

    async def citus(self) -> bool: ...

    async def execute_one(
        self, statement: Statement, *, read_only: bool = False, org_id: str | None = None, writes: bool | None = None
    ) -> Sequence[Row]: ...


async def find(
    database: Runner,
    corpus: nearest.Corpus,
    *,
    org_id: str,
    where: Where,
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    k: int,
    scoped: bool,
    unrelated_similarity: float = 0.0,
    mode: SearchMode | str | None = None,
    embedder: Embedder | None = None,
) -> list[list[Hit]]:
    """For each query, up to ``k`` rows of ``corpus`` matching ``where`` (which pins ``org_id``),
    best first, as (the row's returned columns and its ``cosine``, score).

    A ``scoped`` search is one whose ``where`` pins a user or a namespace: while that scope has few
    rows they are sorted exactly, beyond that the HNSW index finds the nearest.
    ``unrelated_similarity`` is the embedder's (``embeddings.unrelated_similarity``). With the
    ``embedder`` that made ``vectors``, the hybrid score's cosine floor is measured for each query
    (:func:`cosine_floors`).
    """
    settings = database.settings
    mode = check_mode(mode or settings.search_mode, upstream=corpus is MEMORIES)
    search = statement(
        corpus,
        schema=database.schema,
        where=where,
        vectors=vectors,
        texts=texts,
        k=k,
        scoped=scoped,
        mode=mode,
        settings=settings,
        unrelated_similarity=unrelated_similarity,
        statistics=not await database.citus(),
    )
    # One statement in autocommit, whatever the scope: the HNSW options are set inside it.
    rows = await database.execute_one(search, read_only=True, org_id=org_id)
    if mode is not SearchMode.HYBRID:
        return hits(rows, len(texts))
    weights = scoring.Weights.from_settings(settings, unrelated_similarity)
    floors = await cosine_floors(embedder, vectors, settings, unrelated_similarity)
    return ranked(rows, len(texts), corpus=corpus, k=k, weights=weights, floors=floors)


async def cosine_floors(
    embedder: Embedder | None, vectors: Sequence[Sequence[float]], settings: Settings, declared: float
) -> list[tuple[float, float]] | None:
    """Each query's (cosine floor, gate), measured from where unrelated text lands for that query
    (:func:`calibration.unrelated_levels`): its dense arm counts a memory above the floor,
    ``search_related_band`` under that level, once its nearest memory is above the gate,
    ``search_unrelated_margin`` over it. Neither is ever below what the embedder declares. None (the
    weights' one floor) when the settings fix the floor, or without the embedder."""
    if embedder is None or settings.search_cosine_floor is not None:
        return None
    levels = await calibration.unrelated_levels(embedder, vectors)
    return [
        (
            max(declared, level - settings.search_related_band),
            max(declared, level + settings.search_unrelated_margin),
        )
        for level in levels
    ]


# Upstream mode is upstream Memora's own fusion, of the Memora vector store; no other face has an upstream.
UPSTREAM_ONLY = (
    "search_mode 'upstream' (upstream Memora's Qdrant-style fusion) is PgVectorDB's alone: the mem0-style and "
    "AutoGen faces search in 'hybrid' (the default) or 'dense' mode; unset MEMORA_PG_SEARCH_MODE for them."
)


def check_mode(mode: SearchMode | str, *, upstream: bool = False) -> SearchMode:
    """``mode`` as a :class:`SearchMode`: the one check of a search mode, which every face makes when it is
    made and :func:`find` makes again. A name that is no mode is a ConfigurationError, and so is 'upstream'
    unless ``upstream`` allows it (``PgVectorDB``'s search of memories), rather than a search in another mode."""
    try:
        found = SearchMode(mode)
    except ValueError:
        names = ", ".join(repr(str(known)) for known in SearchMode)
        raise ConfigurationError(f"search_mode must be one of {names}, not {mode!r}") from None
    if found is SearchMode.UPSTREAM and not upstream:
        raise ConfigurationError(UPSTREAM_ONLY)
    return found


def hits(rows: Sequence[Row], queries: int) -> list[list[Hit]]:
    """The rows of a dense or upstream search statement (each row a hit, its score in it), one list per query."""
    results: list[list[Hit]] = [[] for _ in range(queries)]
    for row in rows:
        data = row._asdict()
        query_no = data.pop("query_no")
        results[query_no].append((data, float(data.pop("score"))))
    return results


def ranked(
    rows: Sequence[Row],
    queries: int,
    *,
    corpus: nearest.Corpus,
    k: int,
    weights: scoring.Weights,
    floors: Sequence[tuple[float, float]] | None = None,
) -> list[list[Hit]]:
    """The ``k`` best of each query's candidates (the rows of a hybrid search statement), scored;
    with ``floors``, each query's dense arm counts from its own cosine floor and gate."""
    candidates: list[list[Mapping[str, Any]]] = [[] for _ in range(queries)]
    for row in rows:
        candidates[row.query_no].append(row._mapping)
    each = (
        [weights] * queries
        if floors is None
        else [replace(weights, cosine_floor=floor, cosine_gate=gate) for floor, gate in floors]
    )
    return [
        [
            ({**corpus.decode(row), "cosine": row["cosine"]}, score)
            for row, score in scoring.rank(found, k=k, weights=chosen)
        ]
        for found, chosen in zip(candidates, each, strict=True)
    ]
