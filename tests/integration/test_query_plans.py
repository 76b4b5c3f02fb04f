"""The intended index serves each search and listing, at a small and at a larger scale (EXPLAIN)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import Settings
from memora_pg.graph import memories, search, versions
from memora_pg.graph.search import nearest_statement, query_vectors
from memora_pg.mem0.filters import compile_filters
from memora_pg.schema import memories as memories_table
from memora_pg.statements import Statement
from tests.conftest import _create_database, _drop_database
from tests.integration.helpers import Explain, executed_nodes, plan_nodes, seed_for_plans, with_vector_codec

DIMENSIONS = 32
USERS = 100

SEED = """
INSERT INTO memora.organizations (org_id, org_name) VALUES ('org', 'Acme'), ('other', 'Other');
INSERT INTO memora.users (org_id, user_id, user_name)
SELECT org_id, 'u' || g, 'user ' || g FROM generate_series(1, {users}) AS g, (VALUES ('org'), ('other')) AS o(org_id);
INSERT INTO memora.memories
    (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text, metadata)
SELECT CASE WHEN g % 10 = 0 THEN 'other' ELSE 'org' END, md5('m' || g)::uuid, 'u' || (g % {users} + 1), 'agent',
       'memory number ' || g, now() - g * interval '1 minute',
       (SELECT array_agg(random() - 0.5 + 0 * d + 0 * g) FROM generate_series(1, {dims}) AS d)::vector,
       to_tsvector('simple', 'memory number ' || g),
       jsonb_build_object('category', CASE WHEN g % 100 = 1 THEN 'rare' ELSE 'common' END, 'n', g)
FROM generate_series(1, {rows}) AS g;
INSERT INTO memora.memory_updates (org_id, new_memory_id, old_memory_id)
SELECT 'org', md5('m' || g)::uuid, md5('m' || (g - {users}))::uuid
FROM generate_series({users} + 1, {rows}) AS g WHERE g % 10 <> 0 AND g % 3 = 0;
UPDATE memora.memories AS old
SET valid_until = new.obtained_at, superseded_at = new.stored_at
FROM memora.memory_updates AS edge JOIN memora.memories AS new
  ON new.org_id = edge.org_id AND new.memory_id = edge.new_memory_id
WHERE old.org_id = edge.org_id AND old.memory_id = edge.old_memory_id;
ANALYZE memora.memories;
ANALYZE memora.memory_updates;
"""


def _plan_text(plan: Any) -> str:
    return json.dumps(plan)


async def _explain_core(
    engine: AsyncEngine, statement: Any, params: dict[str, Any] | None = None, *, analyze: bool = False
) -> str:
    async with engine.connect() as conn:
        await with_vector_codec(conn)
        await conn.execute(text("SET hnsw.iterative_scan = relaxed_order"))
        scoped = await conn.execution_options(schema_translate_map={None: "memora"})
        return _plan_text((await scoped.execute(Explain(statement, analyze=analyze), params or {})).scalar())


def _ran(plan: str) -> set[str | None]:
    """The indexes the nodes that ran read (a branch gated off by the scope's size never runs)."""
    return {node.get("Index Name") for node in executed_nodes(plan)}


async def _explain(engine: AsyncEngine, statement: str, params: dict[str, Any]) -> str:
    async with engine.connect() as conn:
        await with_vector_codec(conn)
        await conn.execute(text("SET hnsw.iterative_scan = relaxed_order"))
        result = await conn.execute(text("EXPLAIN (FORMAT JSON) " + statement.replace("{schema}", '"memora"')), params)
        return _plan_text(result.scalar())


async def _seed(url: str, rows: int) -> None:
    await seed_for_plans(url, SEED.format(users=USERS, dims=DIMENSIONS, rows=rows), DIMENSIONS)


@pytest.fixture(scope="module", params=[500, 20_000], ids=["small", "large"])
def scale(request: pytest.FixtureRequest, server_url: str) -> Iterator[tuple[str, int]]:
    """A database seeded once per scale: 100 users, 90% of the rows in one organization."""
    name = f"memora_plans_{uuid.uuid4().hex[:8]}"
    url = asyncio.run(_create_database(server_url, name))
    asyncio.run(_seed(url, request.param))
    yield url, request.param
    asyncio.run(_drop_database(server_url, name))


@pytest.fixture
async def seeded(scale: tuple[str, int]) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(scale[0])
    yield engine
    await engine.dispose()


def _search(*, user: bool, mode: str) -> Statement:
    """The faces' search for one query, as search.find builds it."""
    return search.statement(
        search.MEMORIES,
        schema="memora",
        where=search.memories_where("org", user_id="u7" if user else None),
        vectors=[[0.1] * DIMENSIONS],
        texts=["memory number 7"],
        k=10,
        scoped=user,
        mode=mode,
        settings=Settings(),
    )


@pytest.mark.parametrize("mode", ["hybrid", "dense", "upstream"])
async def test_user_search_uses_the_user_btree_not_hnsw(seeded: AsyncEngine, mode: str) -> None:
    """A user of few rows: the search finds them by (org_id, user_id) and sorts them exactly; the
    branch for a large scope, by the HNSW index, never runs. Nor does the full-text GIN index: a word's
    posting list holds every user's rows, so a common word would cost more with every other user's
    memories; the terms are counted among the user's own rows."""
    statement = _search(user=True, mode=mode)
    plan = await _explain_core(seeded, statement.sql, statement.params, analyze=True)
    ran = _ran(plan)
    assert any((index or "").startswith("ix_memories_user_") for index in ran)
    assert "ix_memories_embedding_hnsw" not in ran
    assert "ix_memories_search_text" not in ran


@pytest.mark.parametrize("mode", ["hybrid", "dense", "upstream"])
async def test_organization_search_uses_hnsw_at_scale(seeded: AsyncEngine, scale: tuple[str, int], mode: str) -> None:
    """Organization-wide search walks the HNSW index at scale; a small table is sorted exactly, which is cheaper."""
    statement = _search(user=False, mode=mode)
    plan = await _explain_core(seeded, statement.sql, statement.params, analyze=True)
    uses_hnsw = "ix_memories_embedding_hnsw" in _ran(plan)
    assert uses_hnsw == (scale[1] >= 10_000)


async def test_user_memory_listing_uses_the_recency_index(seeded: AsyncEngine, scale: tuple[str, int]) -> None:
    """get_all_user_memories finds the user's rows by a (org_id, user_id, ...) btree; at scale it reads
    (org_id, user_id, obtained_at desc, seq desc) in order, without sorting."""
    listing = memories.LIST_FOR_USER
    plan = await _explain(seeded, listing, {"org_id": "org", "user_id": "u7", "skip": 0, "limit": 50})
    nodes = plan_nodes(plan)
    assert any((index or "").startswith("ix_memories_user_") for _, index, _ in nodes)
    assert ("Seq Scan", None, "memories") not in nodes
    if scale[1] >= 10_000:
        # The page is cut (Limit) straight off the index scan: no sort of the user's rows.
        assert _limit_reads_index(json.loads(plan)[0]["Plan"], "ix_memories_user_recent")


def _limit_reads_index(node: dict[str, Any], index: str) -> bool:
    children = node.get("Plans", [])
    if node["Node Type"] == "Limit" and children and children[0].get("Index Name") == index:
        return True
    return any(_limit_reads_index(child, index) for child in children)


async def test_metadata_filter_uses_the_gin_index(seeded: AsyncEngine, scale: tuple[str, int]) -> None:
    """A mem0 metadata filter keeping 1% of the rows is answered from the GIN index on metadata at scale."""
    where = compile_filters({"agent_id": "agent", "category": "rare"})
    statement = (
        select(memories_table.c.memory_id)
        .where(memories_table.c.org_id == "org", where)
        .order_by(memories_table.c.obtained_at.desc(), memories_table.c.seq.desc())
        .limit(20)
    )
    nodes = plan_nodes(await _explain_core(seeded, statement))
    if scale[1] >= 10_000:
        assert ("Bitmap Index Scan", "ix_memories_metadata", None) in nodes, nodes
    assert ("Seq Scan", None, "memories") not in nodes or scale[1] < 10_000


@pytest.mark.parametrize("queries", [1, 3])
async def test_filtered_vector_search_plans(seeded: AsyncEngine, scale: tuple[str, int], queries: int) -> None:
    """Pinned to a user: the user's rows sorted exactly. A selective metadata filter: its GIN index and an
    exact sort (full top-k, never starved). A broad filter at scale: the HNSW index. The same for one query
    (a plain select) and for several (a LATERAL join)."""
    params = query_vectors([[0.1 * (n + 1)] * DIMENSIONS for n in range(queries)])
    user_scoped_where = search.memories_where("org", also=compile_filters({"user_id": "u7", "category": "rare"}))
    user_scoped = nearest_statement(
        where=user_scoped_where.sql(),
        k=10,
        scoped=True,
        queries=queries,
    )
    ran = _ran(
        await _explain_core(seeded, user_scoped, {**params, **user_scoped_where.params, "ef": "40"}, analyze=True)
    )
    assert any((index or "").startswith("ix_memories_user_") for index in ran)
    assert "ix_memories_embedding_hnsw" not in ran
    selective_where = search.memories_where("org", also=compile_filters({"agent_id": "agent", "category": "rare"}))
    selective = nearest_statement(
        where=selective_where.sql(),
        k=10,
        scoped=False,
        queries=queries,
    )
    nodes = plan_nodes(await _explain_core(seeded, selective, {**params, **selective_where.params, "ef": "40"}))
    if scale[1] >= 10_000:
        assert ("Bitmap Index Scan", "ix_memories_metadata", None) in nodes
    broad_where = search.memories_where("org", also=compile_filters({"agent_id": "agent", "category": "common"}))
    broad = nearest_statement(
        where=broad_where.sql(),
        k=10,
        scoped=False,
        queries=queries,
    )
    nodes = plan_nodes(await _explain_core(seeded, broad, {**params, **broad_where.params, "ef": "40"}))
    if scale[1] >= 10_000:
        assert ("Index Scan", "ix_memories_embedding_hnsw", "memories") in nodes


# -- as-of reads (memory through time) -----------------------------------------------------------

AS_OF = datetime(2026, 6, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("clock", ["valid", "system"])
async def test_as_of_resolved_fetch_walks_the_keys(seeded: AsyncEngine, scale: tuple[str, int], clock: str) -> None:
    """An as-of resolved fetch of 100 memories walks the chains by their keys, both ways, at scale never a scan."""
    async with seeded.connect() as conn:
        ids = list(
            (
                await conn.execute(
                    text("SELECT memory_id FROM memora.memories WHERE org_id = 'org' AND user_id = 'u7' LIMIT 100")
                )
            ).scalars()
        )
    params = {
        "org_id": "org",
        "as_of": AS_OF,
        "batches": [0] * len(ids),
        "positions": list(range(len(ids))),
        "user_ids": ["u7"] * len(ids),
        "memory_ids": ids,
    }
    nodes = plan_nodes(await _explain(seeded, versions.resolve_statement(clock), params))
    if scale[1] >= 10_000:
        # (A table of 500 rows is read whole, which is cheaper.)
        assert ("Seq Scan", None, "memories") not in nodes
        assert ("Seq Scan", None, "memory_updates") not in nodes
        used = {index for _, index, _ in nodes}
        assert "pk_memories" in used
        assert {"pk_memory_updates", "ix_memory_updates_org_id_old_memory_id"} <= used


@pytest.mark.parametrize(("clock", "index"), [("valid", "ix_memories_user_recent"), ("system", "ix_memories_user_")])
async def test_as_of_listing_uses_a_user_index(
    seeded: AsyncEngine, scale: tuple[str, int], clock: str, index: str
) -> None:
    """get_all_user_memories as of a time reads the user's rows by a (org_id, user_id, ...) btree."""
    params = {"org_id": "org", "user_id": "u7", "skip": 0, "limit": 50, "as_of": AS_OF}
    nodes = plan_nodes(await _explain(seeded, memories.list_statement(False, clock), params))
    assert ("Seq Scan", None, "memories") not in nodes
    assert any((used or "").startswith(index) for _, used, _ in nodes)


@pytest.mark.parametrize(
    ("clock", "index"), [("valid", "ix_memories_user_recent"), ("system", "ix_memories_user_stored")]
)
async def test_memories_as_of_is_inlined_into_the_query(
    seeded: AsyncEngine, scale: tuple[str, int], clock: str, index: str
) -> None:
    """memories_as_of() is a SQL function PostgreSQL inlines: a report's condition on the user, and the
    clock's own range condition, reach the user's btree."""
    statement = (
        "SELECT memory_id FROM {schema}.memories_as_of(CAST(:at AS timestamptz), '" + clock + "')"
        " WHERE org_id = 'org' AND user_id = 'u7'"
    )
    nodes = plan_nodes(await _explain(seeded, statement, {"at": datetime(2000, 1, 1, tzinfo=timezone.utc)}))
    assert ("Seq Scan", None, "memories") not in nodes
    if scale[1] >= 10_000:
        assert any(used == index for _, used, _ in nodes), nodes


async def test_as_of_user_search_uses_the_user_btree(seeded: AsyncEngine, scale: tuple[str, int]) -> None:
    statement = search.statement(
        search.MEMORIES,
        schema="memora",
        where=search.memories_where("org", user_id="u7", as_of=AS_OF, schema="memora"),
        vectors=[[0.1] * DIMENSIONS],
        texts=["memory number 7"],
        k=10,
        scoped=True,
        mode="hybrid",
        settings=Settings(),
    )
    plan = await _explain_core(seeded, statement.sql, statement.params, analyze=True)
    ran = executed_nodes(plan)
    seq_scans = [n for n in ran if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "memories"]
    if scale[1] >= 10_000:
        # (Of a table of 500 rows, the planner may read the few hits' rows in one pass, which is cheaper.)
        assert not seq_scans, [(n.get("Filter"), n.get("Actual Rows"), n.get("Actual Loops")) for n in seq_scans]
    assert any((node.get("Index Name") or "").startswith("ix_memories_user_") for node in ran)
