-- 0017's, and without a start (NULL) the messages follow the interaction's last one. The caller holds
-- the interaction's row lock, so this statement, which runs after it was taken, sees a turn that
-- committed first.
CREATE OR REPLACE FUNCTION {schema}.append_messages(
    p_org_id text, p_interaction_id text, p_start int, p_roles text[], p_contents text[]
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    first int := p_start;
    written bigint;
BEGIN
    IF first IS NULL THEN
        SELECT coalesce(max(m.msg_position) + 1, 0) INTO first
        FROM {schema}.messages AS m
        WHERE m.org_id = p_org_id AND m.interaction_id = p_interaction_id;
    END IF;
    WITH appended AS (
        INSERT INTO {schema}.messages (org_id, interaction_id, msg_position, role, content)
        SELECT p_org_id, p_interaction_id, first + given.n - 1, given.role, given.content
        FROM unnest(p_roles, p_contents) WITH ORDINALITY AS given(role, content, n)
        RETURNING 1
    )
    SELECT count(*) INTO written FROM appended;
END
$body$
