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

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from memora_pg.migrations import options

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COMMON_TERMS = """
CREATE OR REPLACE FUNCTION "{schema}".common_terms(
    relation text, searched_user text, scope_rows double precision, common_rows double precision
) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
DECLARE
    estimated double precision;
BEGIN
    -- The user's rows, as ANALYZE estimated them (a user too few for the statistics to list has none).
    IF searched_user IS NOT NULL THEN
        SELECT u.frequency * c.reltuples INTO estimated
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
             AS u(user_id, frequency)
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', '{schema}', relation))
        WHERE s.schemaname = '{schema}' AND s.tablename = relation AND s.attname = 'user_id'
          AND u.user_id = searched_user;
    END IF;
    estimated := greatest(scope_rows, coalesce(estimated, 0));
    RETURN QUERY
        SELECT e.lexeme
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_elems AS text) AS text[]), s.most_common_elem_freqs)
             AS e(lexeme, frequency)
        WHERE s.schemaname = '{schema}' AND s.tablename = relation AND s.attname = 'search_text'
          AND e.lexeme IS NOT NULL  -- the frequencies end with three of their own (least, most, of nulls)
          AND e.frequency * estimated >= common_rows;
END
$body$
"""


def upgrade() -> None:
    op.execute(COMMON_TERMS.replace("{schema}", options().schema))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".common_terms(text, text, double precision, double precision)')
