"""PostgresMemory: AutoGen's memory protocol on the autogen_contents table."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import QueuePool, text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import (
    ConfigurationError,
    EmbeddingError,
    InvalidInputError,
    NotFoundError,
    PostgresGraphDB,
    Settings,
)
from memora_pg.autogen import (
    AUTOGEN_CORE,
    Image,
    MemoryContent,
    MemoryMimeType,
    PostgresMemory,
    SystemMessage,
)
from memora_pg.embeddings import HashEmbedder, LocalEmbedder
from memora_pg.graph import autogen_contents as contents
from memora_pg.graph import search
from memora_pg.graph.autogen_contents import MAX_BYTES, MAX_TEXT_CHARS
from tests.integration.helpers import Explain, executed_nodes, plan_nodes, with_vector_codec, world

# A 1x1 PNG (red), small enough to inline.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def make(engine: AsyncEngine, settings: Settings, name: str = "notes", **kwargs: Any) -> PostgresMemory:
    return PostgresMemory(name, engine=engine, settings=settings, embedder=HashEmbedder(384), **kwargs)


def text_content(value: str, **metadata: Any) -> MemoryContent:
    return MemoryContent(content=value, mime_type=MemoryMimeType.TEXT, metadata=metadata or None)


async def stored_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(text("SELECT count(*) FROM memora.autogen_contents")) or 0)


class ModelContext:
    """The least a model context needs: async get_messages() and add_message()."""

    def __init__(self, messages: Sequence[Any] = ()) -> None:
        self.messages = list(messages)

    async def get_messages(self) -> list[Any]:
        return list(self.messages)

    async def add_message(self, message: Any) -> None:
        self.messages.append(message)


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "mime_type"),
    [
        ("The user prefers formal language", MemoryMimeType.TEXT),
        ("# Preferences\n\n- **formal** language\n- metric units", MemoryMimeType.MARKDOWN),
        ({"units": "metric", "tone": {"formal": True, "emoji": None}, "langs": ["pt", "en"]}, MemoryMimeType.JSON),
        (b"\x00\x01\x02 raw bytes \xff", MemoryMimeType.BINARY),
        ("Plain text given as a string mime type", "text/plain"),
        (b"%PDF-1.7 pretend", "application/pdf"),
    ],
)
async def test_each_kind_of_content_comes_back_as_it_went_in(
    engine: AsyncEngine, settings: Settings, content: Any, mime_type: MemoryMimeType | str
) -> None:
    """Text, markdown, JSON and bytes are listed back with their Python type, mime type and metadata."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content=content, mime_type=mime_type, metadata={"source": "test", "n": 1}))
    (back,) = await memory.list()
    assert back.content == content
    assert type(back.content) is type(content)
    assert (
        back.model_dump()["mime_type"] == MemoryContent(content=content, mime_type=mime_type).model_dump()["mime_type"]
    )
    assert back.metadata == {"source": "test", "n": 1}


async def test_known_mime_types_come_back_as_enum_members(engine: AsyncEngine, settings: Settings) -> None:
    """A mime type given as "text/markdown" comes back as MemoryMimeType.MARKDOWN; unknown ones as strings."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content="# title", mime_type="text/markdown"))
    await memory.add(MemoryContent(content="<b>hi</b>", mime_type="text/html"))
    assert [m.mime_type for m in await memory.list()] == [MemoryMimeType.MARKDOWN, "text/html"]


async def test_image_round_trip(engine: AsyncEngine, settings: Settings) -> None:
    """An image is stored as bytes and comes back as an AutoGen Image (or bytes without autogen-core)."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content=PNG, mime_type="image/png", metadata={"alt": "red dot"}))
    (back,) = await memory.list()
    assert back.mime_type == "image/png"
    assert back.metadata == {"alt": "red dot"}
    if AUTOGEN_CORE:
        assert isinstance(back.content, Image)
        assert back.content.image.size == (1, 1)
        # An Image given as content is stored as PNG and comes back equal.
        await memory.add(MemoryContent(content=back.content, mime_type=MemoryMimeType.IMAGE))
        again = (await memory.list())[1]
        assert again.mime_type == MemoryMimeType.IMAGE
        assert isinstance(again.content, Image)
        assert again.content.to_base64() == back.content.to_base64()
    else:
        assert back.content == PNG


async def test_json_given_as_a_string_is_stored_as_json(engine: AsyncEngine, settings: Settings) -> None:
    """A str holding a JSON object with the JSON mime type is stored and returned as a dict."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content='{"b": 2, "a": [1, "x"]}', mime_type=MemoryMimeType.JSON))
    (back,) = await memory.list()
    assert back.content == {"a": [1, "x"], "b": 2}


async def test_list_is_chronological(engine: AsyncEngine, settings: Settings) -> None:
    """list() returns every entry, searchable or not, oldest first."""
    memory = make(engine, settings)
    for item in ["first", "second", "third"]:
        await memory.add(text_content(item))
    await memory.add(MemoryContent(content=b"fourth", mime_type=MemoryMimeType.BINARY))
    assert [m.content for m in await memory.list()] == ["first", "second", "third", b"fourth"]


# -- similarity queries --------------------------------------------------------------------------


async def test_query_returns_the_most_similar_first_with_scores(engine: AsyncEngine, settings: Settings) -> None:
    """Results are best first, each with its search score as metadata["score"] and its cosine similarity
    as metadata["similarity"], beside its own metadata."""
    memory = make(engine, settings)
    await memory.add(text_content("the user drives a red car to work", topic="car"))
    await memory.add(text_content("the user loves green tea in the morning", topic="tea"))
    await memory.add(text_content("green tea with jasmine is the user's favourite tea", topic="tea"))
    result = await memory.query("green tea")
    contents = [m.content for m in result.results]
    assert contents[0] == "green tea with jasmine is the user's favourite tea"
    assert contents[1] == "the user loves green tea in the morning"
    scores = [m.metadata["score"] for m in result.results if m.metadata]
    assert len(scores) == 3
    assert all(isinstance(s, float) for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert 0 < scores[0] <= 1
    first = result.results[0].metadata
    assert first is not None
    similarity = first["similarity"]
    assert isinstance(similarity, float)
    assert -1 <= similarity <= 1
    assert result.results[0].metadata == {"topic": "tea", "score": scores[0], "similarity": similarity}


async def test_an_identical_text_scores_one(engine: AsyncEngine, settings: Settings) -> None:
    """Querying with a stored text finds it first; both arms at their best score at least 1 / (1 + neighbour boost)."""
    memory = make(engine, settings)
    await memory.add(text_content("the user is vegetarian"))
    await memory.add(text_content("the user plays chess on sundays"))
    (best, *_) = (await memory.query("the user plays chess on sundays")).results
    assert best.content == "the user plays chess on sundays"
    assert best.metadata is not None
    assert 1 / 1.3 - 1e-9 <= best.metadata["score"] <= 1


async def test_json_is_searchable_by_its_serialized_text(engine: AsyncEngine, settings: Settings) -> None:
    """A JSON entry is found by words of its keys and values, and a MemoryContent can be the query."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content={"favourite_city": "Lisbon", "pet": "cat"}, mime_type="application/json"))
    await memory.add(text_content("the user plays the violin"))
    result = await memory.query(MemoryContent(content={"pet": "cat"}, mime_type=MemoryMimeType.JSON))
    assert result.results[0].content == {"favourite_city": "Lisbon", "pet": "cat"}
    result = await memory.query(MemoryContent(content="which city, Lisbon?", mime_type=MemoryMimeType.MARKDOWN))
    assert result.results[0].content == {"favourite_city": "Lisbon", "pet": "cat"}


async def test_k_limits_results_in_the_constructor_and_per_call(engine: AsyncEngine, settings: Settings) -> None:
    """k caps the number of results; query(k=...) overrides the memory's own for one call."""
    memory = make(engine, settings, k=2)
    for i in range(6):
        await memory.add(text_content(f"note number {i} about tea"))
    assert len((await memory.query("tea")).results) == 2
    assert len((await memory.query("tea", k=5)).results) == 5
    assert len((await memory.query("tea", k=50)).results) == 6
    assert len((await make(engine, settings).query("tea")).results) == 5  # the default k


async def test_score_threshold_drops_weak_results(engine: AsyncEngine, settings: Settings) -> None:
    """score_threshold keeps only results at or above it; query(score_threshold=...) overrides it per call."""
    await make(engine, settings).add(text_content("green tea"))
    await make(engine, settings).add(text_content("a completely unrelated sentence about trains"))
    strict = make(engine, settings, score_threshold=0.7)
    assert [m.content for m in (await strict.query("green tea")).results] == ["green tea"]
    assert len((await strict.query("green tea", score_threshold=None)).results) == 2
    assert len((await strict.query("green tea", score_threshold=-1)).results) == 2
    loose = make(engine, settings)
    assert [m.content for m in (await loose.query("green tea", score_threshold=0.7)).results] == ["green tea"]


async def test_thresholds_are_on_the_cosine_similarity_not_the_ranking_score(
    engine: AsyncEngine, settings: Settings
) -> None:
    """score_threshold (a similarity) and distance_threshold (a cosine distance) keep what their vector
    memories would keep: with the threshold between a hit's ranking score and its cosine similarity, the
    hit stays exactly when its similarity reaches the threshold, whatever its score."""
    memory = make(engine, settings)
    await memory.add(text_content("the user likes green tea with breakfast"))
    await memory.add(text_content("the user commutes by bicycle"))
    for query in ("green tea", "bicycle commute", "what does the user drink"):
        for hit in (await memory.query(query, score_threshold=None)).results:
            assert hit.metadata is not None
            score, similarity = hit.metadata["score"], hit.metadata["similarity"]
            assert score != pytest.approx(similarity)  # the ranking fuses the cosine with the words
            between = (score + similarity) / 2
            by_score = [m.content for m in (await memory.query(query, score_threshold=between)).results]
            by_distance = [m.content for m in (await memory.query(query, distance_threshold=1 - between)).results]
            assert (hit.content in by_score) == (similarity >= between)
            assert by_distance == by_score


async def test_bytes_and_images_are_listed_but_never_queried(engine: AsyncEngine, settings: Settings) -> None:
    """Bytes and images have no embedding: list() returns them, query() never does, even with k large."""
    memory = make(engine, settings)
    await memory.add(MemoryContent(content=b"tea tea tea", mime_type=MemoryMimeType.BINARY, metadata={"w": "tea"}))
    await memory.add(MemoryContent(content=PNG, mime_type="image/png", metadata={"w": "tea"}))
    assert (await memory.query("tea", k=100, score_threshold=-1)).results == []
    await memory.add(text_content("tea"))
    assert [m.content for m in (await memory.query("tea", k=100, score_threshold=-1)).results] == ["tea"]
    assert len(await memory.list()) == 3
    async with engine.connect() as conn:
        embedded = await conn.scalar(text("SELECT count(embedding) FROM memora.autogen_contents"))
    assert embedded == 1


async def test_query_of_an_empty_memory_is_empty(engine: AsyncEngine, settings: Settings) -> None:
    """A query on a memory that holds nothing (not even its organization yet) returns no results."""
    assert (await make(engine, settings).query("anything")).results == []
    assert await make(engine, settings).list() == []


# -- namespaces and scopes ------------------------------------------------------------------------


async def test_namespaces_do_not_see_each_other(engine: AsyncEngine, settings: Settings) -> None:
    """Two names are two memories: neither lists nor finds the other's entries, and clear() of one keeps the other."""
    notes, diary = make(engine, settings, "notes"), make(engine, settings, "diary")
    await notes.add(text_content("tea in notes"))
    await diary.add(text_content("tea in diary"))
    assert [m.content for m in await notes.list()] == ["tea in notes"]
    assert [m.content for m in (await diary.query("tea", k=10)).results] == ["tea in diary"]
    await notes.clear()
    assert await notes.list() == []
    assert [m.content for m in await diary.list()] == ["tea in diary"]


async def test_org_user_and_agent_scope_reads_writes_and_clear(
    engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB
) -> None:
    """A memory sees exactly the entries it could have written: same org and name, same user and agent (None = none)."""
    w = await world(graph)
    other_user = await graph.create_user(w.org_id, "Ann")
    scopes = {
        "org": make(engine, settings, org_id=w.org_id),
        "user": make(engine, settings, org_id=w.org_id, user_id=w.user_id),
        "other_user": make(engine, settings, org_id=w.org_id, user_id=other_user.user_id),
        "user_agent": make(engine, settings, org_id=w.org_id, user_id=w.user_id, agent_id="coach"),
        "agent": make(engine, settings, org_id=w.org_id, agent_id="coach"),
        "default_org": make(engine, settings),
    }
    for label, memory in scopes.items():
        await memory.add(text_content(f"tea for {label}"))
    for label, memory in scopes.items():
        assert [m.content for m in await memory.list()] == [f"tea for {label}"]
        assert [m.content for m in (await memory.query("tea", k=100)).results] == [f"tea for {label}"]
    await scopes["user"].clear()
    assert await scopes["user"].list() == []
    assert await stored_rows(engine) == len(scopes) - 1
    assert [m.content for m in await scopes["user_agent"].list()] == ["tea for user_agent"]


async def test_reset_empties_the_namespace_of_every_scope_and_only_it(
    engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB
) -> None:
    """reset() (AutoGen's ChromaDB memory's) deletes the namespace in its organization, every user's and agent's
    entries in it; it is refused without allow_reset=True, and collection_name is the namespace."""
    w = await world(graph)
    other = await graph.create_organization("Globex")
    mine = make(engine, settings, org_id=w.org_id, user_id=w.user_id, allow_reset=True)
    same_namespace = make(engine, settings, org_id=w.org_id, agent_id="coach")
    other_namespace = make(engine, settings, "diary", org_id=w.org_id, user_id=w.user_id)
    other_org = make(engine, settings, org_id=other.org_id)
    for memory in (mine, same_namespace, other_namespace, other_org):
        await memory.add(text_content("tea"))
    assert mine.collection_name == "notes"
    with pytest.raises(ConfigurationError, match="allow_reset=True"):
        await same_namespace.reset()
    assert await stored_rows(engine) == 4
    await mine.reset()
    assert await mine.list() == []
    assert await same_namespace.list() == []
    assert [m.content for m in await other_namespace.list()] == ["tea"]
    assert [m.content for m in await other_org.list()] == ["tea"]
    assert PostgresMemory.load_component(mine.dump_component()).collection_name == "notes"
    assert PostgresMemory.load_component(mine.dump_component())._allow_reset


async def test_organizations_are_isolated(engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB) -> None:
    """The same name in two organizations holds two separate memories."""
    acme, other = await world(graph), await world(graph)
    await make(engine, settings, org_id=acme.org_id).add(text_content("acme tea"))
    await make(engine, settings, org_id=other.org_id).add(text_content("other tea"))
    assert [m.content for m in (await make(engine, settings, org_id=acme.org_id).query("tea")).results] == ["acme tea"]
    await make(engine, settings, org_id=other.org_id).clear()
    assert [m.content for m in await make(engine, settings, org_id=acme.org_id).list()] == ["acme tea"]


async def test_the_default_organization_is_created_by_the_first_write(engine: AsyncEngine, settings: Settings) -> None:
    """Without org_id, the first write creates the organization "default" (name "default"); reads create nothing."""
    memory = make(engine, settings)
    assert memory.org_id == "default"
    await memory.list()
    await memory.query("tea")
    await memory.clear()
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM memora.organizations")) == 0
    await memory.add(text_content("tea"))
    await make(engine, settings, "other").add(text_content("coffee"))
    async with engine.connect() as conn:
        rows = (await conn.execute(text("SELECT org_id, org_name FROM memora.organizations"))).all()
    assert [tuple(row) for row in rows] == [("default", "default")]


async def test_a_missing_organization_or_user_is_not_found(
    engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB
) -> None:
    """Writing to an organization or user that does not exist is NotFoundError and writes nothing."""
    w = await world(graph)
    with pytest.raises(NotFoundError, match="nowhere"):
        await make(engine, settings, org_id="nowhere").add(text_content("tea"))
    with pytest.raises(NotFoundError, match="nobody"):
        await make(engine, settings, org_id=w.org_id, user_id="nobody").add(text_content("tea"))
    with pytest.raises(NotFoundError):
        await make(engine, settings, org_id="nowhere").add(MemoryContent(content=b"x", mime_type="image/png"))
    assert await stored_rows(engine) == 0
    # An agent id is a plain label: it need not exist.
    await make(engine, settings, org_id=w.org_id, agent_id="never-created").add(text_content("tea"))
    assert await stored_rows(engine) == 1


# -- bad input ---------------------------------------------------------------------------------------


class NotContent:
    pass


@pytest.mark.parametrize(
    ("content", "mime_type", "message"),
    [
        (b"bytes", MemoryMimeType.TEXT, "does not match"),
        ({"a": 1}, MemoryMimeType.TEXT, "does not match"),
        ({"a": 1}, MemoryMimeType.BINARY, "does not match"),
        ("text", MemoryMimeType.BINARY, "does not match"),
        ("text", "image/png", "does not match"),
        ("not json", MemoryMimeType.JSON, "not valid JSON"),
        ("[1, 2]", MemoryMimeType.JSON, "must be an object"),
        (b"{}", MemoryMimeType.JSON, "does not match"),
        ("text", "plain", "type/subtype"),
        ("text", "", "non-empty"),
        ("text", "text/plain\x00", "NUL"),
        ("nul \x00 inside", MemoryMimeType.TEXT, "NUL"),
        ({"key": "nul \x00 inside"}, MemoryMimeType.JSON, "NUL"),
        ({"nul \x00 key": 1}, MemoryMimeType.JSON, "NUL"),
        ({"nan": float("nan")}, MemoryMimeType.JSON, "JSON-serializable"),
        ({"set": {1, 2}}, MemoryMimeType.JSON, "JSON-serializable"),
        ("x" * (MAX_TEXT_CHARS + 1), MemoryMimeType.TEXT, "limited to"),
        ({"x": "x" * MAX_TEXT_CHARS}, MemoryMimeType.JSON, "limited to"),
        (b"x" * (MAX_BYTES + 1), MemoryMimeType.BINARY, "limited to"),
        (b"x" * (MAX_BYTES + 1), "image/png", "limited to"),
    ],
)
async def test_bad_content_is_refused_and_nothing_is_written(
    engine: AsyncEngine, settings: Settings, content: Any, mime_type: Any, message: str
) -> None:
    """Content whose mime type does not fit it, with NUL characters, or over the limits is InvalidInputError."""
    memory = make(engine, settings)
    with pytest.raises(InvalidInputError, match=message):
        await memory.add(MemoryContent(content=content, mime_type=mime_type))
    assert await stored_rows(engine) == 0


async def test_unsupported_content_types_and_bad_metadata_are_refused(engine: AsyncEngine, settings: Settings) -> None:
    """A content of another Python type, a non-MemoryContent, or unserializable metadata is InvalidInputError."""
    memory = make(engine, settings)
    sneaky = MemoryContent(content="x", mime_type=MemoryMimeType.TEXT)
    sneaky.content = [1, 2]  # type: ignore[assignment]  # no validation on assignment
    with pytest.raises(InvalidInputError, match="Unsupported content type list"):
        await memory.add(sneaky)
    odd = MemoryContent.model_construct(content=NotContent(), mime_type=MemoryMimeType.BINARY)  # type: ignore[arg-type]  # unsupported
    with pytest.raises(InvalidInputError, match="Unsupported content type NotContent"):
        await memory.add(odd)
    with pytest.raises(InvalidInputError, match="MemoryContent"):
        await memory.add("just a string")  # type: ignore[arg-type]  # not a MemoryContent, on purpose
    with pytest.raises(InvalidInputError, match="metadata"):
        await memory.add(MemoryContent(content="x", mime_type="text/plain", metadata={"when": object()}))
    with pytest.raises(InvalidInputError, match="NUL"):
        await memory.add(MemoryContent(content="x", mime_type="text/plain", metadata={"k": "\x00"}))
    assert await stored_rows(engine) == 0


async def test_bad_queries_and_options_are_refused(engine: AsyncEngine, settings: Settings) -> None:
    """Empty, NUL or binary queries, unknown keyword arguments and bad k or thresholds are InvalidInputError."""
    memory = make(engine, settings)
    for query in ["", "   "]:
        assert (await memory.query(query)).results == []  # nothing to look for: nothing found
    with pytest.raises(InvalidInputError):
        await memory.query("tea \x00")
    with pytest.raises(InvalidInputError, match="Only text, markdown and JSON"):
        await memory.query(MemoryContent(content=b"x", mime_type=MemoryMimeType.BINARY))
    with pytest.raises(InvalidInputError, match="n_results"):
        await memory.query("tea", n_results=3)
    for k in [0, -1, True, 1.5, 10_000]:
        with pytest.raises(InvalidInputError, match="`k`"):
            await memory.query("tea", k=k)
        with pytest.raises(InvalidInputError, match="`k`"):
            make(engine, settings, k=k)
    for threshold in [2, "0.5", float("nan")]:
        with pytest.raises(InvalidInputError, match="score_threshold"):
            await memory.query("tea", score_threshold=threshold)
    bad_arguments: list[dict[str, Any]] = [
        {"name": ""},
        {"name": "a\x00b"},
        {"name": "n", "org_id": ""},
        {"name": "n", "user_id": 5},
        {"name": "n", "agent_id": "a\x00"},
    ]
    for bad in bad_arguments:
        with pytest.raises(InvalidInputError):
            make(engine, settings, **bad)
    with pytest.raises(InvalidInputError, match="not both"):
        PostgresMemory("n", engine=engine, database_url="postgresql://x/y")


async def test_a_failing_embedder_writes_nothing(engine: AsyncEngine, settings: Settings) -> None:
    """The embedding is computed before the transaction: if it fails, nothing is written."""

    class Broken(HashEmbedder):
        async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            raise RuntimeError("model server down")

    memory = PostgresMemory("notes", engine=engine, settings=settings, embedder=Broken(384))
    with pytest.raises(EmbeddingError, match="model server down"):
        await memory.add(text_content("tea"))
    assert await stored_rows(engine) == 0


# -- update_context -----------------------------------------------------------------------------------


async def test_update_context_adds_relevant_memories_for_the_last_user_message(
    engine: AsyncEngine, settings: Settings
) -> None:
    """The last user message is the query; the results are appended as one SystemMessage and returned."""
    memory = make(engine, settings, k=2)
    await memory.add(text_content("the user is allergic to peanuts"))
    await memory.add(text_content("the user lives in Lisbon"))
    await memory.add(MemoryContent(content={"city": "Lisbon", "since": 2020}, mime_type=MemoryMimeType.JSON))
    context = ModelContext(
        [
            {"role": "user", "content": "do I have allergies?"},
            {"role": "assistant", "content": "let me check"},
            {"role": "user", "content": "where do I live, Lisbon?"},
        ]
    )
    result = await memory.update_context(context)
    assert len(context.messages) == 4
    added = context.messages[-1]
    assert isinstance(added, SystemMessage)
    assert [m.content for m in result.memories.results] == [
        "the user lives in Lisbon",
        {"city": "Lisbon", "since": 2020},
    ]
    assert added.content == (
        '\nRelevant memory content:\n1. the user lives in Lisbon\n2. {"city": "Lisbon", "since": 2020}\n'
    )


async def test_update_context_reads_object_messages_and_list_content(engine: AsyncEngine, settings: Settings) -> None:
    """Messages may be objects with role "user" and list content, whose str parts (NULs dropped) make the query."""

    class Message:
        def __init__(self, role: str, content: Any) -> None:
            self.role, self.content = role, content

    memory = make(engine, settings)
    await memory.add(text_content("the user is allergic to peanuts"))
    context = ModelContext([Message("user", ["allergic to", object(), "pea\x00nuts"]), Message("system", "be kind")])
    result = await memory.update_context(context)
    assert [m.content for m in result.memories.results] == ["the user is allergic to peanuts"]
    assert isinstance(context.messages[-1], SystemMessage)


async def test_update_context_without_a_user_message_or_results_adds_nothing(
    engine: AsyncEngine, settings: Settings
) -> None:
    """No user message, an empty one, or no results: nothing is added and the result is empty."""
    memory = make(engine, settings, score_threshold=0.9)
    await memory.add(text_content("the user is allergic to peanuts"))
    for messages in (
        [],
        [{"role": "system", "content": "be kind"}, {"role": "assistant", "content": "peanuts"}],
        [{"role": "user", "content": "  "}],
        [{"role": "user", "content": "\x00"}],
        [{"role": "user", "content": "what about trains?"}],
    ):
        context = ModelContext(messages)
        result = await memory.update_context(context)
        assert result.memories.results == []
        assert context.messages == messages


# -- engines, setup and embedders ----------------------------------------------------------------------


async def test_close_leaves_the_callers_engine_open(engine: AsyncEngine, settings: Settings) -> None:
    """close() never disposes an engine the caller passed in, and may be called twice."""
    memory = make(engine, settings)
    await memory.add(text_content("tea"))
    await memory.close()
    await memory.close()
    assert await stored_rows(engine) == 1


async def test_close_disposes_an_engine_made_from_a_url(database_url: str, engine: AsyncEngine) -> None:
    """A memory made from a database URL owns its engine and disposes of it in close()."""
    settings = Settings(db_schema="memora")
    memory = PostgresMemory("notes", database_url=database_url, settings=settings, embedder=HashEmbedder(384))
    await memory.add(text_content("tea"))
    assert [m.content for m in await memory.list()] == ["tea"]
    own = await memory.database.raw_engine()
    assert own is not engine
    assert isinstance(own.pool, QueuePool)
    assert own.pool.checkedin() == 1
    await memory.close()
    await memory.close()
    assert memory.database.closed
    assert own.pool.checkedin() == 0


async def test_first_use_migrates_a_fresh_database(fresh_database: str) -> None:
    """Every method works on an empty database without setup(): the first one brings the schema to head."""
    settings = Settings(db_schema="agents_memory")
    for first in ("list", "clear", "query", "add"):
        memory = PostgresMemory("notes", database_url=fresh_database, settings=settings, embedder=HashEmbedder(384))
        if first == "list":
            assert await memory.list() == []
        elif first == "clear":
            await memory.clear()
        elif first == "query":
            assert (await memory.query("tea")).results == []
        else:
            await memory.add(text_content("tea"))
        await memory.close()


async def test_concurrent_first_calls_migrate_once(fresh_database: str) -> None:
    """Concurrent first calls on one memory and on several (as several processes would) all succeed."""
    settings = Settings(db_schema="agents_memory")
    memories = [
        PostgresMemory("notes", database_url=fresh_database, settings=settings, embedder=HashEmbedder(384))
        for _ in range(3)
    ]
    await asyncio.gather(*(m.add(text_content(f"tea {i}")) for i, m in enumerate(memories * 2)))
    assert len(await memories[0].list()) == 6
    for memory in memories:
        await memory.close()


async def test_setup_creates_the_schema_on_a_fresh_database(fresh_database: str) -> None:
    """setup() migrates an empty database to head; the memory then works, and setup() is safe to repeat."""
    settings = Settings(db_schema="agents_memory")
    memory = PostgresMemory("notes", database_url=fresh_database, settings=settings, embedder=HashEmbedder(384))
    await memory.setup()
    await memory.setup()
    await memory.add(text_content("tea"))
    assert [m.content for m in (await memory.query("tea")).results] == ["tea"]
    await memory.close()


async def test_embedder_dimension_mismatch_names_both_numbers(engine: AsyncEngine, settings: Settings) -> None:
    """An embedder of 512 dimensions on a 384-dimension database is a ConfigurationError naming both."""
    memory = PostgresMemory("notes", engine=engine, settings=settings, embedder=HashEmbedder(512))
    with pytest.raises(ConfigurationError, match=r"512.*384"):
        await memory.add(text_content("tea"))
    with pytest.raises(ConfigurationError, match=r"512.*384"):
        await memory.query("tea")
    assert await stored_rows(engine) == 0


async def test_a_paraphrased_question_finds_the_right_entry(engine: AsyncEngine, settings: Settings) -> None:
    """With the local multilingual-e5-small model, a question sharing no word with the entry ranks it first.
    The ranking alone (score_threshold=0): whether a question this impersonal ("which foods must be
    avoided?") is about the user at all is the default threshold's call, tested in test_relatedness."""
    memory = PostgresMemory("facts", engine=engine, settings=settings, embedder=LocalEmbedder())
    facts = [
        "The user is allergic to peanuts.",
        "The user rides a blue bicycle to the office.",
        "The user's daughter studies medicine in Lisbon.",
        "The user prefers green tea in the morning.",
    ]
    for fact in facts:
        await memory.add(text_content(fact))
    questions = {
        "which foods must be avoided because of a reaction?": facts[0],
        "how does this person commute?": facts[1],
        "what is the child's field of study?": facts[2],
        "what hot drink is liked at breakfast?": facts[3],
    }
    for question, fact in questions.items():
        assert (await memory.query(question, k=1, score_threshold=0)).results[0].content == fact


async def test_memories_share_one_engine_concurrently(engine: AsyncEngine, settings: Settings) -> None:
    """Several memories on one engine write and read concurrently, one transaction each."""
    memories = [make(engine, settings, f"ns{i}") for i in range(4)]
    await asyncio.gather(*(m.add(text_content(f"tea {i}")) for i, m in enumerate(memories)))
    found = await asyncio.gather(*(m.list() for m in memories))
    assert [[c.content for c in f] for f in found] == [[f"tea {i}"] for i in range(4)]


async def test_queries_use_the_namespace_index(engine: AsyncEngine) -> None:
    """Among many namespaces, a query finds their scope's rows with ix_autogen_contents_namespace."""
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO memora.organizations (org_id, org_name) VALUES ('default', 'default')"))
        await conn.execute(
            text(
                "INSERT INTO memora.autogen_contents"
                " (org_id, content_id, namespace, mime_type, content_text, embedding, search_text)"
                " SELECT 'default', gen_random_uuid(), 'ns' || (g % 200), 'text/plain', 'entry ' || g,"
                " (SELECT array_agg(random() - 0.5 + 0 * d + 0 * g) FROM generate_series(1, 384) AS d)::vector,"
                " memora.to_search_text('entry ' || g)"
                " FROM generate_series(1, 6000) AS g"
            )
        )
        await conn.execute(text("ANALYZE memora.autogen_contents"))
    for scope in (contents.Scope("default", "ns7"), contents.Scope("default", "ns7", "u", "a")):
        statement = search.statement(
            search.AUTOGEN_CONTENTS,
            schema="memora",
            where=search.autogen_where(scope),
            vectors=[[0.1] * 384],
            texts=["entry 7"],
            k=5,
            scoped=True,
            mode="hybrid",
            settings=Settings(),
        )
        async with engine.connect() as conn:
            await with_vector_codec(conn)
            scoped = await conn.execution_options(schema_translate_map={None: "memora"})
            plan = json.dumps((await scoped.execute(Explain(statement.sql, analyze=True), statement.params)).scalar())
        nodes = plan_nodes(plan)
        assert any(index == "ix_autogen_contents_namespace" for _, index, _ in nodes)
        assert ("Seq Scan", None, "autogen_contents") not in nodes
        # Each neighbour probe reads the index in write order: no sort of the scope's earlier rows by seq alone.
        sorts = [n["Sort Key"] for n in executed_nodes(plan) if n["Node Type"] == "Sort"]
        probes = [keys for keys in sorts if all("autogen_contents" in key and ".seq" in key for key in keys)]
        assert not probes, sorts
