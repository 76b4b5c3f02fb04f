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
    FROM (
        SELECT coalesce(dense.memory_id, lexical.memory_id) AS memory_id,
               coalesce(1.0 / (dense.rank + 2), 0) + coalesce(1.0 / (lexical.rank + 2), 0) AS score,
               coalesce(dense.rank, 12) AS dense_rank,
               coalesce(lexical.rank, 12) AS lexical_rank
        FROM (
        SELECT nearest.memory_id, nearest.distance,
               row_number() OVER (ORDER BY nearest.distance, nearest.seq) - 1 AS rank
        FROM (
            SELECT m.memory_id, m.seq, m.embedding <=> q.embedding AS distance
            FROM {schema}.memories AS m
            WHERE m.org_id = :org_id AND m.embedding IS NOT NULL AND m.user_id = :user_id
            ORDER BY (m.embedding <=> q.embedding) + 0
            LIMIT 12
        ) AS nearest
        WHERE 1 - nearest.distance >= 0.4) AS dense
        FULL JOIN (
        SELECT m.memory_id,
               row_number() OVER (ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq) - 1 AS rank
        FROM {schema}.memories AS m
        WHERE m.org_id = :org_id AND m.embedding IS NOT NULL AND m.user_id = :user_id AND (m.search_text @@ q.terms) IS TRUE
        -- ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row
        ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq
        LIMIT 12) AS lexical ON lexical.memory_id = dense.memory_id) AS fused
    WHERE fused.score > 0.35
    ORDER BY fused.score DESC, fused.dense_rank, fused.lexical_rank
    LIMIT :top_k
) AS hit
JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = hit.memory_id
ORDER BY q.query_no, hit.score DESC, hit.dense_rank, hit.lexical_rank
