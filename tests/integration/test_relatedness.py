"""Who a memory is about, said one way on both sides; and a score whose 0 means "not related"."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import AsyncMemory, MemorySearchScope, PostgresGraphDB, PostgresMemory, Settings
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.embeddings import LocalEmbedder
from memora_pg.embeddings.calibration import unrelated_levels
from memora_pg.mem0 import MemoryConfig
from memora_pg.testing import count_statements
from tests.integration.helpers import Recording, chat, payload, world


async def test_a_query_names_the_user_as_the_memories_are_embedded(engine: AsyncEngine, settings: Settings) -> None:
    """The agent's placeholder, the agent's own placeholder and "the user" in a user's search are embedded as the
    names, as a stored memory is; a query without them is embedded as given, and reads no names."""
    embedder = Recording()
    graph = PostgresGraphDB(engine, settings=settings, embedder=embedder)
    w = await world(graph, user_name="Jake", agent_label="Jenny")
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("I live in Lisbon"), [(f"user_{w.user_id} lives in Lisbon", [0])])
    )
    vector = graph.get_associated_vector_db()
    assert vector is not None
    sent = count_statements(engine)
    queries = [f"user_{w.user_id} moved to Berlin", "The user's city?", f"what did agent_{w.agent_id} say"]
    await vector.search_memories(queries, MemorySearchScope.USER, w.org_id, w.user_id, w.agent_id)
    assert embedder.queries == ["Jake moved to Berlin", "Jake's city?", "what did Jenny say"]
    assert len(sent) == 2  # the names, then the search

    embedder.queries.clear()
    sent.clear()
    await vector.search_memory("where does Jake live", MemorySearchScope.USER, w.org_id, w.user_id)
    assert embedder.queries == ["where does Jake live"]
    assert len(sent) == 1
    # Another user's placeholder, or an organization's search, is embedded as written.
    embedder.queries.clear()
    await vector.search_memory("user_someoneelse moved", MemorySearchScope.USER, w.org_id, w.user_id)
    await vector.search_memory(f"user_{w.user_id} moved", MemorySearchScope.ORGANIZATION, w.org_id)
    assert embedder.queries == ["user_someoneelse moved", f"user_{w.user_id} moved"]


async def test_the_update_is_found_whichever_way_it_names_the_user(engine: AsyncEngine, settings: Settings) -> None:
    """The Memora agent's contradiction search, with the offline model: the old fact, stored with the
    placeholder, is found by the update asked with the placeholder, the name, or "the user"."""
    graph = PostgresGraphDB(engine, settings=settings, embedder=LocalEmbedder())
    w = await world(graph, user_name="Priya")
    u = f"user_{w.user_id}"
    facts = [
        f"{u} works as a nurse at St. Mary's hospital",
        f"{u} has a cat named Biscuit",
        f"{u} drives a blue Vauxhall Corsa",
        f"{u} plays netball on Tuesday evenings",
        f"{u} is learning Spanish on Duolingo",
    ]
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("facts"), [(f, [0]) for f in facts])
    )
    vector = graph.get_associated_vector_db()
    assert vector is not None
    for update in (f"{u} sold her Corsa and bought a Toyota Yaris", "Priya sold her Corsa", "The user sold her car"):
        hits = await vector.search_memory(update, MemorySearchScope.USER, w.org_id, w.user_id)
        assert hits[0][0].memory == facts[2], update


async def test_unrelated_text_lands_higher_for_what_no_memory_answers() -> None:
    """The level is measured per query, among the closest texts about no one: a question about the world
    and a chat line land near some of them, a question about a person near none."""
    embedder = LocalEmbedder()
    queries = ["What is Jake's job?", "What is the boiling point of water at sea level?", "ok"]
    about_jake, about_the_world, chat_line = await unrelated_levels(embedder, await embedder.embed_queries(queries))
    assert 0.6 < about_jake < about_the_world - 0.03
    assert about_jake < chat_line - 0.03 < 0.95
    assert await unrelated_levels(embedder, []) == []


@pytest.fixture
async def memory(database_url: str) -> AsyncMemory:
    config = MemoryConfig.model_validate(
        {"vector_store": {"provider": "pgvector", "config": {"connection_string": database_url}}}
    )
    return AsyncMemory(config, embedder=LocalEmbedder())


FACTS = [
    "Moved to Lisbon in March and loves the city",
    "Works as a backend developer at a fintech startup",
    "Has a golden retriever called Max",
    "Allergic to peanuts",
]


async def test_the_default_threshold_answers_and_keeps_unrelated_questions_out(memory: AsyncMemory) -> None:
    """mem0-style search by default keeps the memories related to the query (score above 0): a paraphrased
    question gets its fact, a question about nothing stored gets nothing; threshold=0 keeps every ranked memory."""
    try:
        for fact in FACTS:
            await memory.add([{"role": "user", "content": fact}], user_id="u1", infer=False)
        found = await memory.search("Which city does the user live in?", filters={"user_id": "u1"})
        assert [hit["memory"] for hit in found["results"]][:1] == [FACTS[0]]
        assert all(hit["score"] > 0 for hit in found["results"])
        for unrelated in ("What is the capital of Australia?", "Sounds good, thanks", "How do I undo a git commit?"):
            assert (await memory.search(unrelated, filters={"user_id": "u1"}))["results"] == [], unrelated
        # A question about the user in the words of no memory is answered: the gate opens for it.
        found = await memory.search("Does he have any pets?", filters={"user_id": "u1"})
        assert [hit["memory"] for hit in found["results"]][:1] == [FACTS[2]]
        every = await memory.search("What is the capital of Australia?", filters={"user_id": "u1"}, threshold=0)
        assert len(every["results"]) == len(FACTS)
    finally:
        await memory.close()


async def test_autogen_keeps_related_memories_by_default(database_url: str) -> None:
    """PostgresMemory without a score_threshold returns the related memories, not every ranked one."""
    store = PostgresMemory("relatedness", database_url=database_url, embedder=LocalEmbedder())
    try:
        for fact in FACTS:
            await store.add(MemoryContent(content=fact, mime_type=MemoryMimeType.TEXT))
        assert [str(m.content) for m in (await store.query("What breed is his dog?")).results][:1] == [FACTS[2]]
        assert (await store.query("What is the capital of Australia?")).results == []
    finally:
        await store.close()
