"""The searched table's common words, from ANALYZE's statistics: ``common_terms(...)``.

A search of a large scope (a user of more than 2,000 memories) counts each query word's rows by
the full-text GIN index, to tell whether the word is rare enough to bring its rows as candidates.
For a common word that probe reads the word's whole posting list, and then its rows. The
statistics ANALYZE keeps (``pg_stats``) already tell which words are common in the table, and how
many rows the user has: ``common_terms(relation, user, scope_rows, common_rows)`` returns the
words of ``relation`` that a scope of the user's rows (at least ``scope_rows`` rows; without a
user, ``scope_rows``) would hold in at least ``common_rows`` rows, if it resembles the table. A
search skips those words' probes.

It is a PL/pgSQL function so that a search's statement plans a function call, not the
``pg_stats`` view, and its body runs (and is planned, once per session) only for a large scope.
Without statistics (a table never analysed, row-level security active) it returns no word.
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.execute(installed(function_source("common_terms", revision), options().schema))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".common_terms(text, text, double precision, double precision)')
