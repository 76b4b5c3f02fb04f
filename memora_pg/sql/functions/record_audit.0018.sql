-- The audit row of a public call; none without a method (auditing is off).
CREATE FUNCTION {schema}.record_audit(
    p_org_id text, p_event_id uuid, p_user_id text, p_agent_id text, p_method text, p_ids jsonb
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    IF p_method IS NOT NULL THEN
        INSERT INTO {schema}.audit_log (org_id, event_id, user_id, agent_id, method, ids)
        VALUES (p_org_id, p_event_id, p_user_id, p_agent_id, p_method, p_ids);
    END IF;
END
$body$
