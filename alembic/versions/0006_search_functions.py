"""The full-text rule in the database: ``search_config()`` and ``to_search_text(text)``.

``search_config()`` returns the text-search configuration the database's full-text vectors
were written with, and ``to_search_text(memory)`` is the full-text vector of a memory text
under it. Every statement that writes a memory row, and every search that parses a query,
calls these, so writers and searches cannot disagree on the configuration; changing it is
``memora-pg text-search CONFIG``, which replaces ``search_config()`` and rewrites the vectors.

A new database (no memory written yet) gets the configured one, by default ``english``; an
existing database keeps the configured one, by default ``simple``, which is what its vectors
were written with before this revision.
"""

from __future__ import annotations

from sqlalchemy import text

from alembic import context, op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed
from memora_pg.sql_text import literal

revision = "0006"
down_revision = "0005"

NEW_DATABASE_CONFIG = "english"
# What memora_pg wrote full-text vectors with before this revision, unless configured otherwise.
EARLIER_DEFAULT_CONFIG = "simple"


def _config(schema: str) -> str:
    configured = options().text_search_config
    if configured is not None:
        return configured
    if context.is_offline_mode():
        return NEW_DATABASE_CONFIG
    written = op.get_bind().scalar(text(f'SELECT EXISTS (SELECT 1 FROM "{schema}".memories)'))
    return EARLIER_DEFAULT_CONFIG if written else NEW_DATABASE_CONFIG


def upgrade() -> None:
    schema = options().schema
    op.execute(installed(function_source("search_config", revision), schema, config=literal(_config(schema))))
    op.execute(installed(function_source("to_search_text", revision), schema))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".to_search_text(text)')
    op.execute(f'DROP FUNCTION "{schema}".search_config()')
