"""Nearest memories under any SQL condition: the search behind the mem0-style API.

All queries of a call go in one statement: each query's nearest neighbours are a LATERAL
subquery. Under a condition that pins one user the user's rows are sorted exactly (the btree
on (org_id, user_id) finds them; never a missed neighbour); otherwise the HNSW index is
walked with pgvector's iterative scans, so selective conditions still fill the top k.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Float, Integer, Select, Text, bindparam, cast, column, func, literal, select, text, true
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from memora_pg import vector_params
from memora_pg.schema import memories

# What a search returns of each memory (the mem0-style API shows these).
MEMORY_FIELDS = (
    memories.c.memory_id,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.memory,
    memories.c.metadata,
    memories.c.obtained_at,
)


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
        select(*MEMORY_FIELDS, (1 - distance).label("score"))
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
    text_search_config: str,
) -> list[dict[str, Any]]:
    """Up to ``k`` memories whose full-text vector matches any word of ``query``, best ranked first."""
    # plainto_tsquery joins the words with AND; any word may match, as in a sparse retriever.
    any_word = cast(
        func.replace(
            cast(func.plainto_tsquery(cast(literal(text_search_config), REGCONFIG), literal(query)), Text),
            " & ",
            " | ",
        ),
        TSQUERY,
    )
    # ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row.
    rank = func.ts_rank(memories.c.search_text, any_word)
    stmt = (
        select(*MEMORY_FIELDS)
        .where(memories.c.org_id == org_id, memories.c.search_text.op("@@")(any_word), where)
        .order_by(rank.desc(), memories.c.seq)
        .limit(k)
    )
    return [row._asdict() for row in await conn.execute(stmt)]
