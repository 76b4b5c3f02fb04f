"""Memory through time on a Citus cluster: the clocks kept by writes and deletes, and every as-of read."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import MemorySearchScope, PgVectorDB, PostgresGraphDB
from tests.citus.helpers import ref, remember, worlds
from tests.integration.helpers import day

SCHEMA = "memora"


async def test_as_of_reads_of_a_back_dated_chain(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """A (Jan 1) <- B (Jan 10) <- C (Jan 5, back-dated): every as-of read, in each organization."""
    vector = graph.get_associated_vector_db()
    assert isinstance(vector, PgVectorDB)
    for w in await worlds(graph):
        a = await remember(graph, engine, w, "lives in Paris", at=1)
        b = await remember(graph, engine, w, "lives in Berlin", supersedes=a, at=10)
        c = await remember(graph, engine, w, "lives in Rome", supersedes=b, at=5)
        fetch = graph.fetch_user_memories_resolved
        assert [m.memory_id for m in await fetch([ref(w, c)], as_of=day(3))] == [a]
        assert [m.memory_id for m in await fetch([ref(w, a)], as_of=day(7))] == [c]
        now = datetime.now(timezone.utc)
        assert [m.memory_id for m in await fetch([ref(w, a)], as_of=now, as_of_clock="system")] == [c]
        listed = await graph.get_all_user_memories(w.org_id, w.user_id, as_of=day(3))
        assert [m.memory_id for m in listed] == [a]
        history = await graph.get_user_memory_history(w.org_id, w.user_id, c, as_of=day(7))
        assert [m.memory_id for m in history] == [c, a]
        for scope, user in ((MemorySearchScope.USER, w.user_id), (MemorySearchScope.ORGANIZATION, None)):
            hits = await vector.search_memory("where does Jake live", scope, w.org_id, user, as_of=day(3))
            assert {m.memory_id for m, _ in hits} <= {a}
        # A deleted middle version: A is current until C began.
        await graph.delete_user_memory(w.org_id, w.user_id, b)
        async with engine.connect() as conn:
            valid_to = await conn.scalar(
                text(
                    f"SELECT valid_to FROM {SCHEMA}.memory_timeline WHERE org_id = :o AND memory_id = CAST(:m AS uuid)"
                ),
                {"o": w.org_id, "m": a},
            )
            assert valid_to == day(5)
            # On Citus memories_as_of() is PL/pgSQL (migration 0008): its query runs across the shards.
            current = await conn.scalar(
                text(f"SELECT count(*) FROM {SCHEMA}.memories_as_of(:at) WHERE org_id = :o"),
                {"at": day(7), "o": w.org_id},
            )
            assert current == 1
            # The same question of the view, with bound parameters, is routed to the organization's shard.
            same = await conn.scalar(
                text(
                    f"SELECT count(*) FROM {SCHEMA}.memory_timeline WHERE org_id = :o"
                    " AND valid_from <= :at AND (valid_to IS NULL OR valid_to > :at)"
                ),
                {"o": w.org_id, "at": day(7)},
            )
            assert same == 1
