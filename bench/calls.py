"""Each public call of every face, one at a time on a small database: p50 and p95 per call.

    python -m bench.calls [--server-url URL] [--iterations 300] [--warmup 20] [--label NAME]

The calls are the hot ones (a save, the resolved fetch, gets, listings, each face's search and
add: one statement each) and those of several statements in one transaction (a user's creation,
the mem0-style update and delete, AutoGen's add with its clear, a memory's deletion). They run
interleaved, ``iterations`` times each, with the hashing embedder so that no model time is
counted, on a database of their own (a user of a few hundred memories).

To compare two trees, run it once with each against the same server: ``PYTHONPATH=<tree> python
<this file> --server-url URL --label <tree>``; the database is created anew for each run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from bench.lib.server import Server, sqlalchemy_url
from memora_pg import (
    MemoriesAndInteraction,
    MemorySearchScope,
    MemoryToStore,
    PgVectorDB,
    PostgresGraphDB,
    Settings,
)
from memora_pg.autogen import MemoryContent, PostgresMemory
from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.engine import create_engine
from memora_pg.mem0 import AsyncMemory, MemoryConfig

Call = Callable[[int], Awaitable[Any]]
AT = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
TOPICS = ("tea", "Paris", "the cat", "running", "jazz", "the garden", "chess", "Rome", "bread", "the sea")


def _save(graph: PostgresGraphDB, w: tuple[str, str, str], text: str) -> Awaitable[Any]:
    org_id, agent_id, user_id = w
    return graph.save_interaction_with_memories(
        org_id,
        agent_id,
        user_id,
        MemoriesAndInteraction(
            interaction=[{"role": "user", "content": text}, {"role": "assistant", "content": "noted"}],
            interaction_date=AT,
            memories=[MemoryToStore(memory=text, source_msg_block_pos=[0])],
        ),
    )


async def calls(url: str, schema: str | None = None) -> dict[str, Call]:
    """The calls, on a database of their own at ``url`` (in ``schema``, default the settings')."""
    settings = Settings() if schema is None else Settings(db_schema=schema)
    embedder = HashEmbedder(384)
    engine = create_engine(sqlalchemy_url(url), settings)
    graph = PostgresGraphDB(engine, settings=settings, embedder=embedder)
    await graph.setup()
    vectors = PgVectorDB(engine, settings=settings, embedder=embedder)
    mem0 = AsyncMemory(
        MemoryConfig(vector_store={"provider": "pgvector", "config": {"collection_name": "bench"}}),
        engine=engine,
        embedder=embedder,
        settings=settings,
    )
    autogen = PostgresMemory("bench", engine=engine, settings=settings, embedder=embedder)
    org = await graph.create_organization("bench")
    user = await graph.create_user(org.org_id, "Jake")
    agent = await graph.create_agent(org.org_id, "Jenny")
    w = (org.org_id, agent.agent_id, user.user_id)
    first = None
    for i in range(300):
        interaction_id, _ = await _save(graph, w, f"Jake talked about {TOPICS[i % len(TOPICS)]} on day {i}")
        first = first or interaction_id
    assert first is not None
    listed = await graph.get_all_user_memories(org.org_id, user.user_id)
    refs = [[{"org_id": org.org_id, "user_id": user.user_id, "memory_id": m.memory_id} for m in listed[:10]]]
    for i in range(100):
        await mem0.add(f"Jake likes {TOPICS[i % len(TOPICS)]} number {i}", user_id="jake", infer=False)
        await autogen.add(
            MemoryContent(content=f"The user likes {TOPICS[i % len(TOPICS)]} {i}", mime_type="text/plain")
        )
    tea = (await mem0.add("I like green tea", user_id="jake", infer=False))["results"][0]["id"]
    scratch = PostgresMemory("scratch", engine=engine, settings=settings, embedder=embedder)

    async def mem0_update_and_delete(i: int) -> None:
        added = await mem0.add(f"passing note {i}", user_id="jake", infer=False)
        memory_id = added["results"][0]["id"]
        await mem0.update(memory_id, f"passing note {i}, changed")
        await mem0.delete(memory_id)

    async def autogen_add_and_clear(i: int) -> None:
        await scratch.add(MemoryContent(content=f"scratch {i}", mime_type="text/plain"))
        await scratch.clear()

    return {
        "save (2 messages, 1 memory)": lambda i: _save(graph, w, f"a note {i}"),
        "resolved fetch of 10": lambda i: graph.fetch_user_memories_resolved_batch(refs),
        "get_user_memory": lambda i: graph.get_user_memory(org.org_id, user.user_id, listed[0].memory_id),
        "get_interaction": lambda i: graph.get_interaction(org.org_id, user.user_id, first, True, True),
        "get_all_user_interactions (10)": lambda i: graph.get_all_user_interactions(
            org.org_id, user.user_id, True, True, 0, 10
        ),
        "PgVectorDB user search": lambda i: vectors.search_memory(
            f"what about {TOPICS[i % len(TOPICS)]}", MemorySearchScope.USER, org.org_id, user.user_id
        ),
        "mem0 search": lambda i: mem0.search(f"does Jake like {TOPICS[i % len(TOPICS)]}", user_id="jake"),
        "mem0 get": lambda i: mem0.get(tea),
        "mem0 add": lambda i: mem0.add(f"note {i}", user_id="jake", infer=False),
        "autogen query": lambda i: autogen.query(f"{TOPICS[i % len(TOPICS)]}"),
        "create_user (transaction)": lambda i: graph.create_user(org.org_id, f"user {i}"),
        "mem0 add + update + delete (3 calls)": mem0_update_and_delete,
        "autogen add + clear (2 calls)": autogen_add_and_clear,
    }


async def measure(url: str, iterations: int, warmup: int) -> dict[str, list[float]]:
    found = await calls(url)
    spent: dict[str, list[float]] = {name: [] for name in found}
    for i in range(warmup + iterations):
        for name, call in found.items():
            started = time.perf_counter()
            await call(i)
            if i >= warmup:
                spent[name].append(time.perf_counter() - started)
    return spent


async def main(args: argparse.Namespace) -> None:
    with Server(args.server_url) as server:
        url = await server.create_database("bench_calls")
        try:
            spent = await measure(url, args.iterations, args.warmup)
        finally:
            await server.drop_database("bench_calls")
    print(f"| call | p50 ({args.label}) | p95 |")
    print("| --- | --- | --- |")
    for name, times in spent.items():
        ordered = sorted(times)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        print(f"| {name} | {statistics.median(ordered) * 1000:.2f} ms | {p95 * 1000:.2f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--label", default="this tree")
    asyncio.run(main(parser.parse_args()))
