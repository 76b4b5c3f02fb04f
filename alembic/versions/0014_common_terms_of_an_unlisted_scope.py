"""A scope that ANALYZE did not list is sized as PostgreSQL's planner sizes it: ``common_terms`` again.

Revision 0013's ``common_terms`` sized a scope (a user's rows, an organization's) by its value's share
of the table in ``pg_stats.most_common_vals``, and a value not listed there as the smallest large
scope (2,001 rows). The list holds at most the statistics target's number of values (100 by default),
and none at all when the values are about equally common: in a table of a hundred users or more of
similar size, no user is listed. Every large user was then sized as 2,001 rows, so only a word held
by a seventh of the table was taken as common, and a word held by one row in twenty had its probe,
which reads the word's whole posting list in the GIN index (65,000 rows of a table of a million, for
a user of 10,000 memories: two thirds of that search's time).

This revision sizes an unlisted value as the planner does for an equality on it: the rows that no
listed value and no NULL holds, shared equally among the other distinct values. A scope is sized
this way only when the search has already counted it larger than 2,000 rows, and never smaller than
that.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql_text import render

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = """
CREATE OR REPLACE FUNCTION "{schema}".common_terms(
    relation text, scope_column text, scope_value text, scope_rows double precision, common_rows double precision
) RETURNS SETOF text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
DECLARE
    estimated double precision;
BEGIN
    -- The scope's rows, as ANALYZE estimated them: its value's listed share of the table, else the
    -- share of a value not listed (NULL when the revision leaves it unsized).
    IF scope_value IS NOT NULL THEN
        SELECT c.reltuples * coalesce(
            (SELECT v.frequency
             FROM unnest(CAST(CAST(s.most_common_vals AS text) AS text[]), s.most_common_freqs)
                  AS v(listed, frequency)
             WHERE v.listed = scope_value),
            {unlisted_share}
        ) INTO estimated
        FROM pg_stats AS s
        JOIN pg_class AS c ON c.oid = to_regclass(format('%I.%I', '{schema}', relation))
        WHERE s.schemaname = '{schema}' AND s.tablename = relation AND s.attname = scope_column;
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

# An unlisted value's share, as the planner estimates an equality on it: what neither the listed values
# nor NULL hold, over the distinct values not listed (n_distinct < 0 is a fraction of the rows).
PLANNERS_SHARE = """(1 - s.null_frac - coalesce((SELECT sum(listed) FROM unnest(s.most_common_freqs) AS listed), 0))
            / nullif(
                CASE WHEN s.n_distinct < 0 THEN -s.n_distinct * c.reltuples ELSE s.n_distinct END
                - coalesce(cardinality(s.most_common_freqs), 0),
                0
            )"""


def _function(*, planners_share: bool) -> str:
    return render(
        FUNCTION,
        schema=options().schema,
        unlisted_share=PLANNERS_SHARE if planners_share else "NULL",
    )


def upgrade() -> None:
    op.execute(_function(planners_share=True))


def downgrade() -> None:
    op.execute(_function(planners_share=False))
