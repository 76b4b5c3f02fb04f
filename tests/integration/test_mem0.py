"""The mem0-style Memory API on PostgreSQL, with its language model on a local OpenAI-compatible server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg.mem0 import AsyncMemory, DuragValidationError, LLMError, Memory, MemoryConfig, MemoryNotFoundError
from memora_pg.mem0.errors import VectorStoreError
from tests.fake_openai import FakeOpenAIServer, FakeResponse
from tests.integration.helpers import Recording

COUNTED = ("memories", "memory_history")


@pytest.fixture
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def _config(database_url: str, llm: FakeOpenAIServer, **store: Any) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "pgvector",
            "config": {"connection_string": database_url, "collection_name": "tests", **store},
        },
        "llm": {
            "provider": "openai",
            "config": {"model": "fake-model", "api_key": "sk-test", "openai_base_url": llm.base_url, "timeout": 2},
        },
        "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        "history_db_path": "/nonexistent/history.db",
    }


@pytest.fixture
async def memory(database_url: str, llm: FakeOpenAIServer) -> AsyncIterator[AsyncMemory]:
    """An AsyncMemory on the session database."""
    store = AsyncMemory.from_config(_config(database_url, llm))
    yield store
    await store.close()


async def _counts(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        return {t: int(await conn.scalar(text(f"SELECT count(*) FROM memora.{t}")) or 0) for t in COUNTED}


async def test_add_without_inference_stores_each_message(memory: AsyncMemory) -> None:
    """infer=False stores one memory per non-system message, with role, actor and the session ids."""
    result = await memory.add(
        [
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "I like green tea", "name": "jake"},
            {"role": "assistant", "content": "Noted: green tea"},
        ],
        user_id="jake",
        agent_id="coach",
        run_id="run-1",
        metadata={"topic": "drinks"},
        infer=False,
    )
    assert [(r["memory"], r["event"], r.get("role")) for r in result["results"]] == [
        ("I like green tea", "ADD", "user"),
        ("Noted: green tea", "ADD", "assistant"),
    ]
    item = await memory.get(result["results"][0]["id"])
    assert item is not None
    assert item["memory"] == "I like green tea"
    assert (item["user_id"], item["agent_id"], item["run_id"], item["actor_id"]) == ("jake", "coach", "run-1", "jake")
    assert item["metadata"] == {"topic": "drinks"}
    assert item["created_at"].endswith("+00:00")
    assert item["updated_at"] == item["created_at"]  # as mem0: equal until the memory changes
    assert len(item["hash"]) == 32
    history = await memory.history(item["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [("ADD", None, "I like green tea")]


async def test_metadata_that_is_not_json_is_refused(memory: AsyncMemory, engine: AsyncEngine) -> None:
    """Metadata must be JSON: a datetime or a NaN is DuragValidationError, and nothing is written."""
    for bad in ({"when": datetime.now(timezone.utc)}, {"score": float("nan")}):
        with pytest.raises(DuragValidationError, match="metadata must be JSON"):
            await memory.add("likes tea", user_id="jake", metadata=bad, infer=False)
    assert await _counts(engine) == dict.fromkeys(COUNTED, 0)


async def test_a_string_is_one_memory_and_ids_are_required(memory: AsyncMemory) -> None:
    """A plain string is stored as one memory; at least one of user_id/agent_id/run_id is required."""
    result = await memory.add("loves sailing", agent_id="coach", infer=False)
    (added,) = result["results"]
    assert added["memory"] == "loves sailing"
    item = await memory.get(added["id"])
    assert item is not None
    assert "user_id" not in item
    with pytest.raises(DuragValidationError, match="At least one"):
        await memory.add("x", infer=False)
    with pytest.raises(DuragValidationError):
        await memory.add(42, user_id="u", infer=False)  # type: ignore[arg-type]  # not messages, on purpose
    with pytest.raises(DuragValidationError):
        await memory.add("x", user_id="u", memory_type="semantic")


async def test_inferred_add_extracts_facts_and_decides(memory: AsyncMemory, llm: FakeOpenAIServer) -> None:
    """infer=True: facts from the model, then ADD/UPDATE/DELETE/NONE decisions applied together with history."""
    llm.script_chat(
        {"facts": ["Lives in Paris", "Likes tea", "Has a cat"]},
        {"memory": [{"id": "0", "text": t, "event": "ADD"} for t in ("Lives in Paris", "Likes tea", "Has a cat")]},
    )
    first = await memory.add("I live in Paris, like tea and have a cat", user_id="jake")
    assert sorted(r["memory"] for r in first["results"]) == ["Has a cat", "Likes tea", "Lives in Paris"]
    ids = {r["memory"]: r["id"] for r in first["results"]}

    def decide(request: dict[str, Any]) -> dict[str, Any]:
        prompt = request["messages"][-1]["content"]
        shown = {text: number for number, text in _shown(prompt)}
        return {
            "memory": [
                {
                    "id": shown["Lives in Paris"],
                    "text": "Lives in Berlin",
                    "event": "UPDATE",
                    "old_memory": "Lives in Paris",
                },
                {"id": shown["Has a cat"], "text": "Has a cat", "event": "DELETE"},
                {"id": shown["Likes tea"], "text": "Likes tea", "event": "NONE"},
                {"id": "99", "text": "Has a dog", "event": "ADD"},
            ]
        }

    llm.script_chat({"facts": ["Lives in Berlin", "Has a dog instead of a cat", "Likes tea"]}, decide)
    second = await memory.add("I moved to Berlin; the cat is gone, I have a dog", user_id="jake")
    events = sorted((r["event"], r["memory"]) for r in second["results"])
    assert events == [("ADD", "Has a dog"), ("DELETE", "Has a cat"), ("UPDATE", "Lives in Berlin")]
    moved = await memory.get(ids["Lives in Paris"])
    assert moved is not None
    assert moved["memory"] == "Lives in Berlin"
    assert moved["updated_at"] is not None
    assert await memory.get(ids["Has a cat"]) is None
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in await memory.history(ids["Lives in Paris"])] == [
        ("ADD", None, "Lives in Paris"),
        ("UPDATE", "Lives in Paris", "Lives in Berlin"),
    ]
    cat_history = await memory.history(ids["Has a cat"])
    assert [(h["event"], h["is_deleted"]) for h in cat_history] == [("ADD", False), ("DELETE", True)]
    listed = await memory.get_all(filters={"user_id": "jake"})
    assert sorted(m["memory"] for m in listed["results"]) == ["Has a dog", "Likes tea", "Lives in Berlin"]


def _shown(prompt: str) -> list[tuple[str, str]]:
    import json
    import re

    match = re.search(r"(\[\{.*?\}\])", prompt, re.S)
    assert match, prompt
    return [(m["id"], m["text"]) for m in json.loads(match.group(1))]


@pytest.mark.parametrize(
    "bad_decisions",
    [
        "not json at all",
        {"memories": []},
        {"memory": [{"id": "0", "text": "x", "event": "MERGE"}]},
        {"memory": [{"id": "7", "text": "x", "event": "UPDATE"}]},
        {"memory": [{"id": "0", "text": "", "event": "ADD"}]},
    ],
)
async def test_malformed_model_output_changes_nothing(
    memory: AsyncMemory, llm: FakeOpenAIServer, engine: AsyncEngine, bad_decisions: Any
) -> None:
    """Unparseable or inconsistent decisions are an LLMError and nothing is written."""
    await memory.add("keep me", user_id="jake", infer=False)
    before = await _counts(engine)
    llm.script_chat({"facts": ["New fact"]}, bad_decisions)
    with pytest.raises(LLMError):
        await memory.add("something new", user_id="jake")
    assert await _counts(engine) == before


async def test_malformed_facts_and_timeouts_are_llm_errors(
    memory: AsyncMemory, llm: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    """No facts list, an HTTP error, or an answer slower than the timeout: LLMError, nothing written."""
    before = await _counts(engine)
    llm.script_chat({"facts": "one fact"})
    with pytest.raises(LLMError):
        await memory.add("x", user_id="jake")
    llm.script_chat(FakeResponse(status=400))
    with pytest.raises(LLMError):
        await memory.add("x", user_id="jake")
    llm.script_chat(FakeResponse(delay=5, content={"facts": ["late"]}))
    with pytest.raises(LLMError):
        await memory.add("x", user_id="jake")
    assert await _counts(engine) == before


async def test_multi_fact_add_is_atomic(memory: AsyncMemory, llm: FakeOpenAIServer, engine: AsyncEngine) -> None:
    """When one of several decided changes fails in the database, none of them (nor their history) remains."""
    await memory.add("Lives in Paris", user_id="jake", infer=False)
    before = await _counts(engine)
    async with engine.begin() as conn:
        await conn.execute(text("ALTER TABLE memora.memories ADD CONSTRAINT no_poison CHECK (memory <> 'poison')"))
    try:
        llm.script_chat(
            {"facts": ["a", "b"]},
            {
                "memory": [
                    {"id": "0", "text": "Lives in Rome", "event": "UPDATE"},
                    {"id": "1", "text": "fine", "event": "ADD"},
                    {"id": "2", "text": "poison", "event": "ADD"},
                ]
            },
        )
        with pytest.raises(Exception):  # noqa: B017, PT011 - the database refuses; the type is DatabaseError
            await memory.add("x", user_id="jake")
        assert await _counts(engine) == before
        (kept,) = (await memory.get_all(filters={"user_id": "jake"}))["results"]
        assert kept["memory"] == "Lives in Paris"
    finally:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE memora.memories DROP CONSTRAINT no_poison"))


async def test_search_scores_threshold_and_filters(memory: AsyncMemory) -> None:
    """Search returns the nearest memories of the filtered scope, best first, with similarity scores."""
    await memory.add(
        [{"role": "user", "content": c} for c in ("green tea in the morning", "black coffee", "green tea at night")],
        user_id="jake",
        metadata={"kind": "drink"},
        infer=False,
    )
    await memory.add("green tea too", user_id="amy", infer=False)
    found = await memory.search("green tea", filters={"user_id": "jake"}, top_k=2)
    assert sorted(r["memory"] for r in found["results"]) == ["green tea at night", "green tea in the morning"]
    scores = [r["score"] for r in found["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= 1 for s in scores)
    strict = await memory.search("green tea", filters={"user_id": "jake"}, threshold=0.99)
    assert strict["results"] == []
    legacy = await memory.search("green tea", user_id="amy")
    assert [r["memory"] for r in legacy["results"]] == ["green tea too"]
    filtered = await memory.search("tea", filters={"user_id": "jake", "kind": {"in": ["drink"]}}, threshold=0.0)
    assert len(filtered["results"]) == 3
    with pytest.raises(DuragValidationError):
        await memory.search("tea", filters={"kind": "drink"})
    with pytest.raises(DuragValidationError):
        await memory.search("tea", filters={"user_id": "jake", "kind": {"regex": "d.*"}})
    assert await memory.search("tea", filters={"user_id": "jake"}, top_k=0) == {"results": []}
    with pytest.raises(DuragValidationError):
        await memory.search("tea", filters={"user_id": "jake"}, top_k=-1)
    with pytest.raises(DuragValidationError):
        await memory.search("tea", filters={"user_id": "jake"}, threshold=1.5)


async def test_full_top_k_under_a_selective_filter(memory: AsyncMemory) -> None:
    """A filter keeping 1% of 1,000 memories still returns the full top_k (iterative index scans)."""
    messages = [{"role": "user", "content": f"note number {i} about topic {i % 7}"} for i in range(1000)]
    result = await memory.add(messages, agent_id="scribe", infer=False)
    rare = [r["id"] for i, r in enumerate(result["results"]) if i % 100 == 0]
    for memory_id in rare:
        item = await memory.get(memory_id)
        assert item is not None
        await memory.update(memory_id, item["memory"], metadata={"tier": "rare"})
    found = await memory.search(
        "note about topic", filters={"agent_id": "scribe", "tier": "rare"}, top_k=10, threshold=None
    )
    assert sorted(r["id"] for r in found["results"]) == sorted(rare)


async def test_rerank(memory: AsyncMemory, database_url: str, llm: FakeOpenAIServer) -> None:
    """rerank=True without a reranker is an error; with the LLM reranker the order follows its scores."""
    await memory.add([{"role": "user", "content": c} for c in ("tea one", "tea two")], user_id="jake", infer=False)
    with pytest.raises(DuragValidationError, match="reranker"):
        await memory.search("tea", filters={"user_id": "jake"}, rerank=True)
    config = _config(database_url, llm)
    config["reranker"] = {"provider": "llm", "config": {}}
    reranking = AsyncMemory.from_config(config)
    try:
        plain = await reranking.search("tea", filters={"user_id": "jake"}, threshold=None)
        order = [r["memory"] for r in plain["results"]]
        llm.script_chat({"scores": [0.1, 0.9]})
        reranked = await reranking.search("tea", filters={"user_id": "jake"}, rerank=True, threshold=None)
        assert [r["memory"] for r in reranked["results"]] == list(reversed(order))
        assert [r["score"] for r in reranked["results"]] == [0.9, 0.1]
    finally:
        await reranking.close()


async def test_hybrid_search_fuses_full_text(database_url: str, llm: FakeOpenAIServer) -> None:
    """With hybrid_search (the default anyway), a word match ranks with the vector hits."""
    store = AsyncMemory.from_config(_config(database_url, llm, hybrid_search=True))
    try:
        await store.add(
            [{"role": "user", "content": c} for c in ("zebra crossing", "kayak trip", "zebra stripes")],
            user_id="jake",
            infer=False,
        )
        found = await store.search("zebra", filters={"user_id": "jake"}, threshold=None)
        top = [r["memory"] for r in found["results"][:2]]
        assert sorted(top) == ["zebra crossing", "zebra stripes"]
        assert found["results"][0]["score"] <= 1.0
    finally:
        await store.close()


async def test_update_keeps_the_id_and_delete_and_delete_all(memory: AsyncMemory) -> None:
    """update keeps the id (metadata merged, as mem0 2.x does); delete and delete_all leave history."""
    (added,) = (await memory.add("likes tennis", user_id="jake", metadata={"a": 1}, infer=False))["results"]
    assert await memory.update(added["id"], "likes padel") == {"message": "Memory updated successfully!"}
    item = await memory.get(added["id"])
    assert item is not None
    assert (item["memory"], item["metadata"], item["user_id"]) == ("likes padel", {"a": 1}, "jake")
    await memory.update(added["id"], "likes squash", metadata={"b": 2})
    item = await memory.get(added["id"])
    assert item is not None
    assert item["metadata"] == {"a": 1, "b": 2}
    with pytest.raises(MemoryNotFoundError):
        await memory.update(str(uuid.uuid4()), "x")
    with pytest.raises(ValueError):  # noqa: PT011 - mem0 raises ValueError for a bad id
        await memory.delete("not-an-id")
    assert await memory.delete(added["id"]) == {"message": "Memory deleted successfully!"}
    assert await memory.get(added["id"]) is None
    assert [h["event"] for h in await memory.history(added["id"])] == ["ADD", "UPDATE", "UPDATE", "DELETE"]

    await memory.add([{"role": "user", "content": f"m{i}"} for i in range(3)], user_id="jake", run_id="r1", infer=False)
    await memory.add("other run", user_id="jake", run_id="r2", infer=False)
    await memory.delete_all(user_id="jake", run_id="r1")
    assert [m["memory"] for m in (await memory.get_all(filters={"user_id": "jake"}))["results"]] == ["other run"]
    with pytest.raises(DuragValidationError, match="reset"):
        await memory.delete_all()


async def test_get_all_filters_and_top_k(memory: AsyncMemory) -> None:
    """get_all lists the filtered memories newest first, at most top_k."""
    for i in range(5):
        await memory.add(f"fact {i}", user_id="jake", metadata={"n": i}, infer=False)
    listed = await memory.get_all(filters={"user_id": "jake", "n": {"gte": 2}}, top_k=2)
    assert [m["memory"] for m in listed["results"]] == ["fact 4", "fact 3"]
    assert await memory.get("garbage") is None
    assert await memory.history("garbage") == []


async def test_procedural_memory(memory: AsyncMemory, llm: FakeOpenAIServer) -> None:
    """memory_type='procedural_memory' with an agent stores the model's summary as one memory."""
    llm.script_chat("Step 1: searched flights. Step 2: booked LIS-BER.")
    result = await memory.add(
        [{"role": "user", "content": "book me a flight"}, {"role": "assistant", "content": "done"}],
        agent_id="travel",
        memory_type="procedural_memory",
    )
    (added,) = result["results"]
    item = await memory.get(added["id"])
    assert item is not None
    assert item["memory"].startswith("Step 1")
    assert item["metadata"] == {"memory_type": "procedural_memory"}
    with pytest.raises(DuragValidationError, match="agent_id"):
        await memory.add("x", user_id="jake", memory_type="procedural_memory")


async def test_reset_forgets_the_collection_only(memory: AsyncMemory, database_url: str, llm: FakeOpenAIServer) -> None:
    """reset() removes this collection's memories and history; another collection is untouched."""
    other = AsyncMemory.from_config(_config(database_url, llm, collection_name="other"))
    try:
        (kept,) = (await other.add("stays", user_id="jake", infer=False))["results"]
        (gone,) = (await memory.add("goes", user_id="jake", infer=False))["results"]
        await memory.reset()
        assert await memory.get(gone["id"]) is None
        assert await memory.history(gone["id"]) == []
        assert await other.get(kept["id"]) is not None
        await memory.add("after reset", user_id="jake", infer=False)
    finally:
        await other.close()


def test_sync_memory_from_a_mem0_config(database_url: str, llm: FakeOpenAIServer) -> None:
    """The synchronous Memory runs a program written against the seed's API unchanged."""
    m = Memory.from_config(_config(database_url, llm))
    try:
        result = m.add("I prefer window seats", user_id="alice", infer=False)
        memory_id = result["results"][0]["id"]
        assert m.search("window seat", filters={"user_id": "alice"})["results"][0]["id"] == memory_id
        assert m.get_all(filters={"user_id": "alice"})["results"][0]["memory"] == "I prefer window seats"
        m.update(memory_id, "I prefer aisle seats")
        updated = m.get(memory_id)
        assert updated is not None
        assert updated["memory"] == "I prefer aisle seats"
        assert [h["event"] for h in m.history(memory_id)] == ["ADD", "UPDATE"]
        m.delete(memory_id)
        m.delete_all(user_id="alice")
        m.reset()
    finally:
        m.close()


def test_config_rejects_other_vector_stores() -> None:
    """memora_pg keeps vectors in PostgreSQL: another provider is a clear error."""
    with pytest.raises((VectorStoreError, ValueError)):
        MemoryConfig.model_validate({"vector_store": {"provider": "qdrant", "config": {}}})
    config = MemoryConfig.model_validate(
        {
            "vector_store": {
                "provider": "pgvector",
                "config": {"host": "db", "user": "u", "password": "p w", "dbname": "x"},
            }
        }
    )
    assert config.settings().url() == "postgresql://u:p%20w@db:5432/x"


async def test_bad_query_and_top_k_are_refused_in_mem0s_words(memory: AsyncMemory) -> None:
    """A bad query or top_k is refused before any retrieval work, with mem0's own messages (which mem0 users'
    code and tests match on); a query is trimmed before it is embedded."""
    recording = Recording()
    memory._embedder = recording
    await memory.add("green tea", user_id="jake", infer=False)
    for query in ("", "   ", "\n\t"):
        with pytest.raises(ValueError, match=r"Invalid query.*empty or whitespace-only"):
            await memory.search(query, filters={"user_id": "jake"})
    with pytest.raises(ValueError, match="Invalid query: must be a non-empty string"):
        await memory.search(None, filters={"user_id": "jake"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Invalid top_k.*Must be a non-negative"):
        await memory.search("tea", filters={"user_id": "jake"}, top_k=-5)
    with pytest.raises(ValueError, match=r"Invalid top_k.*Must be a non-negative"):
        await memory.get_all(filters={"user_id": "jake"}, top_k=-1)
    with pytest.raises(ValueError, match="top_k must be a valid integer"):
        await memory.search("tea", filters={"user_id": "jake"}, top_k="3")  # type: ignore[arg-type]
    with pytest.raises(DuragValidationError, match="at most 1000"):
        await memory.search("tea", filters={"user_id": "jake"}, top_k=1001)
    assert recording.queries == []
    found = await memory.search("  green tea  ", filters={"user_id": "jake"})
    assert recording.queries == ["green tea"]
    assert [m["memory"] for m in found["results"]] == ["green tea"]
