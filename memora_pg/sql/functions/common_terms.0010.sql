-- The words of `relation` that a user's rows would hold in at least `common_rows` rows, from ANALYZE's
-- statistics; none without statistics. A search skips those words' probes.
CREATE OR REPLACE FUNCTION {schema}.common_terms(
    relation text, searched_user text, scope_rows double precision, common_rows double precision
) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
DECLARE
    estimated double precision;
BEGIN
    -- The user's rows, as ANALYZE estimated them (a user too few for the statistics to list has none).
    IF searched_user IS NOT NULL THEN
        SELECT u.frequency * c.reltuples INTO estimated
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
             AS u(user_id, frequency)
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', {schema_name}, relation))
        WHERE s.schemaname = {schema_name} AND s.tablename = relation AND s.attname = 'user_id'
          AND u.user_id = searched_user;
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
