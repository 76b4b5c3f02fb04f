"""Interactions: one conversation thread of a user, its messages at positions 0..n-1, its memories."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, update

from memora_pg.driver import Connection, Row
from memora_pg.graph import audit, memories, versions
from memora_pg.graph.render import WITH_AGENT_AND_SOURCES, blocks, to_model
from memora_pg.models import Interaction, trusted
from memora_pg.schema import interactions, messages
from memora_pg.sql_text import render
from memora_pg.statements import Statement, from_json, function_call


@dataclass(frozen=True)
class Message:
    role: str | None
    content: str | None


# Locks the interaction row, so that concurrent updates of one interaction run one after the
# other. The row alone: Citus refuses FOR UPDATE on a statement with a subquery in its target list.
LOCK_FOR_UPDATE = """
SELECT 1 FROM {schema}.interactions AS i
WHERE i.org_id = :org_id AND i.user_id = :user_id AND i.interaction_id = :interaction_id
FOR UPDATE OF i
"""

# Read after the lock is held, in a statement of its own: under READ COMMITTED a new statement
# sees what the update that held the lock before us committed; the locking statement's own
# subqueries would still see the snapshot taken before it waited. Whether the agent exists too.
STORED_MESSAGES = """
SELECT (SELECT json_agg(json_build_array(g.role, g.content) ORDER BY g.msg_position)
        FROM {schema}.messages AS g
        WHERE g.org_id = :org_id AND g.interaction_id = :interaction_id) AS messages,
       EXISTS (SELECT 1 FROM {schema}.agents AS a WHERE a.org_id = :org_id AND a.agent_id = :agent_id)
           AS agent_exists
"""


async def lock_for_update(
    conn: Connection, *, org_id: str, user_id: str, interaction_id: str, agent_id: str
) -> tuple[list[Message], bool] | None:
    """Lock the interaction; its stored messages and whether the agent exists, or None when it does not exist."""
    params = {"org_id": org_id, "user_id": user_id, "interaction_id": interaction_id, "agent_id": agent_id}
    if await conn.first(LOCK_FOR_UPDATE, params) is None:
        return None
    found = await conn.one(STORED_MESSAGES, params)
    stored = [Message(role, content) for role, content in from_json(found.messages) or []]
    return stored, bool(found.agent_exists)


def divergence(stored: Sequence[Message], new: Sequence[Message]) -> int:
    """The first position where the new complete list differs from the stored one (§7)."""
    for position, (old, given) in enumerate(zip(stored, new, strict=False)):
        if old != given:
            return position
    return min(len(stored), len(new))


# New messages from position ``start`` on: the schema's ``append_messages``, which a save calls too.
APPEND_MESSAGES = function_call("append_messages", ("org_id", "interaction_id", "start", "roles", "contents"))


def message_arguments(messages: Sequence[Message]) -> dict[str, list[str | None]]:
    """Messages as a write function takes them: their roles and their contents, in order."""
    return {"roles": [message.role for message in messages], "contents": [message.content for message in messages]}


async def append_messages(
    conn: Connection, *, org_id: str, interaction_id: str, start: int, new: Sequence[Message]
) -> None:
    if not new:
        return
    await conn.execute(
        APPEND_MESSAGES,
        {
            "org_id": org_id,
            "interaction_id": interaction_id,
            "start": start,
            **message_arguments(new),
        },
    )


# A turn of a conversation the caller names (migration 0018's ``open_interaction``): the organization and the
# user made on first use, the interaction opened or locked, the messages appended after the last one.
OPEN_TURN = function_call(
    "open_interaction",
    ("org_id", "org_name", "user_id", "agent_id", "interaction_id", "at", "roles", "contents", *audit.ARGUMENTS),
)


async def append_turn(
    conn: Connection,
    *,
    org_id: str,
    org_name: str,
    user_id: str,
    agent_id: str,
    interaction_id: str,
    new: Sequence[Message],
    audited: audit.Entry | None,
) -> bool:
    """Append ``new`` to the user's interaction, opening it on first use; False (nothing written) when the
    interaction is another user's."""
    params = {
        "org_id": org_id,
        "org_name": org_name,
        "user_id": user_id,
        "agent_id": agent_id,
        "interaction_id": interaction_id,
        "at": None,  # now
        **message_arguments(new),
        **audit.arguments(audited),
    }
    return bool(await conn.scalar(OPEN_TURN, params))


# The messages of the user's interaction, in order (none when it is another user's or does not exist).
CONVERSATION = """
SELECT m.role, m.content
FROM {schema}.messages AS m
JOIN {schema}.interactions AS i USING (org_id, interaction_id)
WHERE m.org_id = :org_id AND m.interaction_id = :interaction_id AND i.user_id = :user_id
ORDER BY m.msg_position
"""


async def conversation(conn: Connection, *, org_id: str, user_id: str, interaction_id: str) -> list[Message]:
    params = {"org_id": org_id, "user_id": user_id, "interaction_id": interaction_id}
    return [Message(row.role, row.content) for row in await conn.fetch(CONVERSATION, params)]


async def truncate_messages(conn: Connection, *, org_id: str, interaction_id: str, start: int) -> None:
    """Delete the messages from ``start`` on; the source links into them go by cascade, the memories stay."""
    await conn.execute(
        delete(messages).where(
            messages.c.org_id == org_id,
            messages.c.interaction_id == interaction_id,
            messages.c.msg_position >= start,
        )
    )


async def touch(conn: Connection, *, org_id: str, interaction_id: str, agent_id: str, at: datetime) -> None:
    await conn.execute(
        update(interactions)
        .where(interactions.c.org_id == org_id, interactions.c.interaction_id == interaction_id)
        .values(updated_at=at, agent_id=agent_id)
    )


# -- reading ---------------------------------------------------------------------------------

# One statement for a page of interactions with their messages and their memories (each with
# the agent's label and its sources). Messages and memories are read only when asked for. Every
# table is pinned to :org_id (see render.WITH_AGENT_AND_SOURCES).
READ = """
WITH chosen AS (
    SELECT * FROM {schema}.interactions
    WHERE org_id = :org_id AND user_id = :user_id {chosen}
)
SELECT i.org_id, i.user_id, i.agent_id, i.interaction_id, i.created_at, i.updated_at,
       owner.user_name,
       CASE WHEN :with_messages THEN (
           SELECT json_agg(
                      json_build_object('role', g.role, 'content', g.content, 'msg_position', g.msg_position)
                      ORDER BY g.msg_position)
           FROM {schema}.messages AS g
           WHERE g.org_id = :org_id AND g.interaction_id = i.interaction_id
       ) END AS messages,
       CASE WHEN :with_memories THEN (
           SELECT json_agg(
                      json_build_object(
                          'org_id', m.org_id, 'user_id', m.user_id, 'agent_id', m.agent_id,
                          'interaction_id', m.interaction_id, 'memory_id', m.memory_id, 'memory', m.memory,
                          'obtained_at', m.obtained_at, 'user_name', owner.user_name,
                          'agent_label', agent.agent_label, 'sources', sourced.sources)
                      ORDER BY m.seq)
           FROM {schema}.memories AS m
           {with_agent_and_sources}
           WHERE m.org_id = :org_id AND m.interaction_id = i.interaction_id
       ) END AS memories
FROM chosen AS i
LEFT JOIN {schema}.users AS owner ON owner.org_id = :org_id AND owner.user_id = i.user_id
ORDER BY i.updated_at DESC, i.seq DESC
"""

# {chosen} ends the WHERE clause of the chosen interactions: one of them, or a page.
ONE = render(READ, chosen="AND interaction_id = :interaction_id", with_agent_and_sources=WITH_AGENT_AND_SOURCES)
PAGE = render(
    READ,
    chosen="ORDER BY updated_at DESC, seq DESC OFFSET :skip LIMIT :limit",
    with_agent_and_sources=WITH_AGENT_AND_SOURCES,
)


def interaction_of(row: Row) -> Interaction:
    """A row of :data:`ONE` or :data:`PAGE` as the contract's ``Interaction``, constructed without validating
    again what the statement built (as :func:`memora_pg.graph.render.to_model` does)."""
    message_rows = from_json(row.messages) or []
    memory_rows = from_json(row.memories) or []
    return trusted(
        Interaction,
        {
            "org_id": row.org_id,
            "user_id": row.user_id,
            "agent_id": row.agent_id,
            "interaction_id": row.interaction_id,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "messages": blocks(message_rows),
            "memories": [to_model(memory) for memory in memory_rows],
        },
    )


def one(*, org_id: str, user_id: str, interaction_id: str, with_messages: bool, with_memories: bool) -> Statement:
    """The interaction (a row for :func:`interaction_of`, or none)."""
    params = {
        "org_id": org_id,
        "user_id": user_id,
        "interaction_id": interaction_id,
        "with_messages": with_messages,
        "with_memories": with_memories,
    }
    return Statement(ONE, params)


def page(*, org_id: str, user_id: str, with_messages: bool, with_memories: bool, skip: int, limit: int) -> Statement:
    """A page of the user's interactions (rows for :func:`interaction_of`), most recently updated first."""
    params = {
        "org_id": org_id,
        "user_id": user_id,
        "with_messages": with_messages,
        "with_memories": with_memories,
        "skip": skip,
        "limit": limit,
    }
    return Statement(PAGE, params)


LOCK_FOR_DELETE = """
SELECT 1 FROM {schema}.interactions
WHERE org_id = :org_id AND user_id = :user_id AND interaction_id = :interaction_id
FOR UPDATE
"""

# Read after the lock, in its own statement, so that memories added by an update that committed
# while we waited are seen too (see STORED_MESSAGES).
PRODUCED_MEMORIES = """
SELECT memory_id FROM {schema}.memories WHERE org_id = :org_id AND interaction_id = :interaction_id
"""


async def memory_ids(conn: Connection, *, org_id: str, user_id: str, interaction_id: str) -> list[uuid.UUID] | None:
    """Lock the interaction and list the memories it produced; None when it does not exist.

    The set to delete is decided inside the deleting transaction, after the lock is held.
    """
    params = {"org_id": org_id, "user_id": user_id, "interaction_id": interaction_id}
    if await conn.first(LOCK_FOR_DELETE, params) is None:
        return None
    return await conn.scalars(PRODUCED_MEMORIES, params)


async def delete_one(
    conn: Connection, *, org_id: str, user_id: str, interaction_id: str, memory_ids: list[uuid.UUID]
) -> None:
    """Delete the (locked) interaction, its messages and its memories, repairing their chains."""
    await versions.relink_around(conn, org_id=org_id, memory_ids=memory_ids)
    # The memories go by cascade from the interaction, and their sources and links with them.
    await conn.execute(
        delete(interactions).where(
            interactions.c.org_id == org_id,
            interactions.c.user_id == user_id,
            interactions.c.interaction_id == interaction_id,
        )
    )


async def delete_for_user(conn: Connection, *, org_id: str, user_id: str) -> int:
    """Delete every interaction of the user with its messages, and every memory of the user; rows deleted."""
    removed = await memories.delete_for_user(conn, org_id=org_id, user_id=user_id)
    return removed + await conn.execute(
        delete(interactions).where(interactions.c.org_id == org_id, interactions.c.user_id == user_id)
    )
