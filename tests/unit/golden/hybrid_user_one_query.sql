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
 LIMIT 2001) AS counted), 
common_terms AS 
(SELECT listed.lexeme AS lexeme 
FROM (
SELECT listed.lexeme
FROM "memora".common_terms('memories', 'user_id', CAST($4 AS text), 2001, 302) AS listed(lexeme)
) AS listed 
WHERE (SELECT scope_rows.n > 2000 AS anon_2 
FROM scope_rows)), 
scope_texts AS MATERIALIZED 
(SELECT queries.query_no AS query_no, in_scope.row_id AS row_id, in_scope.seq AS seq, in_scope.search_text AS search_text 
FROM queries JOIN (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, memora.memories.search_text AS search_text 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_3 
FROM scope_rows) ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS in_scope ON (in_scope.search_text @@ queries.any_term) IS true), 
term_rarity AS 
(SELECT queries.query_no AS query_no, term.lexeme AS lexeme, CASE WHEN (scope_rows.n > 2000 AND (held.df > 150 OR term.lexeme IN (SELECT common_terms.lexeme 
FROM common_terms))) THEN 601 ELSE held.df END AS df, held.row_ids AS row_ids, held.seqs AS seqs 
FROM queries JOIN LATERAL (SELECT word.lexeme AS lexeme, CAST(quote_literal(word.lexeme) AS TSQUERY) AS query 
FROM unnest(queries.lexemes) AS word(lexeme)) AS term ON true JOIN scope_rows ON true JOIN LATERAL (SELECT count(*) AS df, array_agg(holding.row_id) AS row_ids, array_agg(holding.seq) AS seqs 
FROM ((SELECT scope_texts.row_id AS row_id, scope_texts.seq AS seq 
FROM scope_texts 
WHERE scope_texts.query_no = queries.query_no AND (scope_texts.search_text @@ term.query) 
 LIMIT 601) UNION ALL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (memora.memories.search_text @@ term.query) AND (SELECT scope_rows.n > 2000 AS anon_4 
FROM scope_rows) AND (term.lexeme NOT IN (SELECT common_terms.lexeme 
FROM common_terms)) 
 LIMIT 151)) AS holding) AS held ON true), 
candidates AS 
(SELECT queries.query_no AS query_no, nearest_0.row_id AS row_id 
FROM queries JOIN LATERAL (SELECT scope.memory_id AS row_id, scope.embedding <=> queries.embedding AS distance 
FROM (SELECT memora.memories.org_id AS org_id, memora.memories.memory_id AS memory_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.interaction_id AS interaction_id, memora.memories.memory AS memory, memora.memories.obtained_at AS obtained_at, memora.memories.seq AS seq, memora.memories.metadata AS metadata, memora.memories.embedding AS embedding, memora.memories.search_text AS search_text, memora.memories.stored_at AS stored_at, memora.memories.superseded_at AS superseded_at, memora.memories.valid_until AS valid_until, memora.memories.expires_at AS expires_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) ORDER BY memora.memories.org_id, memora.memories.user_id 
 LIMIT 2001) AS scope ORDER BY distance, scope.seq 
 LIMIT 30) AS nearest_0 ON true UNION SELECT queries.query_no AS query_no, nearest_1.row_id AS row_id 
FROM queries JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.embedding <=> queries.embedding AS distance 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND (SELECT concat(set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $5::VARCHAR, true)) AS concat_1) IS NOT NULL AND (SELECT scope_rows.n <= 2000 AS anon_1 
FROM scope_rows) IS false ORDER BY distance 
 LIMIT 30) AS nearest_1 ON true UNION SELECT placed.query_no AS query_no, placed.row_id AS row_id 
FROM (SELECT weighed.query_no AS query_no, weighed.row_id AS row_id, row_number() OVER (PARTITION BY weighed.query_no ORDER BY weighed.weight DESC, weighed.seq DESC) AS place 
FROM (SELECT term_rarity.query_no AS query_no, held.row_id AS row_id, max(held.seq) AS seq, sum(ln(CAST(1.0 AS double precision) + ((scope_rows.n - term_rarity.df) + CAST(0.5 AS double precision)) / CAST((term_rarity.df + CAST(0.5 AS double precision)) AS FLOAT))) AS weight 
FROM term_rarity JOIN LATERAL unnest(term_rarity.row_ids, term_rarity.seqs) AS held(row_id, seq) ON true JOIN scope_rows ON true 
WHERE term_rarity.df <= 150 GROUP BY term_rarity.query_no, held.row_id) AS weighed) AS placed 
WHERE placed.place <= 100), 
found AS 
(SELECT candidates.query_no AS query_no, own.row_id AS row_id, own.seq AS seq, own.neighbourhood AS neighbourhood, own.attached AS attached, own.unattached AS unattached, own.cosine AS cosine, own.search_text AS search_text, own.org_id AS org_id, own.user_id AS user_id, own.agent_id AS agent_id, own.memory_id AS memory_id, own.memory AS memory, own.metadata AS metadata, own.obtained_at AS obtained_at 
FROM candidates JOIN queries ON queries.query_no = candidates.query_no JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, coalesce('i:' || memora.memories.interaction_id, 'u:' || memora.memories.user_id) AS neighbourhood, memora.memories.interaction_id AS attached, memora.memories.user_id AS unattached, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.memories.search_text AS search_text, memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.memory_id = candidates.row_id) AS own ON true), 
around AS 
(SELECT copies.query_no AS query_no, copies.row_id AS row_id, copies.seq AS seq, copies.neighbourhood AS neighbourhood, copies.attached AS attached, copies.unattached AS unattached, copies.cosine AS cosine, copies.search_text AS search_text, copies.org_id AS org_id, copies.user_id AS user_id, copies.agent_id AS agent_id, copies.memory_id AS memory_id, copies.memory AS memory, copies.metadata AS metadata, copies.obtained_at AS obtained_at 
FROM (SELECT read.query_no AS query_no, read.row_id AS row_id, read.seq AS seq, read.neighbourhood AS neighbourhood, read.attached AS attached, read.unattached AS unattached, read.cosine AS cosine, read.search_text AS search_text, read.org_id AS org_id, read.user_id AS user_id, read.agent_id AS agent_id, read.memory_id AS memory_id, read.memory AS memory, read.metadata AS metadata, read.obtained_at AS obtained_at, row_number() OVER (PARTITION BY read.query_no, read.row_id) AS copy 
FROM (SELECT found.query_no AS query_no, found.row_id AS row_id, found.seq AS seq, found.neighbourhood AS neighbourhood, found.attached AS attached, found.unattached AS unattached, found.cosine AS cosine, found.search_text AS search_text, found.org_id AS org_id, found.user_id AS user_id, found.agent_id AS agent_id, found.memory_id AS memory_id, found.memory AS memory, found.metadata AS metadata, found.obtained_at AS obtained_at 
FROM found UNION ALL SELECT found.query_no AS query_no, before_0.row_id AS row_id, before_0.seq AS seq, before_0.neighbourhood AS neighbourhood, before_0.attached AS attached, before_0.unattached AS unattached, before_0.cosine AS cosine, before_0.search_text AS search_text, before_0.org_id AS org_id, before_0.user_id AS user_id, before_0.agent_id AS agent_id, before_0.memory_id AS memory_id, before_0.memory AS memory, before_0.metadata AS metadata, before_0.obtained_at AS obtained_at 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, coalesce('i:' || memora.memories.interaction_id, 'u:' || memora.memories.user_id) AS neighbourhood, memora.memories.interaction_id AS attached, memora.memories.user_id AS unattached, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.memories.search_text AS search_text, memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND found.attached IS NOT NULL AND memora.memories.interaction_id = found.attached AND memora.memories.seq < found.seq ORDER BY memora.memories.seq DESC 
 LIMIT 1) AS before_0 ON true UNION ALL SELECT found.query_no AS query_no, before_1.row_id AS row_id, before_1.seq AS seq, before_1.neighbourhood AS neighbourhood, before_1.attached AS attached, before_1.unattached AS unattached, before_1.cosine AS cosine, before_1.search_text AS search_text, before_1.org_id AS org_id, before_1.user_id AS user_id, before_1.agent_id AS agent_id, before_1.memory_id AS memory_id, before_1.memory AS memory, before_1.metadata AS metadata, before_1.obtained_at AS obtained_at 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, coalesce('i:' || memora.memories.interaction_id, 'u:' || memora.memories.user_id) AS neighbourhood, memora.memories.interaction_id AS attached, memora.memories.user_id AS unattached, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.memories.search_text AS search_text, memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND memora.memories.interaction_id IS NULL AND found.attached IS NULL AND memora.memories.user_id = found.unattached AND memora.memories.seq < found.seq ORDER BY memora.memories.seq DESC 
 LIMIT 1) AS before_1 ON true UNION ALL SELECT found.query_no AS query_no, after_0.row_id AS row_id, after_0.seq AS seq, after_0.neighbourhood AS neighbourhood, after_0.attached AS attached, after_0.unattached AS unattached, after_0.cosine AS cosine, after_0.search_text AS search_text, after_0.org_id AS org_id, after_0.user_id AS user_id, after_0.agent_id AS agent_id, after_0.memory_id AS memory_id, after_0.memory AS memory, after_0.metadata AS metadata, after_0.obtained_at AS obtained_at 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, coalesce('i:' || memora.memories.interaction_id, 'u:' || memora.memories.user_id) AS neighbourhood, memora.memories.interaction_id AS attached, memora.memories.user_id AS unattached, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.memories.search_text AS search_text, memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND found.attached IS NOT NULL AND memora.memories.interaction_id = found.attached AND memora.memories.seq > found.seq ORDER BY memora.memories.seq 
 LIMIT 1) AS after_0 ON true UNION ALL SELECT found.query_no AS query_no, after_1.row_id AS row_id, after_1.seq AS seq, after_1.neighbourhood AS neighbourhood, after_1.attached AS attached, after_1.unattached AS unattached, after_1.cosine AS cosine, after_1.search_text AS search_text, after_1.org_id AS org_id, after_1.user_id AS user_id, after_1.agent_id AS agent_id, after_1.memory_id AS memory_id, after_1.memory AS memory, after_1.metadata AS metadata, after_1.obtained_at AS obtained_at 
FROM found JOIN queries ON queries.query_no = found.query_no JOIN LATERAL (SELECT memora.memories.memory_id AS row_id, memora.memories.seq AS seq, coalesce('i:' || memora.memories.interaction_id, 'u:' || memora.memories.user_id) AS neighbourhood, memora.memories.interaction_id AS attached, memora.memories.user_id AS unattached, coalesce(nullif(1 - (memora.memories.embedding <=> queries.embedding), CAST('NaN' AS double precision)), CAST(0.0 AS double precision)) AS cosine, memora.memories.search_text AS search_text, memora.memories.org_id AS org_id, memora.memories.user_id AS user_id, memora.memories.agent_id AS agent_id, memora.memories.memory_id AS memory_id, memora.memories.memory AS memory, memora.memories.metadata AS metadata, memora.memories.obtained_at AS obtained_at 
FROM memora.memories 
WHERE memora.memories.org_id = $3::VARCHAR AND memora.memories.user_id = $4::VARCHAR AND memora.memories.embedding IS NOT NULL AND memora.memories.interaction_id IS NULL AND found.attached IS NULL AND memora.memories.user_id = found.unattached AND memora.memories.seq > found.seq ORDER BY memora.memories.seq 
 LIMIT 1) AS after_1 ON true) AS read) AS copies 
WHERE copies.copy = 1), 
frequencies AS 
(SELECT term_rarity.query_no AS query_no, array_agg(term_rarity.lexeme) AS query_lexemes, array_agg(term_rarity.df) AS query_dfs 
FROM term_rarity GROUP BY term_rarity.query_no)
 SELECT around.query_no, around.seq, around.neighbourhood, CAST(around.cosine AS FLOAT) AS cosine, held_terms.term_lexemes AS term_lexemes, held_terms.term_counts AS term_counts, frequencies.query_lexemes AS query_lexemes, frequencies.query_dfs AS query_dfs, scope_rows.n, around.org_id, around.user_id, around.agent_id, around.memory_id, around.memory, CAST(around.metadata AS TEXT) AS metadata, around.obtained_at 
FROM around JOIN queries ON queries.query_no = around.query_no JOIN LATERAL (SELECT array_agg(occurrence.lexeme) AS term_lexemes, array_agg(coalesce(array_length(occurrence.positions, 1), 1)) AS term_counts 
FROM LATERAL unnest(around.search_text) AS occurrence 
WHERE (around.search_text @@ queries.any_term) AND occurrence.lexeme = any(queries.lexemes)) AS held_terms ON true JOIN scope_rows ON true LEFT OUTER JOIN frequencies ON frequencies.query_no = around.query_no ORDER BY around.query_no
