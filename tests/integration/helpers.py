"""Small builders shared by the integration tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement

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


class Explain(Executable, ClauseElement):
    """EXPLAIN (FORMAT JSON) of a Core statement, with its parameters bound as usual."""

    inherit_cache = False

    def __init__(self, statement: Any) -> None:
        self.statement = statement


@compiles(Explain, "postgresql")
def _compile_explain(element: Explain, compiler: Any, **kw: Any) -> str:
    return "EXPLAIN (FORMAT JSON) " + str(compiler.process(element.statement, **kw))


def plan_nodes(plan: str) -> list[tuple[str, str | None, str | None]]:
    """(node type, index name, relation name) of every node of an EXPLAIN (FORMAT JSON) plan."""
    stack = [json.loads(plan)[0]["Plan"]]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append((node["Node Type"], node.get("Index Name"), node.get("Relation Name")))
        stack.extend(node.get("Plans", []))
    return nodes
