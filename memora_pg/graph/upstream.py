"""Upstream Memora's search, for ``PgVectorDB(search_mode="upstream")``: the fusion its Qdrant store makes,
kept for anyone who wants its exact scores. Every other search is :mod:`memora_pg.graph.search`'s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg import vector_params
from memora_pg.config import Settings
from memora_pg.graph import timeline
from memora_pg.graph.render import hit_model
from memora_pg.models import Memory
from memora_pg.sql_text import render
from memora_pg.statements import sql

# The HNSW options of upstream mode's search over a whole organization, for its transaction only:
# iterative scans, so a selective condition still fills the list, and the list's search width.
HNSW_OPTIONS = """
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', :ef, true)
"""


DENSE_CANDIDATES = 12
LEXICAL_CANDIDATES = 12
MIN_SIMILARITY = 0.4
MIN_FUSED_SCORE = 0.35


@lru_cache(maxsize=32)
def search_sql(*, user_scope: bool, agent: bool, exclude_superseded: bool, clock: str | None = None) -> str:
    """Upstream Memora's search (``search_mode="upstream"``), as its Qdrant store fuses: the 12 nearest
    memories (kept at cosine >= 0.4) and the 12 best full-text matches, score = sum over the lists
    holding a memory of 1 / (rank + 2), kept above 0.35, top 10."""
    filters = "m.org_id = :org_id AND m.embedding IS NOT NULL"
    if user_scope:
        filters += " AND m.user_id = :user_id"
    if agent:
        filters += " AND m.agent_id = :agent_id"
    if clock is not None:
        filters += " AND " + timeline.current_at("m", clock)
    elif exclude_superseded:
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
    dense = render(
        """
        SELECT nearest.memory_id, nearest.distance,
               row_number() OVER (ORDER BY nearest.distance, nearest.seq) - 1 AS rank
        FROM (
            SELECT m.memory_id, m.seq, m.embedding <=> q.embedding AS distance
            FROM {schema}.memories AS m
            WHERE {filters}
            ORDER BY {order}
            LIMIT {candidates}
        ) AS nearest
        WHERE 1 - nearest.distance >= {min_similarity}""",
        filters=filters,
        order=order,
        candidates=DENSE_CANDIDATES,
        min_similarity=MIN_SIMILARITY,
    )
    lexical = render(
        """
        SELECT m.memory_id,
               row_number() OVER (ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq) - 1 AS rank
        FROM {schema}.memories AS m
        WHERE {filters} AND {matches}
        -- ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row
        ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq
        LIMIT {candidates}""",
        filters=filters,
        matches=matches,
        candidates=LEXICAL_CANDIDATES,
    )
    fused = render(
        """
        SELECT coalesce(dense.memory_id, lexical.memory_id) AS memory_id,
               coalesce(1.0 / (dense.rank + 2), 0) + coalesce(1.0 / (lexical.rank + 2), 0) AS score,
               coalesce(dense.rank, {dense_candidates}) AS dense_rank,
               coalesce(lexical.rank, {lexical_candidates}) AS lexical_rank
        FROM ({dense}) AS dense
        FULL JOIN ({lexical}) AS lexical ON lexical.memory_id = dense.memory_id""",
        dense_candidates=DENSE_CANDIDATES,
        lexical_candidates=LEXICAL_CANDIDATES,
        dense=dense,
        lexical=lexical,
    )
    return render(
        """
-- MATERIALIZED: each query's vector is parsed once, not once per row it is compared with.
WITH q AS MATERIALIZED (
    SELECT given.query_no,
           given.embedding,
           -- any word of the query may match (upstream's lexical arm is a sparse model, not a phrase)
           CAST(replace(CAST(plainto_tsquery({schema}.search_config(), given.query) AS text), ' & ', ' | ')
                AS tsquery) AS terms
    FROM unnest(CAST(:query_nos AS int[]), CAST(:embeddings AS vector[]), CAST(:queries AS text[]))
         AS given(query_no, embedding, query)
)
SELECT q.query_no, m.org_id, m.user_id, m.agent_id, m.memory_id, m.memory, m.obtained_at, hit.score
FROM q
CROSS JOIN LATERAL (
    SELECT fused.memory_id, fused.score, fused.dense_rank, fused.lexical_rank
    FROM ({fused}) AS fused
    WHERE fused.score > {min_fused_score}
    ORDER BY fused.score DESC, fused.dense_rank, fused.lexical_rank
    LIMIT :top_k
) AS hit
JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = hit.memory_id
ORDER BY q.query_no, hit.score DESC, hit.dense_rank, hit.lexical_rank
""",
        fused=fused,
        min_fused_score=MIN_FUSED_SCORE,
    )


async def upstream_search(
    conn: AsyncConnection,
    *,
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    org_id: str,
    user_id: str | None,
    agent_id: str | None,
    exclude_superseded: bool,
    settings: Settings,
    as_of: datetime | None = None,
    clock: str = timeline.VALID,
) -> list[list[tuple[Memory, float]]]:
    if user_id is None:
        await conn.execute(sql(conn, HNSW_OPTIONS), {"ef": str(settings.hnsw_ef_search)})
    template = search_sql(
        user_scope=user_id is not None,
        agent=agent_id is not None,
        exclude_superseded=exclude_superseded,
        clock=None if as_of is None else clock,
    )
    params: dict[str, Any] = {
        "org_id": org_id,
        "query_nos": list(range(len(texts))),
        "embeddings": vector_params.many(vectors),
        "queries": list(texts),
        "top_k": settings.search_top_k,
    }
    if as_of is not None:
        params["as_of"] = as_of
    if user_id is not None:
        params["user_id"] = user_id
    if agent_id is not None:
        params["agent_id"] = agent_id
    results: list[list[tuple[Memory, float]]] = [[] for _ in texts]
    for row in await conn.execute(sql(conn, template), params):
        results[row.query_no].append((hit_model(row._mapping), float(row.score)))
    return results
