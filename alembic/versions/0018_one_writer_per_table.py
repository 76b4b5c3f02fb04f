"""The write functions are the only writers of memora_pg's tables: what the Agent Framework history
provider, the importers and the mem0-style face wrote with statements of their own, they now write with
a function call.

* ``ensure_owners`` (new): the organization and the users a write needs, made on first sight. It is the
  one home of a rule that five statements held.
* ``record_audit`` (new): the audit row of a public call.
* ``open_interaction`` (new): a turn of a conversation the caller names (an Agent Framework session).
  The organization and the user are made on first use, the interaction is opened or locked, and the
  messages are appended after the last one, with an audit row. Another user's interaction of the same
  id is left alone.
* ``write_contents`` (new): JSON entries of the AutoGen face under ids the caller chose, added or
  rewritten (an import's items, run again).
* ``update_memories`` (new): memories changed in place, their ids kept, with their UPDATE events and the
  audit row: the mem0-style update, which took five statements, is one call.
* ``append_messages``: without a start, the messages follow the interaction's last one.
* ``record_history``: each event at its own time and, where given, with its own deleted flag. An event
  already recorded is skipped; the function returns how many it recorded. This is an import's history,
  run again.
* ``write_memories``: ``p_existing`` (``refuse``, ``upsert``, ``rewrite``) replaces ``p_upsert``. Rows may
  name their own user, agent and time. This is an import's memories of many users, its changed ones
  rewritten.
* ``add_memories`` and ``save_interaction``: the same rules, calling the functions above by name.

``record_history`` and ``write_memories`` change their arguments, so they are dropped and created again,
and distributed again on a distributed schema. The others are created or replaced. Each new function
takes the organization first, so ``memora-pg db distribute`` distributes it too.
"""

from __future__ import annotations

from alembic import op
from memora_pg.citus import distribute_functions
from memora_pg.migrations import options
from memora_pg.sql import function_source, installed, replacing
from memora_pg.sql_text import quoted

revision = "0018"
down_revision = "0017"

# The argument types of the two functions whose arguments change, before and after this revision.
BEFORE = {
    "record_history": "text, uuid[], uuid[], text[], text[], text[], text[], text[], text[], timestamptz",
    "write_memories": "text, text, text, text, timestamptz, uuid[], text[], text[], vector[], timestamptz[], boolean, "
    "uuid[], int[], uuid[], uuid[], uuid, text, text, text, jsonb",
}
AFTER = {
    "record_history": "text, uuid[], uuid[], text[], text[], text[], text[], text[], text[], timestamptz[], boolean[]",
    "write_memories": "text, text, text, text, timestamptz, uuid[], text[], text[], vector[], timestamptz[], text, "
    "uuid[], int[], uuid[], uuid[], uuid, text, text, text, jsonb, text[], text[], timestamptz[]",
}
NEW = {
    "ensure_owners": "text, text, text[], text[]",
    "record_audit": "text, uuid, text, text, text, jsonb",
    "open_interaction": "text, text, text, text, text, timestamptz, text[], text[], uuid, text, text, text, jsonb",
    "write_contents": "text, text, uuid[], text[], text[], text[], vector[], timestamptz[]",
    "update_memories": "text, uuid[], text[], vector[], text[], boolean[], timestamptz[], "
    "uuid, text, text, text, jsonb",
}

# From their source files (memora_pg/sql/functions/NAME.0018.sql), callees first.
NAMES = (*NEW, *AFTER, "append_messages", "add_memories", "save_interaction")
FUNCTIONS = {name: function_source(name, revision) for name in NAMES}


def _run(definition: str, schema: str) -> None:
    op.execute(installed(definition, schema))


def upgrade() -> None:
    schema = options().schema
    for name, arguments in BEFORE.items():
        op.execute(f"DROP FUNCTION {quoted(schema)}.{name}({arguments})")
    for definition in FUNCTIONS.values():
        _run(definition, schema)
    created = {**NEW, **AFTER}
    op.execute(distribute_functions(schema, [f"{name}({arguments})" for name, arguments in created.items()]))


def downgrade() -> None:
    schema = options().schema
    # 0017's and 0016's versions, which call each other by position.
    for name in ("add_memories", "save_interaction"):
        _run(replacing(function_source(name, "0016")), schema)
    _run(function_source("append_messages", "0017"), schema)
    for name, arguments in {**AFTER, **NEW}.items():
        op.execute(f"DROP FUNCTION {quoted(schema)}.{name}({arguments})")
    for name in BEFORE:
        _run(function_source(name, "0017"), schema)
    op.execute(distribute_functions(schema, [f"{name}({arguments})" for name, arguments in BEFORE.items()]))
