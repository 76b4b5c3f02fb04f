-- 0016's, its organization and user made by ensure_owners, each function called by name.
-- mem0's history dates a memory's ADD event with the memory's creation time.
CREATE OR REPLACE FUNCTION {schema}.add_memories(
    p_org_id text, p_collection text, p_user_id text, p_user_name text, p_agent_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_event_ids uuid[], p_actor_ids text[], p_roles text[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    added int := cardinality(p_memory_ids);
BEGIN
    PERFORM {schema}.ensure_owners(
        p_org_id => p_org_id, p_org_name => p_collection, p_user_ids => ARRAY[p_user_id],
        p_user_names => ARRAY[p_user_name]
    );
    PERFORM {schema}.write_memories(
        p_org_id => p_org_id, p_user_id => p_user_id, p_agent_id => p_agent_id, p_interaction_id => NULL,
        p_at => p_at, p_memory_ids => p_memory_ids, p_memories => p_memories, p_metadata => p_metadata,
        p_embeddings => p_embeddings, p_expires_at => p_expires_at, p_existing => 'refuse',
        p_source_memory_ids => '{}', p_source_positions => '{}', p_new_ids => '{}', p_old_ids => '{}',
        p_audit_event_id => p_audit_event_id, p_audit_user_id => p_audit_user_id,
        p_audit_agent_id => p_audit_agent_id, p_audit_method => p_audit_method, p_audit_ids => p_audit_ids
    );
    PERFORM {schema}.record_history(
        p_org_id => p_org_id, p_event_ids => p_event_ids, p_memory_ids => p_memory_ids,
        p_user_ids => array_fill(p_user_id, ARRAY[added]), p_events => array_fill('ADD'::text, ARRAY[added]),
        p_old_memories => array_fill(NULL::text, ARRAY[added]), p_new_memories => p_memories,
        p_actor_ids => p_actor_ids, p_roles => p_roles, p_at => array_fill(p_at, ARRAY[added])
    );
END
$body$
