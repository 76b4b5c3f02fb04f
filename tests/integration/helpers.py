"""Small builders shared by the integration tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from memora_pg import ContraryMemoryToStore, MemoriesAndInteraction, MemoryToStore, PostgresGraphDB


@dataclass
class World:
    org_id: str
    user_id: str
    agent_id: str


async def world(graph: PostgresGraphDB, user_name: str = "Jake", agent_label: str = "Jenny") -> World:
    org = await graph.create_organization("Acme")
    user = await graph.create_user(org.org_id, user_name)
    agent = await graph.create_agent(org.org_id, agent_label)
    return World(org.org_id, user.user_id, agent.agent_id)


def chat(*contents: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]


def day(n: int) -> datetime:
    return datetime(2026, 1, n, 12, 0, tzinfo=timezone.utc)


def payload(
    messages: list[dict[str, str]],
    memories: Sequence[tuple[str, list[int]]] = (),
    contrary: Sequence[tuple[str, list[int], str]] = (),
    at: datetime | None = None,
) -> MemoriesAndInteraction:
    return MemoriesAndInteraction(
        interaction=messages,
        interaction_date=at or day(1),
        memories=[MemoryToStore(memory=text, source_msg_block_pos=pos) for text, pos in memories],
        contrary_memories=[
            ContraryMemoryToStore(memory=text, source_msg_block_pos=pos, existing_contrary_memory_id=old)
            for text, pos, old in contrary
        ],
    )
