-- Whether a version was true at `at`; inlined by PostgreSQL, so that its conditions reach the indexes.
CREATE FUNCTION {schema}.current_in_valid_time(
    obtained_at timestamptz, valid_until timestamptz, expires_at timestamptz, at timestamptz
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN obtained_at <= at AND (valid_until IS NULL OR valid_until > at) AND (expires_at IS NULL OR expires_at > at)
