WITH scope_rows AS 
(SELECT count(*) AS n 
FROM (SELECT 1 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS counted)
 SELECT found.org_id, found.user_id, found.agent_id, found.memory_id, found.memory, found.metadata, found.obtained_at, coalesce(nullif(1 - found.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS score, coalesce(nullif(1 - found.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, $1::INTEGER AS query_no 
FROM ((SELECT scope.org_id AS org_id, scope.user_id AS user_id, scope.agent_id AS agent_id, scope.memory_id AS memory_id, scope.memory AS memory, scope.metadata AS metadata, scope.obtained_at AS obtained_at, scope.embedding <=> $2::VECTOR AS distance 
FROM (SELECT memora.memories.org_id AS org_id, memora.memories.memory_id AS memory_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.interaction_id AS interaction_id, memora.memories.memory AS memory, memora.memories.obtained_at AS obtained_at, memora.memories.seq AS seq, memora.memories.metadata AS metadata, memora.memories.embedding AS embedding, memora.memories.search_text AS search_text, memora.memories.stored_at AS stored_at, memora.memories.superseded_at AS superseded_at, memora.memories.valid_until AS valid_until, memora.memories.expires_at AS expires_at 
FROM memora.memories 
WHERE memora.memories.embedding IS NOT NULL AND memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS scope ORDER BY distance, scope.seq 
 LIMIT 10) UNION ALL (SELECT memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at, memora.memories.embedding <=> $2::VECTOR AS distance 
FROM memora.memories 
WHERE memora.memories.embedding IS NOT NULL AND memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND (SELECT concat(set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $5::VARCHAR, true)) AS concat_1) IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) IS false ORDER BY distance 
 LIMIT 10)) AS found ORDER BY found.distance
