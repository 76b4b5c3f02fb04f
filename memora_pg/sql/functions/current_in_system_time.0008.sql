-- Whether memora_pg knew a version at `at`; inlined like current_in_valid_time.
CREATE FUNCTION {schema}.current_in_system_time(
    obtained_at timestamptz, stored_at timestamptz, superseded_at timestamptz, expires_at timestamptz,
    at timestamptz
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(stored_at, obtained_at) <= at
   AND (superseded_at IS NULL OR superseded_at > at)
   AND (expires_at IS NULL OR expires_at > at)
