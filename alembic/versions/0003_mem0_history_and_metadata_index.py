"""History of the mem0-style API, and a GIN index for metadata filters."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from alembic import op
from memora_pg.migrations import (
    cascading_key,
    created_at_column,
    defer_index_build,
    options,
    tenant_column,
    write_order_column,
)

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    schema = options().schema
    if defer_index_build(schema, "memories"):
        # A large table: `memora-pg index build` creates it CONCURRENTLY, without blocking writes.
        logging.getLogger("alembic").warning(
            "memories is large: ix_memories_metadata is left to 'memora-pg index build' (CONCURRENTLY)"
        )
    else:
        op.create_index("ix_memories_metadata", "memories", ["metadata"], schema=schema, postgresql_using="gin")
    op.create_table(
        "memory_history",
        tenant_column(),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("memory_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("old_memory", sa.Text(), nullable=True),
        sa.Column("new_memory", sa.Text(), nullable=True),
        sa.Column("actor_id", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("is_deleted", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        write_order_column(),
        created_at_column(),
        sa.PrimaryKeyConstraint("org_id", "event_id", name="pk_memory_history"),
        sa.CheckConstraint("event IN ('ADD', 'UPDATE', 'DELETE')", name=op.f("ck_memory_history_known_event")),
        cascading_key(schema, "memory_history", ["org_id", "user_id"], "users"),
        schema=schema,
    )
    op.create_index("ix_memory_history_memory", "memory_history", ["org_id", "memory_id", "seq"], schema=schema)


def downgrade() -> None:
    schema = options().schema
    op.drop_table("memory_history", schema=schema)
    op.execute(f'DROP INDEX IF EXISTS "{schema}".ix_memories_metadata')
