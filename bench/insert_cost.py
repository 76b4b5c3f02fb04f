"""What an HNSW index's build parameters cost on writes: the hnsw-mode save and mem0-style add,
ours and the same statement raw, once per ``ef_construction``, each on a fresh load with the
index built with it.

    python -m bench.insert_cost --scale 10k --ef-construction 64,128
"""

from __future__ import annotations

import argparse
import asyncio

from bench.lib import data, load, writes
from bench.lib.context import Context, VectorBook
from bench.lib.server import Server


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.insert_cost", description=__doc__)
    parser.add_argument("--scale", default="10k")
    parser.add_argument("--ef-construction", default="64,128")
    parser.add_argument("--hnsw-m", type=int, default=load.HNSW_M)
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args(argv)
    layout = data.Layout(data.parse_scale(args.scale))
    space = data.VectorSpace(layout)
    with Server(None) as server:
        for ef_construction in (int(value) for value in args.ef_construction.split(",")):
            name = f"bench_insert_{ef_construction}"
            url = await server.create_database(name)
            await load.load(url, layout, space)
            built = await load.build_hnsw(url, m=args.hnsw_m, ef_construction=ef_construction)
            print(f"ef_construction {ef_construction}: HNSW built in {built:.1f} s", flush=True)
            ctx = Context(url, layout, space, VectorBook(space), iterations=args.iterations, warmup=10)
            ctx.overrides.update(hnsw_m=args.hnsw_m, hnsw_ef_construction=ef_construction)
            # Each figure prints its own line as it is measured.
            await writes.save_figures(ctx, "hnsw")
            await writes.add_figure(ctx, "hnsw")
            await ctx.dispose()
            await server.drop_database(name)


if __name__ == "__main__":
    asyncio.run(main())
