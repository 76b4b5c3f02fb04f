"""The default search as one user's memories grow: 1,000 to 100,000 memories of LoCoMo-like text.

    python -m bench.search_scaling PATH [--sizes 1k,10k,100k] [--index exact,hnsw] [--mem0-python PY]

PATH is a LoCoMo-format file (the development set, or the full set). Its turns are repeated
until the user holds each size: repeat ``r`` of a turn keeps its text and gets the turn's e5
embedding moved by a small random step (norm 0.1, renormalised), so that the vectors are not
duplicates the HNSW graph could not tell apart. One interaction per session of each repeat, as
the Memora face saves a conversation. The questions of the file are the queries, each embedded
once before anything is timed.

For each size and index mode (``exact``: no HNSW index; ``hnsw``: the package's index), every
side runs interleaved with the others after the same warm-up:

* the default search of the Memora face (``PgVectorDB.search_memory``, hybrid, top 10);
* the same face in dense mode (``MEMORA_PG_SEARCH_MODE=dense``);
* the mem0-style ``search`` (hybrid, top 10, a ``user_id`` filter);
* the raw exact-cosine floor: the user's rows sorted by cosine distance, top 10 (asyncpg);
* the raw HNSW floor (hnsw mode): the same through the index, ``hnsw.ef_search`` as the
  package sets it, iterative scans on;
* mem0 2.2.x's ``search`` on the same rows, when ``--mem0-python`` names a venv with mem0ai.

Each line prints p50 and p95 in ms and the ratio of the default search to the exact floor.

``--others N`` adds N memories of other users of the same organization (copies of the measured
user's, ``size`` per user, each user's rows a copy of the measured user's texts and vectors), so that
the table holds what a shared deployment's does: every word's full-text posting list then holds every
user's rows, and the measured user's search must cost what its own rows cost, whatever the others hold.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.lib import load as bench_load
from bench.lib.data import parse_scale
from bench.lib.embedding import SharedEmbedder
from bench.lib.locomo import load as load_locomo
from bench.lib.server import Server, connect, sqlalchemy_url
from bench.lib.timing import Call, interleaved
from memora_pg import AsyncMemory, MemorySearchScope, PgVectorDB, Settings, vector_params
from memora_pg.embeddings import LocalEmbedder
from memora_pg.mem0 import MemoryConfig

SCHEMA = bench_load.SCHEMA
# The mem0-style face keeps a collection in the organization "mem0:<collection>": the same rows serve every face.
COLLECTION = "bench"
ORG, USER, AGENT = f"mem0:{COLLECTION}", "bench-user", "bench-agent"
NOISE = 0.1

EXACT_FLOOR = f"""
SELECT memory_id FROM "{SCHEMA}".memories
WHERE org_id = $1 AND user_id = $2 AND embedding IS NOT NULL
ORDER BY (embedding <=> $3) + 0
LIMIT 10
"""
HNSW_FLOOR = f"""
SELECT memory_id FROM "{SCHEMA}".memories
WHERE org_id = $1 AND user_id = $2 AND embedding IS NOT NULL
ORDER BY embedding <=> $3
LIMIT 10
"""


@dataclass
class Corpus:
    texts: list[str]
    sessions: list[int]
    vectors: np.ndarray[Any, Any]
    queries: list[str]
    query_vectors: list[list[float]]


async def corpus(path: Path, embedder: SharedEmbedder) -> Corpus:
    conversations = await asyncio.to_thread(load_locomo, path)
    texts = [t.text for c in conversations for t in c.turns]
    sessions, number = [], 0
    for c in conversations:
        for s in sorted({t.session for t in c.turns}):
            sessions += [number] * sum(1 for t in c.turns if t.session == s)
            number += 1
    vectors = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
    queries = [q.text for c in conversations for q in c.questions]
    return Corpus(texts, sessions, vectors, queries, await embedder.embed_queries(queries))


def rows(data: Corpus, size: int) -> list[tuple[Any, ...]]:
    """``size`` memories: (memory_id, interaction_id, memory, obtained_at offset in minutes, vector)."""
    rng = np.random.default_rng(7)
    found: list[tuple[Any, ...]] = []
    turns, sessions = len(data.texts), max(data.sessions) + 1
    for n in range(size):
        repeat, i = divmod(n, turns)
        vector = data.vectors[i]
        if repeat:
            step = rng.standard_normal(vector.shape[0]).astype(np.float32)
            vector = vector + NOISE * step / np.linalg.norm(step)
            vector = vector / np.linalg.norm(vector)
        interaction = f"i{repeat * sessions + data.sessions[i]}"
        found.append((uuid.uuid4(), interaction, data.texts[i], n, vector))
    return found


async def fill(url: str, memories: Sequence[tuple[Any, ...]]) -> None:
    """One organization, user and agent; the interactions; the memories, their full-text vectors
    computed by the schema's own rule."""
    await bench_load.migrate(url)
    conn = await connect(url)
    try:
        base = await conn.fetchval("SELECT now() - interval '365 days'")
        await conn.execute(f'INSERT INTO "{SCHEMA}".organizations (org_id, org_name) VALUES ($1, $1)', ORG)
        await conn.execute(f'INSERT INTO "{SCHEMA}".users (org_id, user_id, user_name) VALUES ($1, $2, $2)', ORG, USER)
        await conn.execute(
            f'INSERT INTO "{SCHEMA}".agents (org_id, agent_id, agent_label) VALUES ($1, $2, $2)', ORG, AGENT
        )
        interactions = sorted({m[1] for m in memories}, key=lambda i: int(i[1:]))
        await conn.copy_records_to_table(
            "interactions",
            schema_name=SCHEMA,
            columns=("org_id", "interaction_id", "user_id", "agent_id", "created_at", "updated_at"),
            records=[(ORG, i, USER, AGENT, base, base) for i in interactions],
        )
        await conn.execute(
            "CREATE TEMPORARY TABLE staged (memory_id uuid, interaction_id text, memory text, minute int, "
            f"embedding vector({memories[0][4].shape[0]}))"
        )
        await conn.copy_records_to_table(
            "staged",
            records=[(m[0], m[1], m[2], m[3], vector_params.encode(m[4].tolist())) for m in memories],
        )
        await conn.execute(
            f"""
            INSERT INTO "{SCHEMA}".memories (org_id, memory_id, user_id, agent_id, interaction_id, memory,
                                             obtained_at, stored_at, embedding, search_text)
            SELECT $1, memory_id, $2, $3, interaction_id, memory, at, at, embedding, "{SCHEMA}".to_search_text(memory)
            FROM staged, LATERAL (SELECT CAST($4 AS timestamptz) + make_interval(mins => minute) AS at) AS made
            ORDER BY minute
            """,
            ORG,
            USER,
            AGENT,
            base,
        )
        await conn.execute(f'VACUUM ANALYZE "{SCHEMA}".memories')
    finally:
        await conn.close()


OTHER_USERS = f"""
INSERT INTO "{SCHEMA}".users (org_id, user_id, user_name)
SELECT $1, 'other-' || g, 'other-' || g FROM generate_series(1, CAST($2 AS int)) AS g
"""
# Each other user's memories: a copy of the measured user's (no interaction: only their words and vectors matter).
OTHER_MEMORIES = f"""
INSERT INTO "{SCHEMA}".memories (org_id, memory_id, user_id, agent_id, memory, obtained_at, stored_at, embedding,
                                 search_text)
SELECT m.org_id, gen_random_uuid(), 'other-' || g, m.agent_id, m.memory, m.obtained_at, m.stored_at, m.embedding,
       m.search_text
FROM "{SCHEMA}".memories AS m CROSS JOIN generate_series(CAST($2 AS int), CAST($3 AS int)) AS g
WHERE m.org_id = $1 AND m.user_id = $4
"""


async def add_others(url: str, others: int, size: int) -> int:
    """Other users of the organization, ``size`` memories each, ``others`` memories in all (rounded up to
    whole users), without the HNSW index (built afterwards, as for the measured user); their number."""
    users = -(-others // size)
    await bench_load.drop_hnsw(url)
    conn = await connect(url)
    try:
        await conn.execute(OTHER_USERS, ORG, users)
        batch = max(1, 100_000 // size)
        for first in range(1, users + 1, batch):
            await conn.execute(OTHER_MEMORIES, ORG, first, min(users, first + batch - 1), USER)
        await conn.execute(f'VACUUM ANALYZE "{SCHEMA}".memories')
    finally:
        await conn.close()
    return users * size


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


async def measure(
    url: str,
    data: Corpus,
    embedder: SharedEmbedder,
    *,
    size: int,
    others: int = 0,
    index: str,
    iterations: int,
    warmup: int,
) -> tuple[str, float]:
    """One row of the table: every side timed interleaved; returns the row and the default search's p50."""
    settings = Settings(db_schema=SCHEMA)
    default = PgVectorDB(url, settings=settings, embedder=embedder)
    dense = PgVectorDB(url, settings=Settings(db_schema=SCHEMA, search_mode="dense"), embedder=embedder)
    mem0 = AsyncMemory(
        MemoryConfig.model_validate(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {"connection_string": url, "collection_name": COLLECTION},
                }
            },
        ),
        embedder=embedder,
    )
    raw = await connect(url)
    queries, vectors = data.queries, [vector_params.encode(v) for v in data.query_vectors]
    try:
        if index == "hnsw":
            ef = max(settings.hnsw_ef_search, settings.search_candidates)
            await raw.execute(f"SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = {ef}")

        async def memora(i: int) -> Any:
            return await default.search_memory(queries[i % len(queries)], MemorySearchScope.USER, ORG, USER)

        async def dense_face(i: int) -> Any:
            return await dense.search_memory(queries[i % len(queries)], MemorySearchScope.USER, ORG, USER)

        async def mem0_face(i: int) -> Any:
            return await mem0.search(queries[i % len(queries)], top_k=10, filters={"user_id": USER})

        async def exact_floor(i: int) -> Any:
            return await raw.fetch(EXACT_FLOOR, ORG, USER, vectors[i % len(vectors)])

        async def hnsw_floor(i: int) -> Any:
            return await raw.fetch(HNSW_FLOOR, ORG, USER, vectors[i % len(vectors)])

        calls: dict[str, Call] = {
            "default (hybrid) PgVectorDB": memora,
            "mem0-style search (hybrid)": mem0_face,
            "dense PgVectorDB": dense_face,
            "raw exact cosine": exact_floor,
        }
        if index == "hnsw":
            calls["raw HNSW"] = hnsw_floor
        runs = await interleaved(calls, iterations=iterations, warmup=warmup)
    finally:
        await raw.close()
        await default.close()
        await dense.close()
        await mem0.close()
    floor = runs["raw exact cosine"].sample
    searched = runs["default (hybrid) PgVectorDB"].sample
    hnsw = runs["raw HNSW"].sample if "raw HNSW" in runs else None
    cells = [
        f"{size:,}",
        f"{others:,}",
        index,
        f"{_ms(searched.median)} / {_ms(searched.p95)}",
        f"{searched.median / floor.median:.2f}× / {searched.p95 / floor.p95:.2f}×",
        _ms(runs["mem0-style search (hybrid)"].sample.median),
        _ms(runs["dense PgVectorDB"].sample.median),
        f"{_ms(floor.median)} / {_ms(floor.p95)}",
        _ms(hnsw.median) if hnsw else "—",
    ]
    line = "| " + " | ".join(cells) + " |"
    print(line, flush=True)
    return line, searched.median


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search_scaling", description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--index", default="exact,hnsw")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the table to this file")
    parser.add_argument(
        "--others", default="0", help="memories of other users in the same table, e.g. 1M (default: none)"
    )
    args = parser.parse_args(argv)
    others = parse_scale(args.others) if args.others != "0" else 0
    embedder = SharedEmbedder(LocalEmbedder())
    data = await corpus(args.path, embedder)
    header = [
        f"Search scaling on `{args.path.name}` "
        + ("(one user, turns repeated): " if not others else "(one user among others, turns repeated): ")
        + "`python -m bench.search_scaling "
        + " ".join(sys.argv[1:] if argv is None else argv)
        + "`",
        "",
        "| memories of the user | other users' memories | index | default search p50 / p95 ms "
        "| ÷ raw exact (p50 / p95) | mem0-style search p50 | dense face p50 | raw exact cosine p50 / p95 "
        "| raw HNSW p50 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(header), flush=True)
    lines = list(header)
    medians: dict[tuple[str, int], float] = {}
    with Server(args.server_url) as server:
        for size in map(parse_scale, args.sizes.split(",")):
            url = await server.create_database(f"bench_scaling_{size}")
            await fill(url, rows(data, size))
            added = await add_others(url, others, size) if others else 0
            for index in args.index.split(","):
                # The index the schema was made with is dropped first, so that hnsw mode (alone or after
                # exact mode) measures one built after the load, as an operator builds it.
                await bench_load.drop_hnsw(url)
                if index == "hnsw":
                    await bench_load.build_hnsw(url)
                line, median = await measure(
                    sqlalchemy_url(url),
                    data,
                    embedder,
                    size=size,
                    others=added,
                    index=index,
                    iterations=args.iterations,
                    warmup=args.warmup,
                )
                lines.append(line)
                medians[(index, size)] = median
            await server.drop_database(f"bench_scaling_{size}")
    lines.append("")
    for index in args.index.split(","):
        sizes = sorted(size for mode, size in medians if mode == index)
        if len(sizes) > 1:
            growth = medians[(index, sizes[-1])] / medians[(index, sizes[0])]
            lines.append(
                f"Growth of the default search p50, {sizes[0]:,} → {sizes[-1]:,} memories, {index} mode: {growth:.2f}×."
            )
            print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
