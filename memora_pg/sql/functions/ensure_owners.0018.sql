-- The organization and the users a write needs, made on first sight and never changed: a mem0-style
-- collection's, an Agent Framework session's, an import's. A user without a name is named by its id.
CREATE FUNCTION {schema}.ensure_owners(
    p_org_id text, p_org_name text, p_user_ids text[], p_user_names text[]
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    written bigint;
BEGIN
    INSERT INTO {schema}.organizations (org_id, org_name) VALUES (p_org_id, p_org_name)
    ON CONFLICT DO NOTHING;
    WITH made AS (
        INSERT INTO {schema}.users (org_id, user_id, user_name)
        SELECT DISTINCT ON (given.user_id) p_org_id, given.user_id, coalesce(given.user_name, given.user_id)
        FROM unnest(p_user_ids, p_user_names) AS given(user_id, user_name)
        WHERE given.user_id IS NOT NULL
        ORDER BY given.user_id
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) INTO written FROM made;
END
$body$
