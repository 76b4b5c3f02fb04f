"""The full-text rule in the database: ``search_config()`` and ``to_search_text(text)``.

``search_config()`` returns the text-search configuration the database's full-text vectors
were written with, and ``to_search_text(memory)`` is the full-text vector of a memory text
under it. Every statement that writes a memory row, and every search that parses a query,
calls these, so writers and searches cannot disagree on the configuration; changing it is
``memora-pg text-search CONFIG``, which replaces ``search_config()`` and rewrites the vectors.

A new database (no memory written yet) gets the configured one, by default ``english``; an
existing database keeps the configured one, by default ``simple``, which is what its vectors
were written with before this revision.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text

from alembic import context, op
from memora_pg.migrations import options

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_DATABASE_CONFIG = "english"
# What memora_pg wrote full-text vectors with before this revision, unless configured otherwise.
EARLIER_DEFAULT_CONFIG = "simple"

SEARCH_CONFIG = """
CREATE OR REPLACE FUNCTION {schema}.search_config() RETURNS regconfig
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CAST('{config}' AS regconfig)
"""

TO_SEARCH_TEXT = """
CREATE OR REPLACE FUNCTION {schema}.to_search_text(memory text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_tsvector({schema}.search_config(), memory)
"""


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
    op.execute(SEARCH_CONFIG.format(schema=f'"{schema}"', config=_config(schema)))
    op.execute(TO_SEARCH_TEXT.format(schema=f'"{schema}"'))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".to_search_text(text)')
    op.execute(f'DROP FUNCTION "{schema}".search_config()')
