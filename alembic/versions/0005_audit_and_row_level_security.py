"""The audit log, and row-level security policies by organization on every table.

The policies let a database role that is not the tables' owner see and write only the rows of
the organization named by the transaction's ``memora.org_id`` setting (memora_pg sets it when
``MEMORA_PG_ROW_LEVEL_SECURITY`` is on), and nothing when it is unset. The owner, and roles with
BYPASSRLS, are not restricted.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.migrations import cascading_key, options, tenant_column, write_order_column

revision = "0005"
down_revision = "0004"

TENANT_TABLES = (
    "organizations",
    "users",
    "agents",
    "interactions",
    "messages",
    "memories",
    "memory_sources",
    "memory_updates",
    "memory_history",
    "autogen_contents",
    "audit_log",
)


def upgrade() -> None:
    schema = options().schema
    op.create_table(
        "audit_log",
        tenant_column(),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("agent_id", sa.Text(), nullable=True),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("ids", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        write_order_column(),
        sa.PrimaryKeyConstraint("org_id", "event_id", name="pk_audit_log"),
        cascading_key(schema, "audit_log", ["org_id"], "organizations"),
        cascading_key(schema, "audit_log", ["org_id", "user_id"], "users"),
        schema=schema,
    )
    op.create_index("ix_audit_log_recent", "audit_log", ["org_id", sa.text("at DESC")], schema=schema)
    for table in TENANT_TABLES:
        op.execute(f'ALTER TABLE "{schema}".{table} ENABLE ROW LEVEL SECURITY')
        # current_setting(..., true) is NULL when unset, and NULL = org_id is never true: fail closed.
        op.execute(
            f'CREATE POLICY tenant_isolation ON "{schema}".{table} '
            "USING (org_id = current_setting('memora.org_id', true)) "
            "WITH CHECK (org_id = current_setting('memora.org_id', true))"
        )


def downgrade() -> None:
    schema = options().schema
    for table in TENANT_TABLES:
        op.execute(f'DROP POLICY IF EXISTS tenant_isolation ON "{schema}".{table}')
        op.execute(f'ALTER TABLE "{schema}".{table} DISABLE ROW LEVEL SECURITY')
    op.drop_table("audit_log", schema=schema)
