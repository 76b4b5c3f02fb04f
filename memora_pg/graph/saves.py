"""Where memories are written: every statement that stores new memories, each one round trip.

Each statement is one ``INSERT`` per table, chained as data-modifying CTEs, built from the
same arms: the interaction (:data:`interactions.INTERACTION`), its messages
(:data:`interactions.MESSAGES`), the memory rows (:data:`memories.NEW_MEMORIES`), their source
messages (:data:`memories.SOURCES`), their CONTRARY_UPDATE links (:data:`versions.LINKS`), the ADD
events (:data:`history.ADDED`) and the call's audit row (:data:`audit.ARM`). Every arm reads the
statement's ``scope`` CTE, one row naming the organization, user, agent, interaction and time, or no
row when the write must not happen; so nothing at all is written unless, for example, the user and
the agent exist. The foreign keys between the new rows are checked at the end of the statement, when
all of them are there.

* :data:`SAVE`: a new interaction with its messages and memories (Memora's save).
* :data:`ADD`: new memories of a mem0-style collection, with the organization and user they
  need and their ADD history events.
* :data:`WRITE`: new memories of an existing interaction (an update) or of none (the vector
  store's upsert).

Each arm but the links is one definition (:class:`memora_pg.graph.rows.Rows`) with two forms: the
CTE here, and the statement of its own that each write's ``steps`` send on Citus, where the same
rows go statement by statement (see below).

A contrary memory supersedes a memory that existed before the call (its id came from an
earlier search or read): the statement's snapshot is taken before its own inserts.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memora_pg.driver import Connection, Row
from memora_pg.graph import audit, history, interactions, rows, versions
from memora_pg.graph.memories import NEW_MEMORIES, SCOPE, SOURCES, NewMemory, memory_params, scope_params
from memora_pg.sql_text import render
from memora_pg.statements import Statement

# -- statement by statement (Citus) ------------------------------------------------------------------
# On a Citus cluster each data-modifying CTE of a one-statement write is run first and its result
# broadcast to every worker, and the transaction commits in two phases on all of them. There the
# same rows are written by statements of their own (:meth:`memora_pg.graph.rows.Rows.statement`: a
# multi-row ``INSERT ... VALUES`` with the organization as a constant), in the caller's transaction.
# Citus routes such an insert to the organization's one shard and evaluates its identity defaults
# (``nextval``) on the coordinator; an ``INSERT ... SELECT FROM unnest(...)`` instead is pulled to the
# coordinator and COPYed into the shard (a two-phase commit, and ``nextval`` of the worker's sequence,
# which an application role may not use). One worker, one-phase commit.

# A contrary memory supersedes a memory that existed before the call: as a statement of its own
# after the new memories are in, the link must skip this call's own memories. It reads the old
# memory pinned to the organization, so Citus plans the whole insert on its shard.
LINKS_ALONE = render("WITH {scope}{link}", scope=SCOPE, link=render(versions.LINK, own=versions.OWN_MEMORIES_LEFT_OUT))


@dataclass(frozen=True)
class _Result:
    """A row of the shape the one-statement writes return."""

    user_exists: bool = True
    agent_exists: bool = True
    written: list[uuid.UUID] = field(default_factory=list)
    linked: list[uuid.UUID] = field(default_factory=list)


async def _memories_alone(conn: Connection, params: dict[str, Any], *, link: bool) -> _Result:
    """The memory rows, their sources, their links (with ``link``) and the audit row, one statement each."""
    written = await rows.insert(conn, NEW_MEMORIES, params)
    await rows.insert(conn, SOURCES, params)
    linked: list[uuid.UUID] = []
    if link and params["new_ids"]:
        linked = await conn.scalars(LINKS_ALONE, params)
        await versions.clock_linked(conn, org_id=params["org_id"], linked=linked)
    await rows.insert(conn, audit.ARM, params)
    return _Result(written=written, linked=linked)


# The arms that write new memories with their sources, their contrary links and the call's audit row.
_MEMORY_ARMS = {
    "new_memories": NEW_MEMORIES.cte(),
    "sources": SOURCES.cte(),
    "links": versions.LINKS,
    "audit": audit.ARM.cte(),
}

SAVE = render(
    """
WITH RECURSIVE {scope},{interaction},
{new_messages},
{new_memories},
{sources},
{links},
{audit}
SELECT owners.user_exists, owners.agent_exists, ARRAY(SELECT new_memory_id FROM links) AS linked
FROM owners
""",
    scope=interactions.OWNED_SCOPE,
    interaction=interactions.INTERACTION.cte(),
    new_messages=interactions.MESSAGES.cte(),
    **_MEMORY_ARMS,
)


@dataclass(frozen=True)
class Saved:
    user_exists: bool
    agent_exists: bool
    # The contrary memories whose target was not found for this user: stored without a link.
    unlinked: list[uuid.UUID]


def save(
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str,
    at: datetime,
    messages: Sequence[interactions.Message],
    items: Sequence[NewMemory],
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing the interaction and everything in it, unless the user or the agent is
    missing (then nothing); :func:`saved` reads its result."""
    params = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at),
        **interactions.message_params(messages),
        **memory_params(items),
        **versions.link_params(items),
        **audit.arm_params(audited),
    }

    async def steps(conn: Connection) -> list[_Result]:
        user_exists, agent_exists = await interactions.create(
            conn, org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at
        )
        if not (user_exists and agent_exists):
            return [_Result(user_exists=user_exists, agent_exists=agent_exists)]
        await rows.insert(conn, interactions.MESSAGES, params)
        return [await _memories_alone(conn, params, link=True)]

    return Statement(SAVE, params, steps)


def saved(rows: Sequence[Row], items: Sequence[NewMemory]) -> Saved:
    """What :func:`save`'s statement did."""
    (row,) = rows
    return Saved(
        user_exists=bool(row.user_exists),
        agent_exists=bool(row.agent_exists),
        unlinked=versions.unlinked(items, row.linked),
    )


WRITE = render(
    """
WITH RECURSIVE {scope},
{new_memories},
{sources},
{links},
{audit}
SELECT ARRAY(SELECT memory_id FROM new_memories) AS written, ARRAY(SELECT new_memory_id FROM links) AS linked
""",
    scope=SCOPE,
    **_MEMORY_ARMS,
)


@dataclass(frozen=True)
class Written:
    # The ids written (an upsert of an id another user has writes nothing for it).
    written: list[uuid.UUID]
    # The contrary memories stored without a link (their target was not found for the user).
    unlinked: list[uuid.UUID]


def write(
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str | None,
    at: datetime,
    items: Sequence[NewMemory],
    link: bool,
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing ``items`` with their sources (and, with ``link``, their contrary links)
    and the audit row; :func:`written` reads its result."""
    params = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=interaction_id, at=at),
        **memory_params(items),
        **versions.link_params(items if link else ()),
        **audit.arm_params(audited),
    }

    async def steps(conn: Connection) -> list[_Result]:
        return [await _memories_alone(conn, params, link=link)]

    return Statement(WRITE, params, steps)


def written(rows: Sequence[Row], items: Sequence[NewMemory]) -> Written:
    """What :func:`write`'s statement did."""
    (row,) = rows
    return Written(written=list(row.written), unlinked=versions.unlinked(items, row.linked))


COLLECTION_ORGANIZATION = """
INSERT INTO {schema}.organizations (org_id, org_name) VALUES (:org_id, :collection)
ON CONFLICT DO NOTHING"""
COLLECTION_USER = """
INSERT INTO {schema}.users (org_id, user_id, user_name) VALUES (:org_id, :user_id, :user_name)
ON CONFLICT DO NOTHING"""

ADD = render(
    """
WITH organization AS ({organization}
),
collection_user AS ({user}
),
{scope},
{new_memories},
{added},
{audit}
SELECT 1
""",
    organization=COLLECTION_ORGANIZATION,
    user=COLLECTION_USER,
    scope=SCOPE,
    new_memories=NEW_MEMORIES.cte(),
    added=history.ADDED.cte(),
    audit=audit.ARM.cte(),
)


def add(
    *,
    org_id: str,
    collection: str,
    user_id: str,
    agent_id: str,
    at: datetime,
    items: Sequence[NewMemory],
    audited: audit.Entry | None,
) -> Statement:
    """The statement writing mem0-style ``items`` (each with its vector) for the user, with their ADD
    events and the audit row.

    The collection's organization and the user are created if missing, never changed.
    """
    params: dict[str, Any] = {
        **scope_params(org_id=org_id, user_id=user_id, agent_id=agent_id, interaction_id=None, at=at),
        "collection": collection,
        "user_name": user_id or "(no user)",
        **memory_params(items),
        **history.added_params(items),
        **audit.arm_params(audited),
    }

    async def steps(conn: Connection) -> list[_Result]:
        await conn.execute(COLLECTION_ORGANIZATION, params)
        await conn.execute(COLLECTION_USER, params)
        await rows.insert(conn, NEW_MEMORIES, params)
        await rows.insert(conn, history.ADDED, params)
        await rows.insert(conn, audit.ARM, params)
        return [_Result()]

    return Statement(ADD, params, steps)
