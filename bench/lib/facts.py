"""Facts stored as the Memora agent stores them, for the benchmarks that ask about them."""

from __future__ import annotations

from memora_pg import MemoriesAndInteraction, MemoryToStore, PostgresGraphDB


async def save_facts(graph: PostgresGraphDB, org_id: str, agent_id: str, user_id: str, facts: list[str]) -> None:
    """Each fact saved as the Memora agent saves it: a user's message and the memory drawn from it. Facts
    about a person gather over many conversations: one interaction each."""
    for fact in facts:
        await graph.save_interaction_with_memories(
            org_id,
            agent_id,
            user_id,
            MemoriesAndInteraction(
                interaction=[{"role": "user", "content": fact}],
                memories=[MemoryToStore(memory=fact, source_msg_block_pos=[0])],
            ),
        )
