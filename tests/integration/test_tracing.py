"""OpenTelemetry spans of every face, caught by the SDK's in-memory exporter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import PostgresGraphDB, Settings, embedded, tracing
from memora_pg.autogen import PostgresMemory
from memora_pg.contract import MemorySearchScope
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import DatabaseError, NotFoundError
from memora_pg.mem0.llm import OpenAILLM
from memora_pg.mem0.memory import AsyncMemory
from tests.fake_openai import FakeOpenAIServer
from tests.integration.conftest import APP_ROLE
from tests.integration.helpers import chat, payload, world

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    """The process's tracer provider (settable once), recording into ``_EXPORTER``."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _one(spans: InMemorySpanExporter, method: str) -> ReadableSpan:
    (span,) = [s for s in spans.get_finished_spans() if (s.attributes or {}).get("memora_pg.method") == method]
    return span


def _no_database_attributes(span: ReadableSpan) -> None:
    """The memory span describes the memory operation; the database's spans are asyncpg's children."""
    assert not [name for name in span.attributes or {} if name.startswith("db.")]


async def test_memora_face_spans(graph: PostgresGraphDB, spans: InMemorySpanExporter) -> None:
    w = await world(graph)
    spans.clear()
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("Likes green tea", [0])])
    )
    vector = graph.get_associated_vector_db()
    assert vector is not None
    await vector.search_memory("tea", MemorySearchScope.USER, w.org_id, w.user_id)
    with pytest.raises(NotFoundError):
        await graph.get_interaction(w.org_id, w.user_id, "no-such-interaction")

    assert interaction_id
    save = _one(spans, "save_interaction_with_memories")
    assert save.name == "create_memory"
    assert save.kind == trace.SpanKind.CLIENT  # the tests' server is not the embedded one
    attributes = dict(save.attributes or {})
    assert attributes["gen_ai.operation.name"] == "create_memory"
    assert attributes["gen_ai.memory.store.id"] == w.org_id
    assert attributes["gen_ai.memory.record.count"] == 1
    assert attributes["memora_pg.face"] == "memora"
    _no_database_attributes(save)
    search = _one(spans, "search_memories")
    assert search.name == "search_memory"
    assert (search.attributes or {})["gen_ai.memory.record.count"] == 1
    assert "gen_ai.memory.query.text" not in (search.attributes or {})  # content is opt-in
    missing = _one(spans, "get_interaction")
    assert missing.status.status_code == StatusCode.ERROR
    assert (missing.attributes or {})["error.type"] == "NotFoundError"
    assert (missing.attributes or {})["gen_ai.memory.record.id"] == "no-such-interaction"


async def test_mem0_and_autogen_spans_and_opt_in_content(database_url: str, spans: InMemorySpanExporter) -> None:
    settings = Settings(database_url=database_url, db_schema="memora", trace_content=True)
    mem0 = AsyncMemory(settings=settings, embedder=HashEmbedder(384))
    autogen = PostgresMemory("notes", database_url=database_url, embedder=HashEmbedder(384), settings=settings)
    try:
        added = await mem0.add("Plays the cello", user_id="u", infer=False)
        await mem0.search("what instrument?", filters={"user_id": "u"})
        await mem0.delete(added["results"][0]["id"])
        await autogen.query("anything")
    finally:
        await mem0.close()
        await autogen.close()
    add = _one(spans, "add")
    assert add.name == "create_memory"  # infer=False: the caller asked for a new record
    assert (add.attributes or {})["gen_ai.memory.record.count"] == 1
    search = _one(spans, "search")
    assert search.name == "search_memory"
    assert (search.attributes or {})["gen_ai.memory.query.text"] == "what instrument?"
    assert (search.attributes or {})["gen_ai.memory.store.id"] == "mem0:mem0"
    deleted = _one(spans, "delete")
    assert (deleted.attributes or {})["gen_ai.memory.record.id"] == added["results"][0]["id"]
    query = _one(spans, "query")
    assert (query.attributes or {})["memora_pg.face"] == "autogen"
    assert query.name == "search_memory"


async def test_a_refusal_of_the_database_carries_its_sqlstate(
    rls_database: tuple[str, str],
    spans: InMemorySpanExporter,
) -> None:
    owner_url, app_url = rls_database
    engine: AsyncEngine = create_async_engine(owner_url)
    async with engine.begin() as conn:
        await conn.execute(text(f"REVOKE SELECT ON memora.memories FROM {APP_ROLE}"))
    await engine.dispose()
    store = AsyncMemory(settings=Settings(database_url=app_url, db_schema="memora"), embedder=HashEmbedder(384))
    try:
        with pytest.raises(DatabaseError):
            await store.get_all(filters={"user_id": "u"})
    finally:
        await store.close()
    refused = _one(spans, "get_all")
    assert refused.status.status_code == StatusCode.ERROR
    assert (refused.attributes or {})["memora_pg.sqlstate"] == "42501"  # insufficient_privilege
    assert (refused.attributes or {})["error.type"] == "DatabaseError"


async def test_spans_nest_under_the_callers(graph: PostgresGraphDB, spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("agent turn") as parent:
        await graph.create_organization("acme")
    created = _one(spans, "create_organization")
    assert created.name == "create_memory_store"
    assert created.parent is not None
    assert created.parent.span_id == parent.get_span_context().span_id


async def test_an_inferred_add_is_an_upsert(database_url: str, spans: InMemorySpanExporter) -> None:
    """mem0's add with a model lets the model choose between adding and changing: upsert_memory."""
    with FakeOpenAIServer() as llm:
        llm.script_chat(
            {"facts": ["Plays the cello"]}, {"memory": [{"id": "0", "text": "Plays the cello", "event": "ADD"}]}
        )
        model = OpenAILLM("fake", api_key="sk-test", base_url=llm.base_url, timeout=2)
        store = AsyncMemory(
            settings=Settings(database_url=database_url, db_schema="memora"), embedder=HashEmbedder(384), llm=model
        )
        try:
            await store.add("I play the cello", user_id="upserter")
            await store.delete_all(user_id="upserter")
        finally:
            await store.close()
    add = _one(spans, "add")
    assert add.name == "upsert_memory"
    assert (add.attributes or {})["gen_ai.memory.record.count"] == 1
    everything = _one(spans, "delete_all")
    assert everything.name == "delete_memory"
    assert "gen_ai.memory.record.id" not in (everything.attributes or {})  # every record of the scope


async def test_the_statements_are_asyncpg_spans_under_the_memory_span(
    graph: PostgresGraphDB, spans: InMemorySpanExporter
) -> None:
    """With asyncpg's instrumentation on, each statement is a postgresql span, a child of the memory span."""
    w = await world(graph)
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("Likes tea", [0])])
    )
    vector = graph.get_associated_vector_db()
    assert vector is not None
    assert tracing.instrument_asyncpg()
    try:
        spans.clear()
        await vector.search_memory("tea", MemorySearchScope.USER, w.org_id, w.user_id)
    finally:
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        AsyncPGInstrumentor().uninstrument()  # type: ignore[no-untyped-call]
    search = _one(spans, "search_memories")
    statements = [s for s in spans.get_finished_spans() if s.parent and s.parent.span_id == search.context.span_id]
    assert statements
    for statement in statements:
        attributes = statement.attributes or {}
        assert "postgresql" in (attributes.get("db.system"), attributes.get("db.system.name"))
        assert statement.kind == trace.SpanKind.CLIENT
    _no_database_attributes(search)


@pytest.mark.skipif(
    bool(os.environ.get("MEMORA_PG_TEST_DATABASE_URL")), reason="the suite runs against an external server"
)
async def test_the_span_of_the_embedded_server_is_internal(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """No URL and no engine: the embedded server, beside the application, so an INTERNAL span."""
    graph = PostgresGraphDB(settings=Settings(embedded_data_dir=tmp_path, database_url=None))
    try:
        await graph.create_organization("Embedded")
    finally:
        await graph.close()
        embedded.stop(tmp_path, Settings().embedded_postgres_version)
    created = _one(spans, "create_organization")
    assert created.kind == trace.SpanKind.INTERNAL
    assert not Database(settings=Settings(database_url="postgresql://h/db")).embedded
