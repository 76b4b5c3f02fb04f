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
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import text

from alembic import context, op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed, replacing, view_source

revision = "0008"
down_revision = "0007"

# Their sources: memora_pg/sql/functions/NAME.0008.sql (and functions/citus/ for Citus's form).
CLOCK_FUNCTIONS = ("current_in_valid_time", "current_in_system_time", "checked_clock")


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
    for name in CLOCK_FUNCTIONS:
        op.execute(installed(function_source(name, revision), schema))
    op.execute(installed(function_source("memories_as_of", revision, on_citus=_memories_distributed(quoted)), schema))
    op.execute(installed(view_source("memory_timeline", revision), schema))
    # An expired memory is no longer current: the reporting view agrees with the stores. (Replacing a
    # view resets its options: the invoker's rights are set again.)
    op.execute(installed(view_source("current_memories", revision), schema))
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
    op.execute(installed(replacing(view_source("current_memories", "0004")), schema))
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
