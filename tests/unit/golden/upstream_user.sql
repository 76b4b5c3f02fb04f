WITH queries AS 
(
SELECT given.query_no, given.embedding, parsed.terms, tsvector_to_array(parsed.terms) AS lexemes,
       CAST(array_to_string(
           ARRAY(SELECT quote_literal(word) FROM unnest(tsvector_to_array(parsed.terms)) AS word), ' | '
       ) AS tsquery) AS any_term
FROM (SELECT 0, CAST($1::VECTOR AS vector), (SELECT CAST($2 AS text))) AS given(query_no, embedding, query)
CROSS JOIN LATERAL (SELECT "memora".to_search_text(given.query) AS terms) AS parsed
), 
scope_rows AS 
(SELECT count(*) AS n 
FROM (SELECT 1 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS counted)
 SELECT kept.query_no, own.org_id, own.user_id, own.agent_id, own.memory_id, own.memory, own.metadata, own.obtained_at, kept.score, own.cosine 
FROM (SELECT fused.query_no AS query_no, fused.row_id AS row_id, fused.score AS score, fused.dense_rank AS dense_rank, fused.lexical_rank AS lexical_rank, row_number() OVER (PARTITION BY fused.query_no ORDER BY fused.score DESC, fused.dense_rank, fused.lexical_rank) AS place 
FROM (SELECT coalesce(dense.query_no, lexical.query_no) AS query_no, coalesce(dense.row_id, lexical.row_id) AS row_id, coalesce(CAST(1.0 AS double precision) / CAST((dense.rank + CAST(2.0 AS double precision)) AS FLOAT), CAST(0.0 AS double precision)) + coalesce(CAST(1.0 AS double precision) / CAST((lexical.rank + CAST(2.0 AS double precision)) AS FLOAT), CAST(0.0 AS double precision)) AS score, coalesce(dense.rank, 12) AS dense_rank, coalesce(lexical.rank, 12) AS lexical_rank 
FROM (SELECT nearest.query_no AS query_no, nearest.row_id AS row_id, row_number() OVER (PARTITION BY nearest.query_no ORDER BY nearest.distance, nearest.seq) - 1 AS rank 
FROM (SELECT queries.query_no AS query_no, nearest_0.row_id AS row_id, nearest_0.seq AS seq, nearest_0.distance AS distance 
FROM queries JOIN LATERAL (SELECT scope.memory_id AS row_id, scope.seq AS seq, scope.embedding <=> queries.embedding AS distance 
FROM (SELECT memora.memories.org_id AS org_id, memora.memories.memory_id AS memory_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.interaction_id AS interaction_id, memora.memories.memory AS memory, memora.memories.obtained_at AS obtained_at, memora.memories.seq AS seq, memora.memories.metadata AS metadata, memora.memories.embedding AS embedding, memora.memories.search_text AS search_text, memora.memories.stored_at AS stored_at, memora.memories.superseded_at AS superseded_at, memora.memories.valid_until AS valid_until, memora.memories.expires_at AS expires_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS scope ORDER BY distance, scope.seq 
 LIMIT 12) AS nearest_0 ON true UNION ALL SELECT queries.query_no AS query_no, nearest_1.row_id AS row_id, nearest_1.seq AS seq, nearest_1.distance AS distance 
FROM queries JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, memora.memories.embedding <=> queries.embedding AS distance 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (SELECT concat(set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $5::VARCHAR, true)) AS concat_1) IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) IS false ORDER BY distance 
 LIMIT 12) AS nearest_1 ON true) AS nearest 
WHERE coalesce(nullif(1 - nearest.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) >= CAST(0.4 AS double precision)) AS dense FULL OUTER JOIN (SELECT queries.query_no AS query_no, best.row_id AS row_id, row_number() OVER (PARTITION BY queries.query_no ORDER BY best.relevance DESC, best.seq) - 1 AS rank 
FROM queries JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, ts_rank(memora.memories.search_text, queries.any_term) AS relevance 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (memora.memories.search_text @@ queries.any_term) IS true ORDER BY relevance DESC, memora.memories.seq 
 LIMIT 12) AS best ON true) AS lexical ON lexical.query_no = dense.query_no AND lexical.row_id = dense.row_id) AS fused 
WHERE fused.score > CAST(0.35 AS double precision)) AS kept JOIN queries ON queries.query_no = kept.query_no JOIN LATERAL (SELECT memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.memory_id = kept.row_id) AS own ON true 
WHERE kept.place <= 10 ORDER BY kept.query_no, kept.score DESC, kept.dense_rank, kept.lexical_rank
