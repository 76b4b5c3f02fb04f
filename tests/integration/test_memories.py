"""Memories: version chains (§8), resolution, history, placeholders (§9.4), listings and deletes (§10)."""

from __future__ import annotations

import uuid

import pytest

from memora_pg import InvalidInputError, NotFoundError, PostgresGraphDB
from memora_pg.models import Memory
from tests.integration.helpers import World, chat, day, payload, world


async def _remember(
    graph: PostgresGraphDB, w: World, text: str, *, supersedes: str | None = None, at: int = 1
) -> Memory:
    """Save one memory in its own interaction (a contrary one when ``supersedes`` is given)."""
    if supersedes is None:
        body = payload(chat(text), [(text, [0])], at=day(at))
    else:
        body = payload(chat(text), contrary=[(text, [0], supersedes)], at=day(at))
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    interaction = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    return (interaction.memories or [])[0]


def _ids(memories: list[Memory]) -> list[str]:
    return [m.memory_id for m in memories]


def _ref(w: World, memory: Memory | str) -> dict[str, str]:
    memory_id = memory if isinstance(memory, str) else memory.memory_id
    return {"memory_id": memory_id, "user_id": w.user_id, "org_id": w.org_id}


@pytest.fixture
async def chain(graph: PostgresGraphDB) -> tuple[World, Memory, Memory, Memory]:
    """§8.4: M1 Paris (Jan 1) <- M2 Berlin (Jan 2) <- M3 Rome (Jan 3)."""
    w = await world(graph)
    m1 = await _remember(graph, w, "user_X lives in Paris", at=1)
    m2 = await _remember(graph, w, "user_X moved to Berlin", supersedes=m1.memory_id, at=2)
    m3 = await _remember(graph, w, "user_X moved to Rome", supersedes=m2.memory_id, at=3)
    return w, m1, m2, m3


async def test_resolution_follows_the_chain_to_the_newest(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """Any version resolves to M3; several inputs resolving to it give it once (scenario 11)."""
    w, m1, m2, m3 = chain
    for start in (m1, m2, m3):
        assert _ids(await graph.fetch_user_memories_resolved([_ref(w, start)])) == [m3.memory_id]
    resolved = await graph.fetch_user_memories_resolved([_ref(w, m1), _ref(w, m3), _ref(w, m2)])
    assert _ids(resolved) == [m3.memory_id]
    assert resolved[0].memory == "Jake moved to Rome"
    assert [s.content for s in resolved[0].message_sources or []] == ["user_X moved to Rome"]


async def test_history_walks_backwards_only(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """History of M3 is [M3, M2, M1]; of M2 [M2, M1]; of M1 [M1]; of a missing id []."""
    w, m1, m2, m3 = chain
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m3.memory_id)) == _ids([m3, m2, m1])
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m2.memory_id)) == _ids([m2, m1])
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m1.memory_id)) == _ids([m1])
    assert await graph.get_user_memory_history(w.org_id, w.user_id, str(uuid.uuid4())) == []
    assert await graph.get_user_memory_history(w.org_id, w.user_id, "not-a-uuid") == []


async def test_listing_and_single_get_do_not_resolve(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """get_all_user_memories lists every version newest first; get_user_memory returns that version."""
    w, m1, m2, m3 = chain
    assert _ids(await graph.get_all_user_memories(w.org_id, w.user_id)) == _ids([m3, m2, m1])
    assert (await graph.get_user_memory(w.org_id, w.user_id, m1.memory_id)).memory == "Jake lives in Paris"


async def test_branches_resolve_to_every_newest_version(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """M4 also contradicts M1: fetch(M1) gives [M4, M3] (newest first), fetch(M2) [M3], history(M4) [M4, M1]."""
    w, m1, m2, m3 = chain
    m4 = await _remember(graph, w, "user_X moved to Oslo", supersedes=m1.memory_id, at=4)
    assert _ids(await graph.fetch_user_memories_resolved([_ref(w, m1)])) == _ids([m4, m3])
    assert _ids(await graph.fetch_user_memories_resolved([_ref(w, m2)])) == _ids([m3])
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m4.memory_id)) == _ids([m4, m1])


async def test_unknown_contrary_targets_store_the_memory_unlinked(graph: PostgresGraphDB) -> None:
    """A random UUID, a malformed id or another user's memory: stored, no link, no error (scenario 12)."""
    w = await world(graph)
    stranger = await world(graph)
    foreign = await _remember(graph, stranger, "their fact")
    for target in (str(uuid.uuid4()), "garbage", foreign.memory_id):
        memory = await _remember(graph, w, f"about {target}", supersedes=target)
        assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, memory.memory_id)) == [memory.memory_id]
    assert _ids(await graph.fetch_user_memories_resolved([_ref(stranger, foreign)])) == [foreign.memory_id]


async def test_batch_keeps_one_list_per_input(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """[[a], [], [missing]] gives [[A], [], []]; duplicates are collapsed per list only (scenario 13)."""
    w, m1, _m2, m3 = chain
    result = await graph.fetch_user_memories_resolved_batch(
        [[_ref(w, m1)], [], [_ref(w, str(uuid.uuid4()))], [_ref(w, m3), _ref(w, m1)], [{"memory_id": "x"}, {}]]
    )
    assert [_ids(r) for r in result] == [[m3.memory_id], [], [], [m3.memory_id], []]
    assert await graph.fetch_user_memories_resolved_batch([]) == []
    assert await graph.fetch_user_memories_resolved([]) == []


async def test_fetch_keeps_request_order(graph: PostgresGraphDB) -> None:
    """Results follow the order of the first request that reached each memory."""
    w = await world(graph)
    memories = [await _remember(graph, w, f"fact {i}") for i in range(5)]
    order = [memories[3], memories[0], memories[4], memories[0], memories[1]]
    resolved = await graph.fetch_user_memories_resolved([_ref(w, m) for m in order])
    assert _ids(resolved) == _ids([memories[3], memories[0], memories[4], memories[1]])


async def test_fetch_is_scoped_by_org_and_user(graph: PostgresGraphDB) -> None:
    """An id presented with another user's or organization's keys is skipped."""
    w = await world(graph)
    stranger = await world(graph)
    memory = await _remember(graph, w, "private")
    wrong_user = {"memory_id": memory.memory_id, "user_id": stranger.user_id, "org_id": w.org_id}
    wrong_org = {"memory_id": memory.memory_id, "user_id": w.user_id, "org_id": stranger.org_id}
    assert await graph.fetch_user_memories_resolved([wrong_user, wrong_org]) == []


async def test_placeholders_follow_renames_and_survive_deleted_agents(graph: PostgresGraphDB) -> None:
    """Renames show on the next read; a deleted agent leaves its token and the memory stays (scenarios 14, 15)."""
    w = await world(graph)
    text = f"agent_{w.agent_id} reminded user_{w.user_id}'s wife, not superuser_{w.user_id}"
    memory = await _remember(graph, w, text)
    assert memory.memory == f"Jenny reminded Jake's wife, not superuser_{w.user_id}"
    await graph.update_user(w.org_id, w.user_id, "Jacob")
    await graph.update_agent(w.org_id, w.agent_id, "Jen")
    assert (await graph.get_user_memory(w.org_id, w.user_id, memory.memory_id)).memory.startswith(
        "Jen reminded Jacob's"
    )
    await graph.delete_agent(w.org_id, w.agent_id)
    expected = f"agent_{w.agent_id} reminded Jacob's wife, not superuser_{w.user_id}"
    assert (await graph.get_user_memory(w.org_id, w.user_id, memory.memory_id)).memory == expected
    assert [m.memory for m in await graph.fetch_user_memories_resolved([_ref(w, memory)])] == [expected]
    assert [m.memory for m in await graph.get_all_user_memories(w.org_id, w.user_id)] == [expected]
    (interaction,) = await graph.get_all_user_interactions(w.org_id, w.user_id)
    assert [m.memory for m in interaction.memories or []] == [expected]


async def test_get_all_user_memories_agent_filter_and_paging(graph: PostgresGraphDB) -> None:
    """The agent filter uses the memory's own agent; ties on obtained_at break by newest written first."""
    w = await world(graph)
    other = await graph.create_agent(w.org_id, "Other")
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("a", "b"), [("first", [0]), ("second", [1])], at=day(1))
    )
    await graph.update_interaction_and_memories(
        w.org_id, other.agent_id, w.user_id, interaction_id, payload(chat("a", "b"), [("third", [1])], at=day(1))
    )
    listed = [m.memory for m in await graph.get_all_user_memories(w.org_id, w.user_id)]
    assert listed == ["third", "second", "first"]
    by_agent = await graph.get_all_user_memories(w.org_id, w.user_id, agent_id=other.agent_id)
    assert [m.memory for m in by_agent] == ["third"]
    pages = [
        m.memory
        for skip in (0, 1, 2)
        for m in await graph.get_all_user_memories(w.org_id, w.user_id, skip=skip, limit=1)
    ]
    assert pages == listed
    with pytest.raises(ValueError, match=r"`agent_id` must be a string."):
        await graph.get_all_user_memories(w.org_id, w.user_id, agent_id=5)  # type: ignore[arg-type]  # not a str, on purpose
    with pytest.raises(InvalidInputError):
        await graph.get_all_user_memories(w.org_id, w.user_id, skip=-1)
    assert await graph.get_all_user_memories(w.org_id, "ghost") == []


async def test_get_user_memory_without_sources_and_missing(graph: PostgresGraphDB) -> None:
    """A memory whose sources were truncated is still returned; missing or malformed ids are not found."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("a", "b"), [("m", [1])])
    )
    await graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, interaction_id, payload(chat("a")))
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    assert (await graph.get_user_memory(w.org_id, w.user_id, memory.memory_id)).message_sources == []
    message = r"^Memory \(`org_id`, `user_id`, `memory_id`\) does not exist\.$"
    for missing in (str(uuid.uuid4()), "not-a-uuid", memory.memory_id.upper()[:-1] + "Z"):
        with pytest.raises(NotFoundError, match=message):
            await graph.get_user_memory(w.org_id, w.user_id, missing)
    with pytest.raises(NotFoundError):
        await graph.get_user_memory(w.org_id, "someone-else", memory.memory_id)
    upper = await graph.get_user_memory(w.org_id, w.user_id, memory.memory_id.upper())
    assert upper.memory_id == memory.memory_id


async def test_deleting_a_middle_version_repairs_the_chain(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """After deleting M2, fetch(M1) gives M3 and history(M3) is [M3, M1] (scenario 17, §15.4)."""
    w, m1, m2, m3 = chain
    await graph.delete_user_memory(w.org_id, w.user_id, m2.memory_id)
    assert _ids(await graph.fetch_user_memories_resolved([_ref(w, m1)])) == [m3.memory_id]
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m3.memory_id)) == _ids([m3, m1])


async def test_deleting_the_newest_version_makes_the_previous_current(
    graph: PostgresGraphDB, chain: tuple[World, Memory, Memory, Memory]
) -> None:
    """Deleting M3 leaves M1 -> M2, so M2 is current again."""
    w, m1, m2, m3 = chain
    await graph.delete_user_memory(w.org_id, w.user_id, m3.memory_id)
    assert _ids(await graph.fetch_user_memories_resolved([_ref(w, m1)])) == [m2.memory_id]


async def test_deleting_interactions_repairs_chains_across_several_versions(graph: PostgresGraphDB) -> None:
    """M2 and M3 made in one interaction, deleted together: M4 is re-attached to M1."""
    w = await world(graph)
    m1 = await _remember(graph, w, "v1", at=1)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("x"), contrary=[("v2", [0], m1.memory_id)], at=day(2))
    )
    (m2,) = (await graph.get_interaction(w.org_id, w.user_id, interaction_id)).memories or []
    await graph.update_interaction_and_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        interaction_id,
        payload(chat("x"), contrary=[("v3", [0], m2.memory_id)], at=day(3)),
    )
    m3 = (await graph.fetch_user_memories_resolved([_ref(w, m1)]))[0]
    m4 = await _remember(graph, w, "v4", supersedes=m3.memory_id, at=4)
    await graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, interaction_id)
    assert _ids(await graph.fetch_user_memories_resolved([_ref(w, m1)])) == [m4.memory_id]
    assert _ids(await graph.get_user_memory_history(w.org_id, w.user_id, m4.memory_id)) == _ids([m4, m1])


async def test_delete_user_memory_is_scoped_and_silent(graph: PostgresGraphDB) -> None:
    """Another user's keys delete nothing; missing and malformed ids are silent no-ops."""
    w = await world(graph)
    stranger = await world(graph)
    memory = await _remember(graph, w, "keep me")
    await graph.delete_user_memory(stranger.org_id, stranger.user_id, memory.memory_id)
    await graph.delete_user_memory(w.org_id, stranger.user_id, memory.memory_id)
    await graph.delete_user_memory(w.org_id, w.user_id, str(uuid.uuid4()))
    await graph.delete_user_memory(w.org_id, w.user_id, "malformed")
    assert _ids(await graph.get_all_user_memories(w.org_id, w.user_id)) == [memory.memory_id]


async def test_delete_all_user_memories_keeps_interactions(graph: PostgresGraphDB) -> None:
    """Interactions and messages remain; their memories lists become empty."""
    w = await world(graph)
    await _remember(graph, w, "a")
    await _remember(graph, w, "b")
    await graph.delete_all_user_memories(w.org_id, w.user_id)
    assert await graph.get_all_user_memories(w.org_id, w.user_id) == []
    interactions = await graph.get_all_user_interactions(w.org_id, w.user_id)
    assert len(interactions) == 2
    assert all(i.memories == [] and i.messages for i in interactions)
    await graph.delete_all_user_memories(w.org_id, "ghost")


@pytest.mark.parametrize(
    ("call", "args", "message"),
    [
        ("get_user_memory", ("o", "u", ""), "`org_id`, `user_id` and `memory_id` must be strings and have a value."),
        (
            "get_user_memory_history",
            ("o", None, "m"),
            "`org_id`, `user_id` and `memory_id` must be strings and have a value.",
        ),
        ("delete_user_memory", ("", "u", "m"), "`org_id`, `user_id` and `memory_id` must be strings and have a value."),
        ("get_all_user_memories", ("o", ""), "`org_id` and `user_id` must be strings and have a value."),
        ("delete_all_user_memories", ("o", 1), "`org_id` and `user_id` must be strings and have a value."),
        (
            "get_interaction",
            ("o", "u", ""),
            "`org_id`, `user_id` and `interaction_id` must be strings and have a value.",
        ),
        (
            "delete_user_interaction_and_its_memories",
            ("o", "", "i"),
            "`org_id`, `user_id` and `interaction_id` must be strings and have a value.",
        ),
        (
            "save_interaction_with_memories",
            ("o", "", "u", None),
            "`org_id`, `user_id` and `agent_id` must be strings and have a value.",
        ),
        (
            "update_interaction_and_memories",
            ("o", "a", "u", "", None),
            "`org_id`, `user_id` and `interaction_id` must be strings and have a value.",
        ),
    ],
)
async def test_memory_method_validation(
    graph: PostgresGraphDB, call: str, args: tuple[object, ...], message: str
) -> None:
    """Upstream's messages, as ValueError."""
    with pytest.raises(ValueError) as caught:  # noqa: PT011
        await getattr(graph, call)(*args)
    assert str(caught.value) == message
