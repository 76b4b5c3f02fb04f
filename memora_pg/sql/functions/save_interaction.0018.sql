-- 0016's, each function it calls called by name.
CREATE OR REPLACE FUNCTION {schema}.save_interaction(
    p_org_id text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_roles text[], p_contents text[],
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_source_memory_ids uuid[], p_source_positions int[],
    p_new_ids uuid[], p_old_ids uuid[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (user_exists boolean, agent_exists boolean, linked uuid[])
LANGUAGE plpgsql AS $body$
BEGIN
    SELECT EXISTS (SELECT FROM {schema}.users WHERE org_id = p_org_id AND user_id = p_user_id),
           EXISTS (SELECT FROM {schema}.agents WHERE org_id = p_org_id AND agent_id = p_agent_id)
    INTO user_exists, agent_exists;
    linked := '{}';
    IF user_exists AND agent_exists THEN
        INSERT INTO {schema}.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
        VALUES (p_org_id, p_interaction_id, p_user_id, p_agent_id, p_at, p_at);
        PERFORM {schema}.append_messages(
            p_org_id => p_org_id, p_interaction_id => p_interaction_id, p_start => 0,
            p_roles => p_roles, p_contents => p_contents
        );
        SELECT w.linked INTO linked
        FROM {schema}.write_memories(
            p_org_id => p_org_id, p_user_id => p_user_id, p_agent_id => p_agent_id,
            p_interaction_id => p_interaction_id, p_at => p_at, p_memory_ids => p_memory_ids,
            p_memories => p_memories, p_metadata => p_metadata, p_embeddings => p_embeddings,
            p_expires_at => p_expires_at, p_existing => 'refuse',
            p_source_memory_ids => p_source_memory_ids, p_source_positions => p_source_positions,
            p_new_ids => p_new_ids, p_old_ids => p_old_ids,
            p_audit_event_id => p_audit_event_id, p_audit_user_id => p_audit_user_id,
            p_audit_agent_id => p_audit_agent_id, p_audit_method => p_audit_method, p_audit_ids => p_audit_ids
        ) AS w;
    END IF;
    RETURN NEXT;
END
$body$
