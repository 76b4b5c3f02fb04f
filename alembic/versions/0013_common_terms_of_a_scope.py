"""The common words of any scope the statistics can size: ``common_terms(relation, scope_column, ...)``.

Revision 0010's ``common_terms`` sized a scope from the statistics only when it was a user's rows;
an organization-wide search sized its scope as the smallest large one (2,001 rows), so that only a
word held by a fifth of the table was taken as common. In an organization of a million memories a
word held by one in twenty still had its probe, which reads the word's whole posting list (50,000
rows) to learn what the statistics already say: that the word is too common to bring candidates.

This revision's function takes the column whose value the scope is (``user_id`` for a user's rows,
``org_id`` for an organization's) and sizes the scope by that value's share of the table, as
ANALYZE estimated it (a value too rare for the statistics to list keeps ``scope_rows``). The
four-argument function of 0010 is replaced.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql_text import render

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The scope's rows as ANALYZE estimated them, and the words that many of them would hold; the body
# of either revision's function, which differ in how the scope is named (``{scope}``).
BODY = """
DECLARE
    estimated double precision;
BEGIN
    -- The scope's rows, as ANALYZE estimated them (a value too rare for the statistics to list has none).
    IF scope_value IS NOT NULL THEN
        SELECT v.frequency * c.reltuples INTO estimated
        FROM pg_stats AS s
        CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
             AS v(listed, frequency)
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', '{schema}', relation))
        WHERE s.schemaname = '{schema}' AND s.tablename = relation AND s.attname = {scope}
          AND v.listed = scope_value;
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
"""

FUNCTION = """
CREATE FUNCTION "{schema}".common_terms({arguments}) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
{body}
$body$
"""

OF_A_SCOPE = (
    "relation text, scope_column text, scope_value text, scope_rows double precision, common_rows double precision"
)
# Revision 0010's: a user's rows (its ``searched_user`` named ``scope_value`` here, as the body reads it).
OF_A_USER = "relation text, scope_value text, scope_rows double precision, common_rows double precision"


def _function(arguments: str, scope: str) -> str:
    schema = options().schema
    body = render(BODY, schema=schema, scope=scope)
    return render(FUNCTION, schema=schema, arguments=arguments, body=body)


def _drop(arguments: str) -> str:
    # DROP FUNCTION reads the arguments' names too, and goes by their types.
    return f'DROP FUNCTION "{options().schema}".common_terms({arguments})'


def upgrade() -> None:
    op.execute(_drop(OF_A_USER))
    op.execute(_function(OF_A_SCOPE, "scope_column"))


def downgrade() -> None:
    op.execute(_drop(OF_A_SCOPE))
    op.execute(_function(OF_A_USER, "'user_id'"))
