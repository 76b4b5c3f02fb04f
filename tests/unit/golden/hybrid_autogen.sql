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
 LIMIT 2001) AS counted), 
common_terms AS 
(SELECT listed.lexeme AS lexeme 
FROM (
SELECT listed.lexeme
FROM "memora".common_terms('autogen_contents', NULL, NULL, 2001, 302) AS listed(lexeme)
) AS listed 
WHERE (SELECT scope_rows.n > 2000 AS anon_2 
FROM scope_rows)), 
scope_texts AS MATERIALIZED 
(SELECT queries.query_no AS query_no, in_scope.row_id AS row_id, in_scope.seq AS seq, in_scope.search_text AS search_text 
FROM queries JOIN (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.seq AS seq, memora.autogen_contents.search_text AS search_text 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_3 
FROM scope_rows) ORDER BY memora.autogen_contents.org_id, memora.autogen_contents.namespace, memora.autogen_contents.user_id, memora.autogen_contents.agent_id 
 LIMIT 2001) AS in_scope ON (in_scope.search_text @@ queries.any_term) IS true), 
term_rarity AS 
(SELECT queries.query_no AS query_no, term.lexeme AS lexeme, CASE WHEN (scope_rows.n > 2000 AND (held.df > 150 OR term.lexeme IN (SELECT common_terms.lexeme 
FROM common_terms))) THEN 601 ELSE held.df END AS df, held.row_ids AS row_ids, held.seqs AS seqs 
FROM queries JOIN LATERAL (SELECT word.lexeme AS lexeme, CAST(quote_literal(word.lexeme) AS TSQUERY) AS query 
FROM unnest(queries.lexemes) AS word(lexeme)) AS term ON true JOIN scope_rows ON true JOIN LATERAL (SELECT count(*) AS df, array_agg(holding.row_id) AS row_ids, array_agg(holding.seq) AS seqs 
FROM ((SELECT scope_texts.row_id AS row_id, scope_texts.seq AS seq 
FROM scope_texts 
WHERE scope_texts.query_no = queries.query_no AND (scope_texts.search_text @@ term.query) 
 LIMIT 601) UNION ALL (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.seq AS seq 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (memora.autogen_contents.search_text @@ term.query) AND (SELECT scope_rows.n > 2000 AS anon_4 
FROM scope_rows) AND (term.lexeme NOT IN (SELECT common_terms.lexeme 
FROM common_terms)) 
 LIMIT 151)) AS holding) AS held ON true), 
candidates AS 
(SELECT queries.query_no AS query_no, nearest_0.row_id AS row_id 
FROM queries JOIN LATERAL (SELECT scope.content_id AS row_id, scope.embedding <=> queries.embedding AS distance 
FROM (SELECT memora.autogen_contents.org_id AS org_id, memora.autogen_contents.content_id AS content_id, memora.autogen_contents.namespace AS namespace, memora.autogen_contents.user_id AS user_id, memora.autogen_contents.agent_id AS agent_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata, memora.autogen_contents.embedding AS embedding, memora.autogen_contents.seq AS seq, memora.autogen_contents.created_at AS created_at, memora.autogen_contents.search_text AS search_text 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) ORDER BY memora.autogen_contents.org_id, memora.autogen_contents.namespace, memora.autogen_contents.user_id, memora.autogen_contents.agent_id 
 LIMIT 2001) AS scope ORDER BY distance, scope.seq 
 LIMIT 30) AS nearest_0 ON true UNION SELECT queries.query_no AS query_no, nearest_1.row_id AS row_id 
FROM queries JOIN LATERAL (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.embedding <=> queries.embedding AS distance 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND (SELECT concat(set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $6::VARCHAR, true)) AS concat_1) IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) IS false ORDER BY distance 
 LIMIT 30) AS nearest_1 ON true UNION SELECT placed.query_no AS query_no, placed.row_id AS row_id 
FROM (SELECT weighed.query_no AS query_no, weighed.row_id AS row_id, row_number() OVER (PARTITION BY weighed.query_no ORDER BY weighed.weight DESC, weighed.seq DESC) AS place 
FROM (SELECT term_rarity.query_no AS query_no, held.row_id AS row_id, max(held.seq) AS seq, sum(ln(CAST(1.0 AS double precision) + ((scope_rows.n - term_rarity.df) + CAST(0.5 AS double precision)) / CAST((term_rarity.df + CAST(0.5 AS double precision)) AS FLOAT))) AS weight 
FROM term_rarity JOIN LATERAL unnest(term_rarity.row_ids, term_rarity.seqs) AS held(row_id, seq) ON true JOIN scope_rows ON true 
WHERE term_rarity.df <= 150 GROUP BY term_rarity.query_no, held.row_id) AS weighed) AS placed 
WHERE placed.place <= 100), 
found AS 
(SELECT candidates.query_no AS query_no, own.row_id AS row_id, own.seq AS seq, own.neighbourhood AS neighbourhood, own.attached AS attached, own.unattached AS unattached, own.cosine AS cosine, own.search_text AS search_text, own.content_id AS content_id, own.mime_type AS mime_type, own.content_text AS content_text, own.content_json AS content_json, own.content_bytes AS content_bytes, own.metadata AS metadata 
FROM candidates JOIN queries ON queries.query_no = candidates.query_no JOIN LATERAL (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.seq AS seq, CAST(NULL AS TEXT) AS neighbourhood, CAST(NULL AS TEXT) AS attached, CAST(NULL AS TEXT) AS unattached, coalesce(nullif(1 - (memora.autogen_contents.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.autogen_contents.search_text AS search_text, memora.autogen_contents.content_id AS content_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.content_id = candidates.row_id) AS own ON true), 
around AS 
(SELECT copies.query_no AS query_no, copies.row_id AS row_id, copies.seq AS seq, copies.neighbourhood AS neighbourhood, copies.attached AS attached, copies.unattached AS unattached, copies.cosine AS cosine, copies.search_text AS search_text, copies.content_id AS content_id, copies.mime_type AS mime_type, copies.content_text AS content_text, copies.content_json AS content_json, copies.content_bytes AS content_bytes, copies.metadata AS metadata 
FROM (SELECT read.query_no AS query_no, read.row_id AS row_id, read.seq AS seq, read.neighbourhood AS neighbourhood, read.attached AS attached, read.unattached AS unattached, read.cosine AS cosine, read.search_text AS search_text, read.content_id AS content_id, read.mime_type AS mime_type, read.content_text AS content_text, read.content_json AS content_json, read.content_bytes AS content_bytes, read.metadata AS metadata, row_number() OVER (PARTITION BY read.query_no, read.row_id) AS copy 
FROM (SELECT found.query_no AS query_no, found.row_id AS row_id, found.seq AS seq, found.neighbourhood AS neighbourhood, found.attached AS attached, found.unattached AS unattached, found.cosine AS cosine, found.search_text AS search_text, found.content_id AS content_id, found.mime_type AS mime_type, found.content_text AS content_text, found.content_json AS content_json, found.content_bytes AS content_bytes, found.metadata AS metadata 
FROM found UNION ALL SELECT found.query_no AS query_no, before_0.row_id AS row_id, before_0.seq AS seq, before_0.neighbourhood AS neighbourhood, before_0.attached AS attached, before_0.unattached AS unattached, before_0.cosine AS cosine, before_0.search_text AS search_text, before_0.content_id AS content_id, before_0.mime_type AS mime_type, before_0.content_text AS content_text, before_0.content_json AS content_json, before_0.content_bytes AS content_bytes, before_0.metadata AS metadata 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.seq AS seq, CAST(NULL AS TEXT) AS neighbourhood, CAST(NULL AS TEXT) AS attached, CAST(NULL AS TEXT) AS unattached, coalesce(nullif(1 - (memora.autogen_contents.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.autogen_contents.search_text AS search_text, memora.autogen_contents.content_id AS content_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND memora.autogen_contents.seq < found.seq ORDER BY memora.autogen_contents.org_id DESC, memora.autogen_contents.namespace DESC, memora.autogen_contents.user_id DESC, memora.autogen_contents.agent_id DESC, memora.autogen_contents.seq DESC 
 LIMIT 1) AS before_0 ON true UNION ALL SELECT found.query_no AS query_no, after_0.row_id AS row_id, after_0.seq AS seq, after_0.neighbourhood AS neighbourhood, after_0.attached AS attached, after_0.unattached AS unattached, after_0.cosine AS cosine, after_0.search_text AS search_text, after_0.content_id AS content_id, after_0.mime_type AS mime_type, after_0.content_text AS content_text, after_0.content_json AS content_json, after_0.content_bytes AS content_bytes, after_0.metadata AS metadata 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.autogen_contents.content_id AS row_id, memora.autogen_contents.seq AS seq, CAST(NULL AS TEXT) AS neighbourhood, CAST(NULL AS TEXT) AS attached, CAST(NULL AS TEXT) AS unattached, coalesce(nullif(1 - (memora.autogen_contents.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.autogen_contents.search_text AS search_text, memora.autogen_contents.content_id AS content_id, memora.autogen_contents.mime_type AS mime_type, memora.autogen_contents.content_text AS content_text, memora.autogen_contents.content_json AS content_json, memora.autogen_contents.content_bytes AS content_bytes, memora.autogen_contents.metadata AS metadata 
FROM memora.autogen_contents 
WHERE memora.autogen_contents.org_id = $3::VARCHAR AND memora.autogen_contents.namespace = $4::VARCHAR AND memora.autogen_contents.user_id = $5::VARCHAR AND memora.autogen_contents.agent_id IS NULL AND memora.autogen_contents.embedding IS NOT NULL AND memora.autogen_contents.seq > found.seq ORDER BY memora.autogen_contents.org_id, memora.autogen_contents.namespace, memora.autogen_contents.user_id, memora.autogen_contents.agent_id, memora.autogen_contents.seq 
 LIMIT 1) AS after_0 ON true) AS read) AS copies 
WHERE copies.copy = 1), 
frequencies AS 
(SELECT term_rarity.query_no AS query_no, array_agg(term_rarity.lexeme) AS query_lexemes, array_agg(term_rarity.df) AS query_dfs 
FROM term_rarity GROUP BY term_rarity.query_no)
 SELECT around.query_no, around.seq, around.neighbourhood, CAST(around.cosine AS FLOAT) AS cosine, held_terms.term_lexemes AS term_lexemes, held_terms.term_counts AS term_counts, frequencies.query_lexemes AS query_lexemes, frequencies.query_dfs AS query_dfs, scope_rows.n, around.content_id, around.mime_type, around.content_text, CAST(around.content_json AS TEXT) AS content_json, around.content_bytes, CAST(around.metadata AS TEXT) AS metadata 
FROM around JOIN queries ON queries.query_no = around.query_no JOIN LATERAL (SELECT array_agg(occurrence.lexeme) AS term_lexemes, array_agg(coalesce(array_length(occurrence.positions, 1), 1)) AS term_counts 
FROM LATERAL unnest(around.search_text) AS occurrence 
WHERE (around.search_text @@ queries.any_term) AND occurrence.lexeme = any(queries.lexemes)) AS held_terms ON true JOIN scope_rows ON true LEFT OUTER JOIN frequencies ON frequencies.query_no = around.query_no ORDER BY around.query_no
