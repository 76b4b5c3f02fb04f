"""The text a memory is embedded as: its own user's and agent's placeholders as their names, on every
path that embeds a memory (a save, an update, ``add_memories``, a re-embed)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import PgVectorDB, PostgresGraphDB, Settings, migrations
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.ops.reembed import reembed
from memora_pg.testing import count_statements
from tests.integration.helpers import World, chat, payload, world

EMBEDDER = HashEmbedder(384)


async def stored(engine: AsyncEngine, schema: str = "memora") -> dict[str, list[float]]:
    """Each memory text with its stored vector."""
    async with engine.connect() as conn:
        rows = (await conn.execute(text(f"SELECT memory, CAST(embedding AS text) AS v FROM {schema}.memories"))).all()
    return {row.memory: [float(x) for x in row.v.strip("[]").split(",")] for row in rows}


def assert_embedded_as(vector: Sequence[float], wording: str) -> None:
    expected = EMBEDDER.embed_text(wording)
    assert vector == pytest.approx(expected, abs=1e-6), wording


def texts(w: World) -> dict[str, str]:
    """Stored texts and the wording each must be embedded as (the user is Jake, the agent Jenny)."""
    return {
        f"user_{w.user_id} lives in Lisbon": "Jake lives in Lisbon",
        f"user_{w.user_id}'s sister met agent_{w.agent_id}": "Jake's sister met Jenny",
        # Not the memory's own ids: embedded as written.
        "user_preferences: dark mode": "user_preferences: dark mode",
        f"user_{w.user_id}x is another token": f"user_{w.user_id}x is another token",
        "agent_SomeoneElse0000000000 said hi": "agent_SomeoneElse0000000000 said hi",
    }


async def test_a_save_embeds_names_in_place_of_its_own_placeholders(
    graph: PostgresGraphDB, engine: AsyncEngine
) -> None:
    w = await world(graph)
    wanted = texts(w)
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [(t, [0]) for t in wanted])
    )
    vectors = await stored(engine)
    for written, wording in wanted.items():
        assert_embedded_as(vectors[written], wording)
    # The stored text keeps its placeholders; only the vector reads names.
    assert set(vectors) == set(wanted)


async def test_an_update_and_add_memories_embed_the_same_way(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [])
    )
    await graph.update_interaction_and_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        interaction_id,
        payload(chat("hi", "ok", "I moved"), [(f"user_{w.user_id} moved to Berlin", [2])]),
    )
    vector = graph.get_associated_vector_db()
    assert isinstance(vector, PgVectorDB)
    await vector.add_memories(
        w.org_id, w.user_id, w.agent_id, [uuid.uuid4()], [f"agent_{w.agent_id} coaches user_{w.user_id}"], "2026-01-02"
    )
    vectors = await stored(engine)
    assert_embedded_as(vectors[f"user_{w.user_id} moved to Berlin"], "Jake moved to Berlin")
    assert_embedded_as(vectors[f"agent_{w.agent_id} coaches user_{w.user_id}"], "Jenny coaches Jake")


async def test_a_text_without_placeholders_reads_no_names(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Names are read only for a text that holds the memory's own placeholder: a plain text costs no
    round trip more (the statements a save sends are counted)."""
    w = await world(graph)
    sent = count_statements(engine)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("plain", [0])]))
    plain = [s for s in sent if "user_name" in s and "agent_label" in s]
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("b"), [(f"user_{w.user_id} is here", [0])])
    )
    named = [s for s in sent if "user_name" in s and "agent_label" in s]
    assert plain == []
    assert len(named) == 1


@pytest.fixture
async def own_engine(fresh_database: str) -> AsyncIterator[AsyncEngine]:
    """A database of its own: a re-embed switches its columns."""
    engine = create_async_engine(fresh_database)
    await migrations.upgrade(engine, migrations.MigrationOptions(schema="memora", dimensions=384))
    yield engine
    await engine.dispose()


class Renamed(HashEmbedder):
    """The same vectors under another model name, so that a re-embed has a target."""

    model = "hash-again"


async def test_a_reembed_embeds_the_current_names(own_engine: AsyncEngine, fresh_database: str) -> None:
    """A re-embed embeds each memory as a save does, with the names as they are now: the way to bring
    memories in line after a user or an agent is renamed."""
    settings = Settings(database_url=fresh_database, db_schema="memora")
    graph = PostgresGraphDB(own_engine, settings=settings, embedder=EMBEDDER)
    w = await world(graph)
    wanted = texts(w)
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [(t, [0]) for t in wanted])
    )
    await graph.update_user(w.org_id, w.user_id, "Jacob")
    database = Database(own_engine, settings=settings)
    try:
        await reembed(database, Renamed(384))
    finally:
        await database.close()
    vectors = await stored(own_engine)
    assert_embedded_as(vectors[f"user_{w.user_id} lives in Lisbon"], "Jacob lives in Lisbon")
    assert_embedded_as(vectors[f"user_{w.user_id}'s sister met agent_{w.agent_id}"], "Jacob's sister met Jenny")
    assert_embedded_as(vectors["user_preferences: dark mode"], "user_preferences: dark mode")
    await graph.close()
