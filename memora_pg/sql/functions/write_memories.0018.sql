-- 0017's rules, with an id that is stored already treated as p_existing says:
--   'refuse'  the rows are new (a save, an add): a stored id is a unique violation;
--   'upsert'  the vector store's: the user's own memory gets the new text, vector, agent and time, and an
--             id of another user of the organization is refused;
--   'rewrite' an import's: the stored memory gets the row's text, vector, metadata and expiry, and the
--             row's own user and agent where it names them; its times stay.
-- A row may name its own user, agent and time (p_user_ids, p_agent_ids, p_obtained_at; an import's
-- memories of many users, known since their source created them: that is when they were stored too);
-- without them, the call's.
CREATE FUNCTION {schema}.write_memories(
    p_org_id text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_existing text,
    p_source_memory_ids uuid[], p_source_positions int[],
    p_new_ids uuid[], p_old_ids uuid[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb,
    p_user_ids text[] DEFAULT NULL, p_agent_ids text[] DEFAULT NULL, p_obtained_at timestamptz[] DEFAULT NULL
) RETURNS TABLE (linked uuid[])
LANGUAGE plpgsql AS $body$
DECLARE
    stored uuid[] := '{}';
    others uuid[] := '{}';
    done uuid;
    written bigint;
BEGIN
    IF p_existing IS NULL OR p_existing NOT IN ('refuse', 'upsert', 'rewrite') THEN
        RAISE invalid_parameter_value
            USING MESSAGE = format('p_existing is refuse, upsert or rewrite, not %L', p_existing);
    END IF;
    IF p_existing <> 'refuse' THEN
        SELECT coalesce(array_agg(m.memory_id), '{}'),
               coalesce(array_agg(m.memory_id) FILTER (WHERE m.user_id <> p_user_id), '{}')
        INTO stored, others
        FROM {schema}.memories AS m
        WHERE m.org_id = p_org_id AND m.memory_id = ANY(p_memory_ids);
    END IF;
    IF p_existing = 'upsert' AND cardinality(others) > 0 THEN
        RAISE unique_violation USING CONSTRAINT = 'pk_memories',
            MESSAGE = format('memories %s belong to another user of the organization', others);
    END IF;
    IF p_existing = 'upsert' AND cardinality(stored) > 0 THEN
        UPDATE {schema}.memories AS m
        SET memory = given.memory, agent_id = p_agent_id, obtained_at = p_at, embedding = given.embedding,
            search_text = CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory) END
        FROM unnest(p_memory_ids, p_memories, p_embeddings) AS given(memory_id, memory, embedding)
        WHERE m.org_id = p_org_id AND m.memory_id = given.memory_id AND m.memory_id = ANY(stored);
    ELSIF p_existing = 'rewrite' AND cardinality(stored) > 0 THEN
        UPDATE {schema}.memories AS m
        SET memory = given.memory, user_id = coalesce(given.user_id, m.user_id),
            agent_id = coalesce(given.agent_id, m.agent_id), metadata = coalesce(CAST(given.metadata AS jsonb), '{}'),
            embedding = given.embedding, expires_at = given.expires_at,
            search_text = CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory) END
        FROM unnest(p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at, p_user_ids, p_agent_ids)
             AS given(memory_id, memory, metadata, embedding, expires_at, user_id, agent_id)
        WHERE m.org_id = p_org_id AND m.memory_id = given.memory_id AND m.memory_id = ANY(stored);
    END IF;

    WITH added AS (
        INSERT INTO {schema}.memories
            (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, stored_at, metadata,
             embedding, search_text, expires_at)
        SELECT p_org_id, given.memory_id, coalesce(given.user_id, p_user_id), coalesce(given.agent_id, p_agent_id),
               p_interaction_id, given.memory, coalesce(given.obtained_at, p_at), coalesce(given.obtained_at, now()),
               coalesce(CAST(given.metadata AS jsonb), '{}'), given.embedding,
               CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory) END,
               given.expires_at
        FROM unnest(p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at, p_user_ids, p_agent_ids,
                    p_obtained_at)
             WITH ORDINALITY AS given(memory_id, memory, metadata, embedding, expires_at, user_id, agent_id,
                                      obtained_at, n)
        WHERE given.memory_id <> ALL(stored)
        ORDER BY given.n
        RETURNING 1
    )
    SELECT count(*) INTO written FROM added;

    WITH sourced AS (
        INSERT INTO {schema}.memory_sources (org_id, memory_id, interaction_id, msg_position)
        SELECT p_org_id, given.memory_id, p_interaction_id, given.msg_position
        FROM unnest(p_source_memory_ids, p_source_positions) AS given(memory_id, msg_position)
        RETURNING 1
    )
    SELECT count(*) INTO written FROM sourced;

    -- Each contrary memory supersedes a memory the same user had before this call.
    linked := '{}';
    IF cardinality(p_new_ids) > 0 THEN
        FOR done IN
            INSERT INTO {schema}.memory_updates (org_id, new_memory_id, old_memory_id)
            SELECT p_org_id, contrary.new_id, old.memory_id
            FROM unnest(p_new_ids, p_old_ids) AS contrary(new_id, old_id)
            JOIN {schema}.memories AS old
              ON old.org_id = p_org_id AND old.user_id = p_user_id AND old.memory_id = contrary.old_id
             AND old.memory_id <> ALL(p_memory_ids)
            RETURNING new_memory_id
        LOOP
            linked := linked || done;
        END LOOP;
        PERFORM {schema}.clock_superseded(p_org_id => p_org_id, p_linked => linked);
    END IF;

    PERFORM {schema}.record_audit(
        p_org_id => p_org_id, p_event_id => p_audit_event_id, p_user_id => p_audit_user_id,
        p_agent_id => p_audit_agent_id, p_method => p_audit_method, p_ids => p_audit_ids
    );
    RETURN NEXT;
END
$body$
