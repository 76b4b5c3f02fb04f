-- The scope is any column's value (user_id, org_id), sized by its listed share of the table.
CREATE FUNCTION {schema}.common_terms(
    relation text, scope_column text, scope_value text, scope_rows double precision, common_rows double precision
) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
DECLARE
    estimated double precision;
BEGIN
    -- The scope's rows, as ANALYZE estimated them (a value too rare for the statistics to list has none).
    IF scope_value IS NOT NULL THEN
        SELECT v.frequency * c.reltuples INTO estimated
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
             AS v(listed, frequency)
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', {schema_name}, relation))
        WHERE s.schemaname = {schema_name} AND s.tablename = relation AND s.attname = scope_column
          AND v.listed = scope_value;
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
