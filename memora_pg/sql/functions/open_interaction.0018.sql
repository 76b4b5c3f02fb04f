-- A turn of a conversation that the caller names (an Agent Framework session): the organization and the
-- user made on first use, the interaction created or its row locked and its time moved on, and the
-- turn's messages appended after the last one, with the call's audit row. An interaction of another
-- user with the same id is left alone, and nothing is written: opened is false.
CREATE FUNCTION {schema}.open_interaction(
    p_org_id text, p_org_name text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_roles text[], p_contents text[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (opened boolean)
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM {schema}.ensure_owners(
        p_org_id => p_org_id, p_org_name => p_org_name, p_user_ids => ARRAY[p_user_id], p_user_names => NULL
    );
    INSERT INTO {schema}.interactions AS i (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
    VALUES (p_org_id, p_interaction_id, p_user_id, p_agent_id, coalesce(p_at, now()), coalesce(p_at, now()))
    ON CONFLICT (org_id, interaction_id) DO UPDATE SET updated_at = excluded.updated_at
    WHERE i.user_id = excluded.user_id
    RETURNING true INTO opened;
    opened := coalesce(opened, false);
    IF opened THEN
        PERFORM {schema}.append_messages(
            p_org_id => p_org_id, p_interaction_id => p_interaction_id, p_start => NULL,
            p_roles => p_roles, p_contents => p_contents
        );
        PERFORM {schema}.record_audit(
            p_org_id => p_org_id, p_event_id => p_audit_event_id, p_user_id => p_audit_user_id,
            p_agent_id => p_audit_agent_id, p_method => p_audit_method, p_ids => p_audit_ids
        );
    END IF;
    RETURN NEXT;
END
$body$
