"""What a routed write costs on the Citus cluster vs one plain PostgreSQL 16 server (``python -m bench.citus.writes``).

Two questions behind the Citus save's figure in BENCHMARKS.md, on tables of their own:

* vectors: a 10-row ``INSERT ... VALUES`` with and without a 384-dimension vector per row. Citus evaluates
  a routed insert on the coordinator and sends it to the worker as text, so each vector is printed there and
  parsed again on the worker;
* one call or several: three 10-row inserts as a PL/pgSQL function distributed by the tenant column (Citus
  runs it on the worker, in one call) against the same inserts as three statements in a transaction, and the
  10 vectors written by such a function, or by an ``INSERT ... SELECT FROM unnest`` (which Citus pulls to the
  coordinator and copies into the shard);
* and where memora_pg's own save of 10 memories spends its time on the cluster: each statement's share,
  from :func:`memora_pg.driver.listen` (the time from one statement's start to the next one's, or to the
  call's end). Since migration 0016 a save sends one statement, the call of ``save_interaction``.

Each figure is the p50 of 130 calls after 20 unmeasured ones.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from itertools import count
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import numpy as np
from sqlalchemy.ext.asyncio import create_async_engine

from bench.citus.latency import cluster_and_plain
from memora_pg import PostgresGraphDB, Settings, driver, vector_params
from memora_pg.embeddings import HashEmbedder
from tests.citus.conftest import migrate_and_distribute
from tests.citus.helpers import worlds
from tests.integration.helpers import chat, payload

TABLES = ("w1", "w2", "w3")
ROWS = 10
# One row per placeholder pair: ($1 tenant, $n id, $n+1 value).
VALUES = ", ".join(f"($1, ${2 * k + 2}, ${2 * k + 3})" for k in range(ROWS))
VECTOR_TABLE = "CREATE TABLE vectors (org_id text, id int, embedding vector(384), PRIMARY KEY (org_id, id))"
INSERT_VECTORS = f"INSERT INTO vectors VALUES {VALUES}"
VECTORS_IN_ONE_CALL = """
CREATE FUNCTION write_vectors(p_org text, p_ids int[], p_vectors vector[]) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO vectors SELECT p_org, i, e FROM unnest(p_ids, p_vectors) AS u(i, e);
    RETURN 1;
END $$"""
THREE_INSERTS = """
CREATE FUNCTION write_three(p_org text, p_ids int[], p_values text[]) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO w1 SELECT p_org, i, v FROM unnest(p_ids, p_values) AS u(i, v);
    INSERT INTO w2 SELECT p_org, i, v FROM unnest(p_ids, p_values) AS u(i, v);
    INSERT INTO w3 SELECT p_org, i, v FROM unnest(p_ids, p_values) AS u(i, v);
    RETURN 1;
END $$"""


async def _p50(call: Callable[[], Awaitable[Any]], calls: int = 150, warmup: int = 20) -> float:
    spent = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent[warmup:]) * 1000


async def measure(url: str, *, citus: bool) -> dict[str, float]:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(
            "CREATE TABLE vectors (org_id text, id int, embedding vector(384), PRIMARY KEY (org_id, id))"
        )
        for table in TABLES:
            await conn.execute(f"CREATE TABLE {table} (org_id text, id int, v text, PRIMARY KEY (org_id, id))")
        await conn.execute(THREE_INSERTS)
        await conn.execute(VECTORS_IN_ONE_CALL)
        if citus:
            await conn.execute("SELECT create_distributed_table('vectors', 'org_id')")
            for table in TABLES:
                await conn.execute(f"SELECT create_distributed_table('{table}', 'org_id', colocate_with => 'vectors')")
            await conn.execute(
                "SELECT create_distributed_function('write_three(text,int[],text[])', 'p_org', colocate_with => 'w1')"
            )
            await conn.execute(
                "SELECT create_distributed_function('write_vectors(text,int[],vector[])', 'p_org', "
                "colocate_with => 'vectors')"
            )
        await vector_params.register(conn)
        vector = vector_params.one(np.random.default_rng(7).random(384).tolist())
        ids = count()
        texts = [f"value {k}" for k in range(ROWS)]

        def batch() -> list[int]:
            return [next(ids) for _ in range(ROWS)]

        async def with_vectors() -> None:
            await conn.execute(
                f"INSERT INTO vectors VALUES {VALUES}", "org", *[x for i in batch() for x in (i, vector)]
            )

        async def without_vectors() -> None:
            await conn.execute(INSERT_VECTORS, "org", *[x for i in batch() for x in (i, None)])

        async def vectors_from_unnest() -> None:
            await conn.execute(
                "INSERT INTO vectors SELECT $1, i, e FROM unnest($2::int[], $3::vector[]) AS u(i, e)",
                "org",
                batch(),
                [vector] * ROWS,
            )

        async def vectors_in_one_call() -> None:
            await conn.fetchval("SELECT write_vectors($1, $2, $3)", "org", batch(), [vector] * ROWS)

        async def one_call() -> None:
            await conn.fetchval("SELECT write_three($1, $2, $3)", "org", batch(), texts)

        async def three_statements() -> None:
            rows = batch()
            async with conn.transaction():
                for table in TABLES:
                    await conn.execute(
                        f"INSERT INTO {table} SELECT $1, i, v FROM unnest($2::int[], $3::text[]) AS u(i, v)",
                        "org",
                        rows,
                        texts,
                    )

        return {
            f"{ROWS}-row insert with a vector per row": await _p50(with_vectors),
            f"{ROWS}-row insert without vectors": await _p50(without_vectors),
            f"{ROWS}-row insert with a vector per row, INSERT ... SELECT FROM unnest": await _p50(vectors_from_unnest),
            f"{ROWS}-row insert with a vector per row, one call of a distributed PL/pgSQL function": await _p50(
                vectors_in_one_call
            ),
            f"three {ROWS}-row inserts, one call of a distributed PL/pgSQL function": await _p50(one_call),
            f"three {ROWS}-row inserts, three statements in a transaction": await _p50(three_statements),
        }
    finally:
        await conn.close()


async def save_statements(url: str, saves: int = 40) -> list[tuple[str, float]]:
    """The median time of each statement of a save of 10 memories (a user's first save excluded)."""
    engine = create_async_engine(url)
    graph = PostgresGraphDB(engine, settings=Settings(database_url=url), embedder=HashEmbedder(384))
    try:
        (w,) = await worlds(graph, 1)
        body = payload(chat("hi", "yo"), [(f"fact {i} about tea", [0]) for i in range(10)])
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
        starts: list[tuple[float, str]] = []
        driver.listen(engine, lambda sql, arguments: starts.append((time.perf_counter(), " ".join(sql.split())[:60])))
        spent: dict[str, list[float]] = {}
        for _ in range(saves):
            starts.clear()
            await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
            ended = time.perf_counter()
            for (started, sql), (after, _) in zip(starts, [*starts[1:], (ended, "")], strict=True):
                spent.setdefault(sql, []).append(after - started)
        return [(sql, statistics.median(times) * 1000) for sql, times in spent.items()]
    finally:
        await graph.close()
        await engine.dispose()


async def main() -> None:
    async with cluster_and_plain() as (running, plain):
        on_citus = await measure(running.coordinator.dsn, citus=True)
        on_plain = await measure(plain.get_uri(), citus=False)
        await migrate_and_distribute(running.url)
        statements = await save_statements(running.url)
    print("| write (p50) | plain PostgreSQL 16 | Citus 13.2 (1 coordinator + 2 workers) | ratio |")
    print("|---|---|---|---|")
    for name, ms in on_citus.items():
        print(f"| {name} | {on_plain[name]:.2f} ms | {ms:.2f} ms | {ms / on_plain[name]:.2f}× |")
    print()
    print("| statement of a save of 10 memories on Citus | median |")
    print("|---|---|")
    for sql, ms in statements:
        print(f"| `{sql}` | {ms:.2f} ms |")


if __name__ == "__main__":
    asyncio.run(main())
