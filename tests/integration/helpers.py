"""Small builders shared by the integration tests."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement

from memora_pg import ContraryMemoryToStore, MemoriesAndInteraction, MemoryToStore, PostgresGraphDB, vector_params
from memora_pg.embeddings import HashEmbedder
from memora_pg.migrations import MigrationOptions, upgrade
from memora_pg.sql import current_sources


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


async def scalar_at(url: str, sql: str, **params: Any) -> Any:
    """One value, read on an engine of its own (a test's look at a database it does not otherwise hold)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.scalar(text(sql), params)
    finally:
        await engine.dispose()


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
    """EXPLAIN (FORMAT JSON) of a Core statement, with its parameters bound as usual; with ``analyze``,
    the statement runs and the plan tells which nodes ran and how many rows each returned."""

    inherit_cache = False

    def __init__(self, statement: Any, *, analyze: bool = False) -> None:
        self.statement = statement
        self.analyze = analyze


@compiles(Explain, "postgresql")
def _compile_explain(element: Explain, compiler: Any, **kw: Any) -> str:
    options = "ANALYZE, FORMAT JSON" if element.analyze else "FORMAT JSON"
    return f"EXPLAIN ({options}) " + str(compiler.process(element.statement, **kw))


def executed_nodes(plan: str) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (ANALYZE, FORMAT JSON) plan that ran (a branch gated off never does)."""
    stack = [json.loads(plan)[0]["Plan"]]
    nodes = []
    while stack:
        node = stack.pop()
        if node.get("Actual Loops", 0) > 0:
            nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


def plan_nodes(plan: str) -> list[tuple[str, str | None, str | None]]:
    """(node type, index name, relation name) of every node of an EXPLAIN (FORMAT JSON) plan."""
    stack = [json.loads(plan)[0]["Plan"]]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append((node["Node Type"], node.get("Index Name"), node.get("Relation Name")))
        stack.extend(node.get("Plans", []))
    return nodes


async def seed_for_plans(url: str, seed: str, dimensions: int) -> None:
    """Migrate ``url``, run the ``;``-separated ``seed`` statements without the HNSW index, then build the
    index once (far faster than maintaining it per row) and analyze: a database for plan tests."""
    engine = create_async_engine(url)
    try:
        await upgrade(engine, MigrationOptions(schema="memora", dimensions=dimensions))
        async with engine.begin() as conn:
            await conn.execute(text("DROP INDEX memora.ix_memories_embedding_hnsw"))
            for statement in seed.split(";\n"):
                if statement.strip():
                    await conn.execute(text(statement))
            await conn.execute(
                text(
                    "CREATE INDEX ix_memories_embedding_hnsw ON memora.memories "
                    "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
                )
            )
            await conn.execute(text("ANALYZE memora.memories"))
    finally:
        await engine.dispose()


async def with_vector_codec(conn: AsyncConnection) -> None:
    """pgvector's binary codec (memora_pg.vector_params) on a SQLAlchemy connection of a test's own, so that
    the test can bind vectors as memora_pg's statements do."""
    raw = (await conn.get_raw_connection()).driver_connection
    await vector_params.register(raw)


_ARGUMENTS = re.compile(r"FUNCTION \{schema\}\.\w+\((.*?)\)\s*RETURNS", re.DOTALL)


def argument_names(source: str) -> list[str]:
    """The names of the arguments a function's source declares."""
    declared = _ARGUMENTS.search(source)
    assert declared, "a source declares FUNCTION {schema}.name(...) RETURNS"
    return [argument.split()[0] for argument in declared[1].split(",") if argument.strip()]


# The schema's write functions (migration 0016 on, their sources in memora_pg/sql/functions), by name: those
# that take the organization first, each distributed by it on Citus.
WRITE_FUNCTIONS = tuple(
    name for name, (_, source) in current_sources().items() if argument_names(source)[:1] == ["p_org_id"]
)


class Recording(HashEmbedder):
    """The hashing embedder, keeping the texts it embedded as queries."""

    def __init__(self) -> None:
        super().__init__(384)
        self.queries: list[str] = []

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.queries += texts
        return await super().embed_queries(texts)
