-- A memory's full-text vector.
CREATE OR REPLACE FUNCTION {schema}.to_search_text(memory text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_tsvector({schema}.search_config(), memory)
