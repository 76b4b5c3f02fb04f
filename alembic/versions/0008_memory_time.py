"""Memory through time: two clocks per version, kept on the memory row, and SQL to read them.

*Valid time* is when a fact was true: from ``obtained_at`` (the interaction it came from) until
``valid_until`` (the earliest ``obtained_at`` of any later version in its chain) or
``expires_at`` (an expiry, mem0's ``expiration_date``), whichever comes first. *System time*
is when memora_pg knew it: from ``stored_at`` until ``superseded_at`` (the earliest
``stored_at`` of any later version). The writers keep ``valid_until`` and ``superseded_at``
up to date when they link a version and when a delete repairs a chain; this revision fills
them in for the chains already stored.

A row stored before this revision has no ``stored_at`` (adding it to every row would rewrite
every row and its HNSW entry); its system time is taken to start at its ``obtained_at``.

The rule "current at a time" lives in two functions that PostgreSQL inlines into the
statements calling them, so their conditions reach the indexes:
``current_in_valid_time(...)`` and ``current_in_system_time(...)``. On top of them, for reports:
``memories_as_of(at, clock)`` (the versions current at ``at``) and the ``memory_timeline`` view
(one row per version, with both clocks).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy import text

from alembic import context, op
from memora_pg.migrations import options

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_IN_VALID_TIME = """
CREATE FUNCTION {schema}.current_in_valid_time(
    obtained_at timestamptz, valid_until timestamptz, expires_at timestamptz, at timestamptz
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN obtained_at <= at AND (valid_until IS NULL OR valid_until > at) AND (expires_at IS NULL OR expires_at > at)
"""

CURRENT_IN_SYSTEM_TIME = """
CREATE FUNCTION {schema}.current_in_system_time(
    obtained_at timestamptz, stored_at timestamptz, superseded_at timestamptz, expires_at timestamptz,
    at timestamptz
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(stored_at, obtained_at) <= at
   AND (superseded_at IS NULL OR superseded_at > at)
   AND (expires_at IS NULL OR expires_at > at)
"""

# A clock's name, checked: constant-folded away when the name is a constant.
CHECKED_CLOCK = """
CREATE FUNCTION {schema}.checked_clock(clock text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF clock IS NULL OR clock NOT IN ('valid', 'system') THEN
        RAISE EXCEPTION 'clock must be ''valid'' or ''system'', not %', coalesce(quote_literal(clock), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN clock;
END
$$
"""

# The set-returning function is written with a plain body (not RETURN), which PostgreSQL can
# inline into the calling query: a condition on org_id and user_id then reaches the btree.
MEMORIES_AS_OF = """
CREATE FUNCTION {schema}.memories_as_of(at timestamptz, clock text DEFAULT 'valid')
RETURNS SETOF {schema}.memories
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT m.* FROM {schema}.memories AS m
    WHERE CASE {schema}.checked_clock(clock)
              WHEN 'system' THEN {schema}.current_in_system_time(
                  m.obtained_at, m.stored_at, m.superseded_at, m.expires_at, at)
              ELSE {schema}.current_in_valid_time(m.obtained_at, m.valid_until, m.expires_at, at)
          END
$$
"""

# On Citus a SQL function whose body reads a distributed table cannot be planned (0A000): there the
# same function is PL/pgSQL, whose query Citus plans on the coordinator as any other.
MEMORIES_AS_OF_ON_CITUS = """
CREATE FUNCTION {schema}.memories_as_of(at timestamptz, clock text DEFAULT 'valid')
RETURNS SETOF {schema}.memories
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    IF {schema}.checked_clock(clock) = 'system' THEN
        RETURN QUERY SELECT m.* FROM {schema}.memories AS m
        WHERE {schema}.current_in_system_time(m.obtained_at, m.stored_at, m.superseded_at, m.expires_at, at);
    ELSE
        RETURN QUERY SELECT m.* FROM {schema}.memories AS m
        WHERE {schema}.current_in_valid_time(m.obtained_at, m.valid_until, m.expires_at, at);
    END IF;
END
$$
"""


# The ``current_memories`` view as revision 0004 made it, written out here: a revision keeps the text it
# ran, whatever later revisions of another file do.
TOKENS = r"((?<![A-Za-z0-9_])(user_|agent_)[A-Za-z0-9-]+|[^ua]+|.)"
CURRENT_MEMORIES = f"""
CREATE OR REPLACE VIEW {{schema}}.current_memories AS
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
){{unexpired}}
"""


def _current_memories(schema: str, *, unexpired: bool) -> str:
    """The ``current_memories`` view of revision 0004, and with ``unexpired`` without expired memories."""
    condition = "\nAND (m.expires_at IS NULL OR m.expires_at > now())" if unexpired else ""
    return CURRENT_MEMORIES.replace("{schema}", schema).replace("{unexpired}", condition)


FILLFACTOR = 90

# Whether the memories table is distributed already (an upgrade of a cluster in place): then the function
# must be the PL/pgSQL form. Before distribution it is the SQL form, and `memora-pg db distribute` swaps it.
CITUS_CATALOG = "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"
MEMORIES_DISTRIBUTED = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = to_regclass(:t))"


def _memories_distributed(quoted: str) -> bool:
    if context.is_offline_mode():
        return False
    bind = op.get_bind()
    return bool(bind.scalar(text(CITUS_CATALOG))) and bool(
        bind.scalar(text(MEMORIES_DISTRIBUTED), {"t": f"{quoted}.memories"})
    )


# One row per version. A span ends at the earlier of its successor's start and its expiry, and
# never before it begins: a back-dated correction that starts earlier leaves an empty span.
MEMORY_TIMELINE = """
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
"""

INVOKER_RIGHTS = """
DO $$
BEGIN
    IF CAST(current_setting('server_version_num') AS int) >= 150000 THEN
        ALTER VIEW {schema}.{view} SET (security_invoker = true);
    END IF;
END
$$
"""

# The chains already stored: each version's clocks end at the earliest start among its later versions.
CLOCKS_OF_CHAINS = """
WITH RECURSIVE later(org_id, ancestor, memory_id) AS (
    SELECT org_id, old_memory_id, new_memory_id FROM {schema}.memory_updates AS edge WHERE true {pin:edge}
  UNION
    SELECT later.org_id, later.ancestor, edge.new_memory_id
    FROM later JOIN {schema}.memory_updates AS edge
      ON edge.org_id = later.org_id AND edge.old_memory_id = later.memory_id {pin:edge}
), clocks AS (
    SELECT later.org_id, later.ancestor AS memory_id, min(m.obtained_at) AS valid_until,
           min(coalesce(m.stored_at, m.obtained_at)) AS superseded_at
    FROM later JOIN {schema}.memories AS m ON m.org_id = later.org_id AND m.memory_id = later.memory_id {pin:m}
    GROUP BY later.org_id, later.ancestor
)
UPDATE {schema}.memories AS m
SET valid_until = clocks.valid_until, superseded_at = clocks.superseded_at
FROM clocks
WHERE m.org_id = clocks.org_id AND m.memory_id = clocks.memory_id {pin:m}
"""


def clocks_of_chains(schema: str, *, pinned: bool) -> str:
    """:data:`CLOCKS_OF_CHAINS` for every organization, or with every table pinned to ``:org_id``."""
    statement = CLOCKS_OF_CHAINS.replace("{schema}", schema)
    for alias in ("edge", "m"):
        pin = f"AND {alias}.org_id = :org_id" if pinned else ""
        statement = statement.replace("{pin:" + alias + "}", pin)
    return statement


# mem0's expiration_date (YYYY-MM-DD in the metadata) is the last day a memory is current.
EXPIRY_FROM_METADATA = """
UPDATE {schema}.memories
SET expires_at = CAST(CAST(metadata->>'expiration_date' AS date) + 1 AS timestamp) AT TIME ZONE 'UTC'
WHERE metadata ? 'expiration_date' AND metadata->>'expiration_date' ~ '^\\d{4}-\\d{2}-\\d{2}$'
"""


def upgrade() -> None:
    schema = options().schema
    quoted = f'"{schema}"'
    timestamp = sa.DateTime(timezone=True)
    op.add_column("memories", sa.Column("stored_at", timestamp, nullable=True), schema=schema)
    # Set after the column exists, so that only rows written from now on get it.
    op.alter_column("memories", "stored_at", server_default=sa.func.now(), schema=schema)
    op.add_column("memories", sa.Column("superseded_at", timestamp, nullable=True), schema=schema)
    op.add_column("memories", sa.Column("valid_until", timestamp, nullable=True), schema=schema)
    op.add_column("memories", sa.Column("expires_at", timestamp, nullable=True), schema=schema)
    # Room in every page for the new version of a row whose clocks end (a superseded version): such an
    # update changes no indexed column, so with room on its page it is a HOT update, which writes
    # no index entry (the HNSW entry of a row costs as much as its insert).
    op.execute(f"ALTER TABLE {quoted}.memories SET (fillfactor = {FILLFACTOR})")
    op.create_index(
        "ix_memories_user_stored",
        "memories",
        ["org_id", "user_id", sa.text("coalesce(stored_at, obtained_at)")],
        schema=schema,
    )
    as_of = MEMORIES_AS_OF_ON_CITUS if _memories_distributed(quoted) else MEMORIES_AS_OF
    for definition in (CURRENT_IN_VALID_TIME, CURRENT_IN_SYSTEM_TIME, CHECKED_CLOCK, as_of, MEMORY_TIMELINE):
        op.execute(definition.replace("{schema}", quoted))
    # An expired memory is no longer current: the reporting view agrees with the stores. (Replacing a
    # view resets its options: the invoker's rights are set again.)
    op.execute(_current_memories(quoted, unexpired=True))
    for view in ("memory_timeline", "current_memories"):
        op.execute(INVOKER_RIGHTS.replace("{schema}", quoted).replace("{view}", view))
    op.execute(EXPIRY_FROM_METADATA.replace("{schema}", quoted))
    if context.is_offline_mode():
        # A script for a plain server: every chain at once (on Citus, upgrade online instead).
        op.execute(clocks_of_chains(quoted, pinned=False))
        return
    # One organization at a time, its id a constant: a Citus cluster runs each on one shard.
    bind = op.get_bind()
    chained = bind.execute(text(f"SELECT DISTINCT org_id FROM {quoted}.memory_updates")).scalars().all()
    for org_id in chained:
        bind.execute(text(clocks_of_chains(quoted, pinned=True)), {"org_id": org_id})


def downgrade() -> None:
    schema = options().schema
    quoted = f'"{schema}"'
    op.execute(f"DROP VIEW {quoted}.memory_timeline")
    op.execute(_current_memories(quoted, unexpired=False))
    op.execute(INVOKER_RIGHTS.replace("{schema}", quoted).replace("{view}", "current_memories"))
    op.execute(f"DROP FUNCTION {quoted}.memories_as_of(timestamptz, text)")
    op.execute(f"DROP FUNCTION {quoted}.checked_clock(text)")
    clocks = ", ".join(["timestamptz"] * 5)
    op.execute(f"DROP FUNCTION {quoted}.current_in_system_time({clocks})")
    op.execute(f"DROP FUNCTION {quoted}.current_in_valid_time(timestamptz, timestamptz, timestamptz, timestamptz)")
    op.drop_index("ix_memories_user_stored", table_name="memories", schema=schema)
    op.execute(f"ALTER TABLE {quoted}.memories RESET (fillfactor)")
    for column in ("expires_at", "valid_until", "superseded_at", "stored_at"):
        op.drop_column("memories", column, schema=schema)
