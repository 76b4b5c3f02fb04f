"""Concurrent writers: row locks keep one consistent message chain; a bounded soak keeps every invariant."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import MemorySearchScope, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from tests.integration.helpers import World, chat, payload, world


@pytest.fixture
async def pooled(database_url: str, settings: Settings) -> AsyncIterator[PostgresGraphDB]:
    """A graph with a pool wide enough for 50 concurrent callers (its own engine, from the URL)."""
    wide = settings.model_copy(update={"pool_size": 20, "max_overflow": 40})
    graph = PostgresGraphDB(database_url, settings=wide, embedder=HashEmbedder(384))
    yield graph
    await graph.close()


async def test_fifty_concurrent_updates_leave_one_consistent_chain(pooled: PostgresGraphDB) -> None:
    """50 concurrent updates of one interaction: positions 0..n-1, no duplicates, equal to one caller's list."""
    w = await world(pooled)
    interaction_id, _ = await pooled.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hello", "hi"))
    )
    candidates = [chat("hello", "hi", *[f"caller {i} says {j}" for j in range(i % 5 + 1)]) for i in range(50)]

    async def update(messages: list[dict[str, str]]) -> None:
        await pooled.update_interaction_and_memories(
            w.org_id, w.agent_id, w.user_id, interaction_id, payload(messages, [("fact", [len(messages) - 1])])
        )

    await asyncio.gather(*(update(m) for m in candidates))
    stored = await pooled.get_interaction(w.org_id, w.user_id, interaction_id)
    got = [{"role": m.role, "content": m.content} for m in stored.messages or []]
    assert [m.msg_position for m in stored.messages or []] == list(range(len(got)))
    assert got in candidates
    assert len(stored.memories or []) == 50


async def test_concurrent_contradictions_leave_a_single_chain_when_linear(
    database_url: str, settings: Settings
) -> None:
    """With linear chains, 20 concurrent contradictions of one memory form one chain of 21 versions, not a fork."""
    linear = settings.model_copy(update={"contradiction_chains": "linear", "pool_size": 10, "max_overflow": 20})
    graph = PostgresGraphDB(database_url, settings=linear, embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("version 0", [0])])
        )
        (original,) = (await graph.get_interaction(w.org_id, w.user_id, interaction_id)).memories or []

        async def contradict(i: int) -> None:
            await graph.save_interaction_with_memories(
                w.org_id,
                w.agent_id,
                w.user_id,
                payload(chat("x"), contrary=[(f"version {i}", [0], original.memory_id)]),
            )

        await asyncio.gather(*(contradict(i) for i in range(1, 21)))
        current = await graph.fetch_user_memories_resolved(
            [{"memory_id": original.memory_id, "user_id": w.user_id, "org_id": w.org_id}]
        )
        assert len(current) == 1
        history = await graph.get_user_memory_history(w.org_id, w.user_id, current[0].memory_id)
        assert len(history) == 21
        assert history[-1].memory_id == original.memory_id
    finally:
        await graph.close()


async def test_sequential_contradictions_branch_by_default(graph: PostgresGraphDB) -> None:
    """By default (as upstream) two contradictions of one memory are two current versions (§8.4's branch)."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("v0", [0])])
    )
    (original,) = (await graph.get_interaction(w.org_id, w.user_id, interaction_id)).memories or []
    for text_ in ("v1", "v2"):
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("x"), contrary=[(text_, [0], original.memory_id)])
        )
    current = await graph.fetch_user_memories_resolved(
        [{"memory_id": original.memory_id, "user_id": w.user_id, "org_id": w.org_id}]
    )
    assert [m.memory for m in current] == ["v2", "v1"]


INVARIANTS = {
    "messages are contiguous from 0": """
        SELECT count(*) FROM (
            SELECT org_id, interaction_id, count(*) AS n, min(msg_position) AS lo, max(msg_position) AS hi
            FROM memora.messages GROUP BY org_id, interaction_id
        ) AS m WHERE lo <> 0 OR hi <> n - 1""",
    "sources point into the memory's own interaction": """
        SELECT count(*) FROM memora.memory_sources AS s
        JOIN memora.memories AS m ON m.org_id = s.org_id AND m.memory_id = s.memory_id
        WHERE m.interaction_id IS DISTINCT FROM s.interaction_id""",
    "contradictions never cross users": """
        SELECT count(*) FROM memora.memory_updates AS e
        JOIN memora.memories AS o ON o.org_id = e.org_id AND o.memory_id = e.old_memory_id
        JOIN memora.memories AS n ON n.org_id = e.org_id AND n.memory_id = e.new_memory_id
        WHERE o.user_id <> n.user_id""",
    "searchable memories have both vectors": """
        SELECT count(*) FROM memora.memories WHERE (embedding IS NULL) <> (search_text IS NULL)""",
    "memories of an interaction belong to its user": """
        SELECT count(*) FROM memora.memories AS m
        JOIN memora.interactions AS i ON i.org_id = m.org_id AND i.interaction_id = m.interaction_id
        WHERE i.user_id <> m.user_id""",
}


async def test_soak_of_mixed_reads_and_writes(pooled: PostgresGraphDB, engine: AsyncEngine) -> None:
    """16 tasks mixing saves, updates, contradictions, deletes, searches and reads for a bounded time."""
    worlds: list[World] = [await world(pooled, user_name=f"user {i}") for i in range(4)]
    interactions: dict[int, list[str]] = {i: [] for i in range(len(worlds))}
    store = pooled.get_associated_vector_db()
    assert store is not None
    deadline = asyncio.get_running_loop().time() + 12
    operations = 0

    async def worker(seed: int) -> None:
        nonlocal operations
        rng = random.Random(seed)
        while asyncio.get_running_loop().time() < deadline:
            i = rng.randrange(len(worlds))
            w = worlds[i]
            action = rng.random()
            if action < 0.3 or not interactions[i]:
                messages = chat(*[f"m{rng.randrange(9)}" for _ in range(rng.randrange(1, 5))])
                interaction_id, _ = await pooled.save_interaction_with_memories(
                    w.org_id, w.agent_id, w.user_id, payload(messages, [(f"fact {rng.randrange(99)}", [0])])
                )
                interactions[i].append(interaction_id)
            elif action < 0.55:
                messages = chat(*[f"m{rng.randrange(9)}" for _ in range(rng.randrange(0, 5))])
                target = rng.choice(interactions[i])
                memories = await pooled.get_all_user_memories(w.org_id, w.user_id, limit=5)
                contrary: list[tuple[str, list[int], str]] = (
                    [(f"fix {rng.randrange(99)}", [], memories[0].memory_id)] if memories else []
                )
                with contextlib.suppress(LookupError):  # deleted by another task meanwhile
                    await pooled.update_interaction_and_memories(
                        w.org_id, w.agent_id, w.user_id, target, payload(messages, contrary=contrary)
                    )
            elif action < 0.65:
                target = interactions[i].pop(rng.randrange(len(interactions[i])))
                with contextlib.suppress(LookupError):
                    await pooled.delete_user_interaction_and_its_memories(w.org_id, w.user_id, target)
            elif action < 0.85:
                hits = await store.search_memory("fact", MemorySearchScope.USER, w.org_id, w.user_id)
                await pooled.fetch_user_memories_resolved(
                    [{"memory_id": m.memory_id, "user_id": m.user_id, "org_id": m.org_id} for m, _ in hits]
                )
            else:
                await pooled.get_all_user_interactions(w.org_id, w.user_id, limit=10)
            operations += 1

    await asyncio.gather(*(worker(seed) for seed in range(16)))
    assert operations > 50
    async with engine.connect() as conn:
        broken = {name: int(await conn.scalar(text(query)) or 0) for name, query in INVARIANTS.items()}
    assert broken == dict.fromkeys(INVARIANTS, 0)
