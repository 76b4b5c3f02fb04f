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
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL ORDER BY memora.autogen_contents.org_id, memora.autogen_contents.namespace, memora.autogen_contents.user_id, memora.autogen_contents.agent_id 
 LIMIT 2001) AS counted)
 SELECT found.query_no, found.score, found.cosine, found.content_id, found.mime_type, found.content_text, found.content_json, found.content_bytes, found.metadata 
FROM (SELECT queries.query_no AS query_no, coalesce(nullif(1 - nearest_0.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS score, coalesce(nullif(1 - nearest_0.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, nearest_0.content_id AS content_id, nearest_0.mime_type AS mime_type, nearest_0.content_text AS content_text, nearest_0.content_json AS content_json, nearest_0.content_bytes AS content_bytes, nearest_0.metadata AS metadata 
FROM queries JOIN LATERAL (SELECT scope.content_id AS content_id, scope.mime_type AS mime_type, scope.content_text AS content_text, scope.content_json AS content_json, scope.content_bytes AS content_bytes, scope.metadata AS metadata, scope.embedding <=> queries.embedding AS distance 
FROM (SELECT memora.autogen_contents.org_id AS org_id, memora.autogen_contents.content_id AS content_id, memora.autogen_contents.namespace AS namespace, memora.autogen_contents.user_id AS user_id, memora.autogen_contents.agent_id AS agent_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata, memora.autogen_contents.embedding AS embedding, memora.autogen_contents.seq AS seq, memora.autogen_contents.created_at AS created_at, memora.autogen_contents.search_text AS search_text 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) ORDER BY memora.autogen_contents.org_id, memora.autogen_contents.namespace, memora.autogen_contents.user_id, memora.autogen_contents.agent_id 
 LIMIT 2001) AS scope ORDER BY distance, scope.seq 
 LIMIT 10) AS nearest_0 ON true UNION ALL SELECT queries.query_no AS query_no, coalesce(nullif(1 - nearest_1.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS score, coalesce(nullif(1 - nearest_1.distance, CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, nearest_1.content_id AS content_id, nearest_1.mime_type AS mime_type, nearest_1.content_text AS content_text, nearest_1.content_json AS content_json, nearest_1.content_bytes AS content_bytes, nearest_1.metadata AS metadata 
FROM queries JOIN LATERAL (SELECT memora.autogen_contents.content_id AS content_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata, memora.autogen_contents.embedding <=> queries.embedding AS distance 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (SELECT concat(set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $6::VARCHAR, true)) AS concat_1) IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) IS false ORDER BY distance 
 LIMIT 10) AS nearest_1 ON true) AS found ORDER BY found.query_no, found.score DESC
