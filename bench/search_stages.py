"""Where the default search's time goes: its statement stopped after each stage, against the exact floor.

    python -m bench.search_stages PATH [--size 1k] [--iterations 300]

PATH is a LoCoMo-format file, loaded as ``bench.search_scaling`` loads it (one user, turns repeated
to ``--size`` memories, no HNSW index). The Memora face's default search is run once per query with a
listener on its pool, which keeps the SQL and the arguments it sends. Each stage is that same SQL with
its last part replaced by a count of one CTE, so that PostgreSQL runs the statement up to that CTE and
no further (a CTE nothing reads is never run):

* ``term_rarity``: the query's terms, the scope's count and each term's rows (the GIN index);
* ``candidates``: with the nearest rows (the exact sort) and the rows of rare terms;
* ``found``: with each candidate read by its key;
* ``around``: with each candidate's neighbours;
* the whole statement (its rows returned, with each row's query terms), then the face's call (the
  statement and the scoring in Python, :func:`memora_pg.graph.scoring.rank`).

All of them run interleaved with the raw exact-cosine floor of ``bench.search_scaling``, prepared on a
raw asyncpg connection (the face's statements are prepared on its own pool). Each line gives the p50 and
what the stage adds to the one before it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import search_scaling as scaling
from bench.lib import load as bench_load
from bench.lib.data import parse_scale
from bench.lib.embedding import SharedEmbedder
from bench.lib.server import Server, connect, sqlalchemy_url
from bench.lib.timing import Call, interleaved
from memora_pg import MemorySearchScope, PgVectorDB, Settings, driver, vector_params
from memora_pg.embeddings import LocalEmbedder

STAGES = ("term_rarity", "candidates", "found", "around")
# The statement's last part: what it returns, read from the CTEs above it.
FINAL = re.compile(r"\n SELECT around\.query_no", re.MULTILINE)


def stage_sql(sql: str, cte: str, parameters: int) -> str:
    """``sql`` (the hybrid statement) run up to ``cte``: its CTEs, then a count of ``cte``'s rows. Every
    parameter stays referenced (an unreferenced one has no type to prepare it with)."""
    head = FINAL.split(sql, maxsplit=1)[0]
    bound = ", ".join(f"${n}" for n in range(1, parameters + 1))
    return f"{head}\nSELECT count(*) FROM {cte}, (SELECT {bound}) AS bound"


async def captured(face: PgVectorDB, queries: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """The SQL and arguments the face sends for each query, once its search runs on the asyncpg path
    (a statement's first run goes through SQLAlchemy, which tells that path its columns' types)."""
    for query in queries[:3]:
        await face.search_memory(query, MemorySearchScope.USER, scaling.ORG, scaling.USER)
    sent: list[tuple[str, list[Any]]] = []
    driver.listen(await face.database.engine(), lambda sql, arguments: sent.append((sql, list(arguments))))
    for query in queries:
        before = len(sent)
        await face.search_memory(query, MemorySearchScope.USER, scaling.ORG, scaling.USER)
        if len(sent) != before + 1:
            raise SystemExit("the face's search was not one statement on its asyncpg path")
    return sent


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search_stages", description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--size", default="1k")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--server-url", default=None)
    args = parser.parse_args(argv)
    embedder = SharedEmbedder(LocalEmbedder())
    data = await scaling.corpus(args.path, embedder)
    size = parse_scale(args.size)
    with Server(args.server_url) as server:
        url = await server.create_database("bench_stages")
        await scaling.fill(url, scaling.rows(data, size))
        await bench_load.drop_hnsw(url)
        face = PgVectorDB(sqlalchemy_url(url), settings=Settings(db_schema=scaling.SCHEMA), embedder=embedder)
        raw = await connect(url)
        try:
            sent = await captured(face, data.queries)
            sql = sent[0][0]
            if any(other != sql for other, _ in sent):
                raise SystemExit("the face sent more than one statement text")
            arguments = [found for _, found in sent]
            parameters = len(arguments[0])
            prepared = {cte: await raw.prepare(stage_sql(sql, cte, parameters)) for cte in STAGES}
            prepared["whole statement"] = await raw.prepare(sql)
            floor = await raw.prepare(scaling.EXACT_FLOOR)
            vectors = [vector_params.encode(v) for v in data.query_vectors]

            def stage(statement: Any) -> Call:
                return lambda i: statement.fetch(*arguments[i % len(arguments)])

            calls: dict[str, Call] = {name: stage(statement) for name, statement in prepared.items()}
            calls["the face's call (statement and scoring)"] = lambda i: face.search_memory(
                data.queries[i % len(data.queries)], MemorySearchScope.USER, scaling.ORG, scaling.USER
            )
            calls["raw exact cosine (floor)"] = lambda i: floor.fetch(
                scaling.ORG, scaling.USER, vectors[i % len(vectors)]
            )
            runs = await interleaved(calls, iterations=args.iterations, warmup=args.warmup)
        finally:
            await raw.close()
            await face.close()
        await server.drop_database("bench_stages")
    floor_ms = runs["raw exact cosine (floor)"].sample.median * 1000
    print(f"Stages of the default search, {size:,} memories of one user, exact mode (p50 of {args.iterations}):")
    print()
    print("| up to | p50 ms | adds | ÷ floor |")
    print("| --- | --- | --- | --- |")
    previous = None
    for name, run in runs.items():
        ms = run.sample.median * 1000
        adds = "" if previous is None or name.startswith("raw") else f"+{ms - previous:.2f}"
        print(f"| {name} | {ms:.2f} | {adds} | {ms / floor_ms:.2f}× |")
        previous = ms


if __name__ == "__main__":
    asyncio.run(main())
