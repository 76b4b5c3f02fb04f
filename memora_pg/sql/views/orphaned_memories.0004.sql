-- Memories no message backs: their interaction's messages were truncated away (or they were saved
-- without source positions), or they never had an interaction (written through the vector store).
CREATE VIEW {schema}.orphaned_memories AS
SELECT m.org_id, m.user_id, m.agent_id, m.interaction_id, m.memory_id, m.memory, m.obtained_at,
       CASE WHEN m.interaction_id IS NULL THEN 'standalone' ELSE 'no_sources' END AS reason
FROM {schema}.memories AS m
WHERE m.interaction_id IS NULL
   OR NOT EXISTS (
       SELECT 1 FROM {schema}.memory_sources AS source
       WHERE source.org_id = m.org_id AND source.memory_id = m.memory_id
   )
