-- Memories stored per day (UTC) and, on each day, the user's total so far across all agents.
CREATE VIEW {schema}.memory_growth_daily AS
SELECT daily.org_id, daily.user_id, daily.agent_id, daily.day, daily.memories,
       CAST(sum(daily.memories) OVER (PARTITION BY daily.org_id, daily.user_id ORDER BY daily.day) AS bigint)
           AS user_cumulative
FROM (
    SELECT org_id, user_id, agent_id, CAST(obtained_at AT TIME ZONE 'UTC' AS date) AS day, count(*) AS memories
    FROM {schema}.memories
    GROUP BY org_id, user_id, agent_id, CAST(obtained_at AT TIME ZONE 'UTC' AS date)
) AS daily
