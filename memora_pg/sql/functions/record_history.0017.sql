CREATE OR REPLACE FUNCTION {schema}.record_history(
    p_org_id text, p_event_ids uuid[], p_memory_ids uuid[], p_user_ids text[], p_events text[],
    p_old_memories text[], p_new_memories text[], p_actor_ids text[], p_roles text[], p_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    written bigint;
BEGIN
    WITH recorded AS (
        INSERT INTO {schema}.memory_history
            (org_id, event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, is_deleted,
             created_at)
        SELECT p_org_id, given.event_id, given.memory_id, given.user_id, given.event, given.old_memory,
               given.new_memory, given.actor_id, given.role, given.event = 'DELETE', coalesce(p_at, now())
        FROM unnest(p_event_ids, p_memory_ids, p_user_ids, p_events, p_old_memories, p_new_memories, p_actor_ids,
                    p_roles)
             WITH ORDINALITY AS given(event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, n)
        ORDER BY given.n
        RETURNING 1
    )
    SELECT count(*) INTO written FROM recorded;
END
$body$
