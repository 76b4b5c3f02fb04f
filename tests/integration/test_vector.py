"""PgVectorDB: Memora's vector DB on the memories table (memora-semantics.md §12, scenario 22)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone
from enum import Enum

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import (
    ConfigurationError,
    InvalidInputError,
    MemorySearchScope,
    NotFoundError,
    PostgresGraphDB,
    SearchMode,
    Settings,
    vector_params,
)
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.testing import count_statements
from memora_pg.vector import PgVectorDB
from tests.integration.helpers import World, chat, payload, world

USER = MemorySearchScope.USER
ORG = MemorySearchScope.ORGANIZATION


def _vector(graph: PostgresGraphDB) -> PgVectorDB:
    store = graph.get_associated_vector_db()
    assert isinstance(store, PgVectorDB)
    return store


async def _facts(graph: PostgresGraphDB, w: World, facts: list[str]) -> list[str]:
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        payload(chat("x"), [(f, [0]) for f in facts]),
    )
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    return [m.memory_id for m in found.memories or []]


async def test_user_search_finds_the_users_memories_with_raw_text(graph: PostgresGraphDB) -> None:
    """Hits are the user's own, raw (placeholders kept), no interaction id or sources, best first."""
    w = await world(graph)
    stranger = await world(graph)
    await _facts(graph, w, [f"user_{w.user_id} loves green tea", "user likes hiking in the alps", "car is red"])
    await _facts(graph, stranger, ["green tea is great"])
    (hits,) = await _vector(graph).search_memories(["green tea"], USER, w.org_id, w.user_id)
    assert hits
    top, score = hits[0]
    assert top.memory == f"user_{w.user_id} loves green tea"
    assert top.interaction_id is None
    assert top.message_sources is None
    assert {m.user_id for m, _ in hits} == {w.user_id}
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert 0.35 < score <= 1.0


async def test_hybrid_scores_lie_in_zero_to_one_best_first(graph: PostgresGraphDB) -> None:
    """The default search scores in (0, 1], best first; a memory neither arm relates to the query is no hit."""
    w = await world(graph)
    for fact in ["green tea", "black coffee", "sparkling water", "green tea with lemon"]:
        await _facts(graph, w, [fact])
    (hits,) = await _vector(graph).search_memories(["green tea"], USER, w.org_id, w.user_id)
    assert [m.memory for m, _ in hits][:2] == ["green tea", "green tea with lemon"]
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < score <= 1 for score in scores)
    # both arms at their best: 1 / (1 + neighbour_boost) alone, up to 1 with an equally good neighbour
    assert hits[0][1] == pytest.approx(1 / 1.3)
    assert "black coffee" not in [m.memory for m, _ in hits]


async def test_a_memory_next_to_a_strong_hit_is_lifted(graph: PostgresGraphDB) -> None:
    """Memories of one interaction neighbour each other: the one written next to a strong hit outranks
    an equally unrelated memory of another interaction, and stays below the hit itself."""
    w = await world(graph)
    await _facts(graph, w, ["paddles a kayak on weekends", "keeps it at the marina"])
    await _facts(graph, w, ["keeps a diary"])
    (hits,) = await _vector(graph).search_memories(["kayak"], USER, w.org_id, w.user_id)
    ranked = [m.memory for m, _ in hits]
    assert ranked[:2] == ["paddles a kayak on weekends", "keeps it at the marina"]
    assert hits[1][1] < hits[0][1]


async def test_upstream_mode_scores_follow_upstreams_fusion(engine: AsyncEngine, settings: Settings) -> None:
    """search_mode="upstream": first in both lists scores 1/2 + 1/2 = 1.0; everything kept scores more than 0.35."""
    vector = PgVectorDB(engine, embedder=HashEmbedder(384), settings=settings, search_mode="upstream")
    graph = PostgresGraphDB(engine, settings=settings, associated_vector_db=vector)
    w = await world(graph)
    await _facts(graph, w, ["green tea", "black coffee", "sparkling water"])
    (hits,) = await vector.search_memories(["green tea"], USER, w.org_id, w.user_id)
    assert hits[0][0].memory == "green tea"
    assert hits[0][1] == pytest.approx(1.0)
    assert all(score > 0.35 for _, score in hits)


async def test_every_mode_returns_search_top_k_hits(engine: AsyncEngine, settings: Settings) -> None:
    """search_top_k bounds the hits of every mode, upstream's included (it had its own 10)."""
    small = settings.model_copy(update={"search_top_k": 2})
    graph = PostgresGraphDB(engine, settings=small, embedder=HashEmbedder(384))
    w = await world(graph)
    await _facts(graph, w, ["green tea", "green tea at noon", "green tea at night", "tea, green"])
    for mode in ("hybrid", "dense", "upstream"):
        vector = PgVectorDB(graph.database, embedder=HashEmbedder(384), search_mode=mode)
        (hits,) = await vector.search_memories(["green tea"], USER, w.org_id, w.user_id)
        assert len(hits) == 2, mode


async def test_dense_mode_scores_are_cosine_similarities(engine: AsyncEngine, settings: Settings) -> None:
    """In dense mode the score is 1 - cosine distance, nearest first, and unrelated memories score near 0."""
    vector = PgVectorDB(engine, embedder=HashEmbedder(384), settings=settings, search_mode="dense")
    graph = PostgresGraphDB(engine, settings=settings, associated_vector_db=vector)
    w = await world(graph)
    await _facts(graph, w, ["green tea", "green tea with milk", "unrelated words entirely"])
    (hits,) = await vector.search_memories(["green tea"], USER, w.org_id, w.user_id)
    assert hits[0][0].memory == "green tea"
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    # The unrelated memory's cosine similarity is 0: no hit.
    assert [m.memory for m, _ in hits] == ["green tea", "green tea with milk"]


@pytest.mark.parametrize("mode", list(SearchMode))
async def test_one_list_per_query_in_order(graph: PostgresGraphDB, mode: SearchMode) -> None:
    """search_memories returns exactly one list per query, in query order, in every mode; an unrelated query
    scores low."""
    w = await world(graph)
    await _facts(graph, w, ["green tea", "mountain bike"])
    _vector(graph).search_mode = mode
    results = await _vector(graph).search_memories(["mountain bike", "zzz qqq", "green tea"], USER, w.org_id, w.user_id)
    assert [[m.memory for m, _ in r][:1] for r in results[::2]] == [["mountain bike"], ["green tea"]]
    assert max((score for _, score in results[1]), default=0) < min(results[0][0][1], results[2][0][1]) / 2


@pytest.mark.parametrize("mode", list(SearchMode))
async def test_every_mode_searches_in_one_statement(
    graph: PostgresGraphDB, engine: AsyncEngine, mode: SearchMode
) -> None:
    """Each mode is one statement per call, whatever the scope, the number of queries or the time searched."""
    w = await world(graph)
    await _facts(graph, w, ["green tea", "mountain bike"])
    store = _vector(graph)
    store.search_mode = mode
    await store.search_memory("green tea", USER, w.org_id, w.user_id)  # the schema's check, done once
    sent = count_statements(engine)
    calls = [
        store.search_memory("green tea", USER, w.org_id, w.user_id),
        store.search_memory("green tea", ORG, w.org_id),
        store.search_memories(["green tea", "bike"], ORG, w.org_id, agent_id=w.agent_id),
        store.search_memory("tea", USER, w.org_id, w.user_id, as_of=datetime.now(timezone.utc), as_of_clock="system"),
    ]
    for call in calls:
        sent.clear()
        assert await call
        assert len(sent) == 1, sent


async def test_organization_scope_ignores_user_and_agent_filter_applies(graph: PostgresGraphDB) -> None:
    """ORGANIZATION scope searches every user of the org; a truthy agent_id filters by the memory's agent."""
    w = await world(graph)
    other_user = await graph.create_user(w.org_id, "Amy")
    other_agent = await graph.create_agent(w.org_id, "Other")
    await _facts(graph, w, ["green tea"])
    await graph.save_interaction_with_memories(
        w.org_id, other_agent.agent_id, other_user.user_id, payload(chat("x"), [("green tea too", [0])])
    )
    stranger = await world(graph)
    await _facts(graph, stranger, ["green tea"])
    store = _vector(graph)
    (hits,) = await store.search_memories(["green tea"], ORG, w.org_id, user_id="ignored")
    assert {m.user_id for m, _ in hits} == {w.user_id, other_user.user_id}
    (hits,) = await store.search_memories(["green tea"], ORG, w.org_id, agent_id=other_agent.agent_id)
    assert [m.memory for m, _ in hits] == ["green tea too"]
    (hits,) = await store.search_memories(["green tea"], USER, w.org_id, w.user_id, agent_id=other_agent.agent_id)
    assert hits == []


@pytest.mark.parametrize("mode", list(SearchMode))
async def test_superseded_versions_are_searchable(graph: PostgresGraphDB, mode: SearchMode) -> None:
    """Every version stays searchable (resolution happens in the graph), unless excluded by the setting, in every
    mode."""
    _vector(graph).search_mode = mode
    w = await world(graph)
    (old,) = await _facts(graph, w, ["lives in Paris"])
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("x"), contrary=[("lives in Rome", [0], old)])
    )
    (hits,) = await _vector(graph).search_memories(["lives in Paris"], USER, w.org_id, w.user_id)
    assert "lives in Paris" in [m.memory for m, _ in hits]
    _vector(graph).exclude_superseded = True
    (hits,) = await _vector(graph).search_memories(["lives in Paris"], USER, w.org_id, w.user_id)
    assert "lives in Paris" not in [m.memory for m, _ in hits]


class ForeignScope(Enum):
    USER = "user"
    ORGANIZATION = "organization"


async def test_scope_and_query_errors(graph: PostgresGraphDB) -> None:
    """Upstream's messages for empty queries and a missing user; a bad scope is an error, not a cross-org search."""
    store = _vector(graph)
    w = await world(graph)
    with pytest.raises(ValueError, match=r"^At least one query is required$"):
        await store.search_memories([], USER, w.org_id, w.user_id)
    with pytest.raises(ValueError, match=r"^A query is required$"):
        await store.search_memory("", USER, w.org_id, w.user_id)
    with pytest.raises(ValueError, match=r"^user_id is required in addition to org_id for user-specific search$"):
        await store.search_memories(["x"], USER, w.org_id)
    with pytest.raises(InvalidInputError):
        await store.search_memories(["x"], "usr", w.org_id, w.user_id)  # type: ignore[arg-type]  # no such scope
    # memora-core's own enum (any enum with the same values) and plain values are accepted, beyond the annotation
    assert await store.search_memories(["x"], ForeignScope.USER, w.org_id, w.user_id) == [[]]  # type: ignore[arg-type]
    assert await store.search_memory("x", "organization", w.org_id) == []  # type: ignore[arg-type]


async def test_add_memories_upserts_and_creates_standalone_rows(graph: PostgresGraphDB) -> None:
    """add_memories embeds and upserts; an id without a row becomes a standalone, searchable memory."""
    w = await world(graph)
    store = _vector(graph)
    new_id = uuid.uuid4()
    await store.add_memories(w.org_id, w.user_id, w.agent_id, [new_id], ["enjoys sailing"], "2026-02-01T10:00:00")
    (hits,) = await store.search_memories(["sailing"], USER, w.org_id, w.user_id)
    assert [(m.memory_id, m.memory) for m, _ in hits] == [(str(new_id), "enjoys sailing")]
    assert hits[0][0].obtained_at.isoformat() == "2026-02-01T10:00:00+00:00"
    await store.add_memories(w.org_id, w.user_id, w.agent_id, [str(new_id)], ["enjoys rowing"], "2026-02-02T10:00:00")
    (hits,) = await store.search_memories(["rowing"], USER, w.org_id, w.user_id)
    assert [m.memory for m, _ in hits] == ["enjoys rowing"]
    memory = await graph.get_user_memory(w.org_id, w.user_id, str(new_id))
    assert memory.interaction_id is None


async def test_add_memories_errors(graph: PostgresGraphDB) -> None:
    """Upstream's messages for empty and mismatched input; a missing user or another user's id is refused."""
    store = _vector(graph)
    w = await world(graph)
    with pytest.raises(ValueError, match=r"^At least one memory and its memory id is required$"):
        await store.add_memories(w.org_id, w.user_id, w.agent_id, [], [], "2026-01-01")
    with pytest.raises(ValueError, match=r"^Length of memories and memory_ids must match$"):
        await store.add_memories(w.org_id, w.user_id, w.agent_id, [uuid.uuid4()], ["a", "b"], "2026-01-01")
    with pytest.raises(InvalidInputError):
        await store.add_memories(w.org_id, w.user_id, w.agent_id, ["not-a-uuid"], ["a"], "2026-01-01")
    with pytest.raises(InvalidInputError):
        await store.add_memories(w.org_id, w.user_id, w.agent_id, [uuid.uuid4()], ["a"], "yesterday")
    with pytest.raises(NotFoundError):
        await store.add_memories(w.org_id, "ghost", w.agent_id, [uuid.uuid4()], ["a"], "2026-01-01")
    (taken,) = await _facts(graph, w, ["mine"])
    other = await graph.create_user(w.org_id, "Amy")
    with pytest.raises(InvalidInputError, match="another user"):
        await store.add_memories(w.org_id, other.user_id, w.agent_id, [taken], ["hijack"], "2026-01-01")
    assert (await graph.get_user_memory(w.org_id, w.user_id, taken)).memory == "mine"
    # Refused as a whole: the new id beside another user's is not written either.
    fresh = uuid.uuid4()
    with pytest.raises(InvalidInputError, match="another user"):
        await store.add_memories(
            w.org_id, other.user_id, w.agent_id, [str(fresh), taken], ["new", "hijack"], "2026-01-01"
        )
    assert await graph.get_all_user_memories(w.org_id, other.user_id) == []
    with pytest.raises(InvalidInputError, match="once"):
        await store.add_memories(
            w.org_id, w.user_id, w.agent_id, [str(fresh), str(fresh).upper()], ["a", "b"], "2026-01-01"
        )


async def test_concurrent_first_writes_of_one_memory_id_both_succeed(graph: PostgresGraphDB) -> None:
    """Two upserts of the same new id at once: one inserts the row, the other (run again) rewrites it."""
    w = await world(graph)
    store = _vector(graph)
    for _ in range(5):
        memory_id = uuid.uuid4()
        await asyncio.gather(
            *(
                store.add_memories(w.org_id, w.user_id, w.agent_id, [memory_id], [text], "2026-02-01T10:00:00")
                for text in ("enjoys sailing", "enjoys rowing")
            )
        )
        memory = await graph.get_user_memory(w.org_id, w.user_id, str(memory_id))
        assert memory.memory in ("enjoys sailing", "enjoys rowing")


async def test_vector_deletes_make_memories_unsearchable_but_keep_rows(graph: PostgresGraphDB) -> None:
    """delete_memory/delete_memories/delete_all_* clear the vectors; the graph rows stay (§15.2)."""
    w = await world(graph)
    store = _vector(graph)
    ids = await _facts(graph, w, ["alpha fact", "beta fact", "gamma fact"])
    await store.delete_memory(ids[0])
    await store.delete_memories([ids[1], "garbage", str(uuid.uuid4())])
    (hits,) = await store.search_memories(["fact"], USER, w.org_id, w.user_id)
    assert [m.memory_id for m, _ in hits] == [ids[2]]
    await store.delete_all_user_memories(w.org_id, w.user_id)
    assert await store.search_memories(["gamma fact"], USER, w.org_id, w.user_id) == [[]]
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 3
    other = await world(graph)
    await _facts(graph, other, ["delta fact"])
    await store.delete_all_organization_memories(other.org_id)
    assert await store.search_memories(["delta fact"], ORG, other.org_id) == [[]]
    await store.delete_memory("")
    await store.delete_memories([])


async def test_graph_deletes_remove_vectors_in_the_same_transaction(graph: PostgresGraphDB) -> None:
    """Delete matrix of §10: after each graph delete, search no longer returns the memories (scenario 16)."""
    store = _vector(graph)
    w = await world(graph)
    ids = await _facts(graph, w, ["one fact", "two fact"])
    await graph.delete_user_memory(w.org_id, w.user_id, ids[0])
    (hits,) = await store.search_memories(["fact"], USER, w.org_id, w.user_id)
    assert [m.memory_id for m, _ in hits] == [ids[1]]
    await graph.delete_user(w.org_id, w.user_id)
    assert await store.search_memories(["two fact"], ORG, w.org_id) == [[]]
    w2 = await world(graph)
    await _facts(graph, w2, ["org fact"])
    await graph.delete_organization(w2.org_id)
    assert await store.search_memories(["org fact"], ORG, w2.org_id) == [[]]


async def test_embedder_dimension_mismatch_names_both_numbers(engine: AsyncEngine, settings: Settings) -> None:
    """A 512-dimension embedder on a 384-dimension database is a ConfigurationError naming both."""
    graph = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(512))
    with pytest.raises(ConfigurationError, match=r"512.*384"):
        await graph.setup()
    w = await world(graph)
    with pytest.raises(ConfigurationError, match=r"512.*384"):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("m", [0])]))
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []


async def test_graph_without_vector_store_writes_no_vectors(engine: AsyncEngine, settings: Settings) -> None:
    """associated_vector_db=None stores memories without embeddings (nothing searchable)."""
    graph = PostgresGraphDB(engine, settings=settings, associated_vector_db=None)
    w = await world(graph)
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("green tea", [0])])
    )
    searcher = PgVectorDB(engine, embedder=HashEmbedder(384), settings=settings)
    assert await searcher.search_memories(["green tea"], USER, w.org_id, w.user_id) == [[]]
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 1


async def test_separately_built_store_on_the_same_database_is_native(database_url: str, settings: Settings) -> None:
    """The Memora agent builds both stores itself and assigns one to the other: writes stay atomic."""
    graph = PostgresGraphDB(database_url, settings=settings, associated_vector_db=None)
    vector = PgVectorDB(database_url, embedder=HashEmbedder(384), settings=settings)
    graph.associated_vector_db = vector
    try:
        w = await world(graph)
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("kayak", [0])])
        )
        (hits,) = await vector.search_memories(["kayak"], USER, w.org_id, w.user_id)
        assert [m.memory for m, _ in hits] == ["kayak"]
    finally:
        await vector.close()
        await graph.close()
        await graph.close()


async def test_a_callers_engine_gets_the_binary_vector_codec_once(database_url: str) -> None:
    """The first transaction on a connection registers pgvector's binary codec; vectors then read as numpy arrays."""
    engine = create_async_engine(database_url)
    try:
        store = PgVectorDB(engine, embedder=HashEmbedder(384))
        await store.setup()
        async with store.database.transaction() as conn:
            value = await conn.scalar(text("SELECT CAST(:v AS vector)"), {"v": vector_params.one([0.5, -1.0])})
        assert isinstance(value, np.ndarray)
        assert value.tolist() == [0.5, -1.0]
    finally:
        await engine.dispose()


async def test_a_database_without_pgvector_gets_the_codec_once_it_has_it(fresh_database: str) -> None:
    """Before migrations install pgvector no codec is registered, and the next transaction tries again: on
    the same pooled connection, vectors then read as numpy arrays."""
    engine = create_async_engine(fresh_database, pool_size=1, max_overflow=0)
    database = Database(engine, settings=Settings())
    try:
        async with database.transaction() as conn:
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        async with database.transaction() as conn:
            value = await conn.scalar(text("SELECT CAST(:v AS vector)"), {"v": vector_params.one([0.5, -1.0])})
            assert isinstance(value, np.ndarray)
    finally:
        await database.close()
        await engine.dispose()
