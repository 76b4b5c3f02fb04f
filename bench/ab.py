"""The calls of ``bench.calls`` on an earlier commit and on this tree, in one process, interleaved.

    python -m bench.ab --before 9127466 [--iterations 400] [--server-url URL]

Two runs of a benchmark minutes apart differ by 10 to 30% on a shared machine, more than most
changes to the hot path. Here the earlier commit's package is copied out of git under another
name (``memora_pg_before``, its imports rewritten), both packages serve the same calls on one
database, and each call of one side is followed by the same call of the other (the side going
first alternates), so both see the same machine and the same data. The side whose data is loaded
first saves about 10% slower (its rows sit behind the other's), so the comparison runs twice, on a
new database each time, each side loading first once; the table gives each call's p50 over both
rounds, on both sides, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import ModuleType

from bench import calls as after_calls
from bench.lib.server import Server

BEFORE = "memora_pg_before"


def git(*args: str) -> bytes:
    """What a git command of this repository prints (git itself, from PATH, as a developer runs it)."""
    return subprocess.run(["git", *args], check=True, capture_output=True).stdout  # noqa: S603, S607


def before_package(revision: str, into: Path) -> ModuleType:
    """``bench.calls`` bound to the package of ``revision`` (copied into ``into`` as ``memora_pg_before``)."""
    archive = git("archive", "--format=tar", revision, "memora_pg", "alembic")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "memora_pg").rename(into / BEFORE)
    here = Path(after_calls.__file__)
    (into / "calls_before.py").write_text(here.read_text())
    for path in [*into.rglob("*.py")]:
        path.write_text(re.sub(r"\bmemora_pg\b", BEFORE, path.read_text()))
    sys.path.insert(0, str(into))
    return importlib.import_module("calls_before")


Spent = dict[str, dict[str, list[float]]]


async def compare(
    url: str, before: ModuleType, iterations: int, warmup: int, *, after_first: bool, spent: Spent
) -> None:
    """One round: both sides' calls on the database at ``url``, each side's times added to ``spent``."""
    sides = {}
    for side in ("after", "before") if after_first else ("before", "after"):
        # A schema each: the two trees may stand at different migrations.
        sides[side] = await (after_calls if side == "after" else before).calls(url, schema=f"bench_{side}")
    for name in sides["after"]:
        spent.setdefault(name, {"after": [], "before": []})
    for i in range(warmup + iterations):
        for name in spent:
            for side in ("before", "after") if i % 2 else ("after", "before"):
                started = time.perf_counter()
                await sides[side][name](i)
                if i >= warmup:
                    spent[name][side].append(time.perf_counter() - started)


async def main(args: argparse.Namespace, head: str) -> None:
    with tempfile.TemporaryDirectory(prefix="memora-ab-") as folder:
        before = before_package(args.before, Path(folder))
        spent: Spent = {}
        with Server(args.server_url) as server:
            for after_first in (True, False):
                url = await server.create_database("bench_ab")
                try:
                    await compare(url, before, args.iterations, args.warmup, after_first=after_first, spent=spent)
                finally:
                    await server.drop_database("bench_ab")
    print(f"| call | before ({args.before}) p50 | after (this tree, at {head}) p50 | after ÷ before |")
    print("| --- | --- | --- | --- |")
    for name, times in spent.items():
        old, new = statistics.median(times["before"]), statistics.median(times["after"])
        print(f"| {name} | {old * 1000:.2f} ms | {new * 1000:.2f} ms | {new / old:.2f}× |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    asyncio.run(main(parser.parse_args(), git("rev-parse", "--short", "HEAD").decode().strip()))
