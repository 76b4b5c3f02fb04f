"""Organizations: the tenant root. Deleting one cascades to everything it owns."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete as sa_delete
from sqlalchemy import insert, select, update

from memora_pg.driver import Connection
from memora_pg.models import Organization, from_row
from memora_pg.schema import organizations
from memora_pg.statements import function_call

# The organization and users a write needs, made on first sight (migration 0018's ``ensure_owners``).
ENSURE_OWNERS = function_call("ensure_owners", ("org_id", "org_name", "user_ids", "user_names"))


async def ensure_owners(
    conn: Connection, *, org_id: str, org_name: str, user_ids: Sequence[str] = (), user_names: Sequence[str] = ()
) -> None:
    """Create the organization and the users unless they exist (a user without a name is named by its id);
    none is changed."""
    names = list(user_names) or None
    await conn.execute(
        ENSURE_OWNERS, {"org_id": org_id, "org_name": org_name, "user_ids": list(user_ids), "user_names": names}
    )


async def create(conn: Connection, *, org_id: str, org_name: str) -> Organization:
    stmt = insert(organizations).values(org_id=org_id, org_name=org_name).returning(*organizations.c)
    return Organization.model_validate((await conn.one(stmt))._asdict())


async def rename(conn: Connection, *, org_id: str, org_name: str) -> Organization | None:
    stmt = (
        update(organizations)
        .where(organizations.c.org_id == org_id)
        .values(org_name=org_name)
        .returning(*organizations.c)
    )
    return from_row(Organization, await conn.first(stmt))


async def get(conn: Connection, *, org_id: str) -> Organization | None:
    return from_row(Organization, await conn.first(select(organizations).where(organizations.c.org_id == org_id)))


async def list_all(conn: Connection, *, skip: int = 0, limit: int | None = None) -> list[Organization]:
    stmt = select(organizations).order_by(organizations.c.created_at, organizations.c.org_id).offset(skip).limit(limit)
    return [Organization.model_validate(row._asdict()) for row in await conn.fetch(stmt)]


async def delete(conn: Connection, *, org_id: str) -> None:
    """Delete the organization; everything in it goes by cascade."""
    await conn.execute(sa_delete(organizations).where(organizations.c.org_id == org_id))
