"""Tenants are rows, never objects: organizations add no table, index, sequence or view."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import PostgresGraphDB
from tests.integration.helpers import chat, payload

CATALOG = "SELECT count(*) FROM pg_class"


async def test_a_thousand_organizations_create_no_catalog_object(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """1,000 organizations (every hundredth with a user, an agent and a save) leave pg_class as it was."""
    org = await graph.create_organization("warm-up")
    user = await graph.create_user(org.org_id, "u")
    agent = await graph.create_agent(org.org_id, "a")
    body = payload(chat("x"), [("m", [0])])
    await graph.save_interaction_with_memories(org.org_id, agent.agent_id, user.user_id, body)
    async with engine.connect() as conn:
        before = await conn.scalar(text(CATALOG))
    for n in range(1000):
        org = await graph.create_organization(f"tenant {n}")
        if n % 100 == 0:
            user = await graph.create_user(org.org_id, "u")
            agent = await graph.create_agent(org.org_id, "a")
            await graph.save_interaction_with_memories(org.org_id, agent.agent_id, user.user_id, body)
    async with engine.connect() as conn:
        after = await conn.scalar(text(CATALOG))
        organizations = await conn.scalar(text("SELECT count(*) FROM memora.organizations"))
    assert organizations == 1001
    assert after == before
