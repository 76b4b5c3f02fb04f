"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from collections.abc import Sequence

import pgvector.sqlalchemy  # noqa: F401  (autogenerate forgets this import)
import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

from memora_pg.migrations import options

revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}


def upgrade() -> None:
    schema = options().schema
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    schema = options().schema
    ${downgrades if downgrades else "pass"}
