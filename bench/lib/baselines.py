"""The raw baselines: asyncpg doing the same database work as each memora_pg call.

Same rows, same indexes, same statements (or, for searches, the hand-written floor query), on
one asyncpg connection with pgvector's binary codec and asyncpg's own prepared-statement
cache. Nothing here validates, renders or builds models: what memora_pg spends beyond these
is its own overhead.

Writes have two raw sides. ``save_one`` and ``add_one`` send memora_pg's own single statement
(the ratio's baseline: the same query, so the ratio is the package's client-side cost);
``save`` and ``add`` are what one would write by hand, a statement per table in a transaction
(shown beside it, for what the single statement buys).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import numpy as np

from bench.lib.load import SCHEMA
from memora_pg import vector_params
from memora_pg.graph import interactions, saves, versions

S = f'"{SCHEMA}"'

# -- writes: the statements memora_pg sends, in the same order --------------------------------

CREATE_INTERACTION = (
    f"INSERT INTO {S}.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)"
    " SELECT $1, $2, $3, $4, $5, $5"
    f" WHERE EXISTS (SELECT FROM {S}.users WHERE org_id = $1 AND user_id = $3)"
    f" AND EXISTS (SELECT FROM {S}.agents WHERE org_id = $1 AND agent_id = $4)"
    " RETURNING interaction_id"
)
INSERT_MESSAGE = (
    f"INSERT INTO {S}.messages (org_id, interaction_id, msg_position, role, content) VALUES ($1, $2, $3, $4, $5)"
)
INSERT_MEMORY = (
    f"INSERT INTO {S}.memories (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, metadata,"
    " embedding, search_text) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_tsvector('simple', $6))"
)
INSERT_SOURCE = (
    f"INSERT INTO {S}.memory_sources (org_id, memory_id, interaction_id, msg_position) VALUES ($1, $2, $3, $4)"
)
ENSURE_ORG = f"INSERT INTO {S}.organizations (org_id, org_name) VALUES ($1, $2) ON CONFLICT DO NOTHING"
ENSURE_USER = f"INSERT INTO {S}.users (org_id, user_id, user_name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
INSERT_HISTORY = (
    f"INSERT INTO {S}.memory_history (org_id, event_id, memory_id, user_id, event, new_memory, role)"
    " VALUES ($1, $2, $3, $4, 'ADD', $5, $6)"
)
# memora_pg records every write in audit_log (Settings.audit, on by default): the raw side
# writes the same row, so the ratio stays the package's own overhead.
INSERT_AUDIT = (
    f"INSERT INTO {S}.audit_log (org_id, event_id, user_id, agent_id, method, ids) VALUES ($1, $2, $3, $4, $5, $6)"
)
SAVE_STATEMENTS = 5
ADD_STATEMENTS = 5
# The parameter names of the one-statement save and add, in the order the raw side passes them.
_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
SAVE_NAMES = list(
    saves.save(
        org_id="", user_id="", agent_id="", interaction_id="", at=_EPOCH, messages=[], items=[], audited=None
    ).params
)
ADD_NAMES = list(saves.add(org_id="", collection="", user_id="", agent_id="", at=_EPOCH, items=[], audited=None).params)


async def save(
    conn: asyncpg.Connection,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    at: datetime,
    messages: Sequence[tuple[str, str]],
    texts: Sequence[str],
    vectors: Sequence[np.ndarray[Any, Any]],
    positions: Sequence[int],
) -> str:
    """save_interaction_with_memories: the interaction, its messages, its memories and their sources."""
    interaction_id = uuid.uuid4().hex[:22]
    ids = [uuid.uuid4() for _ in texts]
    async with conn.transaction():
        created = await conn.fetchval(CREATE_INTERACTION, org_id, interaction_id, user_id, agent_id, at)
        assert created is not None
        await conn.executemany(
            INSERT_MESSAGE,
            [(org_id, interaction_id, p, role, content) for p, (role, content) in enumerate(messages)],
        )
        await conn.executemany(
            INSERT_MEMORY,
            [
                (org_id, memory_id, user_id, agent_id, interaction_id, text, at, "{}", vector)
                for memory_id, text, vector in zip(ids, texts, vectors, strict=True)
            ],
        )
        await conn.executemany(
            INSERT_SOURCE,
            [(org_id, memory_id, interaction_id, p) for memory_id, p in zip(ids, positions, strict=True)],
        )
        await conn.execute(
            INSERT_AUDIT,
            org_id,
            uuid.uuid4(),
            user_id,
            agent_id,
            "save_interaction_with_memories",
            json.dumps({"interaction_id": interaction_id, "memory_ids": [str(i) for i in ids]}),
        )
    return interaction_id


async def save_one(
    conn: asyncpg.Connection,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    at: datetime,
    messages: Sequence[tuple[str, str]],
    texts: Sequence[str],
    vectors: Sequence[np.ndarray[Any, Any]],
    positions: Sequence[int],
) -> str:
    """save_interaction_with_memories as memora_pg sends it: one statement, no transaction block."""
    interaction_id = uuid.uuid4().hex[:22]
    ids = [uuid.uuid4() for _ in texts]
    values = {
        "org_id": org_id,
        "user_id": user_id,
        "agent_id": agent_id,
        "interaction_id": interaction_id,
        "at": at,
        "obtained_at": at,
        "msg_positions": list(range(len(messages))),
        "roles": [role for role, _ in messages],
        "contents": [content for _, content in messages],
        "memory_ids": ids,
        "memories": list(texts),
        "metadata": [None] * len(ids),
        "embeddings": vector_params.many(vectors),
        "expires_at": [None] * len(ids),
        "source_memory_ids": ids,
        "source_positions": list(positions),
        "new_ids": [],
        "old_ids": [],
        "audited": True,
        "audit_event_id": uuid.uuid4(),
        "audit_user_id": user_id,
        "audit_agent_id": agent_id,
        "audit_method": "save_interaction_with_memories",
        "audit_ids": json.dumps({"interaction_id": interaction_id, "memory_ids": [str(i) for i in ids]}),
    }
    row = await conn.fetchrow(_SAVE_ONE, *[values[name] for name in SAVE_NAMES])
    assert row["user_exists"]
    assert row["agent_exists"]
    return interaction_id


async def add_one(
    conn: asyncpg.Connection,
    *,
    org_id: str,
    collection: str,
    user_id: str,
    at: datetime,
    texts: Sequence[str],
    vectors: Sequence[np.ndarray[Any, Any]],
) -> list[uuid.UUID]:
    """The mem0-style add(infer=False) as memora_pg sends it: one statement, no transaction block."""
    ids = [uuid.uuid4() for _ in texts]
    values = {
        "org_id": org_id,
        "user_id": user_id,
        "agent_id": "",
        "interaction_id": None,
        "at": at,
        "obtained_at": at,
        "collection": collection,
        "user_name": user_id,
        "memory_ids": ids,
        "memories": list(texts),
        "metadata": ['{"role": "user"}'] * len(texts),
        "embeddings": vector_params.many(vectors),
        "expires_at": [None] * len(texts),
        "source_memory_ids": [],
        "source_positions": [],
        "event_ids": [uuid.uuid4() for _ in texts],
        "actor_ids": [None] * len(texts),
        "roles": ["user"] * len(texts),
        "audited": True,
        "audit_event_id": uuid.uuid4(),
        "audit_user_id": user_id,
        "audit_agent_id": None,
        "audit_method": "mem0.add",
        "audit_ids": json.dumps({"memories": [{"id": str(i), "event": "ADD"} for i in ids]}),
    }
    await conn.execute(_ADD_ONE, *[values[name] for name in ADD_NAMES])
    return ids


async def add(
    conn: asyncpg.Connection,
    *,
    org_id: str,
    collection: str,
    user_id: str,
    at: datetime,
    texts: Sequence[str],
    vectors: Sequence[np.ndarray[Any, Any]],
) -> list[uuid.UUID]:
    """The mem0-style add(infer=False): owner rows, the memories, one ADD history event each."""
    ids = [uuid.uuid4() for _ in texts]
    async with conn.transaction():
        await conn.execute(ENSURE_ORG, org_id, collection)
        await conn.execute(ENSURE_USER, org_id, user_id, user_id)
        await conn.executemany(
            INSERT_MEMORY,
            [
                (org_id, memory_id, user_id, "", None, text, at, '{"role": "user"}', vector)
                for memory_id, text, vector in zip(ids, texts, vectors, strict=True)
            ],
        )
        await conn.executemany(
            INSERT_HISTORY,
            [
                (org_id, uuid.uuid4(), memory_id, user_id, text, "user")
                for memory_id, text in zip(ids, texts, strict=True)
            ],
        )
        await conn.execute(
            INSERT_AUDIT,
            org_id,
            uuid.uuid4(),
            user_id,
            None,
            "mem0.add",
            json.dumps({"memories": [{"id": str(i), "event": "ADD"} for i in ids]}),
        )
    return ids


# -- reads: the same statements, executed and decoded without any model building ----------------


def _positional(template: str, names: Sequence[str]) -> str:
    sql = template.replace("{schema}", S)
    for number, name in sorted(enumerate(names, start=1), key=lambda pair: -len(pair[1])):
        sql = sql.replace(f":{name}", f"${number}")
    return sql


# memora_pg passes a save's and an add's parameters by name; the raw side passes those each statement uses.
SAVE_NAMES = [name for name in SAVE_NAMES if f":{name}" in saves.SAVE]
ADD_NAMES = [name for name in ADD_NAMES if f":{name}" in saves.ADD]
_SAVE_ONE = _positional(saves.SAVE, SAVE_NAMES)
_ADD_ONE = _positional(saves.ADD, ADD_NAMES)
RESOLVE = _positional(versions.RESOLVE, ["org_id", "batches", "positions", "user_ids", "memory_ids"])
PAGE = _positional(interactions.PAGE, ["org_id", "user_id", "with_messages", "with_memories", "skip", "limit"])


async def resolve(conn: asyncpg.Connection, requests: Sequence[tuple[str, str, uuid.UUID]]) -> list[dict[str, Any]]:
    # One organization's requests (the benchmark resolves within one): one statement.
    (org_id,) = {r[0] for r in requests}
    rows = await conn.fetch(
        RESOLVE,
        org_id,
        [0] * len(requests),
        list(range(len(requests))),
        [r[1] for r in requests],
        [r[2] for r in requests],
    )
    return [{**dict(row), "sources": json.loads(row["sources"]) if row["sources"] else []} for row in rows]


async def page(conn: asyncpg.Connection, org_id: str, user_id: str, limit: int) -> list[dict[str, Any]]:
    rows = await conn.fetch(PAGE, org_id, user_id, True, True, 0, limit)
    return [
        {**dict(row), "messages": json.loads(row["messages"] or "[]"), "memories": json.loads(row["memories"] or "[]")}
        for row in rows
    ]


# -- searches: the hand-written floors ---------------------------------------------------------

# The user's rows first (btree), then an exact sort: never misses a neighbour.
USER_EXACT = f"""
WITH mine AS MATERIALIZED (
    SELECT memory_id, memory, embedding FROM {S}.memories
    WHERE org_id = $1 AND user_id = $2 AND embedding IS NOT NULL
)
SELECT memory_id, memory, 1 - (embedding <=> $3) AS score FROM mine ORDER BY embedding <=> $3 LIMIT $4
"""

# What mem0 and most hand-written code send: the planner walks HNSW and filters afterwards.
USER_NAIVE = f"""
SELECT memory_id, memory, 1 - (embedding <=> $3) AS score FROM {S}.memories
WHERE org_id = $1 AND user_id = $2 ORDER BY embedding <=> $3 LIMIT $4
"""

# Organization-wide: HNSW with iterative scans (set per transaction), or an exact scan without the index.
ORG_NEAREST = f"""
SELECT memory_id, memory, 1 - (embedding <=> $2) AS score FROM {S}.memories
WHERE org_id = $1 AND embedding IS NOT NULL ORDER BY embedding <=> $2 LIMIT $3
"""
ITERATIVE = "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)"

# A user's rows under a metadata filter, sorted exactly.
FILTERED_EXACT = f"""
WITH chosen AS MATERIALIZED (
    SELECT memory_id, memory, metadata, embedding FROM {S}.memories
    WHERE org_id = $1 AND user_id = $2 AND embedding IS NOT NULL AND metadata @> $4::jsonb
)
SELECT memory_id, memory, metadata, 1 - (embedding <=> $3) AS score FROM chosen ORDER BY embedding <=> $3 LIMIT $5
"""


async def user_exact(
    conn: asyncpg.Connection, org_id: str, user_id: str, query: np.ndarray[Any, Any], k: int
) -> list[Any]:
    return list(await conn.fetch(USER_EXACT, org_id, user_id, query, k))


async def user_naive(
    conn: asyncpg.Connection, org_id: str, user_id: str, query: np.ndarray[Any, Any], k: int
) -> list[Any]:
    return list(await conn.fetch(USER_NAIVE, org_id, user_id, query, k))


async def org_nearest(
    conn: asyncpg.Connection, org_id: str, query: np.ndarray[Any, Any], k: int, ef_search: int
) -> list[Any]:
    async with conn.transaction():
        await conn.execute(ITERATIVE, str(ef_search))
        return list(await conn.fetch(ORG_NEAREST, org_id, query, k))


async def filtered(
    conn: asyncpg.Connection, org_id: str, user_id: str, query: np.ndarray[Any, Any], metadata: dict[str, Any], k: int
) -> list[Any]:
    return list(await conn.fetch(FILTERED_EXACT, org_id, user_id, query, json.dumps(metadata), k))
