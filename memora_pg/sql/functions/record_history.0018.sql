-- 0017's events, each at its own time (p_at; NULL: now) and, where given, with its own deleted flag
-- (p_deleted; NULL: a DELETE event is a deletion). An event already recorded is left as it is, so an
-- import run again adds only what is new; the number of events recorded.
CREATE FUNCTION {schema}.record_history(
    p_org_id text, p_event_ids uuid[], p_memory_ids uuid[], p_user_ids text[], p_events text[],
    p_old_memories text[], p_new_memories text[], p_actor_ids text[], p_roles text[], p_at timestamptz[],
    p_deleted boolean[] DEFAULT NULL
) RETURNS TABLE (recorded bigint)
LANGUAGE plpgsql AS $body$
BEGIN
    WITH written AS (
        INSERT INTO {schema}.memory_history
            (org_id, event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, is_deleted,
             created_at)
        SELECT p_org_id, given.event_id, given.memory_id, given.user_id, given.event, given.old_memory,
               given.new_memory, given.actor_id, given.role, coalesce(given.deleted, given.event = 'DELETE'),
               coalesce(given.at, now())
        FROM unnest(p_event_ids, p_memory_ids, p_user_ids, p_events, p_old_memories, p_new_memories, p_actor_ids,
                    p_roles, p_at, p_deleted)
             WITH ORDINALITY
             AS given(event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, at, deleted, n)
        ORDER BY given.n
        ON CONFLICT (org_id, event_id) DO NOTHING
        RETURNING 1
    )
    SELECT count(*) INTO recorded FROM written;
    RETURN NEXT;
END
$body$
