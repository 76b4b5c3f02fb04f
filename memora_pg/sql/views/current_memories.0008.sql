-- 0004's view without the expired memories: the reporting view agrees with the stores.
CREATE OR REPLACE VIEW {schema}.current_memories AS
SELECT m.org_id, m.user_id, owner.user_name, m.agent_id, agent.agent_label, m.interaction_id,
       m.memory_id, m.memory,
       CASE WHEN m.memory !~* '(user|agent)_' THEN m.memory ELSE (
           SELECT string_agg(
                      CASE lower(token.piece[2])
                          WHEN 'user_' THEN coalesce(owner.user_name, token.piece[1])
                          WHEN 'agent_' THEN coalesce(agent.agent_label, token.piece[1])
                          ELSE token.piece[1]
                      END, '' ORDER BY token.n)
           FROM regexp_matches(m.memory, '((?<![A-Za-z0-9_])(user_|agent_)[A-Za-z0-9-]+|[^ua]+|.)', 'gi')
                WITH ORDINALITY AS token(piece, n)
       ) END AS rendered,
       m.obtained_at,
       (SELECT count(*) FROM {schema}.memory_sources AS source
        WHERE source.org_id = m.org_id AND source.memory_id = m.memory_id) AS source_count
FROM {schema}.memories AS m
LEFT JOIN {schema}.users AS owner ON owner.org_id = m.org_id AND owner.user_id = m.user_id
LEFT JOIN {schema}.agents AS agent ON agent.org_id = m.org_id AND agent.agent_id = m.agent_id
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.memory_updates AS newer
    WHERE newer.org_id = m.org_id AND newer.old_memory_id = m.memory_id
)
AND (m.expires_at IS NULL OR m.expires_at > now())
