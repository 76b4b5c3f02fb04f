CREATE FUNCTION {schema}.append_messages(
    p_org_id text, p_interaction_id text, p_start int, p_roles text[], p_contents text[]
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO {schema}.messages (org_id, interaction_id, msg_position, role, content)
    SELECT p_org_id, p_interaction_id, p_start + given.n - 1, given.role, given.content
    FROM unnest(p_roles, p_contents) WITH ORDINALITY AS given(role, content, n);
END
$body$
