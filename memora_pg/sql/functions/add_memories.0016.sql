-- mem0's history dates a memory's ADD event with the memory's creation time.
CREATE FUNCTION {schema}.add_memories(
    p_org_id text, p_collection text, p_user_id text, p_user_name text, p_agent_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_event_ids uuid[], p_actor_ids text[], p_roles text[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO {schema}.organizations (org_id, org_name) VALUES (p_org_id, p_collection)
    ON CONFLICT DO NOTHING;
    INSERT INTO {schema}.users (org_id, user_id, user_name) VALUES (p_org_id, p_user_id, p_user_name)
    ON CONFLICT DO NOTHING;
    PERFORM {schema}.write_memories(
        p_org_id, p_user_id, p_agent_id, NULL, p_at,
        p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at, false,
        '{}', '{}',
        '{}', '{}',
        p_audit_event_id, p_audit_user_id, p_audit_agent_id, p_audit_method, p_audit_ids
    );
    PERFORM {schema}.record_history(
        p_org_id, p_event_ids, p_memory_ids,
        array_fill(p_user_id, ARRAY[cardinality(p_memory_ids)]),
        array_fill('ADD'::text, ARRAY[cardinality(p_memory_ids)]),
        array_fill(NULL::text, ARRAY[cardinality(p_memory_ids)]),
        p_memories, p_actor_ids, p_roles, p_at
    );
END
$body$
