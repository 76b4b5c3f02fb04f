"""PostgresGraphDB on a Citus cluster: every BaseGraphDB method, for several organizations at once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import NotFoundError, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from tests.citus.helpers import (
    memory_ids,
    ref,
    remember,
    worlds,
)
from tests.integration.helpers import chat, day, payload


@pytest.fixture(params=["branch", "linear"])
async def chained(
    request: pytest.FixtureRequest, engine: AsyncEngine, settings: Settings
) -> AsyncIterator[PostgresGraphDB]:
    """A graph store in each contradiction_chains mode."""
    store = PostgresGraphDB(
        engine,
        settings=settings.model_copy(update={"contradiction_chains": request.param}),
        embedder=HashEmbedder(384),
    )
    yield store
    await store.close()


# -- organizations, users, agents ------------------------------------------------------------------


async def test_organizations_crud(graph: PostgresGraphDB) -> None:
    """create, get, update, get_all and delete organizations route to each organization's shard."""
    orgs = [await graph.create_organization(f"Org {i}") for i in range(3)]
    for org in orgs:
        assert (await graph.get_organization(org.org_id)).org_name == org.org_name
        assert (await graph.update_organization(org.org_id, org.org_name + "!")).org_name == org.org_name + "!"
    assert {o.org_id for o in await graph.get_all_organizations()} >= {o.org_id for o in orgs}
    await graph.delete_organization(orgs[0].org_id)
    with pytest.raises(NotFoundError):
        await graph.get_organization(orgs[0].org_id)


async def test_erase_organization(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """erase_organization removes one organization with its memories and counts them; others stay."""
    a, b, _ = await worlds(graph)
    await remember(graph, engine, a, "a fact")
    await remember(graph, engine, b, "b fact")
    counts = await graph.erase_organization(a.org_id)
    assert counts
    with pytest.raises(NotFoundError):
        await graph.get_organization(a.org_id)
    assert await graph.get_organization(b.org_id)


async def test_users_crud(graph: PostgresGraphDB) -> None:
    """create, get, update, get_all_org_users and delete users in several organizations."""
    for w in await worlds(graph):
        assert (await graph.get_user(w.org_id, w.user_id)).user_id == w.user_id
        assert (await graph.update_user(w.org_id, w.user_id, "Renamed")).user_name == "Renamed"
        extra = await graph.create_user(w.org_id, "Extra")
        assert {u.user_id for u in await graph.get_all_org_users(w.org_id)} == {w.user_id, extra.user_id}
        await graph.delete_user(w.org_id, extra.user_id)
        with pytest.raises(NotFoundError):
            await graph.get_user(w.org_id, extra.user_id)


async def test_erase_user(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """erase_user removes a user with their interactions and memories and counts the rows."""
    for w in await worlds(graph):
        await remember(graph, engine, w, "to be erased")
        assert await graph.erase_user(w.org_id, w.user_id)
        with pytest.raises(NotFoundError):
            await graph.get_user(w.org_id, w.user_id)


async def test_agents_crud(graph: PostgresGraphDB) -> None:
    """create (org-wide and user-owned), get, update, both listings and delete agents."""
    for w in await worlds(graph):
        own = await graph.create_agent(w.org_id, "Own", user_id=w.user_id)
        assert (await graph.get_agent(w.org_id, own.agent_id)).user_id == w.user_id
        assert (await graph.update_agent(w.org_id, own.agent_id, "Renamed")).agent_label == "Renamed"
        assert {a.agent_id for a in await graph.get_all_org_agents(w.org_id)} == {w.agent_id, own.agent_id}
        assert [a.agent_id for a in await graph.get_all_user_agents(w.org_id, w.user_id)] == [own.agent_id]
        await graph.delete_agent(w.org_id, own.agent_id)
        with pytest.raises(NotFoundError):
            await graph.get_agent(w.org_id, own.agent_id)


async def test_setup_close_and_vector_db(engine: AsyncEngine, settings: Settings) -> None:
    """setup() on a migrated, distributed schema checks it and close() releases the store."""
    store = PostgresGraphDB(engine, settings=settings, embedder=HashEmbedder(384))
    await store.setup()
    assert store.get_associated_vector_db() is not None
    await store.close()


# -- saves and updates, in both chain modes --------------------------------------------------------


async def test_save_interaction_with_memories(chained: PostgresGraphDB, engine: AsyncEngine) -> None:
    """A save of an interaction with two memories, in each of several organizations."""
    for w in await worlds(chained):
        interaction_id, _ = await chained.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "hello"), [("likes tea", [0]), ("is polite", [0, 1])])
        )
        assert len(await memory_ids(engine, w.org_id, interaction_id)) == 2


async def test_save_with_a_contrary_memory(chained: PostgresGraphDB, engine: AsyncEngine) -> None:
    """A save whose memory contradicts an earlier one links the two (linear mode locks the chain first)."""
    for w in await worlds(chained):
        old = await remember(chained, engine, w, "lives in Paris", at=1)
        new = await remember(chained, engine, w, "moved to Berlin", supersedes=old, at=2)
        assert new != old


async def test_update_interaction_and_memories(chained: PostgresGraphDB, engine: AsyncEngine) -> None:
    """An update replaces the message list and adds a memory."""
    for w in await worlds(chained):
        interaction_id, _ = await chained.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("first", [0])])
        )
        await chained.update_interaction_and_memories(
            w.org_id, w.agent_id, w.user_id, interaction_id, payload(chat("hi", "more"), [("second", [1])], at=day(2))
        )
        assert len(await memory_ids(engine, w.org_id, interaction_id)) == 2


async def test_update_with_a_contrary_memory(chained: PostgresGraphDB, engine: AsyncEngine) -> None:
    """An update whose new memory contradicts one of the interaction's own memories."""
    for w in await worlds(chained):
        interaction_id, _ = await chained.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("in Paris", [0])])
        )
        (old,) = await memory_ids(engine, w.org_id, interaction_id)
        await chained.update_interaction_and_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            interaction_id,
            payload(chat("hi", "Berlin now"), contrary=[("in Berlin", [1], old)]),
        )


# -- interactions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("with_messages", "with_memories"), [(True, True), (True, False), (False, True), (False, False)]
)
async def test_get_interaction(graph: PostgresGraphDB, with_messages: bool, with_memories: bool) -> None:
    """get_interaction returns one interaction with or without its messages and memories."""
    for w in await worlds(graph):
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "yo"), [("fact", [0])])
        )
        got = await graph.get_interaction(w.org_id, w.user_id, interaction_id, with_messages, with_memories)
        assert got.interaction_id == interaction_id


async def test_get_all_user_interactions(graph: PostgresGraphDB) -> None:
    """get_all_user_interactions lists a user's interactions with their messages and memories."""
    for w in await worlds(graph):
        for n in (1, 2):
            await graph.save_interaction_with_memories(
                w.org_id, w.agent_id, w.user_id, payload(chat(f"hi {n}"), [(f"fact {n}", [0])], at=day(n))
            )
        assert len(await graph.get_all_user_interactions(w.org_id, w.user_id)) == 2


async def test_delete_user_interaction_and_its_memories(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Deleting one interaction removes its memories and leaves the other organizations' alone."""
    ws = await worlds(graph)
    saved = {}
    for w in ws:
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("fact", [0])])
        )
        saved[w.org_id] = interaction_id
    await graph.delete_user_interaction_and_its_memories(ws[0].org_id, ws[0].user_id, saved[ws[0].org_id])
    assert await memory_ids(engine, ws[0].org_id, saved[ws[0].org_id]) == []
    assert len(await memory_ids(engine, ws[1].org_id, saved[ws[1].org_id])) == 1


async def test_delete_all_user_interactions_and_their_memories(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Deleting all of a user's interactions empties that user only."""
    for w in await worlds(graph):
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("fact", [0])])
        )
        await graph.delete_all_user_interactions_and_their_memories(w.org_id, w.user_id)
        assert await memory_ids(engine, w.org_id, interaction_id) == []


# -- memories --------------------------------------------------------------------------------------


async def test_fetch_user_memories_resolved(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Resolution of one organization's memories follows the chain to the newest version."""
    for w in await worlds(graph):
        old = await remember(graph, engine, w, "lives in Paris", at=1)
        new = await remember(graph, engine, w, "moved to Rome", supersedes=old, at=2)
        assert [m.memory_id for m in await graph.fetch_user_memories_resolved([ref(w, old)])] == [new]


async def test_fetch_user_memories_resolved_across_organizations(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """One resolution call with entries of several organizations (upstream's agent does this)."""
    refs = [ref(w, await remember(graph, engine, w, "a fact")) for w in await worlds(graph)]
    assert len(await graph.fetch_user_memories_resolved(refs)) == len(refs)


async def test_fetch_user_memories_resolved_batch(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """The batch form resolves one list per query, each of another organization."""
    batches = [[ref(w, await remember(graph, engine, w, "a fact"))] for w in await worlds(graph)]
    assert [len(b) for b in await graph.fetch_user_memories_resolved_batch(batches)] == [1, 1, 1]


async def test_get_user_memory(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """get_user_memory returns one memory with its sources."""
    for w in await worlds(graph):
        memory_id = await remember(graph, engine, w, "a fact")
        assert (await graph.get_user_memory(w.org_id, w.user_id, memory_id)).memory_id == memory_id


async def test_get_user_memory_history(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """The history of a contradicted memory walks back to its first version."""
    for w in await worlds(graph):
        old = await remember(graph, engine, w, "lives in Paris", at=1)
        new = await remember(graph, engine, w, "moved to Rome", supersedes=old, at=2)
        history = await graph.get_user_memory_history(w.org_id, w.user_id, new)
        assert [m.memory_id for m in history] == [new, old]


@pytest.mark.parametrize("by_agent", [False, True])
async def test_get_all_user_memories(graph: PostgresGraphDB, engine: AsyncEngine, by_agent: bool) -> None:
    """get_all_user_memories lists a user's memories (of one agent or all)."""
    for w in await worlds(graph):
        await remember(graph, engine, w, "a fact")
        listed = await graph.get_all_user_memories(w.org_id, w.user_id, w.agent_id if by_agent else None)
        assert len(listed) == 1


async def test_delete_user_memory(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Deleting one memory (with a contrary link to it) in each organization."""
    for w in await worlds(graph):
        old = await remember(graph, engine, w, "lives in Paris", at=1)
        await remember(graph, engine, w, "moved to Rome", supersedes=old, at=2)
        await graph.delete_user_memory(w.org_id, w.user_id, old)


async def test_delete_all_user_memories(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """Deleting all of a user's memories."""
    for w in await worlds(graph):
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("fact", [0])])
        )
        await graph.delete_all_user_memories(w.org_id, w.user_id)
        assert await memory_ids(engine, w.org_id, interaction_id) == []
