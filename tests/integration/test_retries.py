"""Transactions that lose a race (deadlock, serialization failure) are typed as transient and retried."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.db import RETRIES, Database, unit_of_work
from memora_pg.driver import Connection
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import DatabaseError, TransientDatabaseError
from tests.conftest import TEST_SCHEMA
from tests.integration.helpers import chat, payload, world


async def test_a_real_deadlock_is_a_transient_error(engine: AsyncEngine) -> None:
    """Two transactions locking two rows in opposite orders: PostgreSQL aborts one, typed TransientDatabaseError."""
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO memora.organizations (org_id, org_name) VALUES ('a', 'a'), ('b', 'b')"))
    first_locked, second_locked = asyncio.Event(), asyncio.Event()

    async def lock(mine: str, theirs: str, locked: asyncio.Event, other: asyncio.Event) -> None:
        async with unit_of_work(engine, "memora") as conn:
            await conn.execute(text("SELECT 1 FROM memora.organizations WHERE org_id = :o FOR UPDATE"), {"o": mine})
            locked.set()
            await other.wait()
            await conn.execute(text("SELECT 1 FROM memora.organizations WHERE org_id = :o FOR UPDATE"), {"o": theirs})

    results = await asyncio.gather(
        lock("a", "b", first_locked, second_locked), lock("b", "a", second_locked, first_locked), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert isinstance(failures[0], TransientDatabaseError)
    assert "40P01" in str(failures[0])


class CountingEmbedder(HashEmbedder):
    """A HashEmbedder that counts the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(384)
        self.texts = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return await super().embed_documents(texts)


async def _fail_memory_inserts(engine: AsyncEngine, times: int) -> None:
    """The next ``times`` inserts into memories fail with a serialization failure (SQLSTATE 40001).

    The count lives in a sequence, which a rolled-back transaction does not roll back.
    """
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE SEQUENCE {TEST_SCHEMA}.injected_failures"))
        await conn.execute(
            text(
                f"""CREATE FUNCTION {TEST_SCHEMA}.fail_some() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF nextval('{TEST_SCHEMA}.injected_failures') <= {times} THEN
                        RAISE EXCEPTION 'injected' USING ERRCODE = '40001';
                    END IF;
                    RETURN NEW;
                END $$"""
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER fail_some BEFORE INSERT ON {TEST_SCHEMA}.memories"
                f" FOR EACH ROW EXECUTE FUNCTION {TEST_SCHEMA}.fail_some()"
            )
        )


async def _remove_injection(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TRIGGER fail_some ON {TEST_SCHEMA}.memories"))
        await conn.execute(text(f"DROP FUNCTION {TEST_SCHEMA}.fail_some()"))
        await conn.execute(text(f"DROP SEQUENCE {TEST_SCHEMA}.injected_failures"))


@pytest.mark.parametrize("chains", ["branch", "linear"])
async def test_a_save_that_loses_a_race_is_retried_without_embedding_again(
    engine: AsyncEngine, settings: Settings, chains: str
) -> None:
    """Two injected serialization failures: the save commits on its third attempt, and embeds once."""
    embedder = CountingEmbedder()
    graph = PostgresGraphDB(
        engine, settings=settings.model_copy(update={"contradiction_chains": chains}), embedder=embedder
    )
    w = await world(graph)
    await _fail_memory_inserts(engine, times=2)
    try:
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "hello"), [("a fact", [0]), ("another", [1])])
        )
    finally:
        await _remove_injection(engine)
    assert embedder.texts == 2
    stored = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert sorted(m.memory for m in stored.memories or []) == ["a fact", "another"]


async def test_a_save_that_keeps_losing_raises_and_writes_nothing(engine: AsyncEngine, settings: Settings) -> None:
    """A save that loses every attempt is a TransientDatabaseError after RETRIES attempts, with nothing written."""
    embedder = CountingEmbedder()
    graph = PostgresGraphDB(engine, settings=settings, embedder=embedder)
    w = await world(graph)
    await _fail_memory_inserts(engine, times=RETRIES)
    try:
        with pytest.raises(TransientDatabaseError):
            await graph.save_interaction_with_memories(
                w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("x", [0])])
            )
    finally:
        await _remove_injection(engine)
    assert embedder.texts == 1
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []


async def test_a_failure_that_is_not_a_race_is_not_retried(engine: AsyncEngine, settings: Settings) -> None:
    """Database.retrying runs work that fails for another reason once."""
    calls = 0

    async def broken(conn: Connection) -> None:
        nonlocal calls
        calls += 1
        raise DatabaseError("not a race")

    database = Database(engine, settings=settings)
    with pytest.raises(DatabaseError):
        await database.retrying(broken)
    assert calls == 1
