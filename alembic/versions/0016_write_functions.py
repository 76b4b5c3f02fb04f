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

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from memora_pg.migrations import options
from memora_pg.sql_text import render

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_MESSAGES = """
CREATE FUNCTION "{schema}".append_messages(
    p_org_id text, p_interaction_id text, p_start int, p_roles text[], p_contents text[]
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO "{schema}".messages (org_id, interaction_id, msg_position, role, content)
    SELECT p_org_id, p_interaction_id, p_start + given.n - 1, given.role, given.content
    FROM unnest(p_roles, p_contents) WITH ORDINALITY AS given(role, content, n);
END
$body$
"""

# The versions that new links supersede get their clocks' ends: the target, and the versions before
# it whose valid time the new version ends earlier (a back-dated correction).
CLOCK_SUPERSEDED = """
CREATE FUNCTION "{schema}".clock_superseded(p_org_id text, p_linked uuid[]) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    WITH RECURSIVE superseded(memory_id, valid_from, stored_at) AS (
        SELECT edge.old_memory_id, new.obtained_at, coalesce(new.stored_at, new.obtained_at)
        FROM "{schema}".memory_updates AS edge
        JOIN "{schema}".memories AS new ON new.org_id = p_org_id AND new.memory_id = edge.new_memory_id
        WHERE edge.org_id = p_org_id AND edge.new_memory_id = ANY(p_linked)
      UNION
        SELECT edge.old_memory_id, superseded.valid_from, superseded.stored_at
        FROM superseded
        JOIN "{schema}".memory_updates AS edge
          ON edge.org_id = p_org_id AND edge.new_memory_id = superseded.memory_id
        JOIN "{schema}".memories AS earlier
          ON earlier.org_id = p_org_id AND earlier.memory_id = edge.old_memory_id
        WHERE earlier.valid_until IS NULL OR earlier.valid_until > superseded.valid_from
    )
    UPDATE "{schema}".memories AS m
    SET valid_until = least(m.valid_until, ends.valid_from), superseded_at = least(m.superseded_at, ends.stored_at)
    FROM (
        SELECT memory_id, min(valid_from) AS valid_from, min(stored_at) AS stored_at FROM superseded GROUP BY memory_id
    ) AS ends
    WHERE m.org_id = p_org_id AND m.memory_id = ends.memory_id;
END
$body$
"""

# New memories, in the order given. With ``p_upsert`` (the vector store's upsert) an id may be stored
# already: an id the user has rewrites that memory's text and vectors (its interaction, metadata and
# sources stay), and an id of another user of the organization is refused (unique_violation on
# pk_memories) before anything is written. A memory without a vector is not searchable: no full-text
# vector either.
#
# The stored ids are read first, so that the new rows go in with a plain ``INSERT ... SELECT``: Citus
# copies those straight into the shard, where an ``ON CONFLICT`` or a ``RETURNING`` would send every
# row, its vector included, through an intermediate result first.
WRITE_MEMORIES = """
CREATE FUNCTION "{schema}".write_memories(
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
    ORDER BY given.n;

    INSERT INTO "{schema}".memory_sources (org_id, memory_id, interaction_id, msg_position)
    SELECT p_org_id, given.memory_id, p_interaction_id, given.msg_position
    FROM unnest(p_source_memory_ids, p_source_positions) AS given(memory_id, msg_position);

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

SAVE_INTERACTION = """
CREATE FUNCTION "{schema}".save_interaction(
    p_org_id text, p_user_id text, p_agent_id text, p_interaction_id text, p_at timestamptz,
    p_roles text[], p_contents text[],
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_source_memory_ids uuid[], p_source_positions int[],
    p_new_ids uuid[], p_old_ids uuid[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS TABLE (user_exists boolean, agent_exists boolean, linked uuid[])
LANGUAGE plpgsql AS $body$
BEGIN
    SELECT EXISTS (SELECT FROM "{schema}".users WHERE org_id = p_org_id AND user_id = p_user_id),
           EXISTS (SELECT FROM "{schema}".agents WHERE org_id = p_org_id AND agent_id = p_agent_id)
    INTO user_exists, agent_exists;
    linked := '{}';
    IF user_exists AND agent_exists THEN
        INSERT INTO "{schema}".interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
        VALUES (p_org_id, p_interaction_id, p_user_id, p_agent_id, p_at, p_at);
        PERFORM "{schema}".append_messages(p_org_id, p_interaction_id, 0, p_roles, p_contents);
        SELECT w.linked INTO linked
        FROM "{schema}".write_memories(
            p_org_id, p_user_id, p_agent_id, p_interaction_id, p_at,
            p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at, false,
            p_source_memory_ids, p_source_positions,
            p_new_ids, p_old_ids,
            p_audit_event_id, p_audit_user_id, p_audit_agent_id, p_audit_method, p_audit_ids
        ) AS w;
    END IF;
    RETURN NEXT;
END
$body$
"""

# mem0-style history events, in the order given (their ``seq`` follows it), dated ``p_at`` or, without
# it, now. Every event is written here, on the node that holds the organization's shards: on Citus a
# ``seq`` taken there and one taken on the coordinator come from different ranges, and history lists
# a memory's events in ``seq`` order.
RECORD_HISTORY = """
CREATE FUNCTION "{schema}".record_history(
    p_org_id text, p_event_ids uuid[], p_memory_ids uuid[], p_user_ids text[], p_events text[],
    p_old_memories text[], p_new_memories text[], p_actor_ids text[], p_roles text[], p_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO "{schema}".memory_history
        (org_id, event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, is_deleted, created_at)
    SELECT p_org_id, given.event_id, given.memory_id, given.user_id, given.event, given.old_memory,
           given.new_memory, given.actor_id, given.role, given.event = 'DELETE', coalesce(p_at, now())
    FROM unnest(p_event_ids, p_memory_ids, p_user_ids, p_events, p_old_memories, p_new_memories, p_actor_ids, p_roles)
         WITH ORDINALITY AS given(event_id, memory_id, user_id, event, old_memory, new_memory, actor_id, role, n)
    ORDER BY given.n;
END
$body$
"""

# mem0's history dates a memory's ADD event with the memory's creation time.
ADD_MEMORIES = """
CREATE FUNCTION "{schema}".add_memories(
    p_org_id text, p_collection text, p_user_id text, p_user_name text, p_agent_id text, p_at timestamptz,
    p_memory_ids uuid[], p_memories text[], p_metadata text[], p_embeddings vector[], p_expires_at timestamptz[],
    p_event_ids uuid[], p_actor_ids text[], p_roles text[],
    p_audit_event_id uuid, p_audit_user_id text, p_audit_agent_id text, p_audit_method text, p_audit_ids jsonb
) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO "{schema}".organizations (org_id, org_name) VALUES (p_org_id, p_collection)
    ON CONFLICT DO NOTHING;
    INSERT INTO "{schema}".users (org_id, user_id, user_name) VALUES (p_org_id, p_user_id, p_user_name)
    ON CONFLICT DO NOTHING;
    PERFORM "{schema}".write_memories(
        p_org_id, p_user_id, p_agent_id, NULL, p_at,
        p_memory_ids, p_memories, p_metadata, p_embeddings, p_expires_at, false,
        '{}', '{}',
        '{}', '{}',
        p_audit_event_id, p_audit_user_id, p_audit_agent_id, p_audit_method, p_audit_ids
    );
    PERFORM "{schema}".record_history(
        p_org_id, p_event_ids, p_memory_ids,
        array_fill(p_user_id, ARRAY[cardinality(p_memory_ids)]),
        array_fill('ADD'::text, ARRAY[cardinality(p_memory_ids)]),
        array_fill(NULL::text, ARRAY[cardinality(p_memory_ids)]),
        p_memories, p_actor_ids, p_roles, p_at
    );
END
$body$
"""

# Each function by its name. PL/pgSQL resolves the functions a body calls when it runs, so any order works.
FUNCTIONS = {
    "append_messages": APPEND_MESSAGES,
    "clock_superseded": CLOCK_SUPERSEDED,
    "write_memories": WRITE_MEMORIES,
    "save_interaction": SAVE_INTERACTION,
    "record_history": RECORD_HISTORY,
    "add_memories": ADD_MEMORIES,
}

# Decided by what the database holds (is the tenant table distributed?), not by whether Citus is installed.
# One connection per worker for the rest of the transaction: Citus refuses a function command after a
# parallel operation in the same transaction.
DISTRIBUTED_ON_CITUS = """
DO $$
DECLARE
    distributed boolean := false;
    written regprocedure;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = to_regclass($1))'
            INTO distributed USING '"{schema}".organizations';
    END IF;
    IF distributed THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
        FOREACH written IN ARRAY ARRAY[{functions}] LOOP
            EXECUTE 'SELECT create_distributed_function($1, $2, colocate_with => $3, force_delegation => true)'
                USING written, 'p_org_id', '"{schema}".organizations';
        END LOOP;
    END IF;
END $$
"""


def upgrade() -> None:
    schema = options().schema
    for definition in FUNCTIONS.values():
        op.execute(render(definition, schema=schema))
    signatures = ", ".join(f"'\"{schema}\".{name}'::regproc::oid::regprocedure" for name in FUNCTIONS)
    op.execute(render(DISTRIBUTED_ON_CITUS, schema=schema, functions=signatures))


def downgrade() -> None:
    schema = options().schema
    for name in reversed(FUNCTIONS):
        op.execute(f'DROP FUNCTION "{schema}".{name}')
