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
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed, replacing

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.execute(installed(function_source("common_terms", revision), options().schema))


def downgrade() -> None:
    op.execute(installed(replacing(function_source("common_terms", "0013")), options().schema))
