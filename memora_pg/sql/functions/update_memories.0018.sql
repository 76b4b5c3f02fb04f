-- Memories changed in place, their ids kept (the mem0-style update, an inferred add's UPDATE decisions).
-- Each memory gets its new text and vector (a NULL text keeps both), and the given metadata merged into
-- its own (top-level keys replaced). Where p_set_expiry says so, it gets its new expiry. Each change gets its
-- UPDATE history event, with the actor and role its metadata names, and the call gets its audit row
-- (naming, when the caller names none, the one user whose memories changed). A memory that is not
-- there is skipped: the rows returned are those changed, as they were before.
CREATE FUNCTION {schema}.update_memories(
    p_org_id text, p_memory_ids uuid[], p_memories text[], p_embeddings vector[], p_metadata text[],
    p_set_expiry boolean[], p_expires_at timestamptz[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (memory_id uuid, user_id text, old_memory text, old_metadata jsonb)
LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    ids uuid[];
    users text[];
    olds text[];
    old_metadata_of jsonb[];
    news text[];
    actors text[];
    roles text[];
BEGIN
    WITH before AS (
        SELECT m.memory_id, m.user_id, m.memory, m.metadata
        FROM {schema}.memories AS m
        WHERE m.org_id = p_org_id AND m.memory_id = ANY(p_memory_ids)
        FOR UPDATE
    ),
    changed AS (
        UPDATE {schema}.memories AS m
        SET memory = coalesce(given.memory, m.memory),
            embedding = CASE WHEN given.memory IS NULL THEN m.embedding ELSE given.embedding END,
            search_text = CASE
                WHEN given.memory IS NULL THEN m.search_text
                WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory)
            END,
            metadata = m.metadata || coalesce(CAST(given.metadata AS jsonb), '{}'),
            expires_at = CASE WHEN given.set_expiry THEN given.expires_at ELSE m.expires_at END
        FROM before,
             unnest(p_memory_ids, p_memories, p_embeddings, p_metadata, p_set_expiry, p_expires_at)
             WITH ORDINALITY AS given(memory_id, memory, embedding, metadata, set_expiry, expires_at, n)
        WHERE m.org_id = p_org_id AND m.memory_id = before.memory_id AND given.memory_id = before.memory_id
        RETURNING given.n, m.memory_id, before.user_id, before.memory AS old_memory,
                  before.metadata AS old_metadata, m.memory AS new_memory, m.metadata AS new_metadata
    )
    SELECT coalesce(array_agg(c.memory_id ORDER BY c.n), '{}'), array_agg(c.user_id ORDER BY c.n),
           array_agg(c.old_memory ORDER BY c.n), array_agg(c.old_metadata ORDER BY c.n),
           array_agg(c.new_memory ORDER BY c.n),
           array_agg(CASE WHEN jsonb_typeof(c.new_metadata -> 'actor_id') = 'string'
                          THEN c.new_metadata ->> 'actor_id' END ORDER BY c.n),
           array_agg(CASE WHEN jsonb_typeof(c.new_metadata -> 'role') = 'string'
                          THEN c.new_metadata ->> 'role' END ORDER BY c.n)
    INTO ids, users, olds, old_metadata_of, news, actors, roles
    FROM changed AS c;

    IF cardinality(ids) > 0 THEN
        PERFORM {schema}.record_history(
            p_org_id => p_org_id, p_event_ids => ARRAY(SELECT gen_random_uuid() FROM unnest(ids)),
            p_memory_ids => ids, p_user_ids => users, p_events => array_fill('UPDATE'::text, ARRAY[cardinality(ids)]),
            p_old_memories => olds, p_new_memories => news, p_actor_ids => actors, p_roles => roles,
            p_at => NULL, p_deleted => NULL
        );
        PERFORM {schema}.record_audit(
            p_org_id => p_org_id, p_event_id => p_audit_event_id,
            p_user_id => coalesce(p_audit_user_id, CASE WHEN users <@ ARRAY[users[1]] THEN users[1] END),
            p_agent_id => p_audit_agent_id, p_method => p_audit_method, p_ids => p_audit_ids
        );
    END IF;
    RETURN QUERY SELECT * FROM unnest(ids, users, olds, old_metadata_of);
END
$body$
