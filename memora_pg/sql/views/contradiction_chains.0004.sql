-- Each chain walked from its root (a memory superseded that supersedes nothing) by a recursive CTE in a
-- lateral subquery, so that a filter on org_id or user_id narrows the roots first.
CREATE VIEW {schema}.contradiction_chains AS
SELECT root.org_id, root.user_id, root.memory_id AS root_memory_id, chain.memory_id, chain.previous_memory_id,
       chain.depth, chain.memory, chain.obtained_at, chain.is_current, chain.current_memory_ids
FROM (
    SELECT DISTINCT edge.org_id, oldest.user_id, edge.old_memory_id AS memory_id
    FROM {schema}.memory_updates AS edge
    JOIN {schema}.memories AS oldest ON oldest.org_id = edge.org_id AND oldest.memory_id = edge.old_memory_id
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.memory_updates AS before
        WHERE before.org_id = edge.org_id AND before.new_memory_id = edge.old_memory_id
    )
) AS root
CROSS JOIN LATERAL (
    WITH RECURSIVE walk(memory_id, previous_memory_id, depth, path) AS (
        SELECT root.memory_id, CAST(NULL AS uuid), 0, ARRAY[root.memory_id]
      UNION ALL
        SELECT edge.new_memory_id, edge.old_memory_id, walk.depth + 1, walk.path || edge.new_memory_id
        FROM walk
        JOIN {schema}.memory_updates AS edge ON edge.org_id = root.org_id AND edge.old_memory_id = walk.memory_id
    ), version AS (
        SELECT walk.memory_id, walk.previous_memory_id, walk.depth, walk.path, m.memory, m.obtained_at, m.seq,
               NOT EXISTS (SELECT 1 FROM walk AS next WHERE next.previous_memory_id = walk.memory_id) AS is_current
        FROM walk
        JOIN {schema}.memories AS m ON m.org_id = root.org_id AND m.memory_id = walk.memory_id
    )
    -- the current versions of a memory are the newest versions whose path passes through it (§8.2)
    SELECT version.memory_id, version.previous_memory_id, version.depth, version.memory, version.obtained_at,
           version.is_current,
           (SELECT array_agg(newest.memory_id ORDER BY newest.obtained_at DESC, newest.seq DESC)
            FROM version AS newest
            WHERE newest.is_current AND version.memory_id = ANY(newest.path)) AS current_memory_ids
    FROM version
) AS chain
