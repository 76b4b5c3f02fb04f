"""What the direct path buys: each hot call with ``direct_statements`` on and off, interleaved.

The same calls, on the same database and engine, through two sets of stores that differ only in
``Settings.direct_statements``: a call that is one statement runs on asyncpg directly
(``memora_pg.driver``) or through SQLAlchemy's execution. Exact mode (the load drops the HNSW
index), so the server's work is small and the difference shows.

    python -m bench.direct --scale 10k --iterations 100
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench import data, load
from bench.context import Context, VectorBook, small_run
from bench.server import Server, connect
from bench.writes import Saver, _writers
from memora_pg import MemorySearchScope, PgVectorDB, PostgresGraphDB
from memora_pg.mem0 import AsyncMemory, MemoryConfig

Call = Callable[[int], Awaitable[Any]]


def calls(ctx: Context, engine: Any, saver: Saver, direct: bool) -> dict[str, Call]:
    """The hot calls of every face, on stores with the direct path ``direct``."""
    layout, side = ctx.layout, "on" if direct else "off"
    settings = ctx.settings(direct_statements=direct)
    dense = PgVectorDB(engine, embedder=ctx.book, settings=settings, search_mode="dense")
    hybrid = PgVectorDB(engine, embedder=ctx.book, settings=settings)
    graph = PostgresGraphDB(engine, embedder=ctx.book, settings=settings)
    config = MemoryConfig(vector_store={"provider": "pgvector", "config": {"collection_name": data.collection(0)}})
    memory = AsyncMemory(config, engine=engine, embedder=ctx.book)
    # The mem0-style face takes its settings from its configuration; the switch is set on its database.
    memory._db.settings = memory._db.settings.model_copy(update={"direct_statements": direct})

    def user(i: int) -> tuple[str, str]:
        u = i % layout.users
        return layout.org_of(u), data.user_id(u)

    async def resolved(i: int) -> Any:
        org, user_id = user(i)
        u = i % layout.users
        refs = [
            {"org_id": org, "user_id": user_id, "memory_id": str(data.memory_uuid(u, j))}
            for j in data.chain_roots(layout, u, 100)
        ]
        return await graph.fetch_user_memories_resolved_batch([refs])

    async def add(i: int) -> Any:
        batch = [f"direct {side} {i} memory {k}" for k in range(10)]
        ctx.book.put(batch, ctx.space.fresh(f"direct {side} {i}", 10))
        return await memory.add([{"role": "user", "content": t} for t in batch], user_id=f"direct-{side}", infer=False)

    return {
        "user search, PgVectorDB dense": lambda i: dense.search_memory(
            f"query {i % 50}", MemorySearchScope.USER, *user(i)
        ),
        "user search, PgVectorDB hybrid (the default)": lambda i: hybrid.search_memory(
            f"query {i % 50}", MemorySearchScope.USER, *user(i)
        ),
        "resolved fetch, 100 ids": resolved,
        f"get_all_user_memories, {layout.per_user:,} memories": lambda i: graph.get_all_user_memories(*user(i)),
        "save, 10 messages + 5 memories": lambda i: saver.ours(graph, f"direct-{side}", f"direct {side} {i}"),
        "mem0-style search": lambda i: memory.search(f"query {i % 50}", user_id=user(i)[1], limit=10),
        "mem0-style add of 10": add,
    }


async def main(argv: list[str] | None = None) -> None:
    iterations, layout, space = small_run("python -m bench.direct", __doc__, argv)
    with Server(None) as server:
        url = await server.create_database("bench_direct")
        await load.load(url, layout, space)
        ctx = Context(url, layout, space, VectorBook(space), iterations=iterations, warmup=10)
        engine = ctx.engine(1)
        raw = await connect(url)
        await _writers(raw, ["direct-on", "direct-off"])
        await raw.close()
        saver = Saver(ctx, "exact")
        on, off = calls(ctx, engine, saver, True), calls(ctx, engine, saver, False)
        print("| call | direct statements on | off (through SQLAlchemy) | saved |")
        print("| --- | --- | --- | --- |")
        for name in on:
            for i in range(10):
                await on[name](i)
                await off[name](i)
            spent: dict[bool, list[float]] = {True: [], False: []}
            for i in range(iterations):
                for direct in (True, False) if i % 2 else (False, True):
                    started = time.perf_counter()
                    await (on if direct else off)[name](i)
                    spent[direct].append(time.perf_counter() - started)
            a, b = (statistics.median(spent[d]) * 1000 for d in (True, False))
            print(f"| {name} | {a:.2f} ms | {b:.2f} ms | {b - a:.2f} ms |", flush=True)
        await ctx.dispose()


if __name__ == "__main__":
    asyncio.run(main())
