"""Row-level security on the cluster: a non-owner role with row_level_security on (as test_security.py does)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from langgraph.store.base import PutOp
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import MemorySearchScope, PostgresGraphDB, PostgresMemory, Settings
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import DatabaseError
from memora_pg.langgraph import AsyncMemoraStore
from memora_pg.mcp import tokens
from memora_pg.models import Agent, Organization, User
from tests.citus.helpers import (
    memory_ids,
    worlds,
)
from tests.integration.helpers import World, chat, payload

APP_ROLE = "memora_citus_app"


@pytest.fixture(scope="session")
def app_url(database_url: str) -> str:
    """A URL for a LOGIN role that owns nothing, with the grants an application gets (propagated to the workers)."""

    async def grant() -> None:
        engine = create_async_engine(database_url)
        try:
            async with engine.begin() as conn:
                if not await conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE}):
                    await conn.execute(text(f"CREATE ROLE {APP_ROLE} LOGIN"))
                await conn.execute(text(f"GRANT USAGE ON SCHEMA memora TO {APP_ROLE}"))
                await conn.execute(
                    text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA memora TO {APP_ROLE}")
                )
                await conn.execute(text(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA memora TO {APP_ROLE}"))
        finally:
            await engine.dispose()

    asyncio.run(grant())
    return make_url(database_url).set(username=APP_ROLE).render_as_string(hide_password=False)


@pytest.fixture
async def app_settings(app_url: str) -> Settings:
    return Settings(database_url=app_url, db_schema="memora", row_level_security=True)


@pytest.fixture(params=["branch", "linear"])
async def app(request: pytest.FixtureRequest, app_settings: Settings) -> AsyncIterator[PostgresGraphDB]:
    """The graph store as the restricted role, in each chain mode."""
    store = PostgresGraphDB(
        settings=app_settings.model_copy(update={"contradiction_chains": request.param}), embedder=HashEmbedder(384)
    )
    yield store
    await store.close()


@pytest.fixture
async def owned(graph: PostgresGraphDB) -> list[World]:
    """Organizations with a user and an agent, created by the owner."""
    return await worlds(graph)


async def test_rls_create_organization(app: PostgresGraphDB) -> None:
    """The restricted role creates an organization (the row lands on a worker under the policy)."""
    org = await app.create_organization("Under RLS")
    assert org.org_id


async def test_rls_gets(app: PostgresGraphDB, owned: list[World]) -> None:
    """get_organization, get_user and get_agent see the organization of the call."""
    for w in owned:
        assert (await app.get_organization(w.org_id)).org_id == w.org_id
        assert (await app.get_user(w.org_id, w.user_id)).user_id == w.user_id
        assert (await app.get_agent(w.org_id, w.agent_id)).agent_id == w.agent_id


async def test_rls_create_user_and_agent(app: PostgresGraphDB, owned: list[World]) -> None:
    """create_user and create_agent write under the policy of the call's organization."""
    for w in owned:
        await app.create_user(w.org_id, "Restricted")
        await app.create_agent(w.org_id, "Restricted")


async def test_rls_save(app: PostgresGraphDB, owned: list[World], engine: AsyncEngine) -> None:
    """A save as the restricted role writes the interaction and its memories."""
    for w in owned:
        interaction_id, _ = await app.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("secret", [0])])
        )
        assert len(await memory_ids(engine, w.org_id, interaction_id)) == 1


async def test_rls_listings_and_search(app: PostgresGraphDB, owned: list[World], graph: PostgresGraphDB) -> None:
    """Listings and a user search as the restricted role see the owner's rows of that organization."""
    for w in owned:
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("green tea", [0])])
        )
        assert [u.user_id for u in await app.get_all_org_users(w.org_id)] == [w.user_id]
        vector = app.get_associated_vector_db()
        assert vector is not None
        assert await vector.search_memory("green tea", MemorySearchScope.USER, w.org_id, w.user_id)


async def test_rls_autogen(app_settings: Settings, owned: list[World]) -> None:
    """PostgresMemory as the restricted role adds and lists entries."""
    for w in owned:
        memory = PostgresMemory("notes", settings=app_settings, embedder=HashEmbedder(384), org_id=w.org_id)
        try:
            await memory.add(MemoryContent(content="prefers tea", mime_type=MemoryMimeType.TEXT))
            assert len(await memory.list()) == 1
        finally:
            await memory.close()


async def test_rls_langgraph_store(app_settings: Settings, owned: list[World]) -> None:
    """MemoraStore as the restricted role writes through the distributed put function and reads back its own."""
    for w in owned:
        store = AsyncMemoraStore(settings=app_settings, embedder=HashEmbedder(384), org_id=w.org_id)
        try:
            await store.aput(("notes",), "tea", {"text": f"prefers tea {w.org_id}"})
            await store.aput(("notes",), "tea", {"text": f"prefers green tea {w.org_id}"})
            found = await store.asearch(("notes",), query="green tea")
            assert [item.value["text"] for item in found] == [f"prefers green tea {w.org_id}"]
        finally:
            await store.close()


async def test_rls_langgraph_store_with_an_organization_per_namespace(
    app_settings: Settings, owned: list[World]
) -> None:
    """One MemoraStore for every organization (org_from_namespace): a batch across them writes each on its
    worker, and each organization reads its own items only."""
    store = AsyncMemoraStore(settings=app_settings, embedder=HashEmbedder(384), org_from_namespace=True)
    try:
        await store.abatch([PutOp((w.org_id, "notes"), "tea", {"text": f"prefers tea {w.org_id}"}) for w in owned])
        for w in owned:
            found = await store.asearch((w.org_id,), query="tea")
            assert [item.value["text"] for item in found] == [f"prefers tea {w.org_id}"]
    finally:
        await store.close()


async def test_rls_isolation_with_set_local(app_url: str, owned: list[World]) -> None:
    """SET LOCAL memora.org_id (propagated with citus.propagate_set_commands = 'local') scopes the workers too."""
    engine = create_async_engine(app_url)
    try:
        a, b = owned[0], owned[1]
        async with engine.begin() as conn:
            await conn.execute(text("SET LOCAL citus.propagate_set_commands = 'local'"))
            await conn.execute(text(f"SET LOCAL memora.org_id = '{a.org_id}'"))
            assert await conn.scalar(text("SELECT count(*) FROM memora.users WHERE org_id = :o"), {"o": a.org_id}) == 1
            assert await conn.scalar(text("SELECT count(*) FROM memora.users WHERE org_id = :o"), {"o": b.org_id}) == 0
    finally:
        await engine.dispose()


async def test_mcp_tokens_on_the_cluster(database_url: str, app_url: str) -> None:
    """The MCP server's tokens: a reference table the application role reads under row-level security,
    and cannot write."""
    owner = Database(database_url, settings=Settings(database_url=database_url, db_schema="memora"))
    app = Database(app_url, settings=Settings(database_url=app_url, db_schema="memora", row_level_security=True))
    try:
        token, info = await tokens.mint(owner, org_id="citus-org", user_id="u")
        assert await tokens.bearer(app, token) == tokens.Bearer(info.token_id, "citus-org", "u")
        with pytest.raises(DatabaseError):
            await tokens.mint(app, org_id="citus-org")
        await tokens.revoke(owner, info.token_id)
        assert await tokens.bearer(app, token) is None
        async with (await owner.engine()).connect() as conn:
            method = await conn.scalar(
                text("SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = 'memora.access_tokens'::regclass")
            )
        assert method in ("n", b"n")  # a reference table ("char", which the driver may give as bytes)
    finally:
        async with (await owner.engine()).begin() as conn:
            await conn.execute(text("DELETE FROM memora.access_tokens"))
        await owner.close()
        await app.close()


async def cello_then_violin(
    app: PostgresGraphDB, engine: AsyncEngine, name: str
) -> tuple[Organization, User, Agent, str, str]:
    """The Memora agent's flow as the application role: it creates the organization, the user and the agent
    itself, saves a memory that names the user by placeholder (as memora-core writes it), then updates the
    interaction with a contradiction of it. The organization, user, agent, interaction id and the old memory's id."""
    org = await app.create_organization(name)
    user = await app.create_user(org.org_id, "Jake")
    agent = await app.create_agent(org.org_id, "Assistant")
    placeholder = f"user_{user.user_id}"
    cello = payload(chat("I play the cello"), [(f"{placeholder} plays the cello", [0])])
    interaction_id, _ = await app.save_interaction_with_memories(org.org_id, agent.agent_id, user.user_id, cello)
    (old_id,) = await memory_ids(engine, org.org_id, interaction_id)
    await app.update_interaction_and_memories(
        org.org_id,
        agent.agent_id,
        user.user_id,
        interaction_id,
        payload(
            chat("I play the cello", "I switched to the violin"),
            contrary=[(f"{placeholder} plays the violin now", [1], old_id)],
        ),
    )
    return org, user, agent, interaction_id, old_id


async def test_rls_the_roles_own_world_with_placeholders(app: PostgresGraphDB, engine: AsyncEngine) -> None:
    """The application role's whole flow as the Memora agent runs it: it creates the organization, the
    user and the agent itself, saves a memory that names the user by placeholder (as memora-core writes
    it), then updates the interaction with a contradiction, and reads everything back."""
    org, user, _, interaction_id, old_id = await cello_then_violin(app, engine, "Own world")
    placeholder = f"user_{user.user_id}"
    assert len(await memory_ids(engine, org.org_id, interaction_id)) == 2
    (newest,) = await app.fetch_user_memories_resolved(
        [{"org_id": org.org_id, "user_id": user.user_id, "memory_id": old_id}]
    )
    assert newest.memory == "Jake plays the violin now"
    vector = app.get_associated_vector_db()
    assert vector is not None
    hits = await vector.search_memory(
        f"{placeholder} plays the violin", MemorySearchScope.USER, org.org_id, user.user_id
    )
    assert any("violin" in memory.memory for memory, _ in hits)
    await app.delete_user(org.org_id, user.user_id)
    assert await memory_ids(engine, org.org_id, interaction_id) == []


@pytest.fixture
async def undelegated(database_url: str) -> AsyncIterator[None]:
    """Every worker without synced metadata, for the test's length: Citus then delegates no function call, and
    each write function runs its body on the coordinator (as on a cluster whose metadata was never synced)."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            ports = list(await conn.scalars(text("SELECT nodeport FROM pg_dist_node WHERE groupid <> 0")))
            for port in ports:
                await conn.execute(text(f"SELECT stop_metadata_sync_to_node('127.0.0.1', {port})"))
        yield
    finally:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for port in ports:
                await conn.execute(text(f"SELECT start_metadata_sync_to_node('127.0.0.1', {port})"))
        await engine.dispose()


async def test_rls_writes_when_no_call_is_delegated(
    undelegated: None, app: PostgresGraphDB, app_settings: Settings, engine: AsyncEngine
) -> None:
    """The application role's writes under row-level security, every face, when Citus runs the write functions
    on the coordinator: an ``INSERT ... SELECT`` there was a COPY into the shard, which PostgreSQL refuses under
    row-level security ("COPY FROM not supported with row-level security"); migration 0017's form is not."""
    from memora_pg.mem0 import AsyncMemory, MemoryConfig

    org, user, agent, interaction_id, _ = await cello_then_violin(app, engine, "Undelegated")
    assert len(await memory_ids(engine, org.org_id, interaction_id)) == 2
    vector = app.get_associated_vector_db()
    assert vector is not None
    standalone = str(uuid.uuid4())
    await vector.add_memories(org.org_id, user.user_id, agent.agent_id, [standalone], ["likes jazz"], "2026-12-06")
    assert await vector.search_memory("jazz", MemorySearchScope.USER, org.org_id, user.user_id)
    mem0 = AsyncMemory(MemoryConfig(), settings=app_settings, embedder=HashEmbedder(384))
    try:
        added = await mem0.add([{"role": "user", "content": "I like tea"}], user_id="mem0-user", infer=False)
        (event,) = added["results"]
        await mem0.update(event["id"], "likes green tea")
        assert [e["event"] for e in await mem0.history(event["id"])] == ["ADD", "UPDATE"]
    finally:
        await mem0.close()
    notes = PostgresMemory("notes", settings=app_settings, embedder=HashEmbedder(384), org_id=org.org_id)
    try:
        await notes.add(MemoryContent(content="prefers tea", mime_type=MemoryMimeType.TEXT))
        assert len(await notes.list()) == 1
    finally:
        await notes.close()
