"""The full-text GIN index keeps a pending list of at most 64 kB: ``gin_pending_list_limit = 64``.

A GIN index with ``fastupdate`` (PostgreSQL's default) puts new entries in a pending list and merges
them into the index later: when the list outgrows ``gin_pending_list_limit`` (4 MB by default), or at
VACUUM or autovacuum's ANALYZE. Every scan of the index reads the whole pending list, row by row. A
search of a scope of more than 2,000 rows (a large user, an organization) probes the full-text index
for each query word, so under steady writes each of those probes read up to 4 MB more. Measured on a
10,000-memory organization after 5,000 saved memories: the organization-wide search took 8.45 and
8.74 ms with the default list against 5.83 and 7.32 ms with a list of 64 kB, and 5.15 and 7.6 ms with
no list (``fastupdate = off``), the saves costing the same within the spread. A small list keeps
most of what the list is for (a bulk import's entries are still merged in batches) and bounds what a
search reads.
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options

revision = "0015"
down_revision = "0014"

# In kB, as the storage parameter counts it.
PENDING_LIST_KB = 64


def upgrade() -> None:
    schema = options().schema
    op.execute(f'ALTER INDEX "{schema}".ix_memories_search_text SET (gin_pending_list_limit = {PENDING_LIST_KB})')


def downgrade() -> None:
    op.execute(f'ALTER INDEX "{options().schema}".ix_memories_search_text RESET (gin_pending_list_limit)')
