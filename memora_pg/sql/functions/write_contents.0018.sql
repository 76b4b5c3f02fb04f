-- JSON entries of the AutoGen face under ids the caller chose (an import's: the same item gets the same id
-- on every run), the organization made on first sight: a new id is added, a stored one gets the new
-- content, metadata and vectors and keeps its time. The number of entries written.
CREATE FUNCTION {schema}.write_contents(
    p_org_id text, p_org_name text, p_content_ids uuid[], p_namespaces text[], p_contents text[],
    p_metadata text[], p_embeddings vector[], p_created_at timestamptz[]
) RETURNS TABLE (written bigint)
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM {schema}.ensure_owners(
        p_org_id => p_org_id, p_org_name => p_org_name, p_user_ids => '{}', p_user_names => '{}'
    );
    WITH stored AS (
        INSERT INTO {schema}.autogen_contents AS c
            (org_id, content_id, namespace, mime_type, content_json, metadata, embedding, search_text, created_at)
        SELECT p_org_id, given.content_id, given.namespace, 'application/json', CAST(given.content AS jsonb),
               coalesce(CAST(given.metadata AS jsonb), '{}'), given.embedding,
               CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.content) END,
               coalesce(given.created_at, now())
        FROM unnest(p_content_ids, p_namespaces, p_contents, p_metadata, p_embeddings, p_created_at)
             WITH ORDINALITY AS given(content_id, namespace, content, metadata, embedding, created_at, n)
        ORDER BY given.n
        ON CONFLICT (org_id, content_id) DO UPDATE SET
            content_json = excluded.content_json, metadata = excluded.metadata, embedding = excluded.embedding,
            search_text = excluded.search_text
        RETURNING 1
    )
    SELECT count(*) INTO written FROM stored;
    RETURN NEXT;
END
$body$
