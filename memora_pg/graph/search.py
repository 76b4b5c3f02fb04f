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
from sqlalchemy import ARRAY, Float, Integer, Select, Text, bindparam, cast, func, literal, select, text, true
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from memora_pg.schema import memories
from memora_pg.vector import vector_literal

# What a search returns of each memory (the mem0-style API shows these).
MEMORY_FIELDS = (
    memories.c.memory_id,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.memory,
    memories.c.metadata,
    memories.c.obtained_at,
)


def nearest_statement(*, org_id: str, where: ColumnElement[bool], k: int, exact: bool) -> Select[Any]:
    """The statement of :func:`nearest`; it takes ``query_nos`` and ``embeddings`` (pgvector text) as parameters."""
    queries = (
        func.unnest(
            bindparam("query_nos", type_=ARRAY(Integer)),
            # Cast once, as an array: a per-row cast would parse the vector for every row compared.
            cast(bindparam("embeddings", type_=ARRAY(Text)), ARRAY(VECTOR())),
        )
        .table_valued("query_no", "embedding")
        .render_derived(name="q")
    )
    distance = memories.c.embedding.cosine_distance(queries.c.embedding)
    # "+ 0" hides the ordering from the HNSW index: the exact path sorts the matching rows (ties by
    # insertion order); the index path orders by distance alone, which the index can deliver.
    order = (distance + literal(0, Float), memories.c.seq) if exact else (distance,)
    hits = (
        select(*MEMORY_FIELDS, (1 - distance).label("score"))
        .where(memories.c.org_id == org_id, memories.c.embedding.is_not(None), where)
        .order_by(*order)
        .limit(k)
        .lateral("hit")
    )
    return (
        select(queries.c.query_no, hits)
        .select_from(queries.join(hits, true()))
        .order_by(queries.c.query_no, hits.c.score.desc())
    )


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
    stmt = nearest_statement(org_id=org_id, where=where, k=k, exact=exact)
    params = {"query_nos": list(range(len(vectors))), "embeddings": [vector_literal(v) for v in vectors]}
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
    rank = func.ts_rank_cd(memories.c.search_text, any_word)
    stmt = (
        select(*MEMORY_FIELDS)
        .where(memories.c.org_id == org_id, memories.c.search_text.op("@@")(any_word), where)
        .order_by(rank.desc(), memories.c.seq)
        .limit(k)
    )
    return [row._asdict() for row in await conn.execute(stmt)]
