"""The whole memora_pg schema: tenants, conversations, memories, their sources, versions and vectors.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.migrations import options

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column[object]:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    opts = options()
    schema = opts.schema
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "organizations",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("org_name", sa.Text(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("org_id", name="pk_organizations"),
        schema=schema,
    )
    op.create_table(
        "users",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("user_name", sa.Text(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("org_id", "user_id", name="pk_users"),
        sa.ForeignKeyConstraint(
            ["org_id"], [f"{schema}.organizations.org_id"], name="fk_users_org_id_organizations", ondelete="CASCADE"
        ),
        schema=schema,
    )
    op.create_table(
        "agents",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("agent_label", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        _created_at(),
        sa.PrimaryKeyConstraint("org_id", "agent_id", name="pk_agents"),
        sa.ForeignKeyConstraint(
            ["org_id"], [f"{schema}.organizations.org_id"], name="fk_agents_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["org_id", "user_id"],
            [f"{schema}.users.org_id", f"{schema}.users.user_id"],
            name="fk_agents_org_id_user_id_users",
            ondelete="CASCADE",
        ),
        schema=schema,
    )
    op.create_index("ix_agents_org_id_user_id", "agents", ["org_id", "user_id"], schema=schema)

    op.create_table(
        "interactions",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "interaction_id", name="pk_interactions"),
        sa.ForeignKeyConstraint(
            ["org_id", "user_id"],
            [f"{schema}.users.org_id", f"{schema}.users.user_id"],
            name="fk_interactions_org_id_user_id_users",
            ondelete="CASCADE",
        ),
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
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("msg_position", sa.Integer(), nullable=False),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("org_id", "interaction_id", "msg_position", name="pk_messages"),
        sa.CheckConstraint("msg_position >= 0", name=op.f("ck_messages_position_not_negative")),
        sa.ForeignKeyConstraint(
            ["org_id", "interaction_id"],
            [f"{schema}.interactions.org_id", f"{schema}.interactions.interaction_id"],
            name="fk_messages_org_id_interaction_id_interactions",
            ondelete="CASCADE",
        ),
        schema=schema,
    )

    op.create_table(
        "memories",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("memory_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=True),
        sa.Column("memory", sa.Text(), nullable=False),
        sa.Column("obtained_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("metadata", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("embedding", VECTOR(opts.dimensions), nullable=True),
        sa.Column("search_text", postgresql.TSVECTOR(), nullable=True),
        sa.PrimaryKeyConstraint("org_id", "memory_id", name="pk_memories"),
        sa.ForeignKeyConstraint(
            ["org_id", "user_id"],
            [f"{schema}.users.org_id", f"{schema}.users.user_id"],
            name="fk_memories_org_id_user_id_users",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id", "interaction_id"],
            [f"{schema}.interactions.org_id", f"{schema}.interactions.interaction_id"],
            name="fk_memories_org_id_interaction_id_interactions",
            ondelete="CASCADE",
        ),
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
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("memory_id", sa.Uuid(), nullable=False),
        sa.Column("interaction_id", sa.Text(), nullable=False),
        sa.Column("msg_position", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "memory_id", "interaction_id", "msg_position", name="pk_memory_sources"),
        sa.ForeignKeyConstraint(
            ["org_id", "memory_id"],
            [f"{schema}.memories.org_id", f"{schema}.memories.memory_id"],
            name="fk_memory_sources_org_id_memory_id_memories",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id", "interaction_id", "msg_position"],
            [f"{schema}.messages.org_id", f"{schema}.messages.interaction_id", f"{schema}.messages.msg_position"],
            name="fk_memory_sources_org_id_interaction_id_msg_position_messages",
            ondelete="CASCADE",
        ),
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
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("new_memory_id", sa.Uuid(), nullable=False),
        sa.Column("old_memory_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "new_memory_id", name="pk_memory_updates"),
        sa.ForeignKeyConstraint(
            ["org_id", "new_memory_id"],
            [f"{schema}.memories.org_id", f"{schema}.memories.memory_id"],
            name="fk_memory_updates_org_id_new_memory_id_memories",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id", "old_memory_id"],
            [f"{schema}.memories.org_id", f"{schema}.memories.memory_id"],
            name="fk_memory_updates_org_id_old_memory_id_memories",
            ondelete="CASCADE",
        ),
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
