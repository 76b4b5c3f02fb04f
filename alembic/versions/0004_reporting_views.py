"""Reporting views: current memories, contradiction chains, growth, activity per agent, orphans.

Every view leads with ``org_id`` and joins or correlates on it, so a filter on ``org_id``
reaches the tables' primary keys and indexes, and the views distribute with the tables on
Citus. docs/reporting.md describes each column and gives example queries.

A later migration that changes a column one of these views reads has to drop and recreate
the view around the change (PostgreSQL refuses to alter a column a view depends on).
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql import installed, view_source
from memora_pg.sql_text import quoted

revision = "0004"
down_revision = "0003"


# Each view's source: memora_pg/sql/views/NAME.0004.sql.
VIEWS = {
    name: view_source(name, revision)
    for name in (
        "current_memories",
        "contradiction_chains",
        "memory_growth_daily",
        "interactions_per_agent",
        "orphaned_memories",
    )
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
    schema = options().schema
    for definition in VIEWS.values():
        op.execute(installed(definition, schema))
    op.execute(
        INVOKER_RIGHTS.replace(
            "{statements}",
            "\n        ".join(f"ALTER VIEW {quoted(schema)}.{name} SET (security_invoker = true);" for name in VIEWS),
        )
    )


def downgrade() -> None:
    schema = f'"{options().schema}"'
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW {schema}.{name}")
