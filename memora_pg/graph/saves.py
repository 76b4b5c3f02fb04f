"""Where memories are written: each write is one call of a database function, on every engine.

The rules live in the functions of migration 0016, one statement each here:

* :data:`SAVE` (``save_interaction``): a new interaction with its messages and memories, written only
  when its user and agent exist (Memora's save);
* :data:`WRITE` (``write_memories``): new memories of an existing interaction (an update) or of none
  (the vector store's upsert), with their source messages, their contrary links and the audit row;
* :data:`ADD` (``add_memories``): new memories of a mem0-style collection, with the organization and
  user they need and their ADD history events.

On Citus each function is distributed by the organization: the coordinator hands the call to the
worker that holds the organization's shards, so a save is one round trip to one worker and commits
in one phase.

A contrary memory supersedes a memory that existed before the call (its id came from an earlier
search or read), never one of the call's own new memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memora_pg.driver import Row
from memora_pg.graph import audit, history, interactions, versions
from memora_pg.graph.memories import NewMemory, memory_params, owner_params
from memora_pg.statements import Statement, function_call

# Each function's arguments, as its statement's parameters are named.
OWNERS = ("org_id", "user_id", "agent_id")
MEMORIES = ("memory_ids", "memories", "metadata", "embeddings", "expires_at")
SOURCES = ("source_memory_ids", "source_positions")
LINKS = ("new_ids", "old_ids")
AUDIT = audit.ARGUMENTS

SAVE = function_call(
    "save_interaction", (*OWNERS, "interaction_id", "at", "roles", "contents", *MEMORIES, *SOURCES, *LINKS, *AUDIT)
)
# Each row's own owners and time (migration 0018), for a write of many users' memories.
ROW_OWNERS = ("user_ids", "agent_ids", "obtained_at")
WRITE = function_call(
    "write_memories", (*OWNERS, "interaction_id", "at", *MEMORIES, "existing", *SOURCES, *LINKS, *AUDIT, *ROW_OWNERS)
)
# What ``write_memories`` does with an id that is stored already.
EXISTING = ("refuse", "upsert", "rewrite")
ADD = function_call(
    "add_memories",
    (
        "org_id",
        "collection",
        "user_id",
        "user_name",
        "agent_id",
        "at",
        *MEMORIES,
        "event_ids",
        "actor_ids",
        "roles",
        *AUDIT,
    ),
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
    link: bool = True,
) -> Statement:
    """The statement writing the interaction and everything in it (with ``link``, the contrary memories'
    links too), unless the user or the agent is missing (then nothing); :func:`saved` reads its result."""
    return Statement(
        SAVE,
        {
            "org_id": org_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "interaction_id": interaction_id,
            "at": at,
            **interactions.message_arguments(messages),
            **memory_params(items),
            **versions.link_params(items if link else ()),
            **audit.arguments(audited),
        },
    )


def saved(rows: Sequence[Row], items: Sequence[NewMemory]) -> Saved:
    """What :func:`save`'s statement did."""
    (row,) = rows
    return Saved(
        user_exists=bool(row.user_exists),
        agent_exists=bool(row.agent_exists),
        unlinked=versions.unlinked(items, row.linked),
    )


@dataclass(frozen=True)
class Written:
    # The contrary memories stored without a link (their target was not found for the user).
    unlinked: list[uuid.UUID]


def write(
    *,
    org_id: str,
    user_id: str | None,
    agent_id: str | None,
    interaction_id: str | None,
    at: datetime | None,
    items: Sequence[NewMemory],
    link: bool,
    audited: audit.Entry | None,
    existing: str = "refuse",
) -> Statement:
    """The statement writing ``items`` with their sources (and, with ``link``, their contrary links)
    and the audit row; :func:`written` reads its result. An item's own user, agent and time, where it
    names them, replace the call's.

    ``existing`` says what an id that is stored already means: ``"refuse"``, a unique violation
    (``AlreadyExistsError``); ``"upsert"``, the user's own memory rewritten and an id of another user of
    the organization ``AlreadyExistsError`` (constraint ``pk_memories``) with nothing written;
    ``"rewrite"`` (an import), the stored memory given the item's text, vector, metadata, expiry and
    owners, its times kept."""
    if existing not in EXISTING:
        raise ValueError(f"existing is one of {EXISTING}, not {existing!r}")
    return Statement(
        WRITE,
        {
            "org_id": org_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "interaction_id": interaction_id,
            "at": at,
            **memory_params(items),
            "existing": existing,
            **versions.link_params(items if link else ()),
            **audit.arguments(audited),
            **owner_params(items),
        },
    )


def written(rows: Sequence[Row], items: Sequence[NewMemory]) -> Written:
    """What :func:`write`'s statement did."""
    (row,) = rows
    return Written(unlinked=versions.unlinked(items, row.linked))


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
    memories = memory_params(items)
    return Statement(
        ADD,
        {
            "org_id": org_id,
            "collection": collection,
            "user_id": user_id,
            "user_name": user_id or "(no user)",
            "agent_id": agent_id,
            "at": at,
            **{name: memories[name] for name in MEMORIES},
            **history.added_params(items),
            **audit.arguments(audited),
        },
    )
