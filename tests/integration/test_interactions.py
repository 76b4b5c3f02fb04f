"""Interactions and their messages: save, the update algorithm of §7, reads, ordering and deletes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import InvalidInputError, MemoriesAndInteraction, NotFoundError, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from tests.integration.helpers import chat, day, payload, world

SHORT_ID_LENGTH = 22


async def test_save_returns_id_and_aware_utc_date(graph: PostgresGraphDB) -> None:
    """A naive interaction_date is taken as UTC; created_at == updated_at == the date (scenario 6)."""
    w = await world(graph)
    naive = datetime(2026, 3, 4, 5, 6, 7, 890123)
    interaction_id, when = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, memories_and_interaction=payload(chat("hi", "hello"), at=naive)
    )
    assert len(interaction_id) == SHORT_ID_LENGTH
    assert when == naive.replace(tzinfo=timezone.utc)
    assert when.tzinfo is not None
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert found.created_at == found.updated_at == when
    assert found.agent_id == w.agent_id


async def test_aware_dates_keep_their_instant(graph: PostgresGraphDB) -> None:
    """An aware date in another offset is stored as the same instant and returned in UTC."""
    w = await world(graph)
    local = datetime(2026, 3, 4, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    _, when = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("user_X likes tea", [0])], at=local)
    )
    assert when == local
    assert when.utcoffset() == timedelta(0)
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    assert memory.obtained_at == local


async def test_saved_messages_and_memories_read_back(graph: PostgresGraphDB) -> None:
    """Messages come in position order; memories carry their source messages (scenario 7)."""
    w = await world(graph)
    messages = chat("hi", "hello", "I like tea", "noted")
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        payload(messages, [(f"user_{w.user_id} likes tea", [2, 2, 3]), ("greets politely", [])]),
    )
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert [(m.msg_position, m.role, m.content) for m in found.messages or []] == [
        (i, m["role"], m["content"]) for i, m in enumerate(messages)
    ]
    first, second = found.memories or []
    assert first.memory == "Jake likes tea"
    assert [s.msg_position for s in first.message_sources or []] == [2, 3]
    assert (first.message_sources or [])[0].content == "I like tea"
    assert second.message_sources == []
    assert first.interaction_id == interaction_id
    uuid.UUID(first.memory_id, version=4)
    assert first.memory_id == first.memory_id.lower()


async def test_flags_give_empty_lists(graph: PostgresGraphDB) -> None:
    """with_messages/with_memories False give [] (not None), as upstream."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("m", [0])])
    )
    bare = await graph.get_interaction(w.org_id, w.user_id, interaction_id, with_messages=False, with_memories=False)
    assert bare.messages == []
    assert bare.memories == []


@pytest.mark.parametrize("chains", ["branch", "linear"])
async def test_save_for_missing_user_or_agent_writes_nothing(
    engine: AsyncEngine, settings: Settings, chains: str
) -> None:
    """A missing user or agent is NotFoundError and nothing is written (scenario 18), whether the save is
    one call (branch chains) or a call followed by the links (linear chains)."""
    graph = PostgresGraphDB(
        engine, settings=settings.model_copy(update={"contradiction_chains": chains}), embedder=HashEmbedder(384)
    )
    w = await world(graph)
    with pytest.raises(NotFoundError, match=r"^User \(`org_id`, `user_id`\) does not exist\.$"):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, "ghost", payload(chat("hi"), [("m", [0])]))
    with pytest.raises(NotFoundError, match=r"^Agent \(`org_id`, `agent_id`\) does not exist\.$"):
        await graph.save_interaction_with_memories(w.org_id, "ghost", w.user_id, payload(chat("hi"), [("m", [0])]))
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []
    assert await graph.get_all_user_memories(w.org_id, w.user_id) == []
    async with engine.connect() as conn:
        written = await conn.scalar(
            text("SELECT count(*) FROM memora.interactions WHERE org_id = :org_id"), {"org_id": w.org_id}
        )
    assert written == 0
    await graph.close()


@pytest.mark.parametrize("position", [-1, 2, 99])
async def test_source_positions_outside_the_interaction_are_refused(graph: PostgresGraphDB, position: int) -> None:
    """A source position < 0 or >= len(messages) is a ValueError and nothing is written (scenario 19)."""
    w = await world(graph)
    with pytest.raises(ValueError, match="outside"):
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("a", "b"), [("ok", [0]), ("bad", [position])])
        )
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []


async def test_empty_message_list_still_creates_the_interaction(graph: PostgresGraphDB) -> None:
    """With no messages the interaction is created and memories without sources are stored."""
    w = await world(graph)
    interaction_id, when = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload([], [("a fact", [])])
    )
    assert isinstance(when, datetime)
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert found.messages == []
    assert [m.memory for m in found.memories or []] == ["a fact"]
    with pytest.raises(InvalidInputError):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload([], [("x", [0])]))


async def test_upstream_payload_objects_and_dicts_are_accepted(graph: PostgresGraphDB) -> None:
    """Any object with the model's attributes (upstream's class) or a dict works; bad shapes are typed errors."""

    class Upstream:
        interaction = chat("hi")
        interaction_date = day(2)
        memories: list[object] = []  # noqa: RUF012
        contrary_memories: list[object] = []  # noqa: RUF012

    w = await world(graph)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, Upstream())  # type: ignore[arg-type]  # duck-typed
    await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        {"interaction": chat("yo"), "interaction_date": day(3)},  # type: ignore[arg-type]  # a dict, as upstream allows
    )
    assert len(await graph.get_all_user_interactions(w.org_id, w.user_id)) == 2
    with pytest.raises(InvalidInputError):
        await graph.save_interaction_with_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            {"interaction": [{"role": None}]},  # type: ignore[arg-type]  # a bad shape, on purpose
        )


async def test_nul_bytes_in_messages_are_refused(graph: PostgresGraphDB) -> None:
    """NUL characters cannot be stored: typed error, nothing written."""
    w = await world(graph)
    with pytest.raises(InvalidInputError, match="NUL"):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a\x00b")))
    with pytest.raises(InvalidInputError, match="NUL"):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m\x00", [])]))
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []


async def test_oversized_inputs_are_refused(graph: PostgresGraphDB) -> None:
    """Texts and batches over the documented limits are refused before any write."""
    w = await world(graph)
    with pytest.raises(InvalidInputError, match="limited"):
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("x" * 100_001, [])])
        )
    with pytest.raises(InvalidInputError, match="At most"):
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [])] * 1001)
        )


STORED = chat("hi", "hello", "I like tea", "noted")


@pytest.mark.parametrize(
    ("new", "m1_sources", "m0_sources"),
    [
        ([*STORED, {"role": "user", "content": "also coffee"}], [2], [0]),
        ([*STORED[:2], {"role": "user", "content": "I like coffee"}], [], [0]),
        (STORED[:2], [], [0]),
        ([], [], []),
        (STORED, [2], [0]),
        ([{"role": "user", "content": "HI"}, *STORED[1:]], [], []),
        ([{"role": "assistant", "content": "hi"}, *STORED[1:]], [], []),
    ],
)
async def test_update_algorithm_worked_example(
    graph: PostgresGraphDB, new: list[dict[str, str]], m1_sources: list[int], m0_sources: list[int]
) -> None:
    """Each row of §7's worked example: the stored list becomes the new one; truncated sources are lost."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(STORED, [("M0", [0]), ("M1", [2])])
    )
    other_agent = await graph.create_agent(w.org_id, "Other")
    _, when = await graph.update_interaction_and_memories(
        w.org_id,
        other_agent.agent_id,
        w.user_id,
        interaction_id,
        updated_memories_and_interaction=payload(new, at=day(9)),
    )
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert [{"role": m.role, "content": m.content} for m in found.messages or []] == new
    assert [m.msg_position for m in found.messages or []] == list(range(len(new)))
    sources = {m.memory: [s.msg_position for s in m.message_sources or []] for m in found.memories or []}
    assert sources == {"M0": m0_sources, "M1": m1_sources}
    assert found.updated_at == when == day(9)
    assert found.created_at == day(1)
    assert found.agent_id == other_agent.agent_id
    assert {m.agent_id for m in found.memories or []} == {w.agent_id}


async def test_update_adds_memories_sourced_in_the_new_list(graph: PostgresGraphDB) -> None:
    """New memories get the update's agent and date, and positions in the new list."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(STORED))
    await graph.update_interaction_and_memories(
        w.org_id, w.agent_id, w.user_id, interaction_id, payload([*STORED, *chat("bye")], [("left", [4])], at=day(5))
    )
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    assert memory.obtained_at == day(5)
    assert [(s.msg_position, s.content) for s in memory.message_sources or []] == [(4, "bye")]


async def test_update_of_identical_messages_only_touches(graph: PostgresGraphDB) -> None:
    """Identical messages and no memories change only updated_at and agent_id (scenario 9); back-dating is kept."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(STORED, at=day(10))
    )
    await graph.update_interaction_and_memories(
        w.org_id, w.agent_id, w.user_id, interaction_id, payload(STORED, at=day(3))
    )
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert found.updated_at == day(3)
    assert len(found.messages or []) == len(STORED)


async def test_update_errors_write_nothing(graph: PostgresGraphDB) -> None:
    """A missing interaction, another user's interaction, a missing agent or a bad position write nothing."""
    w = await world(graph)
    other = await graph.create_user(w.org_id, "Amy")
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(STORED))
    message = r"^Interaction \(`org_id`, `user_id`, `interaction_id`\) does not exist\.$"
    with pytest.raises(NotFoundError, match=message):
        await graph.update_interaction_and_memories(w.org_id, w.agent_id, w.user_id, "missing", payload(chat("x")))
    with pytest.raises(NotFoundError, match=message):
        await graph.update_interaction_and_memories(w.org_id, w.agent_id, other.user_id, interaction_id, payload([]))
    with pytest.raises(NotFoundError, match="Agent"):
        await graph.update_interaction_and_memories(w.org_id, "ghost", w.user_id, interaction_id, payload([]))
    with pytest.raises(InvalidInputError):
        await graph.update_interaction_and_memories(
            w.org_id, w.agent_id, w.user_id, interaction_id, payload(chat("x"), [("m", [0]), ("n", [1])])
        )
    found = await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert len(found.messages or []) == len(STORED)
    assert found.memories == []
    assert found.updated_at == day(1)


async def test_listing_is_newest_first_and_pages_partition(graph: PostgresGraphDB) -> None:
    """Interactions by updated_at desc, ties by creation order desc; skip/limit never skip or repeat (scenario 23)."""
    w = await world(graph)
    ids = []
    for i in range(7):
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat(f"m{i}"), at=day(1 + i // 3))
        )
        ids.append(interaction_id)
    await graph.update_interaction_and_memories(
        w.org_id, w.agent_id, w.user_id, ids[0], payload(chat("m0"), at=day(20))
    )
    listed = [i.interaction_id for i in await graph.get_all_user_interactions(w.org_id, w.user_id)]
    assert listed == [ids[0], ids[6], ids[5], ids[4], ids[3], ids[2], ids[1]]
    pages = [
        i.interaction_id
        for skip in range(0, 7, 3)
        for i in await graph.get_all_user_interactions(w.org_id, w.user_id, skip=skip, limit=3)
    ]
    assert pages == listed
    assert await graph.get_all_user_interactions(w.org_id, w.user_id, limit=0) == []
    assert await graph.get_all_user_interactions(w.org_id, "ghost") == []
    with pytest.raises(ValueError, match=r"`skip` and `limit` must be integers."):
        await graph.get_all_user_interactions(w.org_id, w.user_id, skip="1")  # type: ignore[arg-type]  # not an int, on purpose
    with pytest.raises(InvalidInputError):
        await graph.get_all_user_interactions(w.org_id, w.user_id, limit=-1)


async def test_listing_carries_messages_and_memories(graph: PostgresGraphDB) -> None:
    """Each listed interaction has its messages and memories like get_interaction."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(STORED, [(f"agent_{w.agent_id} met user_{w.user_id}", [1])])
    )
    (listed,) = await graph.get_all_user_interactions(w.org_id, w.user_id)
    assert listed == await graph.get_interaction(w.org_id, w.user_id, interaction_id)
    assert (listed.memories or [])[0].memory == "Jenny met Jake"


async def test_delete_interaction_removes_it_with_its_memories(graph: PostgresGraphDB) -> None:
    """Deleting an interaction removes its messages and memories, leaves others, and raises when missing."""
    w = await world(graph)
    doomed, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(STORED, [("a", [0])])
    )
    kept, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(STORED, [("b", [0])]))
    await graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, doomed)
    with pytest.raises(NotFoundError):
        await graph.get_interaction(w.org_id, w.user_id, doomed)
    assert [m.memory for m in await graph.get_all_user_memories(w.org_id, w.user_id)] == ["b"]
    with pytest.raises(NotFoundError, match="Interaction"):
        await graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, doomed)
    assert (await graph.get_interaction(w.org_id, w.user_id, kept)).interaction_id == kept


async def test_delete_interaction_without_messages(graph: PostgresGraphDB) -> None:
    """An interaction with no messages is deleted with its memories (upstream deleted nothing)."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload([], [("a", [])])
    )
    await graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, interaction_id)
    assert await graph.get_all_user_memories(w.org_id, w.user_id) == []


async def test_delete_all_user_interactions(graph: PostgresGraphDB) -> None:
    """All interactions and all memories of the user go; the user and agents stay; other users are untouched."""
    w = await world(graph)
    other = await graph.create_user(w.org_id, "Amy")
    for who in (w.user_id, other.user_id):
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, who, payload(STORED, [("a", [0])]))
    await graph.delete_all_user_interactions_and_their_memories(w.org_id, w.user_id)
    assert await graph.get_all_user_interactions(w.org_id, w.user_id) == []
    assert await graph.get_all_user_memories(w.org_id, w.user_id) == []
    assert (await graph.get_user(w.org_id, w.user_id)).user_name == "Jake"
    assert len(await graph.get_all_user_memories(w.org_id, other.user_id)) == 1
    await graph.delete_all_user_interactions_and_their_memories(w.org_id, "ghost")


async def test_interactions_are_scoped_by_org_and_user(graph: PostgresGraphDB) -> None:
    """Another user's or organization's ids never reach an interaction."""
    w = await world(graph)
    stranger = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(STORED))
    with pytest.raises(NotFoundError):
        await graph.get_interaction(stranger.org_id, w.user_id, interaction_id)
    with pytest.raises(NotFoundError):
        await graph.delete_user_interaction_and_its_memories(stranger.org_id, stranger.user_id, interaction_id)
    assert await graph.get_all_user_interactions(stranger.org_id, w.user_id) == []


async def test_payload_default_date_is_the_call_time() -> None:
    """An omitted interaction_date is the time of building the payload (not the import time)."""
    before = datetime.now(timezone.utc)
    built = MemoriesAndInteraction(interaction=chat("x"))
    assert before <= built.interaction_date <= datetime.now(timezone.utc)
