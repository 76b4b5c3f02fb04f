-- The text-search configuration of the database's full-text vectors ({config}: the revision decides).
CREATE OR REPLACE FUNCTION {schema}.search_config() RETURNS regconfig
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CAST({config} AS regconfig)
