"""The write functions (migrations 0016-0018) and the statements that call them: every argument a statement
names is one the function declares (and the other way round), and each function writes every column.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.db import Database
from memora_pg.graph import (
    audit,
    autogen_contents,
    history,
    interactions,
    memories,
    orgs,
    saves,
    store_items,
    versions,
)
from memora_pg.graph.autogen_contents import JsonEntry
from memora_pg.graph.interactions import Message
from memora_pg.graph.memories import NewMemory
from memora_pg.statements import Statement
from tests.integration.helpers import world

AT = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)
EXPIRES = datetime(2027, 1, 1, tzinfo=timezone.utc)


def _items(dimensions: int) -> list[NewMemory]:
    vector = [0.0] * dimensions
    vector[3] = 1.0
    said = {"topic": "home", "actor_id": "actor", "role": "user"}
    return [
        NewMemory(uuid.uuid4(), "Jake lives in Lisbon", positions=(0, 1), embedding=vector, metadata=said),
        NewMemory(uuid.uuid4(), "Jake has a cat", positions=(1,), embedding=vector, expires_at=EXPIRES),
        NewMemory(uuid.uuid4(), "kept without a vector", positions=(0,)),
    ]


async def _run(database: Database, org_id: str, *statements: Statement) -> None:
    async with database.transaction(org_id=org_id) as conn:
        for statement in statements:
            await conn.run(statement)


# Each function's arguments, as the migrated schema declares them (``p_`` and the name).
ARGUMENTS = """
SELECT p.proname, p.proargnames[1:p.pronargs] FROM pg_proc AS p
WHERE p.pronamespace = 'memora'::regnamespace AND p.proargnames[1] = 'p_org_id'
"""


async def _rows(conn: AsyncConnection, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in (await conn.execute(text(sql), params)).all()]


MEMORIES = """
SELECT m.memory, m.agent_id, m.obtained_at, m.metadata, m.embedding::text, m.search_text::text, m.expires_at,
       ARRAY(SELECT s.msg_position FROM memora.memory_sources AS s
             WHERE s.org_id = m.org_id AND s.memory_id = m.memory_id ORDER BY s.msg_position)
FROM memora.memories AS m
WHERE m.org_id = :org_id AND m.user_id = :user_id AND m.interaction_id IS NOT DISTINCT FROM :interaction_id
ORDER BY m.memory
"""


async def test_every_write_statement_names_exactly_the_arguments_its_function_declares(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        declared = {name: list(arguments) for name, arguments in (await conn.execute(text(ARGUMENTS))).all()}
    called = {
        "save_interaction": saves.SAVE,
        "write_memories": saves.WRITE,
        "add_memories": saves.ADD,
        "append_messages": interactions.APPEND_MESSAGES,
        "clock_superseded": versions.CLOCK_LINKED,
        "record_history": history.RECORD,
        "ensure_owners": orgs.ENSURE_OWNERS,
        "record_audit": audit.RECORD,
        "open_interaction": interactions.OPEN_TURN,
        "write_contents": autogen_contents.WRITE_JSON,
        "update_memories": memories.UPDATE_IN_PLACE,
        "put_store_items": store_items.PUT,
    }
    assert set(declared) == set(called)
    for function, sql in called.items():
        assert f"{{schema}}.{function}(" in sql
        # Each argument once, bound to the parameter of its own name (or given as NULL).
        given = re.findall(r"\b(p_[a-z_]+) => (?::([a-z_]+)|NULL)", sql)
        assert sorted(argument for argument, _ in given) == sorted(declared[function]), function
        assert all(bound in ("", argument.removeprefix("p_")) for argument, bound in given), function


async def test_a_save_writes_every_column(engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB) -> None:
    w = await world(graph)
    database = Database(engine, settings=settings)
    messages = [Message("user", "I moved to Lisbon, with my cat"), Message("assistant", None)]

    def save(interaction_id: str, method: str) -> Statement:
        return saves.save(
            org_id=w.org_id,
            user_id=w.user_id,
            agent_id=w.agent_id,
            interaction_id=interaction_id,
            at=AT,
            messages=messages,
            items=_items(settings.embedding_dimensions),
            audited=audit.Entry(method, user_id=w.user_id, ids={"interaction_id": interaction_id}),
        )

    await _run(database, w.org_id, save("one", "save_one"), save("two", "save_two"))

    async with engine.connect() as conn:
        by_interaction = {}
        for interaction_id in ("one", "two"):
            by_interaction[interaction_id] = (
                await _rows(
                    conn,
                    "SELECT msg_position, role, content FROM memora.messages"
                    " WHERE org_id = :org_id AND interaction_id = :interaction_id ORDER BY msg_position",
                    org_id=w.org_id,
                    interaction_id=interaction_id,
                ),
                await _rows(conn, MEMORIES, org_id=w.org_id, user_id=w.user_id, interaction_id=interaction_id),
                await _rows(
                    conn,
                    "SELECT user_id, agent_id, ids->>'interaction_id' FROM memora.audit_log"
                    " WHERE org_id = :org_id AND method = :method",
                    org_id=w.org_id,
                    method=f"save_{interaction_id}",
                ),
            )
    messages_one, memories_one, audit_one = by_interaction["one"]
    assert messages_one == [(0, "user", "I moved to Lisbon, with my cat"), (1, "assistant", None)]
    assert len(memories_one) == 3
    assert [row[0] for row in memories_one] == ["Jake has a cat", "Jake lives in Lisbon", "kept without a vector"]
    assert memories_one[0][5] is not None
    assert memories_one[2][5] is None  # no vector, no full-text vector
    assert memories_one[1][3] == {"topic": "home", "actor_id": "actor", "role": "user"}
    assert memories_one[1][7] == [0, 1]
    assert audit_one == [(w.user_id, None, "one")]
    messages_two, memories_two, audit_two = by_interaction["two"]
    assert messages_two == messages_one
    assert memories_two == memories_one
    assert audit_two == [(w.user_id, None, "two")]


async def test_a_mem0_style_add_writes_every_column(engine: AsyncEngine, settings: Settings) -> None:
    database = Database(engine, settings=settings)
    org_id = "mem0:forms"

    def add(user_id: str) -> Statement:
        items = _items(settings.embedding_dimensions)[:2]
        return saves.add(
            org_id=org_id,
            collection="forms",
            user_id=user_id,
            agent_id="",
            at=AT,
            items=items,
            audited=audit.Entry("add", user_id=user_id),
        )

    await _run(database, org_id, add("ann"), add("bob"))

    async with engine.connect() as conn:
        found = {}
        for user_id in ("ann", "bob"):
            found[user_id] = (
                await _rows(conn, MEMORIES, org_id=org_id, user_id=user_id, interaction_id=None),
                await _rows(
                    conn,
                    "SELECT event, new_memory, actor_id, role, created_at FROM memora.memory_history"
                    " WHERE org_id = :org_id AND user_id = :user_id ORDER BY new_memory",
                    org_id=org_id,
                    user_id=user_id,
                ),
                await _rows(
                    conn,
                    "SELECT user_name FROM memora.users WHERE org_id = :org_id AND user_id = :user_id",
                    org_id=org_id,
                    user_id=user_id,
                ),
            )
    memories_ann, history_ann, users_ann = found["ann"]
    assert [row[0] for row in memories_ann] == ["Jake has a cat", "Jake lives in Lisbon"]
    assert history_ann == [
        ("ADD", "Jake has a cat", None, None, AT),
        ("ADD", "Jake lives in Lisbon", "actor", "user", AT),
    ]
    assert users_ann == [("ann",)]
    memories_bob, history_bob, users_bob = found["bob"]
    assert memories_bob == memories_ann
    assert history_bob == history_ann
    assert users_bob == [("bob",)]


async def test_a_contrary_memory_never_supersedes_a_memory_of_its_own_call(
    engine: AsyncEngine, settings: Settings, graph: PostgresGraphDB
) -> None:
    """A contrary memory supersedes a memory the user had before the call: one that names another new
    memory of the same call is stored without a link."""
    w = await world(graph)
    database = Database(engine, settings=settings)
    first, second = _items(settings.embedding_dimensions)[:2]
    before = NewMemory(uuid.uuid4(), "Jake lived in Porto", positions=(0,), embedding=first.embedding)
    statement = saves.save(
        org_id=w.org_id,
        user_id=w.user_id,
        agent_id=w.agent_id,
        interaction_id="earlier",
        at=AT,
        messages=[Message("user", "I live in Porto")],
        items=[before],
        audited=None,
    )
    await _run(database, w.org_id, statement)
    items = [
        NewMemory(first.memory_id, first.text, positions=(0,), embedding=first.embedding, supersedes=before.memory_id),
        NewMemory(
            second.memory_id, second.text, positions=(0,), embedding=second.embedding, supersedes=first.memory_id
        ),
    ]
    statement = saves.save(
        org_id=w.org_id,
        user_id=w.user_id,
        agent_id=w.agent_id,
        interaction_id="later",
        at=AT,
        messages=[Message("user", "I moved to Lisbon, with my cat")],
        items=items,
        audited=None,
    )
    async with database.transaction(org_id=w.org_id) as conn:
        saved = saves.saved(await conn.run(statement), items)
    assert saved.unlinked == [second.memory_id]
    async with engine.connect() as conn:
        links = await _rows(
            conn,
            "SELECT new_memory_id, old_memory_id FROM memora.memory_updates WHERE org_id = :org_id",
            org_id=w.org_id,
        )
        ended = await _rows(
            conn,
            "SELECT valid_until, superseded_at IS NOT NULL FROM memora.memories"
            " WHERE org_id = :org_id AND memory_id = :id",
            org_id=w.org_id,
            id=before.memory_id,
        )
    assert links == [(first.memory_id, before.memory_id)]
    assert ended == [(AT, True)]


async def test_a_turn_opens_the_interaction_once_and_appends_after_the_last_message(
    engine: AsyncEngine, settings: Settings
) -> None:
    """open_interaction: the organization and the user on first use, the messages numbered on from the last
    one, an audit row per turn; another user's interaction of the same id is left as it was."""
    database = Database(engine, settings=settings)
    org_id = "af:turns"

    async def turn(user_id: str, *texts: str) -> bool:
        async with database.transaction(org_id=org_id) as conn:
            return await interactions.append_turn(
                conn,
                org_id=org_id,
                org_name="Turns",
                user_id=user_id,
                agent_id="helper",
                interaction_id="session-1",
                new=[Message("user", text) for text in texts],
                audited=audit.Entry("turn", user_id=user_id, ids={"n": len(texts)}),
            )

    assert await turn("ann", "hello", "I live in Lisbon")
    assert await turn("ann", "and I have a cat")
    assert not await turn("bob", "this is not my session")
    async with engine.connect() as conn:
        stored = await _rows(
            conn,
            "SELECT msg_position, content FROM memora.messages WHERE org_id = :org_id ORDER BY msg_position",
            org_id=org_id,
        )
        owners = await _rows(
            conn,
            "SELECT o.org_name, array_agg(u.user_id ORDER BY u.user_id) FROM memora.organizations AS o"
            " JOIN memora.users AS u USING (org_id) WHERE o.org_id = :org_id GROUP BY o.org_name",
            org_id=org_id,
        )
        audited = await _rows(
            conn, "SELECT user_id, ids FROM memora.audit_log WHERE org_id = :org_id ORDER BY seq", org_id=org_id
        )
        opened = await _rows(
            conn, "SELECT user_id, agent_id FROM memora.interactions WHERE org_id = :org_id", org_id=org_id
        )
    assert stored == [(0, "hello"), (1, "I live in Lisbon"), (2, "and I have a cat")]
    # bob was made on first use, like ann, but wrote nothing
    assert owners == [("Turns", ["ann", "bob"])]
    assert audited == [("ann", {"n": 2}), ("ann", {"n": 1})]
    assert opened == [("ann", "helper")]


async def test_history_keeps_an_events_own_time_and_skips_one_recorded_already(
    engine: AsyncEngine, settings: Settings
) -> None:
    database = Database(engine, settings=settings)
    org_id = "mem0:events"
    memory_id = uuid.uuid4()
    added = history.Event(memory_id, "ann", "ADD", None, "likes tea", event_id=uuid.uuid4(), at=AT)
    # A source that marked a deletion its own way keeps its flag; an event without one is dated now.
    removed = history.Event(memory_id, "ann", "DELETE", "likes tea", None, event_id=uuid.uuid4(), deleted=False)
    async with database.transaction(org_id=org_id) as conn:
        await orgs.ensure_owners(conn, org_id=org_id, org_name="events", user_ids=["ann"])
        first = await history.record(conn, org_id=org_id, events=[added])
    async with database.transaction(org_id=org_id) as conn:
        second = await history.record(conn, org_id=org_id, events=[added, removed])
    assert (first, second) == (1, 1)
    async with engine.connect() as conn:
        events = await _rows(
            conn,
            "SELECT event, is_deleted, created_at = :at FROM memora.memory_history WHERE org_id = :org_id ORDER BY seq",
            org_id=org_id,
            at=AT,
        )
    assert events == [("ADD", False, True), ("DELETE", False, False)]


async def test_a_rewrite_gives_stored_memories_their_new_version_and_keeps_their_times(
    engine: AsyncEngine, settings: Settings
) -> None:
    """write_memories with existing="rewrite" (an import): memories of many users, each with its own
    time (its valid and its stored time); a stored id gets the new text, metadata, vector and owner."""
    database = Database(engine, settings=settings)
    org_id = "mem0:rewrites"
    vector = [0.0] * settings.embedding_dimensions
    vector[1] = 1.0
    ann_id, bob_id = uuid.uuid4(), uuid.uuid4()
    later = datetime(2026, 5, 1, tzinfo=timezone.utc)

    def write(ann_text: str, bob_owner: str, at: datetime) -> Statement:
        items = [
            NewMemory(
                ann_id, ann_text, embedding=vector, metadata={"v": ann_text}, user_id="ann", agent_id="", obtained_at=at
            ),
            NewMemory(bob_id, "Bob runs", embedding=vector, user_id=bob_owner, agent_id="importer", obtained_at=at),
        ]
        return saves.write(
            org_id=org_id,
            user_id=None,
            agent_id=None,
            interaction_id=None,
            at=None,
            items=items,
            link=False,
            audited=None,
            existing="rewrite",
        )

    async with database.transaction(org_id=org_id) as owners:
        await orgs.ensure_owners(owners, org_id=org_id, org_name="rewrites", user_ids=["ann", "bob", "carol"])
    await _run(database, org_id, write("Ann likes tea", "bob", AT))
    await _run(database, org_id, write("Ann likes coffee", "carol", later))
    async with engine.connect() as conn:
        stored = await _rows(
            conn,
            "SELECT memory, user_id, agent_id, metadata, obtained_at, stored_at, search_text IS NOT NULL"
            " FROM memora.memories WHERE org_id = :org_id ORDER BY memory",
            org_id=org_id,
        )
    assert stored == [
        ("Ann likes coffee", "ann", "", {"v": "Ann likes coffee"}, AT, AT, True),
        ("Bob runs", "carol", "importer", {}, AT, AT, True),
    ]


async def test_a_write_refuses_an_unknown_treatment_of_stored_ids() -> None:
    with pytest.raises(ValueError, match="existing"):
        saves.write(
            org_id="o",
            user_id="u",
            agent_id="a",
            interaction_id=None,
            at=AT,
            items=[],
            link=False,
            audited=None,
            existing="merge",
        )


async def test_json_entries_are_added_under_their_ids_and_rewritten_in_place(
    engine: AsyncEngine, settings: Settings
) -> None:
    database = Database(engine, settings=settings)
    org_id = "langgraph:entries"
    vector = [0.0] * settings.embedding_dimensions
    vector[2] = 1.0
    content_id = uuid.uuid4()

    async def write(text: str, created_at: datetime) -> None:
        entry = JsonEntry(content_id, "users.ann", text, {"k": text}, created_at)
        async with database.transaction(org_id=org_id) as conn:
            await autogen_contents.write_json(
                conn, org_id=org_id, org_name="Entries", entries=[entry], embeddings=[vector]
            )

    await write('{"food":"tea"}', AT)
    await write('{"food":"coffee"}', datetime(2026, 6, 1, tzinfo=timezone.utc))
    async with engine.connect() as conn:
        stored = await _rows(
            conn,
            "SELECT namespace, content_json, metadata, created_at, search_text IS NOT NULL"
            " FROM memora.autogen_contents WHERE org_id = :org_id",
            org_id=org_id,
        )
    assert stored == [("users.ann", {"food": "coffee"}, {"k": '{"food":"coffee"}'}, AT, True)]


async def test_an_update_in_place_changes_what_is_there_and_records_its_events(
    engine: AsyncEngine, settings: Settings
) -> None:
    """update_memories: text, vector and merged metadata for a memory that is there, its UPDATE event with the
    actor its metadata names, the audit row naming its user; a memory that is gone is skipped."""
    database = Database(engine, settings=settings)
    org_id = "mem0:updates"
    item = _items(settings.embedding_dimensions)[0]
    add = saves.add(org_id=org_id, collection="updates", user_id="ann", agent_id="", at=AT, items=[item], audited=None)
    await _run(database, org_id, add)
    vector = [0.0] * settings.embedding_dimensions
    vector[5] = 1.0
    planned = [
        memories.Change(item.memory_id, "Jake lives in Porto", vector, {"topic": "move", "mood": "glad"}),
        memories.Change(uuid.uuid4(), "never stored", vector, {}),
    ]
    statement = memories.update_in_place(org_id, planned, audit.Entry("update", ids={"n": 1}))
    async with database.transaction(org_id=org_id) as conn:
        before = memories.updated(await conn.run(statement))
    assert before == [memories.Before(item.memory_id, "ann", "Jake lives in Lisbon", item.metadata or {})]
    async with engine.connect() as conn:
        stored = await _rows(
            conn,
            "SELECT memory, metadata, search_text::text LIKE '%porto%' FROM memora.memories WHERE org_id = :org_id",
            org_id=org_id,
        )
        events = await _rows(
            conn,
            "SELECT event, old_memory, new_memory, actor_id, role FROM memora.memory_history"
            " WHERE org_id = :org_id ORDER BY seq",
            org_id=org_id,
        )
        audited = await _rows(
            conn, "SELECT user_id, method FROM memora.audit_log WHERE org_id = :org_id", org_id=org_id
        )
    assert stored == [
        ("Jake lives in Porto", {"topic": "move", "actor_id": "actor", "role": "user", "mood": "glad"}, True)
    ]
    assert events[1:] == [("UPDATE", "Jake lives in Lisbon", "Jake lives in Porto", "actor", "user")]
    assert audited == [("ann", "update")]
