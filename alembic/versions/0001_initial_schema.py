"""The whole memora_pg schema: tenants, conversations, memories, their sources, versions and vectors."""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.migrations import cascading_key, created_at_column, options, tenant_column, write_order_column

revision = "0001"
down_revision = None


def upgrade() -> None:
    opts = options()
    schema = opts.schema
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "organizations",
        tenant_column(),
        sa.Column("org_name", sa.Text(), nullable=False),
        created_at_column(),
        sa.PrimaryKeyConstraint("org_id", name="pk_organizations"),
        schema=schema,
    )
    op.create_table(
        "users",
        tenant_column(),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("user_name", sa.Text(), nullable=False),
        created_at_column(),
        sa.PrimaryKeyConstraint("org_id", "user_id", name="pk_users"),
        cascading_key(schema, "users", ["org_id"], "organizations"),
        schema=schema,
    )
    op.create_table(
        "agents",
        tenant_column(),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("agent_label", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        created_at_column(),
        sa.PrimaryKeyConstraint("org_id", "agent_id", name="pk_agents"),
        cascading_key(schema, "agents", ["org_id"], "organizations"),
        cascading_key(schema, "agents", ["org_id", "user_id"], "users"),
        schema=schema,
    )
    op.create_index("ix_agents_org_id_user_id", "agents", ["org_id", "user_id"], schema=schema)

    op.create_table(
        "interactions",
        tenant_column(),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        write_order_column(),
        sa.PrimaryKeyConstraint("org_id", "interaction_id", name="pk_interactions"),
        cascading_key(schema, "interactions", ["org_id", "user_id"], "users"),
        schema=schema,
    )
    op.create_index(
        "ix_interactions_user_recent",
        "interactions",
        ["org_id", "user_id", sa.text("updated_at DESC"), sa.text("seq DESC")],
        schema=schema,
    )

    op.create_table(
        "messages",
        tenant_column(),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("msg_position", sa.Integer(), nullable=False),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("org_id", "interaction_id", "msg_position", name="pk_messages"),
        sa.CheckConstraint("msg_position >= 0", name=op.f("ck_messages_position_not_negative")),
        cascading_key(schema, "messages", ["org_id", "interaction_id"], "interactions"),
        schema=schema,
    )

    op.create_table(
        "memories",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=True),
        sa.Column("memory", sa.Text(), nullable=False),
        sa.Column("obtained_at", sa.DateTime(timezone=True), nullable=False),
        write_order_column(),
        sa.Column("metadata", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("embedding", VECTOR(opts.dimensions), nullable=True),
        sa.Column("search_text", postgresql.TSVECTOR(), nullable=True),
        sa.PrimaryKeyConstraint("org_id", "memory_id", name="pk_memories"),
        cascading_key(schema, "memories", ["org_id", "user_id"], "users"),
        cascading_key(schema, "memories", ["org_id", "interaction_id"], "interactions"),
        schema=schema,
    )
    op.create_index(
        "ix_memories_user_recent",
        "memories",
        ["org_id", "user_id", sa.text("obtained_at DESC"), sa.text("seq DESC")],
        schema=schema,
    )
    op.create_index(
        "ix_memories_user_agent_recent",
        "memories",
        ["org_id", "user_id", "agent_id", sa.text("obtained_at DESC"), sa.text("seq DESC")],
        schema=schema,
    )
    op.create_index("ix_memories_org_id_interaction_id", "memories", ["org_id", "interaction_id"], schema=schema)
    op.create_index("ix_memories_search_text", "memories", ["search_text"], schema=schema, postgresql_using="gin")
    op.create_index(
        "ix_memories_embedding_hnsw",
        "memories",
        ["embedding"],
        schema=schema,
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
        postgresql_with={"m": opts.hnsw_m, "ef_construction": opts.hnsw_ef_construction},
    )

    op.create_table(
        "memory_sources",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("msg_position", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "memory_id", "interaction_id", "msg_position", name="pk_memory_sources"),
        cascading_key(schema, "memory_sources", ["org_id", "memory_id"], "memories"),
        cascading_key(schema, "memory_sources", ["org_id", "interaction_id", "msg_position"], "messages"),
        schema=schema,
    )
    op.create_index(
        "ix_memory_sources_org_id_interaction_id_msg_position",
        "memory_sources",
        ["org_id", "interaction_id", "msg_position"],
        schema=schema,
    )

    op.create_table(
        "memory_updates",
        tenant_column(),
        sa.Column("new_memory_id", sa.Uuid(), nullable=False),
        sa.Column("old_memory_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "new_memory_id", name="pk_memory_updates"),
        cascading_key(schema, "memory_updates", ["org_id", "new_memory_id"], "memories", ["org_id", "memory_id"]),
        cascading_key(schema, "memory_updates", ["org_id", "old_memory_id"], "memories", ["org_id", "memory_id"]),
        schema=schema,
    )
    op.create_index(
        "ix_memory_updates_org_id_old_memory_id", "memory_updates", ["org_id", "old_memory_id"], schema=schema
    )


def downgrade() -> None:
    schema = options().schema
    for table in ("memory_updates", "memory_sources", "memories", "messages", "interactions", "agents", "users"):
        op.drop_table(table, schema=schema)
    op.drop_table("organizations", schema=schema)
    # The vector extension and the schema stay: other tables may use them.
