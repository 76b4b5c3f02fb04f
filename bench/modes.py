"""The user-scoped search against its floor, isolated from the rest of a full run.

``bench.run`` measures the reads of exact mode, then builds the index, runs the bulk-import
figure and the writes of hnsw mode, then measures the reads of hnsw mode. This runs the
user-search figure alone on one load, in two sequences, so that each suspect can be told
apart from the others:

* ``modes``: exact, hnsw, exact, hnsw (the index dropped and built between);
* ``writes``: hnsw mode before the hnsw-phase writes (the save and add figures), after them,
  and after ``VACUUM ANALYZE``;
* ``import``: hnsw mode before the bulk-import figure (a second database, an import of the
  organization and its HNSW build) and after it.

    python -m bench.modes --scale 10k --iterations 100
"""

from __future__ import annotations

import asyncio

from bench.lib import bulk, load, reads, writes
from bench.lib.context import Context, VectorBook, small_run
from bench.lib.server import Server, connect

# The user-search figures whose ratio is compared; the others of the same call are printed too.
COMPARED = ("USER scope, dense", "mem0-style")


async def user_search(ctx: Context, mode: str, step: str) -> None:
    raw = await connect(ctx.url)
    try:
        ctx.figures.clear()
        await reads.user_search_figures(ctx, ctx.engine(1), mode, raw)
        for figure in ctx.figures:
            if any(name in figure.name for name in COMPARED) and figure.ours and figure.raw and figure.ratio:
                print(
                    f"{step}: {figure.name}: {figure.ratio:.2f}× the floor "
                    f"(p50 {figure.ours.median * 1000:.2f} against {figure.raw.median * 1000:.2f} ms)",
                    flush=True,
                )
    finally:
        await raw.close()


async def modes(ctx: Context, server: Server, times: load.LoadTimes) -> None:
    for step, mode in enumerate(("exact", "hnsw", "exact", "hnsw"), start=1):
        if mode == "hnsw":
            await load.build_hnsw(ctx.url)
        else:
            await load.drop_hnsw(ctx.url)
        await user_search(ctx, mode, f"modes {step} ({mode})")


async def after_writes(ctx: Context, server: Server, times: load.LoadTimes) -> None:
    await load.build_hnsw(ctx.url)
    await user_search(ctx, "hnsw", "writes 1 (before the hnsw-phase writes)")
    await writes.save_figures(ctx, "hnsw")
    await writes.add_figure(ctx, "hnsw")
    await user_search(ctx, "hnsw", "writes 2 (after them)")
    raw = await connect(ctx.url)
    try:
        await raw.execute("VACUUM ANALYZE")
    finally:
        await raw.close()
    await user_search(ctx, "hnsw", "writes 3 (after VACUUM ANALYZE)")


async def around_import(ctx: Context, server: Server, times: load.LoadTimes) -> None:
    build_s = await load.build_hnsw(ctx.url)
    await user_search(ctx, "hnsw", "import 1 (before the bulk-import figure)")
    await bulk.bulk_figure(ctx, server, times, build_s)
    await user_search(ctx, "hnsw", "import 2 (after it)")


async def main(argv: list[str] | None = None) -> None:
    iterations, layout, space = small_run("python -m bench.modes", __doc__, argv)
    with Server(None) as server:
        for sequence in (modes, after_writes, around_import):
            name = f"bench_modes_{sequence.__name__}"
            url = await server.create_database(name)
            try:
                times = await load.load(url, layout, space)
                ctx = Context(url, layout, space, VectorBook(space), iterations=iterations, warmup=10)
                try:
                    await sequence(ctx, server, times)
                finally:
                    await ctx.dispose()
            finally:
                await server.drop_database(name)


if __name__ == "__main__":
    asyncio.run(main())
