"""The write functions insert their rows in a form Citus never turns into a COPY: an application role
under row-level security can save on Citus wherever the call runs.

A write function's ``INSERT ... SELECT ... FROM unnest(...)`` reads no table, so Citus plans it "via the
coordinator": it computes the rows and COPYs them into the organization's shard. PostgreSQL refuses
COPY FROM into a table with row-level security for a role it applies to ("COPY FROM not supported with
row-level security"). Inside a call that Citus delegated to the organization's worker the COPY is
local, and passes. A call that is not delegated runs its body on the coordinator, and every save of
the application role failed there. That happens when the worker that holds the organization has no
synced metadata (measured: ``stop_metadata_sync_to_node`` on one worker, 4 of 8 saves failed).

With ``RETURNING``, Citus sends the rows to the worker as an intermediate result and inserts them there
with a plain ``INSERT``, which row-level security checks like any other. The returned rows are only
counted. On the delegated path the call still runs on one worker and commits in one phase (a save of
10 memories as the application role: 17.06 ms p50 before, 17.39 ms after, in the same run); on one
server the difference is within noise. The rows, their order and every rule are those of 0016.
"""

from __future__ import annotations

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed, replacing

revision = "0017"
down_revision = "0016"

# The functions this revision replaces, from their source files (memora_pg/sql/functions/NAME.0017.sql); a
# downgrade puts back revision 0016's (NAME.0016.sql).
NAMES = ("append_messages", "write_memories", "record_history")
FUNCTIONS = {name: function_source(name, revision) for name in NAMES}


def upgrade() -> None:
    # CREATE OR REPLACE keeps each function's identity, so on Citus it stays distributed (and Citus sends the
    # new body to the workers).
    schema = options().schema
    for definition in FUNCTIONS.values():
        op.execute(installed(definition, schema))


def downgrade() -> None:
    schema = options().schema
    for name in NAMES:
        op.execute(installed(replacing(function_source(name, "0016")), schema))
