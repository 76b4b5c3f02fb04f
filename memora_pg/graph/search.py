"""Nearest memories under any SQL condition: the search behind the mem0-style API.

All queries of a call go in one statement: each query's nearest neighbours are a LATERAL
subquery. Under a condition that pins one user the user's rows are sorted exactly (the btree
on (org_id, user_id) finds them; never a missed neighbour); otherwise the HNSW index is
walked with pgvector's iterative scans, so selective conditions still fill the top k.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Float, Integer, Select, Text, bindparam, cast, column, func, literal, select, text, true
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from memora_pg import vector_params
from memora_pg.config import Settings
from memora_pg.graph.memories import FIELDS
from memora_pg.models import Memory
from memora_pg.schema import memories
from memora_pg.statements import sql

# One row per query vector, numbered from 0.
QUERY_VECTORS = """
SELECT given.n - 1 AS query_no, given.embedding
FROM unnest(CAST(:embeddings AS vector[])) WITH ORDINALITY AS given(embedding, n)
"""


def _hits(query: ColumnElement[Any], *, org_id: str, where: ColumnElement[bool], k: int, exact: bool) -> Select[Any]:
    """The ``k`` memories nearest to ``query`` among those matching ``where``, with their similarity."""
    distance = memories.c.embedding.cosine_distance(query)
    # "+ 0" hides the ordering from the HNSW index: the exact path sorts the matching rows (ties by
    # insertion order); the index path orders by distance alone, which the index can deliver.
    order = (distance + literal(0, Float), memories.c.seq) if exact else (distance,)
    return (
        select(*FIELDS, (1 - distance).label("score"))
        .where(memories.c.org_id == org_id, memories.c.embedding.is_not(None), where)
        .order_by(*order)
        .limit(k)
    )


def nearest_statement(*, org_id: str, where: ColumnElement[bool], k: int, exact: bool, queries: int) -> Select[Any]:
    """The statement of :func:`nearest` for ``queries`` query vectors; it takes :func:`query_vectors`' parameters."""
    if queries == 1:
        # One query (every search): a plain select, cheaper to build and to plan than the LATERAL join below.
        query = bindparam("embedding", type_=vector_params.BinaryVector())
        return _hits(query, org_id=org_id, where=where, k=k, exact=exact).add_columns(
            literal(0, Integer).label("query_no")
        )
    vectors = text(QUERY_VECTORS).columns(column("query_no", Integer), column("embedding", VECTOR())).subquery("q")
    hits = _hits(vectors.c.embedding, org_id=org_id, where=where, k=k, exact=exact).lateral("hit")
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


async def nearest(
    conn: AsyncConnection,
    *,
    org_id: str,
    vectors: Sequence[Sequence[float]],
    where: ColumnElement[bool],
    k: int,
    exact: bool,
    ef_search: int = 100,
) -> list[list[tuple[dict[str, Any], float]]]:
    """For each vector, up to ``k`` memories of the organization matching ``where``, nearest first.

    Each hit is (the memory's row as a dict, cosine similarity).
    """
    if not exact:
        await conn.execute(
            text(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.ef_search', :ef, true)"
            ),
            {"ef": str(max(ef_search, k))},
        )
    stmt = nearest_statement(org_id=org_id, where=where, k=k, exact=exact, queries=len(vectors))
    params = query_vectors(vectors)
    results: list[list[tuple[dict[str, Any], float]]] = [[] for _ in vectors]
    for row in await conn.execute(stmt, params):
        data = row._asdict()
        results[data.pop("query_no")].append((data, float(data.pop("score"))))
    return results


async def matching_text(
    conn: AsyncConnection,
    *,
    org_id: str,
    query: str,
    where: ColumnElement[bool],
    k: int,
) -> list[dict[str, Any]]:
    """Up to ``k`` memories whose full-text vector matches any word of ``query``, best ranked first."""
    # plainto_tsquery joins the words with AND; any word may match, as in a sparse retriever.
    any_word = cast(
        func.replace(
            cast(func.plainto_tsquery(getattr(func, _schema(conn)).search_config(), literal(query)), Text),
            " & ",
            " | ",
        ),
        TSQUERY,
    )
    # ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row.
    rank = func.ts_rank(memories.c.search_text, any_word)
    stmt = (
        select(*FIELDS)
        .where(memories.c.org_id == org_id, memories.c.search_text.op("@@")(any_word), where)
        .order_by(rank.desc(), memories.c.seq)
        .limit(k)
    )
    return [row._asdict() for row in await conn.execute(stmt)]


DENSE_CANDIDATES = 12
LEXICAL_CANDIDATES = 12
MIN_SIMILARITY = 0.4
MIN_FUSED_SCORE = 0.35
TOP_K = 10


@lru_cache(maxsize=32)
def search_sql(*, user_scope: bool, agent: bool, mode: str, exclude_superseded: bool) -> str:
    """The search statement for one combination of scope, agent filter and mode."""
    filters = "m.org_id = :org_id AND m.embedding IS NOT NULL"
    if user_scope:
        filters += " AND m.user_id = :user_id"
    if agent:
        filters += " AND m.agent_id = :agent_id"
    if exclude_superseded:
        filters += (
            " AND NOT EXISTS (SELECT 1 FROM {schema}.memory_updates AS newer"
            " WHERE newer.org_id = m.org_id AND newer.old_memory_id = m.memory_id)"
        )
    # "+ 0" keeps the HNSW index out of user-scoped searches: the user's rows (found with the
    # btree) are sorted exactly, which is faster at a user's scale and never misses a neighbour.
    order = "(m.embedding <=> q.embedding) + 0" if user_scope else "m.embedding <=> q.embedding"
    # Likewise "IS TRUE" keeps the full-text GIN index out of user-scoped searches: a common word
    # matches much of the organization, while the user's rows are few (and read by the dense arm anyway).
    matches = "(m.search_text @@ q.terms) IS TRUE" if user_scope else "m.search_text @@ q.terms"
    dense = f"""
        SELECT nearest.memory_id, nearest.distance,
               row_number() OVER (ORDER BY nearest.distance, nearest.seq) - 1 AS rank
        FROM (
            SELECT m.memory_id, m.seq, m.embedding <=> q.embedding AS distance
            FROM {{schema}}.memories AS m
            WHERE {filters}
            ORDER BY {order}
            LIMIT {DENSE_CANDIDATES}
        ) AS nearest
        WHERE 1 - nearest.distance >= {MIN_SIMILARITY}"""
    if mode == "dense":
        fused = f"""
        SELECT dense.memory_id, 1 - dense.distance AS score, dense.rank AS dense_rank, 0 AS lexical_rank
        FROM ({dense}) AS dense"""
        keep = "true"
    else:
        lexical = f"""
        SELECT m.memory_id,
               row_number() OVER (ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq) - 1 AS rank
        FROM {{schema}}.memories AS m
        WHERE {filters} AND {matches}
        -- ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row
        ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq
        LIMIT {LEXICAL_CANDIDATES}"""
        fused = f"""
        SELECT coalesce(dense.memory_id, lexical.memory_id) AS memory_id,
               coalesce(1.0 / (dense.rank + 2), 0) + coalesce(1.0 / (lexical.rank + 2), 0) AS score,
               coalesce(dense.rank, {DENSE_CANDIDATES}) AS dense_rank,
               coalesce(lexical.rank, {LEXICAL_CANDIDATES}) AS lexical_rank
        FROM ({dense}) AS dense
        FULL JOIN ({lexical}) AS lexical ON lexical.memory_id = dense.memory_id"""
        keep = f"fused.score > {MIN_FUSED_SCORE}"
    return f"""
-- MATERIALIZED: each query's vector is parsed once, not once per row it is compared with.
WITH q AS MATERIALIZED (
    SELECT given.query_no,
           given.embedding,
           -- any word of the query may match (upstream's lexical arm is a sparse model, not a phrase)
           CAST(replace(CAST(plainto_tsquery({{schema}}.search_config(), given.query) AS text), ' & ', ' | ')
                AS tsquery) AS terms
    FROM unnest(CAST(:query_nos AS int[]), CAST(:embeddings AS vector[]), CAST(:queries AS text[]))
         AS given(query_no, embedding, query)
)
SELECT q.query_no, m.org_id, m.user_id, m.agent_id, m.memory_id, m.memory, m.obtained_at, hit.score
FROM q
CROSS JOIN LATERAL (
    SELECT fused.memory_id, fused.score, fused.dense_rank, fused.lexical_rank
    FROM ({fused}) AS fused
    WHERE {keep}
    ORDER BY fused.score DESC, fused.dense_rank, fused.lexical_rank
    LIMIT {TOP_K}
) AS hit
JOIN {{schema}}.memories AS m ON m.org_id = :org_id AND m.memory_id = hit.memory_id
ORDER BY q.query_no, hit.score DESC, hit.dense_rank, hit.lexical_rank
"""


async def search(
    conn: AsyncConnection,
    *,
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    org_id: str,
    user_id: str | None,
    agent_id: str | None,
    mode: str,
    exclude_superseded: bool,
    settings: Settings,
) -> list[list[tuple[Memory, float]]]:
    if user_id is None:
        # Organization-wide: HNSW with iterative scans, so the tenant filter never starves the top-k.
        await conn.execute(
            text(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.ef_search', :ef, true)"
            ),
            {"ef": str(settings.hnsw_ef_search)},
        )
    template = search_sql(
        user_scope=user_id is not None, agent=agent_id is not None, mode=mode, exclude_superseded=exclude_superseded
    )
    params: dict[str, Any] = {
        "org_id": org_id,
        "query_nos": list(range(len(texts))),
        "embeddings": vector_params.many(vectors),
        "queries": list(texts),
    }
    if user_id is not None:
        params["user_id"] = user_id
    if agent_id is not None:
        params["agent_id"] = agent_id
    results: list[list[tuple[Memory, float]]] = [[] for _ in texts]
    for row in await conn.execute(sql(conn, template), params):
        memory = Memory(
            org_id=row.org_id,
            user_id=row.user_id,
            agent_id=row.agent_id,
            interaction_id=None,
            memory_id=str(row.memory_id),
            memory=row.memory,
            obtained_at=row.obtained_at,
            message_sources=None,
        )
        results[row.query_no].append((memory, float(row.score)))
    return results


def _schema(conn: AsyncConnection) -> str:
    schema: str = conn.sync_connection.get_execution_options()["schema_translate_map"][None]  # type: ignore[union-attr]
    return schema
