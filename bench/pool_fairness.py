"""Many agents on one pool: does every caller get a connection, and how long does it wait for one?

    python -m bench.pool_fairness [--clients 50] [--minutes 10] [--server-url URL]

``--clients`` tasks share one ``PostgresGraphDB`` with the default pool (``pool_size`` 5 plus
``max_overflow`` 10) and the default ``pool_timeout``. Each creates its user, then loops: save an
interaction with a memory, get it, update it with a contradiction, search, fetch the memory resolved,
delete the interaction. Printed: the calls, the pool timeouts (a caller that waited ``pool_timeout``
for a connection), each client's calls (fewest and most), and the wait for a connection (p50, p99,
max), as the pool's fair gate (``memora_pg.fair_checkout``) measured it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from bench.lib.server import Server
from memora_pg import (
    ContraryMemoryToStore,
    MemoriesAndInteraction,
    MemorySearchScope,
    MemoryToStore,
    PgVectorDB,
    PostgresGraphDB,
    Settings,
)
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import DatabaseError
from memora_pg.fair_checkout import gate_of


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def client(graph: PostgresGraphDB, org_id: str, agent_id: str, end: float, n: int) -> tuple[int, int]:
    """One agent's loop until ``end``: its calls, and the ones that timed out waiting for a connection."""
    vector = graph.get_associated_vector_db()
    assert isinstance(vector, PgVectorDB)
    calls = timeouts = 0

    async def call(work: object) -> object:
        nonlocal calls, timeouts
        calls += 1
        try:
            return await work  # type: ignore[misc]
        except DatabaseError as error:
            if "pool_timeout" not in str(error):
                raise
            timeouts += 1
            return None

    user = await call(graph.create_user(org_id, f"agent user {n}"))
    while user is None and time.monotonic() < end:
        user = await call(graph.create_user(org_id, f"agent user {n}"))
    if user is None:
        return calls, timeouts
    user_id = user.user_id  # type: ignore[attr-defined]
    while time.monotonic() < end:
        messages = [{"role": "user", "content": f"I live in Lisbon ({n})"}]
        saved = await call(
            graph.save_interaction_with_memories(
                org_id,
                agent_id,
                user_id,
                MemoriesAndInteraction(
                    interaction=messages, memories=[MemoryToStore(memory="lives in Lisbon", source_msg_block_pos=[0])]
                ),
            )
        )
        if saved is None:
            continue
        interaction_id = saved[0]  # type: ignore[index]
        got = await call(graph.get_interaction(org_id, user_id, interaction_id))
        if got is None:
            continue
        old_id = got.memories[0].memory_id  # type: ignore[attr-defined]
        moved = [*messages, {"role": "assistant", "content": "Noted"}, {"role": "user", "content": "I moved to Porto"}]
        await call(
            graph.update_interaction_and_memories(
                org_id,
                agent_id,
                user_id,
                interaction_id,
                MemoriesAndInteraction(
                    interaction=moved,
                    contrary_memories=[
                        ContraryMemoryToStore(
                            memory="moved to Porto", source_msg_block_pos=[2], existing_contrary_memory_id=old_id
                        )
                    ],
                ),
            )
        )
        await call(vector.search_memory("where does the user live?", MemorySearchScope.USER, org_id, user_id))
        await call(graph.fetch_user_memories_resolved([{"org_id": org_id, "user_id": user_id, "memory_id": old_id}]))
        await call(graph.delete_user_interaction_and_its_memories(org_id, user_id, interaction_id))
    return calls, timeouts


async def run(args: argparse.Namespace) -> str:
    with Server(args.server_url) as server:
        url = await server.create_database("memora_pool_fairness")
        try:
            settings = Settings(database_url=url)
            graph = PostgresGraphDB(settings=settings, embedder=HashEmbedder(384))
            org = await graph.create_organization("fairness")
            agent = await graph.create_agent(org.org_id, "assistant")
            gate = gate_of(await graph.database.engine())
            assert gate is not None
            gate.waits.clear()
            started = time.monotonic()
            end = started + args.minutes * 60
            results = await asyncio.gather(
                *(client(graph, org.org_id, agent.agent_id, end, n) for n in range(args.clients))
            )
            elapsed = time.monotonic() - started
            waits = [wait * 1000 for wait in gate.waits]
            await graph.close()
        finally:
            await server.drop_database("memora_pool_fairness")
    calls = [c for c, _ in results]
    timeouts = sum(t for _, t in results)
    return "\n".join(
        [
            f"Pool fairness: {args.clients} clients on one PostgresGraphDB, default pool "
            f"({settings.pool_size} + {settings.max_overflow} connections, pool_timeout {settings.pool_timeout:g} s), "
            f"{elapsed / 60:.1f} minutes. Command: `python -m bench.pool_fairness --clients {args.clients} "
            f"--minutes {args.minutes:g}`.",
            "",
            "| calls | calls/s | pool timeouts | calls per client, fewest / most "
            "| wait for a connection p50 / p99 / max |",
            "| --- | --- | --- | --- | --- |",
            f"| {sum(calls)} | {sum(calls) / elapsed:.0f} | {timeouts} | {min(calls)} / {max(calls)} "
            f"| {statistics.median(waits):.2f} / {_quantile(waits, 0.99):.2f} / {max(waits):.2f} ms |",
            "",
            f"(the wait figures are of the last {len(waits)} checkouts)",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--server-url", default=None)
    print(asyncio.run(run(parser.parse_args(argv))), file=sys.stdout)


if __name__ == "__main__":
    main()
