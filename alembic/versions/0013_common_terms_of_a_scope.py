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
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed
from memora_pg.sql_text import quoted

revision = "0013"
down_revision = "0012"

# The argument types of 0010's function and of this revision's (DROP FUNCTION goes by the types).
OF_A_USER = "text, text, double precision, double precision"
OF_A_SCOPE = "text, text, text, double precision, double precision"


def _replace(arguments: str, source_revision: str) -> None:
    schema = options().schema
    op.execute(f"DROP FUNCTION {quoted(schema)}.common_terms({arguments})")
    op.execute(installed(function_source("common_terms", source_revision), schema))


def upgrade() -> None:
    _replace(OF_A_USER, revision)


def downgrade() -> None:
    _replace(OF_A_SCOPE, "0010")
