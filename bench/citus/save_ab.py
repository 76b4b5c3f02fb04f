"""The save of 10 memories on Citus and on one server, an earlier commit against this tree, interleaved.

    MEMORA_PG_TEST_POSTGRES=16 python -m bench.citus.save_ab --before 20f8147 [--saves 150] [--rounds 2]

``bench.citus.latency`` measures this tree alone, and two runs minutes apart differ by 10 to 30% on this
machine. Here the earlier commit's package (copied out of git as ``bench.ab`` does) and this tree save on
the same cluster and the same plain PostgreSQL 16 server, in one process, each in a schema of its own
(distributed with its own ``distribution_sql`` on the cluster), each save of one side followed by one of
the other. Each round uses new schemas; the table gives each round's p50 and the Citus ÷ plain ratio of
each side, the issue's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

import memora_pg
from bench.ab import BEFORE, before_package, git
from bench.citus.latency import cluster_and_plain

Save = Callable[[], Awaitable[Any]]


async def saver(package: ModuleType, url: str, schema: str, *, distribute: bool) -> Save:
    """A save of 10 memories by ``package`` into a new schema at ``url`` (distributed first with ``distribute``)."""
    migrations = importlib.import_module(f"{package.__name__}.migrations")
    engine = create_async_engine(url)
    await migrations.upgrade(engine, migrations.MigrationOptions(schema=schema))
    if distribute:
        citus = importlib.import_module(f"{package.__name__}.citus")
        for statement in citus.distribution_sql(schema).splitlines():
            if statement and not statement.startswith("--"):
                async with engine.begin() as conn:
                    await conn.execute(text(statement))
    embedder = importlib.import_module(f"{package.__name__}.embeddings").HashEmbedder(384)
    graph = package.PostgresGraphDB(engine, settings=package.Settings(db_schema=schema), embedder=embedder)
    org = await graph.create_organization("o")
    user = await graph.create_user(org.org_id, "u")
    agent = await graph.create_agent(org.org_id, "a")
    body = package.MemoriesAndInteraction(
        interaction=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        memories=[package.MemoryToStore(memory=f"fact {i} about tea", source_msg_block_pos=[0]) for i in range(10)],
    )
    return lambda: graph.save_interaction_with_memories(org.org_id, agent.agent_id, user.user_id, body)


async def p50s(sides: dict[str, Save], saves: int, warmup: int = 20) -> dict[str, float]:
    """Each side's p50 in ms, the sides taking turns (the one going first alternating)."""
    spent: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(warmup + saves):
        for name in sides if i % 2 else reversed(list(sides)):
            started = time.perf_counter()
            await sides[name]()
            if i >= warmup:
                spent[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) * 1000 for name, times in spent.items()}


async def main(args: argparse.Namespace) -> None:
    head = git("rev-parse", "--short", "HEAD").decode().strip()
    with tempfile.TemporaryDirectory(prefix="memora-save-ab-") as folder:
        before_package(args.before, Path(folder))
        packages = {"before": importlib.import_module(BEFORE), "after": memora_pg}
        print(f"{args.before} before, this tree (at {head}) after; p50 of {args.saves} saves of 10 memories each")
        print("| round | side | plain PostgreSQL 16 | Citus 13.2 | Citus ÷ plain |")
        print("| --- | --- | --- | --- | --- |")
        async with cluster_and_plain() as (running, plain):
            urls = {"citus": running.url, "plain": plain.get_uri(driver="asyncpg")}
            for round_no in range(args.rounds):
                found = {}
                for server, url in urls.items():
                    sides = {
                        name: await saver(package, url, f"ab_{name}_{round_no}", distribute=server == "citus")
                        for name, package in packages.items()
                    }
                    found[server] = await p50s(sides, args.saves)
                for name in packages:
                    on_plain, on_citus = found["plain"][name], found["citus"][name]
                    ratio = on_citus / on_plain
                    print(f"| {round_no + 1} | {name} | {on_plain:.2f} ms | {on_citus:.2f} ms | {ratio:.2f}× |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--saves", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
