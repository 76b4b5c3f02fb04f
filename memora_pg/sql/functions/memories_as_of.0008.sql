-- The versions current at `at`. A plain body (not RETURN), which PostgreSQL can inline into the calling
-- query: a condition on org_id and user_id then reaches the btree. Citus has its own form (citus/).
CREATE FUNCTION {schema}.memories_as_of(at timestamptz, clock text DEFAULT 'valid')
RETURNS SETOF {schema}.memories
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT m.* FROM {schema}.memories AS m
    WHERE CASE {schema}.checked_clock(clock)
              WHEN 'system' THEN {schema}.current_in_system_time(
                  m.obtained_at, m.stored_at, m.superseded_at, m.expires_at, at)
              ELSE {schema}.current_in_valid_time(m.obtained_at, m.valid_until, m.expires_at, at)
          END
$$
