"""What a Memora save or update writes: which vector store gets the memories (the graph's own, whose vectors
commit with the rows, or one outside this database), the plan made before the transaction opens (messages,
memories and their vectors, validated and embedded), and the steps that follow the memories' write in it
(the linear chains' links, the vector store outside).

``PostgresGraphDB.save_interaction_with_memories`` and ``update_interaction_and_memories`` share
these; each chooses its own transaction.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memora_pg.contract import BaseVectorDB
from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.errors import NotFoundError
from memora_pg.graph import audit, saves, versions
from memora_pg.graph import validate as check
from memora_pg.graph.interactions import Message
from memora_pg.graph.memories import NewMemory
from memora_pg.vector import PgVectorDB

logger = logging.getLogger("memora_pg.store")


@dataclass(frozen=True)
class Write:
    at: datetime
    messages: list[Message]
    items: list[NewMemory]
    # The graph's own vector store (vectors written with the rows), else one outside this database.
    native: PgVectorDB | None
    foreign: BaseVectorDB | None


async def vector_stores(
    store: BaseVectorDB | None, database: Database
) -> tuple[PgVectorDB | None, BaseVectorDB | None]:
    """Where the memories' vectors go: (``store`` when it is memora_pg's own on ``database``'s server, whose
    writes commit with the rows; else None) and (``store`` when it is any other, written after the rows)."""
    if isinstance(store, PgVectorDB):
        if store.database is database:
            return store, None
        await database.engine()
        await store.database.engine()
        if store.database.identity() == database.identity():
            return store, None
    return None, store


async def prepare(
    given: object,
    native: PgVectorDB | None,
    foreign: BaseVectorDB | None,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
) -> Write:
    """Everything a save or update writes, validated and embedded before its transaction opens
    (each memory's text as a read shows it: :meth:`PgVectorDB.embed_memories`)."""
    payload = check.payload(given)
    new_messages = check.messages(payload)
    items = check.new_memories(payload, len(new_messages))
    return Write(
        at=payload.interaction_date,
        messages=new_messages,
        items=await _embedded(native, items, org_id=org_id, user_id=user_id, agent_id=agent_id),
        native=native,
        foreign=foreign,
    )


async def _embedded(
    native: PgVectorDB | None, items: list[NewMemory], *, org_id: str, user_id: str, agent_id: str
) -> list[NewMemory]:
    """The items with their embeddings, computed before any transaction opens."""
    if native is None or not items:
        return items
    texts = [item.text for item in items]
    vectors = await native.embed_memories(texts, org_id=org_id, user_id=user_id, agent_id=agent_id)
    return [replace(item, embedding=vector) for item, vector in zip(items, vectors, strict=True)]


async def to_interaction(
    conn: Connection,
    org_id: str,
    user_id: str,
    agent_id: str,
    interaction_id: str,
    write: Write,
    audited: audit.Entry | None,
    *,
    linear: bool,
) -> list[uuid.UUID]:
    """The new memories of an existing interaction, in the caller's transaction; the ones left unlinked."""
    statement = saves.write(
        org_id=org_id,
        user_id=user_id,
        agent_id=agent_id,
        interaction_id=interaction_id,
        at=write.at,
        items=write.items,
        link=not linear,
        audited=audited,
    )
    unlinked = saves.written(await conn.run(statement), write.items).unlinked
    return await linked_and_foreign(conn, org_id, user_id, agent_id, write, unlinked, linear=linear)


async def linked_and_foreign(
    conn: Connection,
    org_id: str,
    user_id: str,
    agent_id: str,
    write: Write,
    unlinked: list[uuid.UUID],
    *,
    linear: bool,
) -> list[uuid.UUID]:
    """After the memories are written: linear chains link each contrary memory to its chain's current
    version, and a vector store outside this database gets the memories; the ones left unlinked."""
    if linear:
        unlinked = await versions.link_linear(conn, org_id=org_id, user_id=user_id, contrary=write.items)
    if write.foreign is not None and write.items:
        # Upstream's order for a store outside this database: last, before the commit.
        await write.foreign.add_memories(
            org_id=org_id,
            user_id=user_id,
            agent_id=agent_id,
            memory_ids=[str(item.memory_id) for item in write.items],
            memories=[item.text for item in write.items],
            obtained_at=write.at.isoformat(),
        )
    return unlinked


def owners_exist(saved: saves.Saved) -> None:
    if not saved.user_exists:
        raise NotFoundError(check.USER_MISSING)
    if not saved.agent_exists:
        raise NotFoundError(check.AGENT_MISSING)


def ids(interaction_id: str, write: Write) -> dict[str, Any]:
    """The audit row's ids of a save or update."""
    return {"interaction_id": interaction_id, "memory_ids": [str(item.memory_id) for item in write.items]}


def warn_unlinked(unlinked: list[uuid.UUID]) -> None:
    for memory_id in unlinked:
        logger.warning(
            "contrary memory %s names a memory that does not exist for this user; stored without a link", memory_id
        )
