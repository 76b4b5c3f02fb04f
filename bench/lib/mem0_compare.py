"""memora_pg beside mem0 (open-source ``Memory``, pgvector store) on the same server and the same data.

mem0 runs in its own virtual environment (``bench/mem0_side.py``) against a database of its own
on the benchmark's server. Its collection table is created by mem0, then filled with the very
rows of the memora_pg database (same ids, texts, vectors, users and metadata, in mem0's payload
layout) by COPY, and its HNSW index rebuilt as mem0 defines it. The queries are the ones the
memora_pg figures of the same run used, so recall and result counts compare like with like.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.lib import data
from bench.lib.context import Context
from bench.lib.reads import K, Queries, _quality, _quality_note, _users, user_truth
from bench.lib.report import Figure
from bench.lib.server import Server, connect
from bench.lib.timing import Run, Sample

COLLECTION = "memories"
ADD_CALLS = 30
ADD_BATCH = 10
SIDE = Path(__file__).parents[1] / "mem0_side.py"


def _payload(user: int, j: int) -> str:
    text = data.memory_text(user, j)
    at = data.BASE_TIME.isoformat()
    return json.dumps(
        {
            "user_id": data.user_id(user),
            "data": text,
            "hash": hashlib.md5(text.encode(), usedforsecurity=False).hexdigest(),
            "created_at": at,
            "updated_at": at,
            "text_lemmatized": text,
            "role": "user",
            "topic": data.topic(j),
        }
    )


async def _side(python: str, command: str, args: dict[str, Any]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(args, handle)
    process = await asyncio.create_subprocess_exec(
        python,
        str(SIDE),
        command,
        handle.name,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"MEM0_TELEMETRY": "False", "PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()},
    )
    out, err = await process.communicate()
    os.unlink(handle.name)
    if process.returncode != 0:
        raise RuntimeError(f"mem0 side failed ({command}):\n{err.decode()[-4000:]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def _load(url: str, ctx: Context) -> float:
    """COPY the memora_pg rows into mem0's table, rebuild mem0's HNSW index; seconds of the rebuild."""
    conn = await connect(url)
    try:
        index = f"{COLLECTION}_hnsw_idx"
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", index)
        await conn.execute(f'DROP INDEX IF EXISTS "{index}"')
        for user, vectors in ctx.space.all_vectors():
            await conn.copy_records_to_table(
                COLLECTION,
                columns=("id", "vector", "payload"),
                records=[
                    (data.memory_uuid(user, j), vectors[j], _payload(user, j)) for j in range(ctx.layout.per_user)
                ],
            )
        await conn.execute("SET maintenance_work_mem = '4GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        started = asyncio.get_running_loop().time()
        await conn.execute(definition)
        elapsed = asyncio.get_running_loop().time() - started
        await conn.execute("VACUUM ANALYZE " + COLLECTION)
    finally:
        await conn.close()
    return elapsed


def _queries(ctx: Context, kind: str, topic: bool) -> tuple[Queries, list[dict[str, Any]]]:
    queries = Queries(ctx, kind, _users(ctx))
    listed = []
    for i in range(ctx.warmup + ctx.iterations):
        entry: dict[str, Any] = {"text": queries.text(i), "user_id": data.user_id(queries.user(i)), "k": K}
        if topic:
            entry["metadata"] = {"topic": f"t{(i * 7) % data.TOPICS}"}
        listed.append(entry)
        queries.vector(i)
    return queries, listed


async def mem0_figures(
    ctx: Context,
    server: Server,
    python: str,
    *,
    add_ours: dict[str, Figure],
    user_ours: Run,
    filtered_ours: Run,
) -> None:
    name = f"bench_mem0_{ctx.scale.lower()}"
    url = await server.create_database(name)
    try:
        with tempfile.TemporaryDirectory(prefix="mem0-bench-") as scratch:
            base = {
                "url": url,
                "collection": COLLECTION,
                "dimensions": data.DIMENSIONS,
                "history_path": str(Path(scratch) / "history.db"),
            }
            await _side(python, "init", base)
            await _load(url, ctx)
            user_queries, user_list = _queries(ctx, "user", topic=False)
            filtered_queries, filtered_list = _queries(ctx, "filtered", topic=True)
            add_texts = [f"mem0 add {c} memory {k}" for c in range(ADD_CALLS) for k in range(ADD_BATCH)]
            add_vectors = ctx.space.fresh("mem0 add", len(add_texts))
            texts = [q["text"] for q in user_list] + [q["text"] for q in filtered_list]
            vectors = np.stack(
                [user_queries.vector(i) for i in range(len(user_list))]
                + [filtered_queries.vector(i) for i in range(len(filtered_list))]
            )
            vectors_file = str(Path(scratch) / "vectors.npz")
            np.savez(vectors_file, add=add_vectors, queries=vectors)
            result = await _side(
                python,
                "measure",
                {
                    **base,
                    "vectors_file": vectors_file,
                    "add_texts": add_texts,
                    "add_batch": ADD_BATCH,
                    "add_user": "mem0-adder",
                    "query_texts": texts,
                    "user_queries": user_list,
                    "filtered_queries": filtered_list,
                },
            )
    finally:
        await server.drop_database(name)
    version = result["mem0"]
    w = ctx.warmup
    add = Sample([s / ADD_BATCH for s in result["add_seconds"][2:]])
    for mode, wanted in (("hnsw", 2.5), ("exact", 20.0)):
        ours = add_ours.get(mode)
        if ours is None or ours.ours is None:
            continue
        speedup = add.median / ours.ours.median
        ctx.add(
            Figure(
                f"Beside mem0 {version}",
                "add(infer=False), 10 messages per call: time per memory (raw column: mem0)",
                ctx.scale,
                mode,
                ours=ours.ours,
                raw=add,
                ratio=speedup,
                notes=[f"memora_pg {1 / ours.ours.median:,.0f} memories/s, mem0 {1 / add.median:,.0f} memories/s"],
                target=f"≥ {wanted:g}× mem0 (ratio = mem0 time / ours)",
                met=speedup >= wanted,
            )
        )
    for kind, ours_run, queries, topic in (
        ("user search", user_ours, user_queries, False),
        ("metadata-filtered search", filtered_ours, filtered_queries, True),
    ):
        theirs = result["filtered" if topic else "search"]
        timed = Sample(theirs["seconds"][w:])
        ids = theirs["ids"][w:]
        truths = [
            user_truth(ctx, queries, i, (i * 7) % data.TOPICS if topic else None) for i in range(w, w + ctx.iterations)
        ]
        speedup = timed.median / ours_run.sample.median
        ours_complete = _quality(ours_run.results, truths)[2]
        if topic:
            target, met = "≥ 10× faster than mem0 (at 100k)", speedup >= 10
        else:
            target = "p50 ≤ mem0's, full top-k where mem0 is not"
            met = speedup >= 1 and ours_complete
        ctx.add(
            Figure(
                f"Beside mem0 {version}",
                f"{kind}, top 10: memora_pg AsyncMemory.search vs mem0 Memory.search (raw column: mem0)",
                ctx.scale,
                "hnsw",
                ours=ours_run.sample,
                raw=timed,
                ratio=speedup,
                notes=[
                    _quality_note("memora_pg", ours_run.results, truths),
                    _quality_note("mem0", ids, truths),
                ],
                target=target,
                met=met,
            )
        )
    print(f"mem0 {version} (python {sys.version.split()[0]} side) compared", flush=True)


def available(python: str | None) -> str | None:
    """The mem0 venv's python, when it exists and has mem0."""
    if not python:
        return None
    return python if Path(python).exists() else None
