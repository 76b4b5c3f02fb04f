"""Reporting views: current memories, contradiction chains, growth, activity per agent, orphans.

Every view leads with ``org_id`` and joins or correlates on it, so a filter on ``org_id``
reaches the tables' primary keys and indexes, and the views distribute with the tables on
Citus. docs/reporting.md describes each column and gives example queries.

A later migration that changes a column one of these views reads has to drop and recreate
the view around the change (PostgreSQL refuses to alter a column a view depends on).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from memora_pg.migrations import options

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# One token of a memory text per match, in order: a placeholder (memora-semantics §9.4: `user_` or
# `agent_`, any case, not preceded by a letter, digit or underscore, then [A-Za-z0-9-]+), a run of
# text that cannot start one, or a single character. Replacing tokens one by one is a single pass,
# as in memora_pg.graph.render: a name put in is never scanned again, and names are inserted
# literally (chained regexp_replace calls would rescan the first pass's names and read `\1` in them).
TOKENS = r"((?<![A-Za-z0-9_])(user_|agent_)[A-Za-z0-9-]+|[^ua]+|.)"

# Every memory that no newer version supersedes, with its names, its rendered text and its sources.
CURRENT_MEMORIES = f"""
CREATE VIEW {{schema}}.current_memories AS
SELECT m.org_id, m.user_id, owner.user_name, m.agent_id, agent.agent_label, m.interaction_id,
       m.memory_id, m.memory,
       CASE WHEN m.memory !~* '(user|agent)_' THEN m.memory ELSE (
           SELECT string_agg(
                      CASE lower(token.piece[2])
                          WHEN 'user_' THEN coalesce(owner.user_name, token.piece[1])
                          WHEN 'agent_' THEN coalesce(agent.agent_label, token.piece[1])
                          ELSE token.piece[1]
                      END, '' ORDER BY token.n)
           FROM regexp_matches(m.memory, '{TOKENS}', 'gi') WITH ORDINALITY AS token(piece, n)
       ) END AS rendered,
       m.obtained_at,
       (SELECT count(*) FROM {{schema}}.memory_sources AS source
        WHERE source.org_id = m.org_id AND source.memory_id = m.memory_id) AS source_count
FROM {{schema}}.memories AS m
LEFT JOIN {{schema}}.users AS owner ON owner.org_id = m.org_id AND owner.user_id = m.user_id
LEFT JOIN {{schema}}.agents AS agent ON agent.org_id = m.org_id AND agent.agent_id = m.agent_id
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.memory_updates AS newer
    WHERE newer.org_id = m.org_id AND newer.old_memory_id = m.memory_id
)
"""

# Each chain is walked from its root (a memory that was superseded and supersedes nothing) by a
# recursive CTE inside a lateral subquery, so a filter on org_id or user_id narrows the roots
# first and only the chains asked for are walked.
CONTRADICTION_CHAINS = """
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
"""

# Memories stored per day (UTC) and, on each day, the user's total so far across all agents.
MEMORY_GROWTH_DAILY = """
CREATE VIEW {schema}.memory_growth_daily AS
SELECT daily.org_id, daily.user_id, daily.agent_id, daily.day, daily.memories,
       CAST(sum(daily.memories) OVER (PARTITION BY daily.org_id, daily.user_id ORDER BY daily.day) AS bigint)
           AS user_cumulative
FROM (
    SELECT org_id, user_id, agent_id, CAST(obtained_at AT TIME ZONE 'UTC' AS date) AS day, count(*) AS memories
    FROM {schema}.memories
    GROUP BY org_id, user_id, agent_id, CAST(obtained_at AT TIME ZONE 'UTC' AS date)
) AS daily
"""

# Interactions by the agent of their latest save or update.
INTERACTIONS_PER_AGENT = """
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
"""

# Memories no message backs: their interaction's messages were truncated away (or they were saved
# without source positions), or they never had an interaction (written through the vector store).
ORPHANED_MEMORIES = """
CREATE VIEW {schema}.orphaned_memories AS
SELECT m.org_id, m.user_id, m.agent_id, m.interaction_id, m.memory_id, m.memory, m.obtained_at,
       CASE WHEN m.interaction_id IS NULL THEN 'standalone' ELSE 'no_sources' END AS reason
FROM {schema}.memories AS m
WHERE m.interaction_id IS NULL
   OR NOT EXISTS (
       SELECT 1 FROM {schema}.memory_sources AS source
       WHERE source.org_id = m.org_id AND source.memory_id = m.memory_id
   )
"""

VIEWS = {
    "current_memories": CURRENT_MEMORIES,
    "contradiction_chains": CONTRADICTION_CHAINS,
    "memory_growth_daily": MEMORY_GROWTH_DAILY,
    "interactions_per_agent": INTERACTIONS_PER_AGENT,
    "orphaned_memories": ORPHANED_MEMORIES,
}

# On PostgreSQL 15 and later the views check the querying role's privileges and row-level
# security policies instead of their owner's; PostgreSQL 14 has no such option.
INVOKER_RIGHTS = """
DO $$
BEGIN
    IF CAST(current_setting('server_version_num') AS int) >= 150000 THEN
        {statements}
    END IF;
END
$$
"""


def upgrade() -> None:
    schema = f'"{options().schema}"'
    for definition in VIEWS.values():
        op.execute(definition.replace("{schema}", schema))
    op.execute(
        INVOKER_RIGHTS.replace(
            "{statements}",
            "\n        ".join(f"ALTER VIEW {schema}.{name} SET (security_invoker = true);" for name in VIEWS),
        )
    )


def downgrade() -> None:
    schema = f'"{options().schema}"'
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW {schema}.{name}")
