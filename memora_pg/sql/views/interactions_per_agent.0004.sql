-- Interactions by the agent of their latest save or update.
CREATE VIEW {schema}.interactions_per_agent AS
SELECT i.org_id, i.agent_id, agent.agent_label,
       count(*) AS interactions,
       count(DISTINCT i.user_id) AS users,
       CAST(sum(counted.messages) AS bigint) AS messages,
       round(avg(counted.messages), 2) AS messages_per_interaction,
       max(i.updated_at) AS last_activity
FROM {schema}.interactions AS i
CROSS JOIN LATERAL (
    SELECT count(*) AS messages FROM {schema}.messages AS g
    WHERE g.org_id = i.org_id AND g.interaction_id = i.interaction_id
) AS counted
LEFT JOIN {schema}.agents AS agent ON agent.org_id = i.org_id AND agent.agent_id = i.agent_id
GROUP BY i.org_id, i.agent_id, agent.agent_label
