-- One row per version. A span ends at the earlier of its successor's start and its expiry, and never
-- before it begins: a back-dated correction that starts earlier leaves an empty span.
CREATE VIEW {schema}.memory_timeline AS
SELECT m.org_id, m.user_id, m.agent_id, m.memory_id, m.memory,
       edge.old_memory_id AS supersedes,
       m.obtained_at AS valid_from,
       CASE WHEN m.valid_until IS NOT NULL OR m.expires_at IS NOT NULL
            THEN greatest(m.obtained_at, least(m.valid_until, m.expires_at)) END AS valid_to,
       coalesce(m.stored_at, m.obtained_at) AS system_from,
       m.superseded_at AS system_to,
       m.expires_at,
       m.valid_until IS NULL AND m.superseded_at IS NULL
           AND (m.expires_at IS NULL OR m.expires_at > now()) AS is_current
FROM {schema}.memories AS m
LEFT JOIN {schema}.memory_updates AS edge ON edge.org_id = m.org_id AND edge.new_memory_id = m.memory_id
