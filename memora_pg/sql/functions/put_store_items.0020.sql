-- LangGraph store items written by one batch (memora_pg.langgraph), or brought over from another store
-- (memora-pg import --from langgraph): each (namespace, key) given once. Its current version, if any, is
-- closed and kept as history; a value makes the new current version, which keeps the item's creation time; a
-- NULL value is a delete, which closes it only. The organization is made on first sight. How many versions it
-- closed and how many it added.
--
-- The times are now, unless an import gives its source's: p_created_at, p_updated_at and p_expires_at (NULL,
-- or an element NULL, for now and what follows from it). A version is closed when the next one begins, and
-- never before it began itself.
CREATE FUNCTION {schema}.put_store_items(
    p_org_id text, p_org_name text, p_namespaces text[], p_keys text[], p_values text[], p_embeddings vector[],
    p_texts text[], p_ttl_ms bigint[], p_created_at timestamptz[], p_updated_at timestamptz[],
    p_expires_at timestamptz[]
) RETURNS TABLE (closed bigint, added bigint)
LANGUAGE plpgsql AS $body$
DECLARE
    -- The transaction's time, as a value: Citus takes no non-immutable function inside a COALESCE of a
    -- distributed UPDATE.
    at_now CONSTANT timestamptz := now();
    closed_namespaces text[];
    closed_keys text[];
    closed_created_at timestamptz[];
BEGIN
    PERFORM {schema}.ensure_owners(
        p_org_id => p_org_id, p_org_name => p_org_name, p_user_ids => '{}', p_user_names => '{}'
    );
    -- Concurrent writers of one key take turns, locked in key order so that two batches never deadlock: the
    -- second closes the version the first added, rather than adding a second current one.
    PERFORM pg_advisory_xact_lock(hashtextextended(p_org_id || '/' || given.namespace || '/' || given.key, 0))
    FROM unnest(p_namespaces, p_keys) AS given(namespace, key)
    ORDER BY given.namespace, given.key;
    -- Closed first, in a statement of its own: the new version may only be current once the old one is not.
    -- What each closed version keeps for the next one: the item's creation time.
    WITH replaced AS (
        UPDATE {schema}.store_items AS item
        SET superseded_at = greatest(item.updated_at, coalesce(given.updated_at, at_now))
        FROM unnest(p_namespaces, p_keys, p_updated_at) AS given(namespace, key, updated_at)
        WHERE item.org_id = p_org_id AND item.namespace = given.namespace AND item.key = given.key
          AND item.superseded_at IS NULL
        RETURNING item.namespace, item.key, item.created_at
    )
    SELECT count(*), coalesce(array_agg(namespace), '{}'), coalesce(array_agg(key), '{}'),
           coalesce(array_agg(created_at), '{}')
    INTO closed, closed_namespaces, closed_keys, closed_created_at
    FROM replaced;
    INSERT INTO {schema}.store_items AS item
        (org_id, item_id, namespace, key, value, created_at, updated_at, expires_at, ttl_ms, embedding,
         indexed_text, search_text)
    SELECT p_org_id, gen_random_uuid(), given.namespace, given.key, CAST(given.value AS jsonb),
           coalesce(given.created_at, earlier.created_at, at_now), coalesce(given.updated_at, at_now),
           coalesce(given.expires_at, at_now + given.ttl_ms * interval '1 millisecond'), given.ttl_ms,
           given.embedding, CASE WHEN given.embedding IS NOT NULL THEN given.text END,
           CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.text) END
    FROM unnest(p_namespaces, p_keys, p_values, p_embeddings, p_texts, p_ttl_ms, p_created_at, p_updated_at,
                p_expires_at)
         WITH ORDINALITY AS given(namespace, key, value, embedding, text, ttl_ms, created_at, updated_at,
                                  expires_at, n)
    LEFT JOIN unnest(closed_namespaces, closed_keys, closed_created_at) AS earlier(namespace, key, created_at)
           ON earlier.namespace = given.namespace AND earlier.key = given.key
    WHERE given.value IS NOT NULL
    ORDER BY given.n;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN NEXT;
END
$body$
