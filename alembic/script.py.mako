"""${message}
"""

from __future__ import annotations

import pgvector.sqlalchemy  # noqa: F401  (autogenerate forgets this import)
import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

from memora_pg.migrations import options

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}


def upgrade() -> None:
    schema = options().schema
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    schema = options().schema
    ${downgrades if downgrades else "pass"}
