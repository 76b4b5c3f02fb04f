"""Neighbours by key: the memories written just before and after a memory, found by index.

The default search scores candidates (the nearest memories and those holding a rare query
word) and the memories around each of them: the one written just before and the one just after
in the same interaction, or, for memories of no interaction, among the same user's. Each is one
probe of an index ordered by write order:

* ``(org_id, interaction_id, seq)`` replaces ``(org_id, interaction_id)``, which it serves as
  well (the interaction's memories, the foreign key's deletes);
* ``(org_id, user_id, seq)`` of the memories of no interaction (mem0-style and vector-store
  writes): a partial index, empty for memories saved with their interaction.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op
from memora_pg.migrations import options

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    schema = options().schema
    op.create_index("ix_memories_interaction_seq", "memories", ["org_id", "interaction_id", "seq"], schema=schema)
    op.drop_index("ix_memories_org_id_interaction_id", table_name="memories", schema=schema)
    op.create_index(
        "ix_memories_unattached_seq",
        "memories",
        ["org_id", "user_id", "seq"],
        schema=schema,
        postgresql_where=sa.text("interaction_id IS NULL"),
    )


def downgrade() -> None:
    schema = options().schema
    op.drop_index("ix_memories_unattached_seq", table_name="memories", schema=schema)
    op.create_index("ix_memories_org_id_interaction_id", "memories", ["org_id", "interaction_id"], schema=schema)
    op.drop_index("ix_memories_interaction_seq", table_name="memories", schema=schema)
