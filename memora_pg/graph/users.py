"""Users of an organization. Deleting one cascades to its interactions, memories and own agents."""

from __future__ import annotations

from sqlalchemy import exists, insert, literal, select, update

from memora_pg.driver import Connection
from memora_pg.ids import new_short_id
from memora_pg.models import User, from_row
from memora_pg.schema import organizations, users
from memora_pg.statements import Statement


async def create(conn: Connection, *, org_id: str, user_name: str) -> User | None:
    """The new user, or None when the organization does not exist."""
    org_exists = exists().where(organizations.c.org_id == org_id)
    stmt = (
        insert(users)
        .from_select(
            ["org_id", "user_id", "user_name"],
            select(literal(org_id), literal(new_short_id()), literal(user_name)).where(org_exists),
        )
        .returning(*users.c)
    )
    return from_row(User, await conn.first(stmt))


async def rename(conn: Connection, *, org_id: str, user_id: str, user_name: str) -> User | None:
    stmt = (
        update(users)
        .where(users.c.org_id == org_id, users.c.user_id == user_id)
        .values(user_name=user_name)
        .returning(*users.c)
    )
    return from_row(User, await conn.first(stmt))


async def get(conn: Connection, *, org_id: str, user_id: str) -> User | None:
    stmt = select(users).where(users.c.org_id == org_id, users.c.user_id == user_id)
    return from_row(User, await conn.first(stmt))


# The names a memory's placeholders stand for: its user's and its agent's (either NULL when missing).
NAMES = """
SELECT (SELECT user_name FROM {schema}.users WHERE org_id = :org_id AND user_id = :user_id) AS user_name,
       (SELECT agent_label FROM {schema}.agents WHERE org_id = :org_id AND agent_id = :agent_id) AS agent_label
"""


def names(*, org_id: str, user_id: str, agent_id: str | None) -> Statement:
    """The user's name and the agent's label (a row of two columns)."""
    return Statement(NAMES, {"org_id": org_id, "user_id": user_id, "agent_id": agent_id})


async def list_for_org(conn: Connection, *, org_id: str, skip: int = 0, limit: int | None = None) -> list[User]:
    stmt = (
        select(users)
        .where(users.c.org_id == org_id)
        .order_by(users.c.created_at, users.c.user_id)
        .offset(skip)
        .limit(limit)
    )
    return [User.model_validate(row._asdict()) for row in await conn.fetch(stmt)]
