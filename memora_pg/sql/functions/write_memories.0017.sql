-- 0016's rules, each insert with a RETURNING whose rows are only counted (revision 0017: Citus never turns
-- it into a COPY, which row-level security refuses). A stored id (``p_upsert``) is read first, so the new rows
-- need no ``ON CONFLICT``.
CREATE OR REPLACE FUNCTION {schema}.write_memories(
    p_org_id text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_upsert boolean,
    p_source_memory_ids uuid[], p_source_positions int[],
    p_new_ids uuid[], p_old_ids uuid[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (linked uuid[])
LANGUAGE plpgsql AS $body$
DECLARE
    own uuid[] := '{}';
    others uuid[] := '{}';
    done uuid;
    written bigint;
BEGIN
    IF p_upsert THEN
        SELECT coalesce(array_agg(m.memory_id) FILTER (WHERE m.user_id = p_user_id), '{}'),
               coalesce(array_agg(m.memory_id) FILTER (WHERE m.user_id <> p_user_id), '{}')
        INTO own, others
        FROM {schema}.memories AS m
        WHERE m.org_id = p_org_id AND m.memory_id = ANY(p_memory_ids);
        IF cardinality(others) > 0 THEN
            RAISE unique_violation USING CONSTRAINT = 'pk_memories',
                MESSAGE = format('memories %s belong to another user of the organization', others);
        END IF;
    END IF;
    IF cardinality(own) > 0 THEN
        UPDATE {schema}.memories AS m
        SET memory = given.memory, agent_id = p_agent_id, obtained_at = p_at, embedding = given.embedding,
            search_text = CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory) END
        FROM unnest(p_memory_ids, p_memories, p_embeddings) AS given(memory_id, memory, embedding)
        WHERE m.org_id = p_org_id AND m.memory_id = given.memory_id AND m.memory_id = ANY(own);
    END IF;

    WITH added AS (
        INSERT INTO {schema}.memories
            (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, metadata,
             embedding, search_text, expires_at)
        SELECT p_org_id, given.memory_id, p_user_id, p_agent_id, p_interaction_id, given.memory, p_at,
               coalesce(CAST(given.metadata AS jsonb), '{}'), given.embedding,
               CASE WHEN given.embedding IS NOT NULL THEN {schema}.to_search_text(given.memory) END,
               given.expires_at
        FROM unnest(p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at)
             WITH ORDINALITY AS given(memory_id, memory, metadata, embedding, expires_at, n)
        WHERE given.memory_id <> ALL(own)
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
        PERFORM {schema}.clock_superseded(p_org_id, linked);
    END IF;

    IF p_audit_method IS NOT NULL THEN
        INSERT INTO {schema}.audit_log (org_id, event_id, user_id, agent_id, method, ids)
        VALUES (p_org_id, p_audit_event_id, p_audit_user_id, p_audit_agent_id, p_audit_method, p_audit_ids);
    END IF;
    RETURN NEXT;
END
$body$
