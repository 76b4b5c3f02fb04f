"""The default search costs what its candidates cost, not what the user's rows cost (EXPLAIN ANALYZE).

One user holds 10,000 memories (interactions of 10), another 40 memories of no interaction. With the
HNSW index, the large user's search walks the index and reads the full-text vectors and embeddings
of a bounded number of rows; the small user's rows are sorted exactly. Both find the neighbours of
their candidates by key, and set the HNSW options inside the statement, for it alone.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import MemorySearchScope, PgVectorDB, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.graph import nearest, scoring, search
from memora_pg.mem0 import shapes
from tests.conftest import _create_database, _drop_database
from tests.integration.helpers import Explain, executed_nodes, seed_for_plans, with_vector_codec

DIMENSIONS = 32
LARGE = 10_000
SMALL = 40

SEED = """
INSERT INTO memora.organizations (org_id, org_name) VALUES ('org', 'Acme');
INSERT INTO memora.users (org_id, user_id, user_name) VALUES ('org', 'large', 'Large'), ('org', 'small', 'Small');
INSERT INTO memora.agents (org_id, agent_id, agent_label) VALUES ('org', 'agent', 'Agent');
INSERT INTO memora.interactions (org_id, interaction_id, user_id, agent_id, created_at, updated_at)
SELECT 'org', 'i' || g, 'large', 'agent', now(), now() FROM generate_series(0, {large} / 10 - 1) AS g;
INSERT INTO memora.memories
    (org_id, memory_id, user_id, agent_id, interaction_id, memory, obtained_at, embedding, search_text)
SELECT 'org', md5('large' || g)::uuid, 'large', 'agent', 'i' || (g / 10), words, now(),
       (SELECT array_agg(random() - 0.5 + 0 * d + 0 * g) FROM generate_series(1, {dims}) AS d)::vector,
       memora.to_search_text(words)
FROM generate_series(0, {large} - 1) AS g,
     LATERAL (SELECT 'the user talked about ' || (ARRAY['tea', 'chess', 'lisbon', 'music', 'cycling'])[g % 5 + 1]
                     || CASE WHEN g % 2000 = 7 THEN ' and a zeppelin' ELSE '' END
                     || CASE WHEN g % 20 = 3 THEN ' with a kite' ELSE '' END AS words) AS t;
INSERT INTO memora.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text)
SELECT 'org', md5('small' || g)::uuid, 'small', 'agent', 'a small note about tea number ' || g, now(),
       (SELECT array_agg(random() - 0.5 + 0 * d + 0 * g) FROM generate_series(1, {dims}) AS d)::vector,
       memora.to_search_text('a small note about tea number ' || g)
FROM generate_series(1, {small}) AS g;
ANALYZE memora.memories;
"""


async def _seed(url: str) -> None:
    await seed_for_plans(url, SEED.format(large=LARGE, small=SMALL, dims=DIMENSIONS), DIMENSIONS)


@pytest.fixture(scope="module")
def seeded_url(server_url: str) -> Iterator[str]:
    name = f"memora_cost_{uuid.uuid4().hex[:8]}"
    url = asyncio.run(_create_database(server_url, name))
    asyncio.run(_seed(url))
    yield url
    asyncio.run(_drop_database(server_url, name))


@pytest.fixture
async def seeded(seeded_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(seeded_url, pool_size=1, max_overflow=0)
    yield engine
    await engine.dispose()


def _searching(where: search.Where, query: str, *, scoped: bool = True, mode: str = "hybrid") -> Any:
    return search.statement(
        search.MEMORIES,
        schema="memora",
        where=where,
        vectors=[[0.1] * DIMENSIONS],
        texts=[query],
        k=10,
        scoped=scoped,
        mode=mode,
        settings=Settings(),
    )


def _statement(user: str, query: str, mode: str = "hybrid") -> Any:
    return _searching(search.memories_where("org", user_id=user), query, mode=mode)


async def _analyze(engine: AsyncEngine, statement: Any) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        await with_vector_codec(conn)
        scoped = await conn.execution_options(schema_translate_map={None: "memora"})
        plan = (await scoped.execute(Explain(statement.sql, analyze=True), statement.params)).scalar()
    return executed_nodes(json.dumps(plan))


def _memories_scans(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    scans = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")
    return [n for n in nodes if n["Node Type"] in scans and n.get("Relation Name") == "memories"]


@pytest.mark.parametrize("query", ["what did the user say about tea", "the zeppelin", "talked about chess and music"])
async def test_a_large_users_search_reads_a_bounded_number_of_rows(seeded: AsyncEngine, query: str) -> None:
    """10,000 memories of one user, HNSW present: the nearest come from the index, and no step reads more
    than the bounded counts (the scope's size, a common word's rows); in all, far fewer rows than the user's."""
    nodes = await _analyze(seeded, _statement("large", query))
    indexes = {n.get("Index Name") for n in nodes}
    assert "ix_memories_embedding_hnsw" in indexes
    # The exact sort of the user's rows (the branch for a small scope) never ran.
    assert not any(n["Node Type"] == "Sort" and n.get("Actual Rows", 0) * n["Actual Loops"] >= LARGE for n in nodes)
    scans = _memories_scans(nodes)
    read = [n["Actual Rows"] * n["Actual Loops"] for n in scans]
    assert max(read) <= nearest.EXACT_ROWS + 1
    assert sum(read) <= LARGE // 2, read
    # Beyond EXACT_ROWS, a word's rows are counted only as far as telling whether they are candidates.
    probes = [n for n in scans if n["Node Type"] == "Bitmap Heap Scan"]
    assert all(n["Actual Rows"] <= scoring.Weights().candidates + 1 for n in probes)
    # The neighbours of the candidates, each by one probe of the interaction's write order.
    assert "ix_memories_interaction_seq" in indexes


async def test_a_large_users_search_probes_no_word_the_tables_statistics_show_common(seeded: AsyncEngine) -> None:
    """Every memory of the large user says "talked", and a fifth of them "chess" or "music": ANALYZE's
    statistics show each held by far more of the user's rows than a rare word is, so the GIN index is
    never probed for them. "zeppelin" (5 rows) is probed, and its memories are found."""
    common = await _analyze(seeded, _statement("large", "talked about chess and music"))
    assert not [n for n in _memories_scans(common) if n["Node Type"] == "Bitmap Heap Scan"]
    rare = await _analyze(seeded, _statement("large", "the zeppelin"))
    probes = [n for n in _memories_scans(rare) if n["Node Type"] == "Bitmap Heap Scan"]
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in probes) == LARGE // 2000
    store = PgVectorDB(seeded, settings=Settings(db_schema="memora"), embedder=HashEmbedder(DIMENSIONS))
    try:
        hits = await store.search_memory("the zeppelin", MemorySearchScope.USER, "org", "large")
        assert sum("zeppelin" in memory.memory for memory, _ in hits) == LARGE // 2000
    finally:
        await store.close()


def _organization_statement(query: str) -> Any:
    return _searching(search.memories_where("org"), query, scoped=False)


async def test_an_organizations_search_probes_no_word_the_statistics_show_common_in_it(seeded: AsyncEngine) -> None:
    """ "kite" is in one memory of twenty: 500 of the organization's rows, more than a rare word may have,
    though few enough that a scope of the smallest large size would hold it rarely. The statistics size
    the organization's scope, so the word's posting list is never read. "zeppelin" (5 rows) is probed."""
    common = await _analyze(seeded, _organization_statement("a kite"))
    assert not [n for n in _memories_scans(common) if n["Node Type"] == "Bitmap Heap Scan"]
    rare = await _analyze(seeded, _organization_statement("a kite and a zeppelin"))
    probes = [n for n in _memories_scans(rare) if n["Node Type"] == "Bitmap Heap Scan"]
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in probes) == LARGE // 2000
    store = PgVectorDB(seeded, settings=Settings(db_schema="memora"), embedder=HashEmbedder(DIMENSIONS))
    try:
        hits = await store.search_memory("the zeppelin", MemorySearchScope.ORGANIZATION, "org")
        assert sum("zeppelin" in memory.memory for memory, _ in hits) == LARGE // 2000
    finally:
        await store.close()


def _mem0_statement(filters: dict[str, Any], query: str) -> Any:
    _, where = shapes.searched("org", "memora", filters, {}, None, "valid", False)
    return _searching(where, query)


async def test_a_mem0_style_search_of_a_user_sizes_its_scope_as_the_users(seeded: AsyncEngine) -> None:
    """The mem0-style search of filters that pin the user alone (its unexpired memories) skips the words the
    statistics show common among the user's rows, as the Memora face does: "kite", in 500 of them. A filter
    that may narrow the scope much further (here a metadata key) probes it: the word may be rare among the
    rows the filter keeps."""
    common = await _analyze(seeded, _mem0_statement({"user_id": "large"}, "a kite"))
    assert not [n for n in _memories_scans(common) if n["Node Type"] == "Bitmap Heap Scan"]
    narrowed = await _analyze(seeded, _mem0_statement({"user_id": "large", "topic": "t1"}, "a kite"))
    assert [n for n in _memories_scans(narrowed) if n["Node Type"] == "Bitmap Heap Scan"]


async def test_a_small_users_search_sorts_its_rows_and_probes_unattached_neighbours(seeded: AsyncEngine) -> None:
    """40 memories of no interaction: sorted exactly by the user's btree (the HNSW branch never runs),
    their neighbours found among the user's memories of no interaction by the partial index."""
    nodes = await _analyze(seeded, _statement("small", "a note about tea"))
    indexes = {n.get("Index Name") for n in nodes}
    assert "ix_memories_embedding_hnsw" not in indexes
    assert "ix_memories_unattached_seq" in indexes
    assert any((index or "").startswith("ix_memories_user_") for index in indexes)


@pytest.mark.parametrize("query", ["a note about tea", "what did they say about tea and chess"])
async def test_a_small_users_search_reads_its_own_rows_only(seeded: AsyncEngine, query: str) -> None:
    """40 memories of one user, in a table where another user's memories hold the same words ("tea" in 2,000
    of them): the query's words are counted among the small user's rows, never through the GIN index, whose
    posting list of a word holds every user's rows. No scan of the memories returns more rows than the
    small user has, so the search costs the same whatever the other users hold."""
    nodes = await _analyze(seeded, _statement("small", query))
    assert "ix_memories_search_text" not in {n.get("Index Name") for n in nodes}
    read = [n["Actual Rows"] * n["Actual Loops"] for n in _memories_scans(nodes)]
    assert max(read) <= SMALL, read


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
async def test_a_large_users_search_fills_its_hits_and_leaves_the_session_as_it_was(
    seeded: AsyncEngine, mode: str
) -> None:
    """The HNSW options are set inside the statement: the index scan returns every hit asked for (iterative
    scans, ef_search at least the candidates), and the pooled connection's own settings are untouched."""
    store = PgVectorDB(
        seeded, settings=Settings(db_schema="memora", search_mode=mode), embedder=HashEmbedder(DIMENSIONS)
    )
    try:
        hits = await store.search_memory("the user talked about tea", MemorySearchScope.USER, "org", "large")
        assert len(hits) == 10
        assert all(memory.user_id == "large" for memory, _ in hits)
        async with seeded.connect() as conn:
            settings = (
                await conn.execute(
                    text("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
                )
            ).one()
        assert tuple(settings) == ("40", "off")
    finally:
        await store.close()


async def test_a_search_statement_is_prepared_once_and_kept_on_its_connection(seeded_url: str) -> None:
    """A search's statement is longer than asyncpg keeps by default (15 KB): memora_pg's engine keeps it,
    so each call runs the connection's prepared statement, and PostgreSQL may keep one plan for it."""
    store = PgVectorDB(
        seeded_url, settings=Settings(db_schema="memora", pool_size=1), embedder=HashEmbedder(DIMENSIONS)
    )
    try:
        # A search of a user's memories with an agent, as of a time: one of the longest statements.
        at = datetime.now(timezone.utc)
        for query in ("tea", "chess", "lisbon", "music", "cycling", "zeppelin", "tea and chess"):
            await store.search_memory(query, MemorySearchScope.USER, "org", "small", "agent", as_of=at)
        engine = await store._db.engine()
        async with engine.connect() as conn:
            runs = (
                await conn.execute(
                    text(
                        "SELECT generic_plans + custom_plans, length(statement) FROM pg_prepared_statements"
                        " WHERE statement LIKE 'WITH queries%'"
                    )
                )
            ).all()
    finally:
        await store.close()
    # Every call ran a kept statement (the first of a statement runs through SQLAlchemy's own cache, the rest
    # through asyncpg's), none one prepared and planned for itself alone.
    assert sum(executions for executions, _ in runs) == 7
    assert max(length for _, length in runs) > 15 * 1024
