"""The write functions of migration 0016 and the statements that call them: every argument a statement
names is one the function declares (and the other way round), and each function writes every column.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.db import Database
from memora_pg.graph import audit, history, interactions, saves, versions
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
