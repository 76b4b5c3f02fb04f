-- A value the statistics do not list is sized as the planner sizes an equality on it.
CREATE OR REPLACE FUNCTION {schema}.common_terms(
    relation text, scope_column text, scope_value text, scope_rows double precision, common_rows double precision
) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
DECLARE
    estimated double precision;
BEGIN
    -- The scope's rows, as ANALYZE estimated them: its value's listed share of the table, else the
    -- share of a value not listed (NULL when the revision leaves it unsized).
    IF scope_value IS NOT NULL THEN
        SELECT c.reltuples * coalesce(
            (SELECT v.frequency
             FROM unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
                  AS v(listed, frequency)
             WHERE v.listed = scope_value),
            (1 - s.null_frac - coalesce((SELECT sum(listed) FROM unnest(s.most_common_freqs) AS listed), 0))
            / nullif(
                CASE WHEN s.n_distinct < 0 THEN -s.n_distinct * c.reltuples ELSE s.n_distinct END
                - coalesce(cardinality(s.most_common_freqs), 0),
                0
            )
        ) INTO estimated
        FROM pg_stats AS s
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', {schema_name}, relation))
        WHERE s.schemaname = {schema_name} AND s.tablename = relation AND s.attname = scope_column;
    END IF;
    estimated := greatest(scope_rows, coalesce(estimated, 0));
    RETURN QUERY
        SELECT e.lexeme
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_elems AS text) AS text[]), s.most_common_elem_freqs)
             AS e(lexeme, frequency)
        WHERE s.schemaname = {schema_name} AND s.tablename = relation AND s.attname = 'search_text'
          AND e.lexeme IS NOT NULL  -- the frequencies end with three of their own (least, most, of nulls)
          AND e.frequency * estimated >= common_rows;
END
$body$
