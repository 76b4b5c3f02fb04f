-- memories_as_of on Citus, which cannot plan a SQL function whose body reads a distributed table
-- (0A000): PL/pgSQL, whose queries Citus plans on the coordinator as any other.
CREATE OR REPLACE FUNCTION {schema}.memories_as_of(at timestamptz, clock text DEFAULT 'valid')
RETURNS SETOF {schema}.memories
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    IF {schema}.checked_clock(clock) = 'system' THEN
        RETURN QUERY SELECT m.* FROM {schema}.memories AS m
        WHERE {schema}.current_in_system_time(m.obtained_at, m.stored_at, m.superseded_at, m.expires_at, at);
    ELSE
        RETURN QUERY SELECT m.* FROM {schema}.memories AS m
        WHERE {schema}.current_in_valid_time(m.obtained_at, m.valid_until, m.expires_at, at);
    END IF;
END
$$
