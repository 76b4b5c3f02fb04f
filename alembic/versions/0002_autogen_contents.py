"""Entries of the AutoGen memory protocol (PostgresMemory): any mime type, by namespace.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

from alembic import context, op
from memora_pg.migrations import options

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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
        sa.Column("org_id", sa.Text(), nullable=False),
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
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("org_id", "content_id", name="pk_autogen_contents"),
        sa.CheckConstraint(
            "num_nonnulls(content_text, content_json, content_bytes) = 1", name=op.f("ck_autogen_contents_one_content")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            [f"{schema}.organizations.org_id"],
            name="fk_autogen_contents_org_id_organizations",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id", "user_id"],
            [f"{schema}.users.org_id", f"{schema}.users.user_id"],
            name="fk_autogen_contents_org_id_user_id_users",
            ondelete="CASCADE",
        ),
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
