"""AutoGen entries get a full-text vector, so ``PostgresMemory.query`` ranks as every other face.

``search_text`` is the schema's ``to_search_text`` of the text that was embedded (text and
markdown as they are, JSON as its serialized text), set exactly when ``embedding`` is.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.migrations import options

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    schema = options().schema
    op.add_column("autogen_contents", sa.Column("search_text", postgresql.TSVECTOR(), nullable=True), schema=schema)
    op.execute(
        f'UPDATE "{schema}".autogen_contents'
        f' SET search_text = "{schema}".to_search_text(coalesce(content_text, CAST(content_json AS text)))'
        " WHERE embedding IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_column("autogen_contents", "search_text", schema=options().schema)
