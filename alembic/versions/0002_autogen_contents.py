"""Entries of the AutoGen memory protocol (PostgresMemory): any mime type, by namespace."""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

from alembic import context, op
from memora_pg.migrations import cascading_key, created_at_column, options, tenant_column, write_order_column

revision = "0002"
down_revision = "0001"


def _dimensions(schema: str, default: int) -> int:
    """The deployment's embedding dimension: the memories column's, when a database is at hand."""
    if context.is_offline_mode():
        return default
    found = op.get_bind().scalar(
        sa.text("SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(:table) AND attname = 'embedding'"),
        {"table": f'"{schema}".memories'},
    )
    return int(found) if found and found > 0 else default


def upgrade() -> None:
    opts = options()
    schema = opts.schema
    op.create_table(
        "autogen_contents",
        tenant_column(),
        sa.Column("content_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("agent_id", sa.Text(), nullable=True),
        sa.Column("mime_type", sa.Text(), nullable=False),
        sa.Column("content_text", sa.Text(), nullable=True),
        sa.Column("content_json", postgresql.JSONB(), nullable=True),
        sa.Column("content_bytes", sa.LargeBinary(), nullable=True),
        sa.Column("metadata", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("embedding", VECTOR(_dimensions(schema, opts.dimensions)), nullable=True),
        write_order_column(),
        created_at_column(),
        sa.PrimaryKeyConstraint("org_id", "content_id", name="pk_autogen_contents"),
        sa.CheckConstraint(
            "num_nonnulls(content_text, content_json, content_bytes) = 1", name=op.f("ck_autogen_contents_one_content")
        ),
        cascading_key(schema, "autogen_contents", ["org_id"], "organizations"),
        cascading_key(schema, "autogen_contents", ["org_id", "user_id"], "users"),
        schema=schema,
    )
    op.create_index(
        "ix_autogen_contents_namespace",
        "autogen_contents",
        ["org_id", "namespace", "user_id", "agent_id", "seq"],
        schema=schema,
    )


def downgrade() -> None:
    op.drop_table("autogen_contents", schema=options().schema)
