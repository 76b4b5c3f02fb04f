"""memora_pg.langgraph: LangGraph's BaseStore on the session database, through the store's public API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timezone

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, ListNamespacesOp, PutOp, SearchOp
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg.config import Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import ConfigurationError, InvalidInputError
from memora_pg.langgraph import AsyncMemoraStore, MemoraStore
from memora_pg.statements import Statement
from tests.conftest import TEST_SCHEMA


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[AsyncMemoraStore]:
    async with AsyncMemoraStore(settings=settings, embedder=HashEmbedder(384)) as opened:
        yield opened


async def _rows(database_url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in await conn.execute(text(sql.format(schema=TEST_SCHEMA)))]
    finally:
        await engine.dispose()


async def test_put_get_and_delete_keep_each_version(store: AsyncMemoraStore, database_url: str) -> None:
    await store.aput(("users", "alice"), "food", {"likes": "pizza"})
    first = await store.aget(("users", "alice"), "food")
    assert first is not None
    assert first.value == {"likes": "pizza"}
    assert first.namespace == ("users", "alice")
    await asyncio.sleep(0.01)
    await store.aput(("users", "alice"), "food", {"likes": "sushi"})
    second = await store.aget(("users", "alice"), "food")
    assert second is not None
    assert second.value == {"likes": "sushi"}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    # the version it replaced is still there, as of its time
    then = await store.aget(("users", "alice"), "food", as_of=first.updated_at)
    assert then is not None
    assert then.value == {"likes": "pizza"}
    await store.adelete(("users", "alice"), "food")
    assert await store.aget(("users", "alice"), "food") is None
    assert await store.aget(("users", "alice"), "missing") is None
    versions = await _rows(database_url, "SELECT count(*), count(superseded_at) FROM {schema}.store_items")
    assert versions == [(2, 2)]


async def test_a_search_without_a_query_filters_and_orders_by_update(store: AsyncMemoraStore) -> None:
    for n in range(6):
        await store.aput(("docs", "a" if n % 2 else "b"), f"d{n}", {"n": n, "kind": "even" if n % 2 == 0 else "odd"})
    newest_first = await store.asearch(("docs",), limit=10)
    assert [item.key for item in newest_first] == [f"d{n}" for n in reversed(range(6))]
    assert all(item.score is None for item in newest_first)
    assert [i.key for i in await store.asearch(("docs", "a"))] == ["d5", "d3", "d1"]
    assert [i.key for i in await store.asearch(("docs",), filter={"kind": "even"})] == ["d4", "d2", "d0"]
    assert [i.key for i in await store.asearch(("docs",), filter={"n": {"$gt": 3}})] == ["d5", "d4"]
    assert [i.key for i in await store.asearch(("docs",), filter={"n": {"$gte": 1, "$lt": 3}})] == ["d2", "d1"]
    assert [i.key for i in await store.asearch(("docs",), filter={"n": {"$lte": 0}})] == ["d0"]
    assert [i.key for i in await store.asearch(("docs",), filter={"kind": {"$ne": "odd"}}, limit=2)] == ["d4", "d2"]
    # numbers compare as numbers (10 > 9), not as text
    await store.aput(("docs", "b"), "d10", {"n": 10})
    assert [i.key for i in await store.asearch(("docs",), filter={"n": {"$gt": 9}})] == ["d10"]
    assert [i.key for i in await store.asearch(("docs",), limit=2, offset=1)] == ["d5", "d4"]
    # a prefix is whole labels: ("doc",) is not a prefix of ("docs", ...)
    assert await store.asearch(("doc",)) == []


async def test_a_search_with_a_query_ranks_and_filters_in_one_statement(store: AsyncMemoraStore) -> None:
    facts = {
        "pets": "Alice has a golden retriever named Max",
        "city": "Alice moved to Lisbon in March",
        "job": "Alice works as a nurse at the city hospital",
        "food": "Alice is allergic to peanuts",
    }
    for key, fact in facts.items():
        await store.aput(("users", "alice"), key, {"text": fact, "topic": key})
    for n in range(30):
        await store.aput(("users", "bob"), f"note{n}", {"text": f"Bob wrote note number {n}", "topic": "notes"})
    found = await store.asearch(("users", "alice"), query="golden retriever named Max", limit=2)
    assert found[0].key == "pets"
    assert found[0].score is not None
    assert found[0].score > 0
    # the filter runs inside the search: a filtered search fills its limit wherever that many match
    notes = await store.asearch(("users",), query="Alice golden retriever", filter={"topic": "notes"}, limit=10)
    assert len(notes) == 10
    assert {item.namespace for item in notes} == {("users", "bob")}
    page = await store.asearch(("users",), query="Bob wrote note", limit=5, offset=5)
    assert len(page) == 5


async def test_list_namespaces_matches_prefix_suffix_wildcards_and_depth(store: AsyncMemoraStore) -> None:
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c")]:
        await store.aput(namespace, "k", {"v": 1})
    assert await store.alist_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c")]
    assert await store.alist_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert await store.alist_namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
    assert await store.alist_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]
    assert await store.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("x", "b")]
    assert await store.alist_namespaces(limit=1, offset=1) == [("a", "b", "d")]


async def test_a_batch_reads_the_store_as_it_was_and_the_last_write_wins(store: AsyncMemoraStore) -> None:
    await store.aput(("n",), "k", {"v": 0})
    results = await store.abatch(
        [
            PutOp(("n",), "k", {"v": 1}),
            GetOp(("n",), "k"),
            PutOp(("n",), "k", {"v": 2}),
            SearchOp(("n",), None, 10, 0),
            ListNamespacesOp(None, None, 100, 0),
        ]
    )
    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], Item)
    assert results[1].value == {"v": 0}
    assert [item.value for item in results[3]] == [{"v": 0}]  # type: ignore[union-attr]
    assert results[4] == [("n",)]
    current = await store.aget(("n",), "k")
    assert current is not None
    assert current.value == {"v": 2}


async def test_time_to_live_expires_refreshes_and_sweeps(settings: Settings, database_url: str) -> None:
    async with AsyncMemoraStore(
        settings=settings, embedder=HashEmbedder(384), ttl={"default_ttl": 0.01, "refresh_on_read": True}
    ) as store:
        await store.aput(("t",), "short", {"v": 1})
        await store.aput(("t",), "kept", {"v": 2}, ttl=None)
        assert await store.aget(("t",), "short") is not None
        await asyncio.sleep(0.9)
        assert await store.aget(("t",), "short") is None
        assert [item.key for item in await store.asearch(("t",))] == ["kept"]
        assert await store.sweep_ttl() == 1
    assert await _rows(database_url, "SELECT key FROM {schema}.store_items") == [("kept",)]


async def test_a_read_restarts_the_time_to_live(settings: Settings, database_url: str) -> None:
    async with AsyncMemoraStore(settings=settings, embedder=HashEmbedder(384), ttl={"default_ttl": 60}) as store:
        await store.aput(("t",), "k", {"v": 1})
        [(before,)] = await _rows(database_url, "SELECT expires_at FROM {schema}.store_items")
        await asyncio.sleep(0.05)
        await store.aget(("t",), "k", refresh_ttl=False)
        [(unchanged,)] = await _rows(database_url, "SELECT expires_at FROM {schema}.store_items")
        await store.aget(("t",), "k")
        [(after,)] = await _rows(database_url, "SELECT expires_at FROM {schema}.store_items")
    assert unchanged == before
    assert isinstance(after, datetime)
    assert isinstance(before, datetime)
    assert after > before


async def test_a_search_as_of_a_time_ranks_the_versions_current_then(store: AsyncMemoraStore) -> None:
    await store.aput(("u",), "home", {"text": "lives in Berlin"})
    between = datetime.now(timezone.utc)
    await asyncio.sleep(0.01)
    await store.aput(("u",), "home", {"text": "lives in Lisbon"})
    [now] = await store.asearch(("u",), query="where does the user live")
    [then] = await store.asearch(("u",), query="where does the user live", as_of=between)
    assert now.value == {"text": "lives in Lisbon"}
    assert then.value == {"text": "lives in Berlin"}


async def test_bad_input_is_refused_before_anything_is_written(store: AsyncMemoraStore, database_url: str) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await store.aput((), "k", {"v": 1})
    with pytest.raises(InvalidInputError):
        await store.aput(("a",), "k\x00", {"v": 1})
    with pytest.raises(InvalidInputError):
        await store.abatch([PutOp(("a",), "fine", {"v": 1}), PutOp(("a",), "bad", ["not", "a", "dict"])])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="operator"):
        await store.asearch(("a",), filter={"v": {"$regex": "x"}})
    with pytest.raises(InvalidInputError):
        await store.asearch(("a",), limit=-1)
    assert await _rows(database_url, "SELECT count(*) FROM {schema}.store_items") == [(0,)]


async def test_an_index_of_another_dimension_is_refused(settings: Settings) -> None:
    store = AsyncMemoraStore(settings=settings, index={"dims": 8, "embed": lambda texts: [[1.0] * 8 for _ in texts]})
    with pytest.raises(ConfigurationError, match="8"):
        await store.aput(("a",), "k", {"v": 1})
    await store.close()


async def test_an_index_config_embeds_the_fields_it_names(settings: Settings, database_url: str) -> None:
    hasher = HashEmbedder(384)
    seen: list[str] = []

    async def embed(texts: list[str]) -> list[list[float]]:
        seen.extend(texts)
        return await hasher.embed_documents(texts)

    index = {"dims": 384, "embed": embed, "fields": ["title", "tags[*]"]}
    async with AsyncMemoraStore(settings=settings, index=index) as store:
        await store.aput(("d",), "1", {"title": "Postgres", "tags": ["sql", "mvcc"], "body": "not embedded"})
        await store.aput(("d",), "2", {"title": "skipped"}, index=False)
        await store.aput(("d",), "3", {"title": "x", "body": "only the body"}, index=["body"])
    assert seen[:2] == ["Postgres\nsql\nmvcc", "only the body"]
    rows = await _rows(database_url, "SELECT key, embedding IS NOT NULL FROM {schema}.store_items ORDER BY key")
    assert rows == [("1", True), ("2", False), ("3", True)]


async def test_a_get_of_one_key_keeps_its_plan(settings: Settings) -> None:
    one_connection = settings.model_copy(update={"pool_size": 1, "max_overflow": 0})
    async with AsyncMemoraStore(settings=one_connection, embedder=HashEmbedder(384)) as store:
        await store.abatch([PutOp(("users", str(n % 4)), f"k{n}", {"n": n}) for n in range(40)])
        for n in range(12):
            found = await store.aget(("users", str(n % 4)), f"k{n}")
            assert found is not None
            assert found.value == {"n": n}
        assert await store.aget(("users", "0"), "k1") is None
        both = await store.abatch([GetOp(("users", "1"), "k1"), GetOp(("users", "2"), "k2")])
        assert [item.key if isinstance(item, Item) else None for item in both] == ["k1", "k2"]
        # the connection's prepared get: planned five times, then its generic plan kept
        [(generic, custom)] = await store.database.execute_one(
            Statement(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%AS asked_no%' AND statement NOT LIKE '%unnest%'"
            )
        )
    assert custom == 5
    assert generic == 8


@pytest.mark.parametrize("distance_type", ["inner_product", "l2"])
async def test_inner_product_and_l2_take_unit_length_vectors_only(
    settings: Settings, database_url: str, distance_type: str
) -> None:
    hasher = HashEmbedder(384)

    async def unit(texts: list[str]) -> list[list[float]]:
        return await hasher.embed_documents(texts)

    async def doubled(texts: list[str]) -> list[list[float]]:
        return [[2 * x for x in vector] for vector in await hasher.embed_documents(texts)]

    index = {"dims": 384, "embed": unit, "distance_type": distance_type, "fields": ["text"]}
    async with AsyncMemoraStore(settings=settings, index=index) as store:
        await store.aput(("d",), "pg", {"text": "postgres vacuum and mvcc"})
        await store.aput(("d",), "cat", {"text": "my cat sleeps all day"})
        best = (await store.asearch(("d",), query="postgres vacuum"))[0]
        assert best.key == "pg"
    index = {**index, "embed": doubled}
    async with AsyncMemoraStore(settings=settings, index=index) as store:
        with pytest.raises(ConfigurationError, match="unit-length"):
            await store.abatch([PutOp(("d",), "new", {"text": "a new item"}), PutOp(("d",), "pg", None)])
    # the refused batch wrote nothing: its delete did not happen either
    assert await _rows(database_url, "SELECT key FROM {schema}.store_items ORDER BY key") == [("cat",), ("pg",)]
    with pytest.raises(ConfigurationError, match="distance_type"):
        AsyncMemoraStore(settings=settings, index={**index, "distance_type": "hamming"})


async def test_two_organizations_are_isolated_under_row_level_security(rls_database: tuple[str, str]) -> None:
    _, app_url = rls_database
    settings = Settings(database_url=app_url, db_schema="memora", row_level_security=True)
    a = AsyncMemoraStore(settings=settings, embedder=HashEmbedder(384), org_id="org-a")
    b = AsyncMemoraStore(database=a.database, embedder=HashEmbedder(384), org_id="org-b")
    await a.aput(("users", "u"), "secret", {"text": "the launch code is 1234"})
    await b.aput(("users", "u"), "other", {"text": "b's own note"})
    assert await b.aget(("users", "u"), "secret") is None
    assert [item.key for item in await b.asearch(("users",), query="launch code")] == ["other"]
    assert await b.alist_namespaces() == [("users", "u")]
    assert [item.key for item in await a.asearch(("users",))] == ["secret"]
    await b.close()
    await a.close()


async def test_a_namespace_first_label_is_its_organization(rls_database: tuple[str, str]) -> None:
    owner_url, app_url = rls_database
    settings = Settings(database_url=app_url, db_schema="memora", row_level_security=True)
    tenants = AsyncMemoraStore(settings=settings, embedder=HashEmbedder(384), org_from_namespace=True)
    acme_only = AsyncMemoraStore(database=tenants.database, embedder=HashEmbedder(384), org_id="acme")
    # one batch, two organizations: one transaction each
    await tenants.abatch(
        [
            PutOp(("acme", "users", "u"), "plan", {"text": "acme's launch plan"}),
            PutOp(("globex", "users", "u"), "plan", {"text": "globex's launch plan"}),
            PutOp(("acme", "users", "v"), "note", {"text": "a note"}, ttl=0.001),
        ]
    )
    acme = await tenants.aget(("acme", "users", "u"), "plan")
    assert acme is not None
    assert acme.value == {"text": "acme's launch plan"}
    assert acme.namespace == ("acme", "users", "u")
    assert [item.value["text"] for item in await tenants.asearch(("globex",), query="launch plan")] == [
        "globex's launch plan"
    ]
    # a store of one organization sees that organization's items, and only them
    assert {item.key for item in await acme_only.asearch(("acme",))} == {"plan", "note"}
    assert await acme_only.aget(("globex", "users", "u"), "plan") is None
    assert await tenants.alist_namespaces(prefix=("globex",)) == [("globex", "users", "u")]
    # an operation that names no organization is refused before anything runs
    with pytest.raises(InvalidInputError, match="organization"):
        await tenants.asearch((), query="launch plan")
    with pytest.raises(InvalidInputError, match="organization"):
        await tenants.alist_namespaces()
    with pytest.raises(InvalidInputError, match="organization"):
        await tenants.abatch([PutOp(("acme", "x"), "k", {"v": 1}), SearchOp((), query="x")])
    assert await tenants.aget(("acme", "x"), "k") is None
    # the sweep visits each organization the store wrote
    await asyncio.sleep(0.1)
    assert await tenants.sweep_ttl() == 1
    with pytest.raises(InvalidInputError):
        AsyncMemoraStore(settings=settings, org_id="acme", org_from_namespace=True)
    await acme_only.close()
    await tenants.close()
    # as the owner sees them: each item in its organization, under its whole namespace
    rows = await _rows(owner_url, "SELECT org_id, namespace, key FROM {schema}.store_items ORDER BY 1, 2")
    assert rows == [("acme", "acme.users.u", "plan"), ("globex", "globex.users.u", "plan")]


def test_the_sync_store_from_a_connection_string(database_url: str) -> None:
    settings = Settings(db_schema=TEST_SCHEMA)
    with MemoraStore.from_conn_string(database_url, settings=settings, embedder=HashEmbedder(384)) as store:
        store.put(("s",), "k", {"text": "synchronous"})
        item = store.get(("s",), "k")
        assert item is not None
        assert item.value == {"text": "synchronous"}
        assert [found.key for found in store.search(("s",), query="synchronous")] == ["k"]
        assert store.list_namespaces() == [("s",)]
        store.delete(("s",), "k")
        assert store.get(("s",), "k") is None
