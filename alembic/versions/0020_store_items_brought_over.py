"""Store items brought over with their times: ``put_store_items`` takes an import's source times.

``memora-pg import --from langgraph`` writes a ``PostgresStore``'s items as ``store_items`` (the items of
``memora_pg.langgraph.MemoraStore``), through the table's one writer. An item brought over keeps its
source's ``created_at``, ``updated_at`` and ``expires_at``, so the new version of the function takes them
(``p_created_at``, ``p_updated_at``, ``p_expires_at``; NULL for now, as every store write passes). Its
signature changes, so the revision drops the earlier version and creates this one, distributed by its
organization on a schema that Citus distributes.
"""

from __future__ import annotations

from alembic import op
from memora_pg.citus import distribute_functions
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed

revision = "0020"
down_revision = "0019"

BEFORE = "put_store_items(text, text, text[], text[], text[], vector[], text[], bigint[])"
AFTER = (
    "put_store_items(text, text, text[], text[], text[], vector[], text[], bigint[], timestamptz[], "
    "timestamptz[], timestamptz[])"
)


def upgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".{BEFORE}')
    op.execute(installed(function_source("put_store_items", revision), schema))
    op.execute(distribute_functions(schema, [AFTER]))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".{AFTER}')
    op.execute(installed(function_source("put_store_items", down_revision), schema))
    op.execute(distribute_functions(schema, [BEFORE]))
