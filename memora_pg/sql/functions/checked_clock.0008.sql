-- A clock's name, checked: constant-folded away when the name is a constant.
CREATE FUNCTION {schema}.checked_clock(clock text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF clock IS NULL OR clock NOT IN ('valid', 'system') THEN
        RAISE EXCEPTION 'clock must be ''valid'' or ''system'', not %', coalesce(quote_literal(clock), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN clock;
END
$$
