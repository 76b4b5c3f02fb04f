"""A row is searchable on both arms or on neither: ``search_text`` is set exactly when ``embedding`` is.

Every writer sets the two together, and a row made unsearchable loses both; until now that rule was
kept by the code alone, in each writer. This revision makes the database keep it, on the two tables
that hold vectors: a CHECK constraint ``ck_<table>_searchable_together``. A row that broke the rule
before (none that memora_pg wrote) is mended first: a full-text vector without an embedding is
cleared, and an embedding without a full-text vector gets the one its text gives (``to_search_text``,
of the text, or of a JSON entry's text).

The constraint is checked against every row once, in this revision's transaction (a scan of each
table under its lock: about a second per million rows on a small machine).
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options

revision = "0011"
down_revision = "0010"

# Each table with vectors, and the text its full-text vector is made of.
SEARCHED_TEXT = {
    "memories": "memory",
    "autogen_contents": "coalesce(content_text, CAST(content_json AS text))",
}

MEND = """
UPDATE "{schema}".{table} SET search_text = NULL WHERE embedding IS NULL AND search_text IS NOT NULL;
UPDATE "{schema}".{table} SET search_text = "{schema}".to_search_text({text})
WHERE embedding IS NOT NULL AND search_text IS NULL;
ALTER TABLE "{schema}".{table} ADD CONSTRAINT ck_{table}_searchable_together
    CHECK ((embedding IS NULL) = (search_text IS NULL));
"""


def upgrade() -> None:
    schema = options().schema
    for table, text in SEARCHED_TEXT.items():
        for statement in MEND.replace("{schema}", schema).replace("{table}", table).replace("{text}", text).split(";"):
            if statement.strip():
                op.execute(statement)


def downgrade() -> None:
    schema = options().schema
    for table in SEARCHED_TEXT:
        op.execute(f'ALTER TABLE "{schema}".{table} DROP CONSTRAINT ck_{table}_searchable_together')
