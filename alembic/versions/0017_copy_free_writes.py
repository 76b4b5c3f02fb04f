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

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql_text import render

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_MESSAGES = """
CREATE OR REPLACE FUNCTION "{schema}".append_messages(
    p_org_id text, p_interaction_id text, p_start int, p_roles text[], p_contents text[]
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    written bigint;
BEGIN
    WITH appended AS (
        INSERT INTO "{schema}".messages (org_id, interaction_id, msg_position, role, content)
        SELECT p_org_id, p_interaction_id, p_start + given.n - 1, given.role, given.content
        FROM unnest(p_roles, p_contents) WITH ORDINALITY AS given(role, content, n)
        RETURNING 1
    )
    SELECT count(*) INTO written FROM appended;
END
$body$
"""

# 0016's rules, each insert in the form above. A stored id (``p_upsert``) is read first, so the new rows
# need no ``ON CONFLICT``.
WRITE_MEMORIES = """
CREATE OR REPLACE FUNCTION "{schema}".write_memories(
    p_org_id text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_upsert boolean,
    p_source_memory_ids uuid[], p_source_positions int[],
    p_new_ids uuid[], p_old_ids uuid[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (linked uuid[])
LANGUAGE plpgsql AS $body$
DECLARE
    own uuid[] := '{}';
    others uuid[] := '{}';
    done uuid;
    written bigint;
BEGIN
    IF p_upsert THEN
        SELECT coalesce(array_agg(m.memory_id) FILTER (WHERE m.user_id = p_user_id), '{}'),
               coalesce(array_agg(m.memory_id) FILTER (WHERE m.user_id <> p_user_id), '{}')
        INTO own, others
        FROM "{schema}".memories AS m
        WHERE m.org_id = p_org_id AND m.memory_id = ANY(p_memory_ids);
        IF cardinality(others) > 0 THEN
            RAISE unique_violation USING CONSTRAINT = 'pk_memories',
                MESSAGE = format('memories %s belong to another user of the organization', others);
        END IF;
    END IF;
    IF cardinality(own) > 0 THEN
        UPDATE "{schema}".memories AS m
        SET memory = given.memory, agent_id = p_agent_id, obtained_at = p_at, embedding = given.embedding,
            search_text = CASE WHEN given.embedding IS NOT NULL THEN "{schema}".to_search_text(given.memory) END
        FROM unnest(p_memory_ids, p_memories, p_embeddings) AS given(memory_id, memory, embedding)
        WHERE m.org_id = p_org_id AND m.memory_id = given.memory_id AND m.memory_id = ANY(own);
    END IF;

    WITH added AS (
        INSERT INTO "{schema}".memories
            (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, metadata,
             embedding, search_text, expires_at)
        SELECT p_org_id, given.memory_id, p_user_id, p_agent_id, p_interaction_id, given.memory, p_at,
               coalesce(CAST(given.metadata AS jsonb), '{}'), given.embedding,
               CASE WHEN given.embedding IS NOT NULL THEN "{schema}".to_search_text(given.memory) END,
               given.expires_at
        FROM unnest(p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at)
             WITH ORDINALITY AS given(memory_id, memory, metadata, embedding, expires_at, n)
        WHERE given.memory_id <> ALL(own)
        ORDER BY given.n
        RETURNING 1
    )
    SELECT count(*) INTO written FROM added;

    WITH sourced AS (
        INSERT INTO "{schema}".memory_sources (org_id, memory_id, interaction_id, msg_position)
        SELECT p_org_id, given.memory_id, p_interaction_id, given.msg_position
        FROM unnest(p_source_memory_ids, p_source_positions) AS given(memory_id, msg_position)
        RETURNING 1
    )
    SELECT count(*) INTO written FROM sourced;

    -- Each contrary memory supersedes a memory the same user had before this call.
    linked := '{}';
    IF cardinality(p_new_ids) > 0 THEN
        FOR done IN
            INSERT INTO "{schema}".memory_updates (org_id, new_memory_id, old_memory_id)
            SELECT p_org_id, contrary.new_id, old.memory_id
            FROM unnest(p_new_ids, p_old_ids) AS contrary(new_id, old_id)
            JOIN "{schema}".memories AS old
              ON old.org_id = p_org_id AND old.user_id = p_user_id AND old.memory_id = contrary.old_id
             AND old.memory_id <> ALL(p_memory_ids)
            RETURNING new_memory_id
        LOOP
            linked := linked || done;
        END LOOP;
        PERFORM "{schema}".clock_superseded(p_org_id, linked);
    END IF;

    IF p_audit_method IS NOT NULL THEN
        INSERT INTO "{schema}".audit_log (org_id, event_id, user_id, agent_id, method, ids)
        VALUES (p_org_id, p_audit_event_id, p_audit_user_id, p_audit_agent_id, p_audit_method, p_audit_ids);
    END IF;
    RETURN NEXT;
END
$body$
"""

RECORD_HISTORY = """
CREATE OR REPLACE FUNCTION "{schema}".record_history(
    p_org_id text, p_event_ids uuid[], p_memory_ids uuid[], p_user_ids text[], p_events text[],
    p_old_memories text[], p_new_memories text[], p_actor_ids text[], p_roles text[], p_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
    written bigint;
BEGIN
    WITH recorded AS (
        INSERT INTO "{schema}".memory_history
            (org_id, event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, is_deleted,
             created_at)
        SELECT p_org_id, given.event_id, given.memory_id, given.user_id, given.event, given.old_memory,
               given.new_memory, given.actor_id, given.role, given.event = 'DELETE', coalesce(p_at, now())
        FROM unnest(p_event_ids, p_memory_ids, p_user_ids, p_events, p_old_memories, p_new_memories, p_actor_ids,
                    p_roles)
             WITH ORDINALITY AS given(event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, n)
        ORDER BY given.n
        RETURNING 1
    )
    SELECT count(*) INTO written FROM recorded;
END
$body$
"""

FUNCTIONS = {"append_messages": APPEND_MESSAGES, "write_memories": WRITE_MEMORIES, "record_history": RECORD_HISTORY}


def _revision_0016() -> ModuleType:
    """Revision 0016, whose bodies a downgrade puts back (a revision is never edited: its text is the source)."""
    path = Path(__file__).with_name("0016_write_functions.py")
    spec = importlib.util.spec_from_file_location("memora_pg_revision_0016", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    # CREATE OR REPLACE keeps each function's identity, so on Citus it stays distributed (and Citus sends the
    # new body to the workers).
    schema = options().schema
    for definition in FUNCTIONS.values():
        op.execute(render(definition, schema=schema))


def downgrade() -> None:
    schema = options().schema
    before = _revision_0016().FUNCTIONS
    for name in FUNCTIONS:
        op.execute(render(before[name].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1), schema=schema))
