"""Many tenants: the same memories spread over more and more organizations, each with one user.

Shared tables keyed by ``org_id`` should make the number of organizations invisible: no
per-tenant object (table, index, sequence, policy) ever exists, so the catalog, the planner's
work and the locks a call takes stay the same from 100 organizations to 50,000. This measures
it, per organization count, on the package's own calls:

* p50 and p95 of a save (10 messages, 5 memories), a user-scoped search, a resolved fetch of the
  user's memories and an organization-wide search;
* the planning time of each call's statements (``EXPLAIN (SUMMARY)``'s "Planning Time");
* the catalog (``pg_class`` rows of the schema) and the locks one search holds in its transaction.

    python -m bench.tenants --memories 100k --orgs 100,5000,50000
    python -m bench.tenants --memories 1M --orgs 100,5000,50000 --index exact

Rows are generated in SQL (random unit vectors), with the HNSW index built once after the load,
with the package's default build parameters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from datetime import datetime, timezone
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from bench.lib import data, load
from bench.lib.context import Statements
from bench.lib.reads import explained
from bench.lib.server import Server, connect, sqlalchemy_url
from bench.lib.timing import interleaved
from memora_pg import MemoriesAndInteraction, MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import create_engine

SCHEMA = load.SCHEMA
DIMENSIONS = data.DIMENSIONS

SEED = f"""
INSERT INTO {SCHEMA}.organizations (org_id, org_name)
SELECT 'org-' || g, 'Org ' || g FROM generate_series(1, $1) AS g;
INSERT INTO {SCHEMA}.users (org_id, user_id, user_name)
SELECT 'org-' || g, 'user', 'User' FROM generate_series(1, $1) AS g;
INSERT INTO {SCHEMA}.agents (org_id, agent_id, agent_label)
SELECT 'org-' || g, 'agent', 'Agent' FROM generate_series(1, $1) AS g;
"""

MEMORIES = f"""
INSERT INTO {SCHEMA}.memories
    (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text)
SELECT 'org-' || (g % $1 + 1), gen_random_uuid(), 'user', 'agent', 'memory number ' || g,
       now() - g * interval '1 second', v.embedding, to_tsvector('english', 'memory number ' || g)
FROM generate_series(1, $2) AS g
CROSS JOIN LATERAL (
    -- d makes the aggregate the subquery's; g makes the subquery run again for each row
    SELECT CAST(array_agg(random() - 0.5 + 0 * d + 0 * g) AS vector({DIMENSIONS})) AS embedding
    FROM generate_series(1, {DIMENSIONS}) AS d
) AS v
"""


async def seed(url: str, orgs: int, memories: int, *, hnsw: bool) -> float:
    """The organizations, their users and agents, and ``memories`` memories spread evenly; seconds taken.

    With ``hnsw`` the HNSW index is built after the load (exact mode without it)."""
    await load.migrate(url)
    conn = await connect(url)
    started = time.perf_counter()
    try:
        await conn.execute(f"DROP INDEX {SCHEMA}.ix_memories_embedding_hnsw")
        for statement in SEED.strip().split(";\n"):
            await conn.execute(statement.rstrip(";"), orgs)
        for start in range(0, memories, 50_000):
            await conn.execute(MEMORIES, orgs, min(50_000, memories - start))
        if hnsw:
            await load.build_hnsw(url)
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return time.perf_counter() - started


async def planning_ms(conn: asyncpg.Connection, sent: list[tuple[str, Any]]) -> float:
    """The planning time of the statements one call sent (``EXPLAIN (SUMMARY)``: planned, not run)."""
    return float(sum(plan.get("Planning Time", 0.0) for plan in await explained(conn, sent, "SUMMARY ON")))


async def measure(url: str, orgs: int, memories: int, iterations: int) -> dict[str, Any]:
    rng = random.Random(orgs)  # noqa: S311 - which tenants are asked, not a secret
    settings = Settings(db_schema=SCHEMA)
    engine = create_engine(sqlalchemy_url(url), settings)
    embedder = HashEmbedder(DIMENSIONS)
    vector = PgVectorDB(engine, embedder=embedder, settings=settings, search_mode="dense")
    graph = PostgresGraphDB(engine, settings=settings, embedder=embedder, associated_vector_db=vector)
    statements = Statements(engine)
    raw = await connect(url)
    per_org = {}
    try:
        rows = await raw.fetch(
            f"SELECT org_id, array_agg(memory_id) AS ids FROM {SCHEMA}.memories WHERE org_id = ANY($1) GROUP BY org_id",
            [f"org-{rng.randint(1, orgs)}" for _ in range(200)],
        )
        per_org = {row["org_id"]: [str(i) for i in row["ids"][:10]] for row in rows}
        chosen = sorted(per_org)

        def org(i: int) -> str:
            return str(chosen[i % len(chosen)])

        async def save(i: int) -> Any:
            body = MemoriesAndInteraction(
                interaction=[{"role": "user", "content": f"message {n} of call {i}"} for n in range(10)],
                interaction_date=datetime.now(timezone.utc),
                memories=[{"memory": f"fact {n} of call {i}", "source_msg_block_pos": [n]} for n in range(5)],
                contrary_memories=[],
            )
            return await graph.save_interaction_with_memories(org(i), "agent", "user", body)

        async def user_search(i: int) -> Any:
            return await vector.search_memory(f"memory number {i}", MemorySearchScope.USER, org(i), "user")

        async def resolved(i: int) -> Any:
            ids = per_org[org(i)]
            return await graph.fetch_user_memories_resolved(
                [{"org_id": org(i), "user_id": "user", "memory_id": m} for m in ids]
            )

        async def org_search(i: int) -> Any:
            return await vector.search_memory(f"memory number {i}", MemorySearchScope.ORGANIZATION, org(i))

        calls = {"save": save, "user search": user_search, "resolved fetch": resolved, "org search": org_search}
        runs = await interleaved(calls, iterations=iterations, warmup=10)
        result: dict[str, Any] = {"orgs": orgs, "memories": memories}
        for name, call in calls.items():
            statements.clear()
            await call(10_000)
            sent = [(s, p) for s, p in statements.sent if not s.lstrip().upper().startswith("SELECT SET_CONFIG")]
            planned = [await planning_ms(raw, sent) for _ in range(5)]
            sample = runs[name].sample
            result[name] = {
                "p50_ms": sample.median * 1000,
                "p95_ms": sample.p95 * 1000,
                "planning_ms": statistics.median(planned),
            }
        result["pg_class_rows"] = await raw.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
            SCHEMA,
        )
        result["locks_per_search"] = await _locks_of_a_search(raw, chosen[0])
        return result
    finally:
        await raw.close()
        await graph.close()
        await vector.close()
        await engine.dispose()


async def _locks_of_a_search(conn: asyncpg.Connection, org_id: str) -> int:
    """Relation locks one user-scoped read holds in its transaction (the same for any tenant count)."""
    async with conn.transaction():
        await conn.fetch(
            f"SELECT memory_id FROM {SCHEMA}.memories WHERE org_id = $1 AND user_id = 'user'"
            " ORDER BY obtained_at DESC LIMIT 10",
            org_id,
        )
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
        )
    return count


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    memories = data.parse_scale(args.memories)
    results = []
    with Server(args.server_url) as server:
        for orgs in [int(x) for x in args.orgs.split(",")]:
            name = f"bench_tenants_{orgs}"
            url = await server.create_database(name)
            try:
                seconds = await seed(url, orgs, memories, hnsw=args.index == "hnsw")
                print(
                    f"== {orgs:,} organizations, {memories:,} memories, {args.index} mode: seeded in {seconds:.0f} s",
                    flush=True,
                )
                found = await measure(url, orgs, memories, args.iterations)
                found["mode"] = args.index
                print(json.dumps(found), flush=True)
                results.append(found)
            finally:
                await server.drop_database(name)
    return results


def table(results: list[dict[str, Any]]) -> str:
    calls = ("save", "user search", "resolved fetch", "org search")
    lines = [
        "| organizations | mode | "
        + " | ".join(f"{c} p50 / p95 (planning)" for c in calls)
        + " | pg_class rows | locks |",
        "| --- | --- | " + " | ".join("---" for _ in calls) + " | --- | --- |",
    ]
    for r in results:
        cells = [f"{r[c]['p50_ms']:.2f} / {r[c]['p95_ms']:.2f} ms ({r[c]['planning_ms']:.3f} ms)" for c in calls]
        catalog = f"{r['pg_class_rows']} | {r['locks_per_search']}"
        lines.append(f"| {r['orgs']:,} | {r['mode']} | " + " | ".join(cells) + f" | {catalog} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tenants", description=__doc__)
    parser.add_argument("--memories", default="100k")
    parser.add_argument("--orgs", default="100,5000,50000")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument(
        "--index",
        choices=("hnsw", "exact"),
        default="hnsw",
        help="'exact': no HNSW index (organization-wide searches scan the organization's rows); "
        "the build of a million random vectors is most of a run's time",
    )
    parser.add_argument("--server-url", default=None)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(table(results))


if __name__ == "__main__":
    main()
