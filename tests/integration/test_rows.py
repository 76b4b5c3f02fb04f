"""Rows as multi-row inserts (``memora_pg.graph.rows``, the form a write takes on Citus), on one server.

The inserts of a write go in as few statements as PostgreSQL's limit on a statement's parameters
allows, parents first, and each insert's returned column comes back whole, in order, however the
rows were split between statements.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB
from memora_pg.graph import interactions, rows, saves
from memora_pg.testing import count_statements
from tests.conftest import TEST_SCHEMA
from tests.integration.helpers import World, world


async def _write(graph: PostgresGraphDB, w: World, memories: int) -> tuple[list[list[object]], list[str]]:
    """An interaction with two messages and ``memories`` memories, each with its source, as one write."""
    org_id, user_id, agent_id = w.org_id, w.user_id, w.agent_id
    ids = [uuid.uuid4() for _ in range(memories)]
    common = {
        "org_id": org_id,
        "user_id": user_id,
        "agent_id": agent_id,
        "interaction_id": "i-" + uuid.uuid4().hex,
        "at": None,
        "obtained_at": None,
    }
    inserts = [
        interactions.ROW,
        saves.MESSAGE_ROWS.of([{"msg_position": n, "role": "user", "content": f"m{n}"} for n in range(2)]),
        saves.MEMORY_ROWS.of(
            [
                {"memory_id": i, "memory": f"fact {n}", "metadata": None, "embedding": None, "expires_at": None}
                for n, i in enumerate(ids)
            ]
        ),
        saves.SOURCE_ROWS.of([{"memory_id": i, "msg_position": 0} for i in ids]),
    ]
    engine = await graph.database.engine()
    sent = count_statements(engine)
    async with graph.database.transaction(org_id=org_id) as conn:
        common["at"] = common["obtained_at"] = (await conn.execute(text("SELECT now()"))).scalar()
        returned = await rows.insert_together(conn, common, inserts)
    return [returned[2], ids], [s for s in sent if s.lstrip().startswith("WITH rows_0")]


async def test_a_write_of_usual_size_is_one_statement(graph: PostgresGraphDB) -> None:
    w = await world(graph)
    (written, ids), statements = await _write(graph, w, 10)
    assert written == ids
    assert len(statements) == 1
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 10


async def test_rows_beyond_a_statements_parameters_go_in_several_statements_each_in_order(
    graph: PostgresGraphDB, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for 40 parameters a statement (6 are common), 10 memories of 5 parameters each and their
    sources take several statements; every row is written once and the ids come back in their order."""
    monkeypatch.setattr(rows, "PARAMETERS_PER_STATEMENT", 40)
    w = await world(graph)
    (written, ids), statements = await _write(graph, w, 10)
    assert written == ids
    assert len(statements) > 2
    async with engine.connect() as conn:
        counts = (
            await conn.execute(
                text(
                    f"SELECT (SELECT count(*) FROM {TEST_SCHEMA}.memories WHERE org_id = :org),"
                    f" (SELECT count(*) FROM {TEST_SCHEMA}.memory_sources WHERE org_id = :org),"
                    f" (SELECT count(*) FROM {TEST_SCHEMA}.messages WHERE org_id = :org)"
                ),
                {"org": w.org_id},
            )
        ).one()
    assert tuple(counts) == (10, 10, 2)


def test_an_insert_of_one_row_has_a_text_of_its_own_and_a_numbered_row_has_none() -> None:
    assert "VALUES (:org_id, :collection)" in saves.COLLECTION_ORGANIZATION.one_row()
    with pytest.raises(ValueError, match="one-row text"):
        saves.MEMORY_ROWS.one_row()
