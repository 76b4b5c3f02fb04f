"""Agents: org-wide (no user) or user-specific (listed for the organization and for that user)."""

from __future__ import annotations

from sqlalchemy import delete, exists, insert, literal, null, select, update

from memora_pg.driver import Connection
from memora_pg.ids import new_short_id
from memora_pg.models import Agent, from_row
from memora_pg.schema import agents, organizations, users


async def create(conn: Connection, *, org_id: str, agent_label: str, user_id: str | None) -> Agent | None:
    """The new agent, or None when the organization (or the given user) does not exist."""
    owner_exists = (
        exists().where(users.c.org_id == org_id, users.c.user_id == user_id)
        if user_id
        else exists().where(organizations.c.org_id == org_id)
    )
    stmt = (
        insert(agents)
        .from_select(
            ["org_id", "agent_id", "agent_label", "user_id"],
            select(
                literal(org_id), literal(new_short_id()), literal(agent_label), literal(user_id) if user_id else null()
            ).where(owner_exists),
        )
        .returning(*agents.c)
    )
    return from_row(Agent, await conn.first(stmt))


async def relabel(conn: Connection, *, org_id: str, agent_id: str, agent_label: str) -> Agent | None:
    stmt = (
        update(agents)
        .where(agents.c.org_id == org_id, agents.c.agent_id == agent_id)
        .values(agent_label=agent_label)
        .returning(*agents.c)
    )
    return from_row(Agent, await conn.first(stmt))


async def get(conn: Connection, *, org_id: str, agent_id: str) -> Agent | None:
    stmt = select(agents).where(agents.c.org_id == org_id, agents.c.agent_id == agent_id)
    return from_row(Agent, await conn.first(stmt))


async def list_for_org(
    conn: Connection, *, org_id: str, user_id: str | None = None, skip: int = 0, limit: int | None = None
) -> list[Agent]:
    """Every agent of the organization, or only those created for ``user_id``; oldest first."""
    stmt = select(agents).where(agents.c.org_id == org_id)
    if user_id is not None:
        stmt = stmt.where(agents.c.user_id == user_id)
    stmt = stmt.order_by(agents.c.created_at, agents.c.agent_id).offset(skip).limit(limit)
    return [Agent.model_validate(row._asdict()) for row in await conn.fetch(stmt)]


async def delete_one(conn: Connection, *, org_id: str, agent_id: str) -> bool:
    """Delete only the agent: interactions and memories keep its id as a plain value."""
    return await conn.execute(delete(agents).where(agents.c.org_id == org_id, agents.c.agent_id == agent_id)) > 0
