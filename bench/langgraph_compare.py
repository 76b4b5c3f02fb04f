"""MemoraStore beside LangGraph's PostgresStore on one server: puts, gets and searches of the same items.

    .venv-diff/bin/python -m bench.langgraph_compare [--items 20000] [--per-namespace 200] [--iterations 300]

Runs in the differential environment (``make diff-env``), where langgraph-checkpoint-postgres and psycopg
are installed beside memora_pg. Both stores get the same embedding function (memora_pg's HashEmbedder, a
deterministic hashing of the words, so no model runs and both sides get the same vectors) and index the same field;
each has a database of its own on the same embedded PostgreSQL 18. MemoraStore runs with its default
settings (hybrid search); PostgresStore with its defaults (an HNSW index on its vectors, cosine).

Measured, each side in turn, call by call (interleaved, after a warm-up):

* load: the items written in batches of 100 puts (items per second); then both databases are analyzed, as
  autovacuum does within a minute of such a load;
* put: one put of a new key into a loaded namespace (p50);
* get: one get of a stored key (p50);
* search with a query, with a filter, and with both, in one namespace of ``--per-namespace`` items (p50).

Prints a table and writes it to ``--out`` (bench/results/langgraph_compare.md).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.postgres import PostgresStore  # type: ignore[import-untyped,import-not-found,unused-ignore]

from bench.lib.server import Server, connect, plain_url
from memora_pg import Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.langgraph import MemoraStore

DIMENSIONS = 384
# Calls of each kind made before the timed ones, on each side.
WARMUP = 20
TOPICS = ["travel", "food", "work", "family", "health", "music", "sport", "books"]
# The words of the items' texts and of the queries.
SENTENCE = (
    "prefers aisle seats flies to Lisbon every spring likes green tea avoids peanuts works nights as a nurse "
    "plays the cello on sundays runs marathons reads crime novels has a cat named Miso moved to Porto in June"
)
WORDS = SENTENCE.split()


def _items(count: int, per_namespace: int, seed: int = 7) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    rng = random.Random(seed)  # noqa: S311 - sample data, not secrets
    items: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
    for n in range(count):
        namespace = ("users", f"user{n // per_namespace}", "memories")
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        items.append((namespace, f"m{n}", {"text": text, "topic": rng.choice(TOPICS), "n": n % 10}))
    return items


def _p50_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


def _timed(call: Callable[[BaseStore, int], Any], store: BaseStore, i: int) -> float:
    started = time.perf_counter()
    call(store, i)
    return time.perf_counter() - started


def measure(
    stores: dict[str, BaseStore],
    items: list[Any],
    *,
    analyzers: list[Callable[[], None]],
    iterations: int,
) -> dict[str, dict[str, float]]:
    rng = random.Random(11)  # noqa: S311 - sample data, not secrets
    figures: dict[str, dict[str, float]] = {name: {} for name in stores}
    for name, store in stores.items():
        started = time.perf_counter()
        for start in range(0, len(items), 100):
            store.batch([PutOp(ns, key, value) for ns, key, value in items[start : start + 100]])
        figures[name]["load items/s"] = len(items) / (time.perf_counter() - started)
    # What autovacuum does within its first minute: statistics, which also replace the plans PostgreSQL
    # cached for the connections' prepared statements while the tables were empty.
    for analyze in analyzers:
        analyze()
    namespaces = sorted({ns for ns, _, _ in items})
    queries = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(iterations + WARMUP)]
    cases: dict[str, Callable[[BaseStore, int], Any]] = {
        "put p50 ms": lambda s, i: s.put(
            namespaces[i % len(namespaces)], f"new{i}", {"text": queries[i], "topic": "new", "n": 1}
        ),
        "get p50 ms": lambda s, i: s.get(items[(i * 7919) % len(items)][0], items[(i * 7919) % len(items)][1]),
        "search, query p50 ms": lambda s, i: s.search(namespaces[i % len(namespaces)], query=queries[i], limit=10),
        "search, filter p50 ms": lambda s, i: s.search(
            namespaces[i % len(namespaces)], filter={"topic": TOPICS[i % 8]}, limit=10
        ),
        "search, query and filter p50 ms": lambda s, i: s.search(
            namespaces[i % len(namespaces)], query=queries[i], filter={"topic": TOPICS[i % 8]}, limit=10
        ),
    }
    for case, call in cases.items():
        samples: dict[str, list[float]] = {name: [] for name in stores}
        for i in range(iterations + WARMUP):
            for name, store in stores.items():
                seconds = _timed(call, store, i)
                if i >= WARMUP:
                    samples[name].append(seconds)
        for name in stores:
            figures[name][case] = _p50_ms(samples[name])
    return figures


async def _analyze(url: str) -> None:
    conn = await connect(url)
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def _analyzer(url: str) -> Callable[[], None]:
    return lambda: asyncio.run(_analyze(url))


def table(figures: dict[str, dict[str, float]], *, items: int, per_namespace: int) -> str:
    ours, theirs = figures["MemoraStore"], figures["PostgresStore"]
    lines = [
        f"{items:,} items, {per_namespace} per namespace,"
        f" the same embedding function on both sides (HashEmbedder, {DIMENSIONS} dims)",
        "",
        "| figure | MemoraStore | PostgresStore | MemoraStore / PostgresStore |",
        "| --- | --- | --- | --- |",
    ]
    for figure in ours:
        ratio = ours[figure] / theirs[figure]
        lines.append(f"| {figure} | {ours[figure]:.2f} | {theirs[figure]:.2f} | {ratio:.2f}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--per-namespace", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--out", default="bench/results/langgraph_compare.md")
    args = parser.parse_args()
    items = _items(args.items, args.per_namespace)
    hasher = HashEmbedder(DIMENSIONS)
    with Server() as server:
        ours_url = asyncio.run(server.create_database("lg_memora"))
        theirs_url = asyncio.run(server.create_database("lg_postgres"))
        # The same vectors on both sides: memora_pg's embedder itself, and its synchronous form for LangGraph.
        index = {"dims": DIMENSIONS, "embed": hasher.embed_sync, "fields": ["text"]}
        with (
            MemoraStore.from_conn_string(
                ours_url, index={"fields": ["text"]}, settings=Settings(database_url=ours_url), embedder=hasher
            ) as ours,
            PostgresStore.from_conn_string(plain_url(theirs_url), index=index) as theirs,
        ):
            ours.setup()
            theirs.setup()
            figures = measure(
                {"MemoraStore": ours, "PostgresStore": theirs},
                items,
                analyzers=[_analyzer(ours_url), _analyzer(theirs_url)],
                iterations=args.iterations,
            )
    report = table(figures, items=args.items, per_namespace=args.per_namespace)
    print(report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
