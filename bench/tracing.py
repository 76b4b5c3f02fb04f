"""What the OpenTelemetry spans cost: one user's default search, with and without its span, interleaved.

The user search of the Memora face (``PgVectorDB.search_memory``, default settings: hybrid) is timed
through its instrumented method and through the same method unwrapped (``__wrapped__``), alternating,
after the same warm-up. First with ``opentelemetry-api`` alone (what an application that configured
no SDK gets: the no-op tracer), then, for reference, with the SDK recording every span into memory.

    python -m bench.tracing --memories 2000 --iterations 400
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from bench.lib.server import Server
from memora_pg import MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.models import MemoriesAndInteraction, MemoryToStore

VOCABULARY = (
    "tea coffee garden Lisbon cello chess sister morning train novel river dog cat bakery jazz marathon soup"
    " winter museum bicycle guitar piano violin painting library mountain lake forest ocean island"
)
WORDS = VOCABULARY.split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(8))


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def compare(vector: PgVectorDB, org_id: str, user_id: str, iterations: int) -> tuple[float, float]:
    """Median seconds of the instrumented search and of the bare one, interleaved."""
    bare = PgVectorDB.search_memories.__wrapped__  # type: ignore[attr-defined]
    rng = random.Random(7)  # noqa: S311 - which queries, not a secret
    queries = [sentence(rng)[:40] for _ in range(iterations)]

    def traced(q: str) -> Callable[[], Awaitable[Any]]:
        return lambda: vector.search_memory(q, MemorySearchScope.USER, org_id, user_id)

    def untraced(q: str) -> Callable[[], Awaitable[Any]]:
        return lambda: bare(vector, [q], MemorySearchScope.USER, org_id, user_id)

    for q in queries[:30]:  # warm-up: plans settle, caches fill
        await traced(q)()
        await untraced(q)()
    with_span: list[float] = []
    without: list[float] = []
    for i, q in enumerate(queries):
        pair = [(with_span, traced(q)), (without, untraced(q))]
        for samples, call in pair if i % 2 else reversed(pair):
            samples.append(await _timed(call))
    return statistics.median(with_span), statistics.median(without)


async def main(memories: int, iterations: int) -> None:
    with Server() as server:
        url = await server.create_database("memora_tracing_bench")
        graph = PostgresGraphDB(url, settings=Settings(database_url=url), embedder=HashEmbedder(384))
        try:
            org = await graph.create_organization("bench")
            user = await graph.create_user(org.org_id, "reader")
            agent = await graph.create_agent(org.org_id, "agent")
            rng = random.Random(3)  # noqa: S311 - the memories' words, not a secret
            for start in range(0, memories, 100):
                batch = [sentence(rng) for _ in range(min(100, memories - start))]
                await graph.save_interaction_with_memories(
                    org.org_id,
                    agent.agent_id,
                    user.user_id,
                    MemoriesAndInteraction(
                        interaction=[{"role": "user", "content": "notes"}],
                        interaction_date=datetime.now(timezone.utc),
                        memories=[MemoryToStore(memory=t, source_msg_block_pos=[0]) for t in batch],
                    ),
                )
            vector = graph.get_associated_vector_db()
            assert isinstance(vector, PgVectorDB)
            print(f"one user, {memories:,} memories, default search (hybrid), {iterations} searches per side")
            traced, bare = await compare(vector, org.org_id, user.user_id, iterations)
            print(
                f"API only (no SDK):  with span {traced * 1e3:.3f} ms, without {bare * 1e3:.3f} ms, "
                f"overhead {100 * (traced / bare - 1):+.1f}%"
            )

            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
            trace.set_tracer_provider(provider)
            traced, bare = await compare(vector, org.org_id, user.user_id, iterations)
            print(
                f"SDK, every span recorded: with span {traced * 1e3:.3f} ms, without {bare * 1e3:.3f} ms, "
                f"overhead {100 * (traced / bare - 1):+.1f}%"
            )
        finally:
            await graph.close()


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args(argv)
    asyncio.run(main(args.memories, args.iterations))


if __name__ == "__main__":
    run()
