"""Every write of new memories is one function call, the same on one server and on Citus.

A save wrote its rows with one statement of data-modifying CTEs on one server, and on Citus with one
statement per table: there each CTE would have been run on the coordinator and its rows sent to
every worker, with a two-phase commit. Two forms of every insert, and on Citus six round trips for a
save. This revision gives each write one home, a PL/pgSQL function, called in one statement on both
engines:

* ``append_messages``: an interaction's messages from a position on;
* ``clock_superseded``: the clocks that new CONTRARY_UPDATE links end (revision 0008's rule);
* ``write_memories``: new memories (with ``p_upsert``, the vector store's, a user's own memories
  rewritten by id) with their source messages, their contrary links and the call's audit row;
* ``save_interaction``: a new interaction with its messages and memories, written only when its user
  and agent exist;
* ``record_history``: mem0-style history events;
* ``add_memories``: new memories of a mem0-style collection, with the organization and user they
  need and their ADD history events.

Each takes the organization as its first argument, ``p_org_id``. On Citus they are distributed by it,
co-located with the tables, with ``force_delegation``: the coordinator sends the call to the worker
that holds the organization's shards, which runs it there (in a transaction block too), so a save is
one round trip to one worker and commits in one phase. On a schema already distributed this
revision distributes them itself; ``memora-pg db distribute`` does it for a schema distributed later.

Inside a function each statement sees what the ones before it wrote, so a contrary memory's link
leaves out the call's own new memories: it supersedes a memory that existed before the call.
"""

from __future__ import annotations

from alembic import op
from memora_pg.citus import if_distributed
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed
from memora_pg.sql_text import render

revision = "0016"
down_revision = "0015"

# Each function by its name, from its source file of this revision (memora_pg/sql/functions/NAME.0016.sql).
# PL/pgSQL resolves the functions a body calls when it runs, so any order works.
NAMES = ("append_messages", "clock_superseded", "write_memories", "save_interaction", "record_history", "add_memories")
FUNCTIONS = {name: function_source(name, revision) for name in NAMES}

# On a distributed schema the functions are distributed too (memora_pg.citus.if_distributed decides). One
# connection per worker for the rest of the transaction: Citus refuses a function command after a parallel
# operation in the same transaction.
DISTRIBUTED_ON_CITUS = """\
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
        FOREACH written IN ARRAY ARRAY[{functions}] LOOP
            EXECUTE 'SELECT create_distributed_function($1, $2, colocate_with => $3, force_delegation => true)'
                USING written, 'p_org_id', '"{schema}".organizations';
        END LOOP;
"""


def upgrade() -> None:
    schema = options().schema
    for definition in FUNCTIONS.values():
        op.execute(installed(definition, schema))
    signatures = ", ".join(f"'\"{schema}\".{name}'::regproc::oid::regprocedure" for name in FUNCTIONS)
    distribute = render(DISTRIBUTED_ON_CITUS, schema=schema, functions=signatures)
    op.execute(if_distributed(schema, distribute, declarations="written regprocedure;"))


def downgrade() -> None:
    schema = options().schema
    for name in reversed(FUNCTIONS):
        op.execute(f'DROP FUNCTION "{schema}".{name}')
