"""No per-row queries: reads send a small constant number of statements, whatever the data's shape."""

from __future__ import annotations

from collections.abc import Awaitable

from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import MemoriesAndInteraction, PostgresGraphDB
from memora_pg.models import ContraryMemoryToStore, MemoryToStore
from memora_pg.testing import count_statements
from tests.integration.helpers import World, chat, day, world

CHAINS = 100


async def _chains(graph: PostgresGraphDB, w: World, depth: int) -> list[str]:
    """100 memories, each superseded ``depth`` times (depth + 1 saves of 100 memories)."""
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        MemoriesAndInteraction(
            interaction=chat("x"),
            interaction_date=day(1),
            memories=[MemoryToStore(memory=f"fact {i} v0", source_msg_block_pos=[0]) for i in range(CHAINS)],
        ),
    )
    oldest = [m.memory_id for m in (await graph.get_interaction(w.org_id, w.user_id, interaction_id)).memories or []]
    latest = oldest
    for version in range(1, depth + 1):
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            MemoriesAndInteraction(
                interaction=chat("x"),
                interaction_date=day(1 + version),
                contrary_memories=[
                    ContraryMemoryToStore(
                        memory=f"fact {i} v{version}", source_msg_block_pos=[0], existing_contrary_memory_id=old
                    )
                    for i, old in enumerate(latest)
                ],
            ),
        )
        found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
        latest = [m.memory_id for m in found.memories or []]
    return oldest


async def test_resolved_batch_fetch_is_one_statement_at_any_depth(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """fetch_user_memories_resolved_batch with 100 ids sends one statement for chains of depth 1, 5 and 20."""
    counts = {}
    for depth in (1, 5, 20):
        w = await world(graph)
        oldest = await _chains(graph, w, depth)
        refs = [{"memory_id": m, "user_id": w.user_id, "org_id": w.org_id} for m in oldest]
        sent = count_statements(engine)
        batches = await graph.fetch_user_memories_resolved_batch([refs[:50], refs[50:]])
        counts[depth] = len(sent)
        assert [len(b) for b in batches] == [50, 50]
        assert {m.memory.split()[-1] for b in batches for m in b} == {f"v{depth}"}
    assert counts == {1: 1, 5: 1, 20: 1}


async def test_listing_100_interactions_is_one_statement(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """get_all_user_interactions with messages and memories for 100 interactions sends one statement."""
    w = await world(graph)
    for i in range(100):
        await graph.save_interaction_with_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            MemoriesAndInteraction(
                interaction=chat(f"q{i}", f"a{i}", f"q{i}b"),
                interaction_date=day(1),
                memories=[MemoryToStore(memory=f"m{i}-{j}", source_msg_block_pos=[j]) for j in range(3)],
            ),
        )
    sent = count_statements(engine)
    listed = await graph.get_all_user_interactions(w.org_id, w.user_id, limit=100)
    assert len(sent) == 1
    assert len(listed) == 100
    assert all(len(i.messages or []) == 3 and len(i.memories or []) == 3 for i in listed)


async def test_statement_counts_per_method(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """The documented statement count of each interaction and memory method (closing note's table)."""
    w = await world(graph)
    sent = count_statements(engine)

    async def count(call: Awaitable[object]) -> int:
        sent.clear()
        await call
        return len(sent)

    body = MemoriesAndInteraction(
        interaction=chat("a", "b"),
        memories=[MemoryToStore(memory="m", source_msg_block_pos=[0])],
    )
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    contrary = body.model_copy(
        update={
            "contrary_memories": [
                ContraryMemoryToStore(
                    memory="n", source_msg_block_pos=[1], existing_contrary_memory_id=memory.memory_id
                )
            ]
        }
    )
    measured = {
        # one call of save_interaction: interaction, messages, memories, sources, contrary links and audit
        "save": await count(graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, contrary)),
        # lock, read messages, (truncate), (append), touch, then one call of write_memories
        "update": await count(
            graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, body)
        ),
        "get_interaction": await count(graph.get_interaction(w.org_id, w.user_id, interaction_id)),
        "get_user_memory": await count(graph.get_user_memory(w.org_id, w.user_id, memory.memory_id)),
        "history": await count(graph.get_user_memory_history(w.org_id, w.user_id, memory.memory_id)),
        "get_all_user_memories": await count(graph.get_all_user_memories(w.org_id, w.user_id)),
        # relink, delete, audit
        "delete_user_memory": await count(graph.delete_user_memory(w.org_id, w.user_id, memory.memory_id)),
        # lock, list its memories, relink, delete, audit
        "delete_interaction": await count(
            graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, interaction_id)
        ),
    }
    assert measured == {
        "save": 1,
        "update": 4,
        "get_interaction": 1,
        "get_user_memory": 1,
        "history": 1,
        "get_all_user_memories": 1,
        "delete_user_memory": 3,
        "delete_interaction": 5,
    }
