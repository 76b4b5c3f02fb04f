"""Property-based tests of the public methods: any input is either stored exactly or refused with a typed error.

Never a raw driver error, never a partial write. Strings include arbitrary unicode, NUL
characters, empty and long strings, and SQL-injection payloads.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import (
    InvalidInputError,
    MemoraPGError,
    MemoriesAndInteraction,
    MemorySearchScope,
    MemoryToStore,
    NotFoundError,
    PgVectorDB,
    PostgresGraphDB,
    Settings,
)
from memora_pg.embeddings import HashEmbedder
from memora_pg.mem0 import AsyncMemory, DuragValidationError
from memora_pg.mem0.filters import compile_filters
from tests.integration.helpers import World, world

INJECTIONS = [
    "'; DROP TABLE memora.memories; --",
    '" OR 1=1 --',
    "$$; SELECT pg_sleep(10); $$",
    "Robert'); DELETE FROM memora.users;--",
    "\\x00\\'",
    "{schema}",
    ":org_id",
    "%(name)s",
]
texts = st.one_of(st.text(max_size=300), st.sampled_from(INJECTIONS), st.text(alphabet="\x00ab'\";", max_size=8))
ids = st.one_of(st.none(), st.integers(), st.text(max_size=40), st.sampled_from(INJECTIONS), st.just(str(uuid.uuid4())))
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def run(database_url: str) -> Iterator[tuple[Callable[[Coroutine[Any, Any, Any]], Any], PostgresGraphDB, World]]:
    """A graph on its own event loop, for hypothesis's synchronous examples; its rows are removed afterwards."""
    loop = asyncio.new_event_loop()
    graph = PostgresGraphDB(
        database_url, settings=Settings(database_url=database_url, db_schema="memora"), embedder=HashEmbedder(384)
    )
    w = loop.run_until_complete(world(graph))
    yield loop.run_until_complete, graph, w
    loop.run_until_complete(graph.delete_organization(w.org_id))
    loop.run_until_complete(graph.close())
    loop.close()


def _typed(call: Callable[[], Any]) -> Any:
    """Run a call; only success or the package's own errors are acceptable."""
    try:
        return call()
    except MemoraPGError as error:
        return error


def test_names_are_stored_exactly_or_refused(run: Any) -> None:
    """Organization, user and agent names round-trip exactly, or are an InvalidInputError."""
    loop, graph, w = run

    @PROPERTY
    @given(name=texts)
    def check(name: str) -> None:
        result = _typed(lambda: loop(graph.create_user(w.org_id, name)))
        if isinstance(result, MemoraPGError):
            assert isinstance(result, InvalidInputError)
            assert "\x00" in name or name == ""
        else:
            assert loop(graph.get_user(w.org_id, result.user_id)).user_name == name

    check()


def test_interactions_are_stored_exactly_or_not_at_all(run: Any, database_url: str) -> None:
    """Any messages and memories: the interaction reads back exactly, or InvalidInputError and nothing written."""
    loop, graph, w = run

    async def count() -> int:
        engine = create_async_engine(database_url)
        try:
            async with engine.connect() as conn:
                return int(
                    await conn.scalar(
                        text("SELECT count(*) FROM memora.interactions WHERE org_id = :o"), {"o": w.org_id}
                    )
                    or 0
                )
        finally:
            await engine.dispose()

    @PROPERTY
    @given(
        contents=st.lists(texts, max_size=6),
        memories=st.lists(st.tuples(texts, st.lists(st.integers(-3, 8), max_size=3)), max_size=4),
    )
    def check(contents: list[str], memories: list[tuple[str, list[int]]]) -> None:
        before = loop(count())
        body = MemoriesAndInteraction(
            interaction=[{"role": "user", "content": c} for c in contents],
            memories=[MemoryToStore(memory=m, source_msg_block_pos=p) for m, p in memories],
        )
        result = _typed(lambda: loop(graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)))
        if isinstance(result, MemoraPGError):
            assert isinstance(result, InvalidInputError)
            assert loop(count()) == before
            return
        stored = loop(graph.get_interaction(w.org_id, w.user_id, result[0]))
        assert [m.content for m in stored.messages or []] == contents
        assert [m.memory for m in stored.memories or []] == [m for m, _ in memories]
        for memory, (_, positions) in zip(stored.memories or [], memories, strict=True):
            assert [s.msg_position for s in memory.message_sources or []] == sorted(set(positions))

    check()


def test_malformed_ids_are_not_found_or_invalid(run: Any) -> None:
    """Any id in any position gives NotFoundError, InvalidInputError, [] or None — never a driver error."""
    loop, graph, w = run
    calls = [
        lambda x: graph.get_organization(x),
        lambda x: graph.get_user(w.org_id, x),
        lambda x: graph.get_agent(x, w.agent_id),
        lambda x: graph.get_interaction(w.org_id, w.user_id, x),
        lambda x: graph.get_user_memory(w.org_id, w.user_id, x),
        lambda x: graph.get_user_memory_history(w.org_id, x, str(uuid.uuid4())),
        lambda x: graph.delete_user_memory(w.org_id, w.user_id, x),
        lambda x: graph.get_all_user_memories(w.org_id, w.user_id, agent_id=x),
        lambda x: graph.fetch_user_memories_resolved([{"org_id": w.org_id, "user_id": w.user_id, "memory_id": x}]),
    ]

    @PROPERTY
    @given(value=ids, which=st.integers(0, len(calls) - 1))
    def check(value: Any, which: int) -> None:
        result = _typed(lambda: loop(calls[which](value)))
        assert result is None or isinstance(result, list | NotFoundError | InvalidInputError), result

    check()


def test_paging_arguments(run: Any) -> None:
    """skip/limit: non-negative integers work, anything else is an InvalidInputError."""
    loop, graph, w = run

    @PROPERTY
    @given(skip=st.one_of(st.integers(-5, 5), st.text(max_size=2), st.none()), limit=st.integers(-5, 5))
    def check(skip: Any, limit: int) -> None:
        result = _typed(lambda: loop(graph.get_all_user_interactions(w.org_id, w.user_id, skip=skip, limit=limit)))
        valid = isinstance(skip, int) and skip >= 0 and limit >= 0
        assert isinstance(result, list) if valid else isinstance(result, InvalidInputError)

    check()


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=False, width=32), texts),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
operators = st.sampled_from(["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains", "regex"])
conditions = st.one_of(
    json_values,
    st.just("*"),
    st.dictionaries(operators, json_values, min_size=1, max_size=2),
)
filters = st.recursive(
    st.dictionaries(st.one_of(texts, st.sampled_from(["user_id", "agent_id", "run_id"])), conditions, max_size=3),
    lambda inner: st.dictionaries(st.sampled_from(["AND", "OR", "NOT"]), st.lists(inner, min_size=1, max_size=3)),
    max_leaves=6,
)


def test_any_filter_compiles_and_runs_or_is_refused(database_url: str) -> None:
    """Arbitrary filter dicts (operators, nesting, injection keys) either run in SQL or are DuragValidationError."""
    loop = asyncio.new_event_loop()
    memory = AsyncMemory.from_config(
        {
            "vector_store": {"provider": "pgvector", "config": {"connection_string": database_url}},
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        }
    )
    loop.run_until_complete(memory.add("seed memory", user_id="u", metadata={"k": 1, "s": "x"}, infer=False))

    @PROPERTY
    @given(where=filters)
    def check(where: dict[str, Any]) -> None:
        try:
            compile_filters(where)
        except DuragValidationError:
            return
        scoped = {"user_id": "u", "AND": [where]} if where else {"user_id": "u"}
        result = _typed(lambda: loop.run_until_complete(memory.get_all(filters=scoped)))
        assert isinstance(result, dict | DuragValidationError), result

    try:
        check()
    finally:
        loop.run_until_complete(memory.reset())
        loop.run_until_complete(memory.close())
        loop.close()


moments = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.datetimes(timezones=st.just(timezone.utc)),
    st.integers(),
    texts,
)
clocks = st.one_of(st.sampled_from(["valid", "system"]), texts)


def test_updates_are_stored_exactly_or_change_nothing(run: Any) -> None:
    """Any new messages and memories for an existing interaction: they read back exactly (the messages are the
    new list, the new memories are added with their sources), or InvalidInputError and the interaction is as it
    was."""
    loop, graph, w = run
    seed = MemoriesAndInteraction(interaction=[{"role": "user", "content": "seed"}])
    interaction_id, _ = loop(graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, seed))

    @PROPERTY
    @given(
        contents=st.lists(texts, max_size=5),
        memories=st.lists(st.tuples(texts, st.lists(st.integers(-3, 6), max_size=3)), max_size=3),
    )
    def check(contents: list[str], memories: list[tuple[str, list[int]]]) -> None:
        before = loop(graph.get_interaction(w.org_id, w.user_id, interaction_id))
        body = MemoriesAndInteraction(
            interaction=[{"role": "user", "content": c} for c in contents],
            memories=[MemoryToStore(memory=m, source_msg_block_pos=p) for m, p in memories],
        )
        result = _typed(
            lambda: loop(graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, body))
        )
        after = loop(graph.get_interaction(w.org_id, w.user_id, interaction_id))
        if isinstance(result, MemoraPGError):
            assert isinstance(result, InvalidInputError), result
            assert after == before
            return
        assert [m.content for m in after.messages or []] == contents
        old = {m.memory_id for m in before.memories or []}
        added = [m for m in after.memories or [] if m.memory_id not in old]
        assert [m.memory for m in added] == [m for m, _ in memories]
        for memory, (_, positions) in zip(added, memories, strict=True):
            assert [s.msg_position for s in memory.message_sources or []] == sorted(set(positions))

    check()


def test_searches_and_reads_through_time_take_any_query_and_moment(run: Any) -> None:
    """Any query text, as-of value and clock: search, listing, resolved fetch and history answer, or refuse
    with InvalidInputError (a value that is not a datetime, a clock that is not one) and never a driver error."""
    loop, graph, w = run
    body = MemoriesAndInteraction(
        interaction=[{"role": "user", "content": "I live in Paris"}],
        memories=[MemoryToStore(memory="lives in Paris", source_msg_block_pos=[0])],
    )
    loop(graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body))
    (memory,) = loop(graph.get_all_user_memories(w.org_id, w.user_id))
    vector = graph.get_associated_vector_db()
    assert isinstance(vector, PgVectorDB)
    ref = [{"org_id": w.org_id, "user_id": w.user_id, "memory_id": memory.memory_id}]

    @PROPERTY
    @given(query=texts, at=moments, clock=clocks, which=st.integers(0, 3))
    def check(query: str, at: Any, clock: Any, which: int) -> None:
        calls: list[Callable[[], Coroutine[Any, Any, Any]]] = [
            lambda: vector.search_memory(
                query, MemorySearchScope.USER, w.org_id, w.user_id, as_of=at, as_of_clock=clock
            ),
            lambda: graph.get_all_user_memories(w.org_id, w.user_id, as_of=at, as_of_clock=clock),
            lambda: graph.fetch_user_memories_resolved(ref, as_of=at, as_of_clock=clock),
            lambda: graph.get_user_memory_history(w.org_id, w.user_id, memory.memory_id, as_of=at, as_of_clock=clock),
        ]
        result = _typed(lambda: loop(calls[which]()))
        if isinstance(result, MemoraPGError):
            assert isinstance(result, InvalidInputError), result
            sensible_time = at is None or isinstance(at, datetime)
            # A search refuses an empty query and one holding NUL characters (PostgreSQL text cannot hold them).
            sensible_query = which != 0 or (query != "" and "\x00" not in query)
            assert not (sensible_time and clock in ("valid", "system") and sensible_query), result
        else:
            assert isinstance(result, list)

    check()
