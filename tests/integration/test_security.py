"""Tenant isolation by the database (row-level security), erasure that leaves no trace, and the audit log."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import NotFoundError, PostgresGraphDB, PostgresMemory, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.mem0 import AsyncMemory, MemoryConfig
from memora_pg.migrations import MigrationOptions, downgrade, upgrade
from memora_pg.schema import TENANT_TABLES
from tests.integration.helpers import chat, payload, world


async def test_row_level_security_confines_a_role_to_one_organization(rls_database: tuple[str, str]) -> None:
    """A non-owner role with row_level_security on sees and writes only the organization of each call."""
    _, app_url = rls_database
    settings = Settings(database_url=app_url, db_schema="memora", row_level_security=True)
    app = PostgresGraphDB(settings=settings, embedder=HashEmbedder(384))
    a = await world(app)
    b = await world(app)
    await app.save_interaction_with_memories(
        a.org_id, a.agent_id, a.user_id, payload(chat("x"), [("secret of A", [0])])
    )
    assert len(await app.get_all_user_memories(a.org_id, a.user_id)) == 1
    # B's scope cannot see A's rows, whatever ids it is given
    with pytest.raises(NotFoundError):
        await app.get_user(b.org_id, a.user_id)
    assert await app.get_all_user_memories(b.org_id, a.user_id) == []
    # the database itself refuses: a transaction scoped to B inserting a row of A
    engine = create_async_engine(app_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT set_config('memora.org_id', :o, false)"), {"o": b.org_id})
            assert await conn.scalar(text("SELECT count(*) FROM memora.memories")) == 0
            with pytest.raises(Exception, match="row-level security"):
                await conn.execute(
                    text("INSERT INTO memora.users (org_id, user_id, user_name) VALUES (:o, 'intruder', 'x')"),
                    {"o": a.org_id},
                )
    finally:
        await engine.dispose()
    await app.close()


async def test_row_level_security_fails_closed_without_an_organization(rls_database: tuple[str, str]) -> None:
    """Connected as the restricted role without setting the organization, nothing is visible or writable."""
    owner_url, app_url = rls_database
    owner = PostgresGraphDB(owner_url, embedder=HashEmbedder(384))
    a = await world(owner)
    await owner.close()
    unscoped = PostgresGraphDB(
        settings=Settings(database_url=app_url, db_schema="memora", row_level_security=False),
        embedder=HashEmbedder(384),
    )
    with pytest.raises(NotFoundError):
        await unscoped.get_organization(a.org_id)
    assert await unscoped.get_all_organizations() == []
    with pytest.raises(Exception):  # noqa: B017, PT011 - the insert violates the policy (a DatabaseError)
        await unscoped.create_organization("no scope")
    await unscoped.close()


SECRET = "SECRET-7f3a"


async def _traces(engine: AsyncEngine, needles: list[str]) -> dict[str, int]:
    """Rows of every memora table whose text form contains any needle."""
    found = {}
    async with engine.connect() as conn:
        for table in TENANT_TABLES:
            conditions = " OR ".join(f"t::text LIKE :n{i}" for i in range(len(needles)))
            count = await conn.scalar(
                text(f"SELECT count(*) FROM memora.{table} AS t WHERE {conditions}"),
                {f"n{i}": f"%{needle}%" for i, needle in enumerate(needles)},
            )
            found[table] = int(count or 0)
    return found


async def test_erasing_a_user_leaves_no_trace(engine: AsyncEngine, database_url: str, graph: PostgresGraphDB) -> None:
    """Erasing a user removes every row that holds their text or ids, in every table, and counts them."""
    w = await world(graph)
    other = await graph.create_user(w.org_id, "Bystander")
    own_agent = await graph.create_agent(w.org_id, "Own coach", user_id=w.user_id)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat(f"I live at {SECRET}"), [(f"lives at {SECRET}", [0])])
    )
    (memory,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    await graph.save_interaction_with_memories(
        w.org_id,
        w.agent_id,
        w.user_id,
        payload(chat("moved"), contrary=[(f"moved from {SECRET}", [0], memory.memory_id)]),
    )
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, other.user_id, payload(chat("hello"), [("bystander fact", [0])])
    )
    notes = PostgresMemory("notes", engine=engine, embedder=HashEmbedder(384), org_id=w.org_id, user_id=w.user_id)
    from memora_pg.autogen import MemoryContent

    await notes.add(MemoryContent(content=f"note {SECRET}", mime_type="text/plain"))
    mem0 = AsyncMemory.from_config(
        {
            "vector_store": {
                "provider": "pgvector",
                "config": {"connection_string": database_url, "collection_name": "e"},
            },
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        }
    )
    (added,) = (await mem0.add(f"mem0 {SECRET}", user_id=w.user_id, infer=False))["results"]
    await mem0.update(added["id"], f"mem0 updated {SECRET}")

    needles = [SECRET, w.user_id, interaction_id, own_agent.agent_id]
    assert sum((await _traces(engine, needles)).values()) > 0
    counts = await graph.erase_user(w.org_id, w.user_id)
    mem0_counts = await graph.erase_user(mem0.org_id, w.user_id)
    assert counts["memories"] == 2
    assert counts["vectors"] == 2
    assert counts["interactions"] == 2
    assert counts["messages"] == 2
    assert counts["memory_updates"] == 1
    assert counts["agents"] == 1
    assert counts["autogen_contents"] == 1
    assert counts["audit_log"] > 0
    assert mem0_counts["memory_history"] == 2
    assert await _traces(engine, needles) == dict.fromkeys(TENANT_TABLES, 0)
    assert len(await graph.get_all_user_memories(w.org_id, other.user_id)) == 1
    await mem0.close()


async def test_erasing_an_organization_counts_and_removes_everything(
    engine: AsyncEngine, graph: PostgresGraphDB
) -> None:
    """Erasing an organization removes all its rows (audit included); another organization is untouched."""
    w = await world(graph)
    kept = await world(graph)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat(SECRET), [(SECRET, [0])]))
    counts = await graph.erase_organization(w.org_id)
    assert counts["organizations"] == 1
    assert counts["memories"] == 1
    assert counts["audit_log"] >= 4
    assert await _traces(engine, [SECRET, w.org_id]) == dict.fromkeys(TENANT_TABLES, 0)
    assert (await graph.get_organization(kept.org_id)).org_id == kept.org_id
    assert await graph.erase_organization(str(uuid.uuid4())) == dict.fromkeys([*TENANT_TABLES, "vectors"], 0)


async def test_every_mutation_is_audited_in_its_transaction(engine: AsyncEngine, graph: PostgresGraphDB) -> None:
    """Who, what and when of each write is in audit_log, queryable by SQL; a failed write leaves no audit row."""
    w = await world(graph)
    interaction_id, _ = await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])])
    )
    with pytest.raises(ValueError):  # noqa: PT011
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [5])]))
    await graph.delete_user_interaction_and_its_memories(w.org_id, w.user_id, interaction_id)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text("SELECT method, user_id, agent_id, ids FROM memora.audit_log WHERE org_id = :o ORDER BY seq"),
                {"o": w.org_id},
            )
        ).all()
    methods = [r.method for r in rows]
    assert methods == [
        "create_organization",
        "create_user",
        "create_agent",
        "save_interaction_with_memories",
        "delete_user_interaction_and_its_memories",
    ]
    saved = rows[3]
    assert (saved.user_id, saved.agent_id, saved.ids["interaction_id"]) == (w.user_id, w.agent_id, interaction_id)
    assert len(saved.ids["memory_ids"]) == 1


async def test_downgrade_and_upgrade_keep_the_data(fresh_database: str) -> None:
    """Going back a revision and forward again keeps every memory (the data tables are not touched)."""
    engine = create_async_engine(fresh_database)
    options = MigrationOptions(schema="memora")
    await upgrade(engine, options)
    graph = PostgresGraphDB(engine, embedder=HashEmbedder(384))
    w = await world(graph)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("kept", [0])]))
    await downgrade(engine, options, "0003")
    await upgrade(engine, options)
    graph = PostgresGraphDB(engine, embedder=HashEmbedder(384))
    assert [m.memory for m in await graph.get_all_user_memories(w.org_id, w.user_id)] == ["kept"]
    await engine.dispose()


async def _audit_rows(engine: AsyncEngine, org_id: str) -> list[tuple[str, str | None]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT method, user_id FROM memora.audit_log WHERE org_id = :o ORDER BY seq"), {"o": org_id}
        )
        return [(row.method, row.user_id) for row in rows]


@pytest.mark.parametrize("audit", [True, False])
async def test_one_statement_writes_audit_only_when_auditing_is_on(
    engine: AsyncEngine, settings: Settings, audit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save and a mem0-style add are one statement each; their audit row is in it, or absent with audit off."""
    own = settings.model_copy(update={"audit": audit})
    graph = PostgresGraphDB(engine, settings=own, embedder=HashEmbedder(384))
    w = await world(graph)
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("m", [0])]))
    monkeypatch.setenv("MEMORA_PG_AUDIT", str(audit).lower())
    config = MemoryConfig(
        vector_store={"provider": "pgvector", "config": {"collection_name": "audited", "schema": "memora"}}
    )
    memory = AsyncMemory(config, engine=engine, embedder=HashEmbedder(384))
    await memory.add("likes tea", user_id="jake", infer=False)
    await memory.add([{"role": "system", "content": "only a system message"}], user_id="jake", infer=False)
    saved = await _audit_rows(engine, w.org_id)
    added = await _audit_rows(engine, memory.org_id)
    if audit:
        assert saved[-1] == ("save_interaction_with_memories", w.user_id)
        assert added == [("mem0.add", "jake"), ("mem0.add", None)]
    else:
        assert saved == []
        assert added == []
    assert len(await graph.get_all_user_memories(w.org_id, w.user_id)) == 1
