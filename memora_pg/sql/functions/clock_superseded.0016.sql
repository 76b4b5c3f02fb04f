-- The versions that new links supersede get their clocks' ends: the target, and the versions before
-- it whose valid time the new version ends earlier (a back-dated correction).
CREATE FUNCTION {schema}.clock_superseded(p_org_id text, p_linked uuid[]) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    WITH RECURSIVE superseded(memory_id, valid_from, stored_at) AS (
        SELECT edge.old_memory_id, new.obtained_at, coalesce(new.stored_at, new.obtained_at)
        FROM {schema}.memory_updates AS edge
        JOIN {schema}.memories AS new ON new.org_id = p_org_id AND new.memory_id = edge.new_memory_id
        WHERE edge.org_id = p_org_id AND edge.new_memory_id = ANY(p_linked)
      UNION
        SELECT edge.old_memory_id, superseded.valid_from, superseded.stored_at
        FROM superseded
        JOIN {schema}.memory_updates AS edge
          ON edge.org_id = p_org_id AND edge.new_memory_id = superseded.memory_id
        JOIN {schema}.memories AS earlier
          ON earlier.org_id = p_org_id AND earlier.memory_id = edge.old_memory_id
        WHERE earlier.valid_until IS NULL OR earlier.valid_until > superseded.valid_from
    )
    UPDATE {schema}.memories AS m
    SET valid_until = least(m.valid_until, ends.valid_from), superseded_at = least(m.superseded_at, ends.stored_at)
    FROM (
        SELECT memory_id, min(valid_from) AS valid_from, min(stored_at) AS stored_at FROM superseded GROUP BY memory_id
    ) AS ends
    WHERE m.org_id = p_org_id AND m.memory_id = ends.memory_id;
END
$body$
