"""One statement, four ways to run it: what memora_pg's data path costs beside its alternatives.

    python -m bench.execution_paths [--iterations 2000] [--server-url URL]

The ways, on one database and one table of 1,000 rows with a 384-dimension vector each:

* ``memora_pg.driver``: memora_pg's data path (SQLAlchemy compiles once, SQLAlchemy's pool checks the
  connection out, asyncpg runs the statement and its rows are used as asyncpg returns them);
* SQLAlchemy's ``AsyncConnection.execute`` in autocommit on the same engine (its public execution:
  its ``Connection``, the statement's cache key, each parameter and row processed, a ``Row`` per row);
* an ``asyncpg`` pool with pgvector's codec in its ``init`` hook, and the SQL text written out, with
  asyncpg's reset of a released connection (its default: one more round trip) and without it (the floor).

Each is measured on the statements a call is made of: a row by its key, and 50 rows with their
vectors. The calls are interleaved (one of each way in turn), so all see the same machine.
Printed: each way's p50 and its ratio to the floor. ``docs/execution.md`` says which memora_pg
chose and why.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Column, Integer, MetaData, Table, Text, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.base import Executable

from bench.lib.server import Server, plain_url, sqlalchemy_url
from memora_pg import driver, vector_params
from memora_pg.config import Settings
from memora_pg.engine import create_engine

ROWS = 1000
DIMENSIONS = 384

TABLE = Table(
    "execution_paths",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("body", Text),
)  # its vectors are read by FIFTY, SQL text, as the data layer reads vectors
BY_KEY = select(TABLE.c.id, TABLE.c.body).where(TABLE.c.id == bindparam("id"))
# As the data layer writes a statement that returns vectors: SQL text, its rows as asyncpg decodes them
# (the typed Core column would have SQLAlchemy convert each vector, which the driver refuses).
FIFTY = text("SELECT id, body, embedding FROM execution_paths WHERE id >= :id LIMIT 50")
STATEMENTS: dict[str, Executable] = {"a row by its key": BY_KEY, "50 rows with vectors": FIFTY}
SQL = {
    "a row by its key": "SELECT id, body FROM public.execution_paths WHERE id = $1",
    "50 rows with vectors": "SELECT id, body, embedding FROM public.execution_paths WHERE id >= $1 LIMIT 50",
}

Way = Callable[[str, int], Awaitable[int]]


async def load(url: str) -> None:
    conn = await asyncpg.connect(plain_url(url))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await vector_params.register(conn)
        await conn.execute(
            f"CREATE TABLE execution_paths (id integer PRIMARY KEY, body text, embedding vector({DIMENSIONS}))"
        )
        await conn.executemany(
            "INSERT INTO execution_paths VALUES ($1, $2, $3)",
            [(n, f"memory {n}", [((n * 31 + d) % 97) / 97.0 for d in range(DIMENSIONS)]) for n in range(ROWS)],
        )
        await conn.execute("ANALYZE execution_paths")
    finally:
        await conn.close()


def memora_way(engine: AsyncEngine) -> Way:
    async def run(name: str, key: int) -> int:
        async with driver.checkout(engine, "public") as conn:
            return len(await conn.fetch(STATEMENTS[name], {"id": key}))

    return run


def sqlalchemy_way(engine: AsyncEngine) -> Way:
    autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def run(name: str, key: int) -> int:
        async with autocommit.connect() as conn:
            return len((await conn.execute(STATEMENTS[name], {"id": key})).all())

    return run


def asyncpg_way(pool: asyncpg.Pool) -> Way:
    async def run(name: str, key: int) -> int:
        async with pool.acquire() as conn:
            return len(await conn.fetch(SQL[name], key))

    return run


async def _no_reset(conn: asyncpg.Connection) -> None:
    """No reset on release: asyncpg's default (``Connection.reset``) is one more round trip per checkout."""


async def measure(url: str, iterations: int) -> dict[str, dict[str, float]]:
    await load(url)
    engine = create_engine(sqlalchemy_url(url), Settings())
    pool = await asyncpg.create_pool(plain_url(url), min_size=1, max_size=5, init=vector_params.register)
    bare = await asyncpg.create_pool(
        plain_url(url), min_size=1, max_size=5, init=vector_params.register, reset=_no_reset
    )
    ways = {"memora_pg.driver": memora_way(engine), "SQLAlchemy execute": sqlalchemy_way(engine),
            "asyncpg pool": asyncpg_way(pool), "asyncpg pool, no reset": asyncpg_way(bare)}  # fmt: skip
    timings: dict[str, dict[str, list[float]]] = {way: {name: [] for name in STATEMENTS} for way in ways}
    try:
        for name in STATEMENTS:
            for way in ways.values():  # each way's first call prepares and checks its statement
                assert await way(name, 0) > 0
        for n in range(iterations):
            for name in STATEMENTS:
                for way_name, way in ways.items():
                    started = time.perf_counter()
                    await way(name, n % (ROWS - 50))
                    timings[way_name][name].append((time.perf_counter() - started) * 1000)
    finally:
        await pool.close()
        await bare.close()
        await engine.dispose()
    return {way: {name: statistics.median(ms) for name, ms in by_name.items()} for way, by_name in timings.items()}


def report(p50: dict[str, dict[str, float]]) -> str:
    baseline = p50["asyncpg pool, no reset"]
    lines = ["| way | " + " | ".join(STATEMENTS) + " |", "| --- |" + " --- |" * len(STATEMENTS)]
    for way, by_name in p50.items():
        cells = [f"{ms:.3f} ms ({ms / baseline[name]:.2f}×)" for name, ms in by_name.items()]
        lines.append(f"| {way} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--server-url", default=None)
    args = parser.parse_args()
    with Server(args.server_url) as server:
        url = asyncio.run(server.create_database("execution_paths"))
        p50 = asyncio.run(measure(url, args.iterations))
    print(f"p50 of {args.iterations} calls each, interleaved (ratio to the asyncpg pool without reset, the floor):\n")
    print(report(p50))


if __name__ == "__main__":
    main()
