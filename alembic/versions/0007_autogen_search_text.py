"""AutoGen entries get a full-text vector, so ``PostgresMemory.query`` ranks as every other face.

``search_text`` is the schema's ``to_search_text`` of the text that was embedded (text and
markdown as they are, JSON as its serialized text), set exactly when ``embedding`` is.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.migrations import options

revision = "0007"
down_revision = "0006"


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
