"""``python -m bench.run``: the whole benchmark, at the scales asked for, into ``--out`` (bench/results/run.md).

For each scale: a database of its own on the benchmark's server, loaded by raw COPY without the
HNSW index; every figure in exact mode (no HNSW index: what the exact index mode will be);
the HNSW index built (timed with the COPY: the bulk-import floor); every figure again in hnsw
mode; then mem0 beside memora_pg on the same server and data. Each figure prints as it is
measured; the Markdown tables go into ``--out`` between the results markers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.lib import bulk, data, load, mem0_compare, reads, writes
from bench.lib.context import Context, VectorBook
from bench.lib.report import Figure, machine, markdown, write
from bench.lib.server import Server

# Where bench/README.md installs mem0 (a venv of its own, never memora_pg's).
DEFAULT_MEM0_PYTHON = "/tmp/venv-bench/bin/python"  # noqa: S108 - a path, not a temporary file
# Figures whose growth from the smallest to the largest scale is checked (user-scoped work).
GROWTH = (
    "save_interaction_with_memories (",
    "fetch_user_memories_resolved",
    "get_all_user_interactions",
    "user-scoped search, PgVectorDB",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--scale", default="10k,100k", help="comma-separated totals of memories, e.g. 10k,100k,1M")
    parser.add_argument("--out", type=Path, default=None, help="Markdown file whose results block is replaced")
    parser.add_argument("--iterations", type=int, default=100, help="timed calls per figure and side")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls per figure and side first")
    parser.add_argument(
        "--server-url",
        default=os.environ.get("MEMORA_PG_BENCH_SERVER_URL"),
        help="run on this PostgreSQL server (default: a temporary embedded PostgreSQL 18)",
    )
    parser.add_argument(
        "--mem0-python",
        default=os.environ.get("MEMORA_PG_BENCH_MEM0_PYTHON", DEFAULT_MEM0_PYTHON),
        help="python of a venv with mem0ai installed; '' skips the mem0 comparison",
    )
    parser.add_argument(
        "--only",
        choices=("all", "bulk", "org"),
        default="all",
        help="'bulk': load, build and the bulk-import figure only; 'org': load, build and the organization-wide search",
    )
    parser.add_argument(
        "--ef-search",
        default="100",
        help="comma-separated hnsw_ef_search values: the organization-wide search in hnsw mode runs once with each",
    )
    parser.add_argument(
        "--hnsw-m", type=int, default=load.HNSW_M, help="HNSW m of every index the run builds (default: the package's)"
    )
    parser.add_argument(
        "--hnsw-ef-construction",
        type=int,
        default=load.HNSW_EF_CONSTRUCTION,
        help="HNSW ef_construction of every index the run builds (default: the package's)",
    )
    parser.add_argument("--note", default="", help="a line added under the header (e.g. 'the machine was shared')")
    return parser.parse_args(argv)


async def run_scale(server: Server, n: int, args: argparse.Namespace) -> list[Figure]:
    layout = data.Layout(n)
    space = data.VectorSpace(layout)
    label = data.scale_label(layout.total)
    name = f"bench_{label.lower()}"
    print(
        f"== {label}: {layout.users} users of {layout.per_user} memories in {layout.orgs} organization(s)", flush=True
    )
    url = await server.create_database(name)
    ctx = Context(url, layout, space, VectorBook(space), iterations=args.iterations, warmup=args.warmup)
    # memora_pg's own index builds (the import's) use the same parameters as the raw build.
    ctx.overrides.update(hnsw_m=args.hnsw_m, hnsw_ef_construction=args.hnsw_ef_construction)
    index = {"m": args.hnsw_m, "ef_construction": args.hnsw_ef_construction}
    try:
        started = time.perf_counter()
        times = await load.load(url, layout, space)
        print(f"   loaded in {time.perf_counter() - started:.0f} s", flush=True)

        if args.only == "bulk":
            await bulk.bulk_figure(ctx, server, times, await load.build_hnsw(url, **index))
            return ctx.figures
        if args.only == "org":
            build_s = await load.build_hnsw(url, **index)
            print(f"   HNSW (m {args.hnsw_m}, ef_construction {args.hnsw_ef_construction}) built in {build_s:.0f} s")
            await org_sweep(ctx, args)
            return ctx.figures
        await writes.save_figures(ctx, "exact")
        add_exact = await writes.add_figure(ctx, "exact")
        await reads.read_figures(ctx, "exact")

        build_s = await load.build_hnsw(url, **index)
        await bulk.bulk_figure(ctx, server, times, build_s)

        await writes.save_figures(ctx, "hnsw")
        add_hnsw = await writes.add_figure(ctx, "hnsw")
        await writes.add_rate_figure(ctx, add_hnsw, add_exact)
        runs = await reads.read_figures(ctx, "hnsw")
        await org_sweep(ctx, args, skip=ctx.settings().hnsw_ef_search)

        python = mem0_compare.available(args.mem0_python)
        if python:
            await mem0_compare.mem0_figures(
                ctx,
                server,
                python,
                add_ours={"hnsw": add_hnsw, "exact": add_exact},
                user_ours=runs["face"],
                filtered_ours=runs["filtered"],
            )
        else:
            ctx.add(Figure("Beside mem0", "not measured: no mem0 venv (--mem0-python)", label))
    finally:
        await ctx.dispose()
        await server.drop_database(name)
    return ctx.figures


async def org_sweep(ctx: Context, args: argparse.Namespace, *, skip: int | None = None) -> None:
    """The organization-wide search in hnsw mode with each --ef-search value (recall against speed)."""
    for ef in (int(value) for value in args.ef_search.split(",") if value.strip()):
        if ef == skip:
            continue
        ctx.overrides["hnsw_ef_search"] = ef
        try:
            await reads.org_hnsw_figure(ctx)
        finally:
            ctx.overrides.pop("hnsw_ef_search")


def index_options(args: argparse.Namespace) -> str:
    """The --hnsw-* options of the command line, where they are not the package's defaults."""
    options = ""
    if args.hnsw_m != load.HNSW_M:
        options += f" --hnsw-m {args.hnsw_m}"
    if args.hnsw_ef_construction != load.HNSW_EF_CONSTRUCTION:
        options += f" --hnsw-ef-construction {args.hnsw_ef_construction}"
    return options


def growth_figures(figures: list[Figure]) -> list[Figure]:
    """User-scoped figures at the largest scale against the smallest: within 1.5×."""
    scales = sorted({f.scale for f in figures}, key=data.parse_scale)
    if len(scales) < 2:
        return []
    small, large = scales[0], scales[-1]
    found = []
    for figure in figures:
        if figure.scale != large or figure.ours is None or not figure.name.startswith(GROWTH):
            continue
        before = next(
            (f for f in figures if f.scale == small and f.name == figure.name and f.mode == figure.mode and f.ours),
            None,
        )
        if before is None or before.ours is None:
            continue
        ratio = figure.ours.median / before.ours.median
        found.append(
            Figure(
                "Growth",
                figure.name,
                f"{small} → {large}",
                figure.mode,
                ratio=ratio,
                notes=[f"p50 {before.ours.median * 1000:.2f} ms → {figure.ours.median * 1000:.2f} ms"],
                target="within 1.5×",
                met=ratio <= 1.5,
            )
        )
    return found


async def main(argv: list[str] | None = None) -> list[Figure]:
    args = parse_args(argv)
    scales = [data.parse_scale(s) for s in args.scale.split(",") if s.strip()]
    figures: list[Figure] = []
    started = time.perf_counter()
    with Server(args.server_url) as server:
        versions = await server.versions()
        for n in scales:
            figures += await run_scale(server, n, args)
    for figure in growth_figures(figures):
        print(figure.line(), flush=True)
        figures.append(figure)
    import asyncpg  # type: ignore[import-untyped]
    import sqlalchemy

    header = [
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC in {time.perf_counter() - started:.0f} s on "
        f"{machine()}; PostgreSQL {versions['postgresql']}, pgvector {versions['pgvector']}, "
        f"Python {sys.version.split()[0]}, SQLAlchemy {sqlalchemy.__version__}, asyncpg {asyncpg.__version__}.",
        "",
        f"Command: `python -m bench.run --scale {args.scale} --iterations {args.iterations} "
        f"--warmup {args.warmup}{' --only ' + args.only if args.only != 'all' else ''}"
        f"{' --ef-search ' + args.ef_search if args.ef_search != '100' else ''}"
        f"{index_options(args)}"
        f"{' --out ' + str(args.out) if args.out else ''}`",
    ]
    if args.note:
        header += ["", args.note]
    if args.out is not None:
        write(args.out, markdown(figures, header=header), title="memora_pg benchmarks")
    return figures


if __name__ == "__main__":
    asyncio.run(main())
