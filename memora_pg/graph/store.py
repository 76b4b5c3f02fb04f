"""``PostgresGraphDB``: Memora's ``BaseGraphDB`` on PostgreSQL.

Every public method validates its arguments first (upstream's messages), then runs one
transaction that calls the data functions of this package, and returns pydantic models.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg import db, migrations
from memora_pg.config import Settings
from memora_pg.errors import NotFoundError, database_errors
from memora_pg.graph import agents, orgs, users
from memora_pg.graph import validate as check
from memora_pg.models import Agent, Organization, User


def _org_missing(org_id: str) -> NotFoundError:
    return NotFoundError("Organization (`org_id`) does not exist.")


class PostgresGraphDB:
    """The Memora graph on PostgreSQL: one database, one transaction per call.

    ``database`` is a ``postgresql://`` URL, an existing SQLAlchemy ``AsyncEngine`` (which
    the caller keeps owning), or None for the configured URL (``MEMORA_PG_DATABASE_URL`` or
    ``DATABASE_URL``) and otherwise the embedded server.
    """

    def __init__(
        self,
        database: str | AsyncEngine | None = None,
        *,
        settings: Settings | None = None,
        schema: str | None = None,
    ) -> None:
        overrides: dict[str, Any] = {}
        if schema is not None:
            overrides["db_schema"] = schema
        if isinstance(database, str):
            overrides["database_url"] = database
        self.settings = (settings or Settings()).model_copy(update=overrides) if overrides else (settings or Settings())
        if schema is not None:
            Settings.model_validate({"db_schema": schema})  # refuse a schema name that is not a plain identifier
        self._given_engine = database if isinstance(database, AsyncEngine) else None
        self._raw_engine: AsyncEngine | None = self._given_engine
        self._engine: AsyncEngine | None = (
            db.scoped(self._given_engine, self.settings.db_schema) if self._given_engine else None
        )
        self._closed = False

    # -- plumbing ------------------------------------------------------------------------

    async def _ready(self) -> AsyncEngine:
        if self._engine is None:
            self._raw_engine = await db.create_engine_from_settings(self.settings)
            self._engine = db.scoped(self._raw_engine, self.settings.db_schema)
        return self._engine

    @asynccontextmanager
    async def _unit_of_work(self) -> AsyncIterator[AsyncConnection]:
        """One transaction on a pooled connection (the engine is created on first use)."""
        engine = await self._ready()
        async with db.unit_of_work(engine) as conn:
            yield conn

    @property
    def engine(self) -> AsyncEngine | None:
        """The engine, mapped into memora_pg's schema (None until first use)."""
        return self._engine

    async def setup(self, *args: Any, **kwargs: Any) -> None:
        """Bring the schema to the current migration head; idempotent and safe from several processes."""
        await self._ready()
        assert self._raw_engine is not None
        with database_errors():
            await migrations.upgrade(self._raw_engine, migrations.MigrationOptions.from_settings(self.settings))

    async def close(self) -> None:
        """Release the connections of an engine this object created; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._given_engine is None and self._raw_engine is not None:
            await self._raw_engine.dispose()

    async def __aenter__(self) -> PostgresGraphDB:
        await self.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- organizations -------------------------------------------------------------------

    async def create_organization(self, org_name: str) -> Organization:
        check.require_name(check.ORG_NAME, org_name)
        async with self._unit_of_work() as conn:
            return await orgs.create(conn, org_name=org_name)

    async def update_organization(self, org_id: str, new_org_name: str) -> Organization:
        check.require(check.ORG_AND_NEW_NAME, org_id, new_org_name)
        check.require_name(check.ORG_AND_NEW_NAME, new_org_name)
        async with self._unit_of_work() as conn:
            org = await orgs.rename(conn, org_id=org_id, org_name=new_org_name)
        if org is None:
            raise _org_missing(org_id)
        return org

    async def delete_organization(self, org_id: str) -> None:
        check.require(check.ORG_ID, org_id)
        async with self._unit_of_work() as conn:
            await orgs.delete_one(conn, org_id=org_id)

    async def get_organization(self, org_id: str) -> Organization:
        check.require(check.ORG_ID, org_id)
        async with self._unit_of_work() as conn:
            org = await orgs.get(conn, org_id=org_id)
        if org is None:
            raise _org_missing(org_id)
        return org

    async def get_all_organizations(self, *, skip: int = 0, limit: int | None = None) -> list[Organization]:
        """Every organization, oldest first; ``skip``/``limit`` page through them."""
        skip, limit = _optional_paging(skip, limit)
        async with self._unit_of_work() as conn:
            return await orgs.list_all(conn, skip=skip, limit=limit)

    # -- agents --------------------------------------------------------------------------

    async def create_agent(self, org_id: str, agent_label: str, user_id: str | None = None) -> Agent:
        check.require(check.ORG_AND_AGENT_LABEL, org_id, agent_label)
        check.require_name(check.ORG_AND_AGENT_LABEL, agent_label)
        owner = check.optional_id(check.AGENT_USER_ID, user_id)
        async with self._unit_of_work() as conn:
            agent = await agents.create(conn, org_id=org_id, agent_label=agent_label, user_id=owner)
        if agent is None:
            raise NotFoundError("Failed to create agent.")
        return agent

    async def update_agent(self, org_id: str, agent_id: str, new_agent_label: str) -> Agent:
        check.require(check.UPDATE_AGENT, org_id, agent_id, new_agent_label)
        check.require_name(check.UPDATE_AGENT, new_agent_label)
        async with self._unit_of_work() as conn:
            agent = await agents.relabel(conn, org_id=org_id, agent_id=agent_id, agent_label=new_agent_label)
        if agent is None:
            raise NotFoundError("Agent (`org_id`, `agent_id`) does not exist.")
        return agent

    async def delete_agent(self, org_id: str, agent_id: str) -> None:
        check.require(check.ORG_AND_AGENT, org_id, agent_id)
        async with self._unit_of_work() as conn:
            await agents.delete_one(conn, org_id=org_id, agent_id=agent_id)

    async def get_agent(self, org_id: str, agent_id: str) -> Agent:
        check.require(check.ORG_AND_AGENT, org_id, agent_id)
        async with self._unit_of_work() as conn:
            agent = await agents.get(conn, org_id=org_id, agent_id=agent_id)
        if agent is None:
            raise NotFoundError("Agent (`org_id`, `agent_id`) does not exist.")
        return agent

    async def get_all_org_agents(self, org_id: str, *, skip: int = 0, limit: int | None = None) -> list[Agent]:
        """Every agent of the organization, user-specific ones included; oldest first."""
        check.require(check.ORG_ID, org_id)
        skip, limit = _optional_paging(skip, limit)
        async with self._unit_of_work() as conn:
            return await agents.list_for_org(conn, org_id=org_id, skip=skip, limit=limit)

    async def get_all_user_agents(
        self, org_id: str, user_id: str, *, skip: int = 0, limit: int | None = None
    ) -> list[Agent]:
        """Only the agents created for this user (not the org-wide ones); oldest first."""
        check.require(check.ORG_AND_USER, org_id, user_id)
        skip, limit = _optional_paging(skip, limit)
        async with self._unit_of_work() as conn:
            return await agents.list_for_org(conn, org_id=org_id, user_id=user_id, skip=skip, limit=limit)

    # -- users ---------------------------------------------------------------------------

    async def create_user(self, org_id: str, user_name: str) -> User:
        check.require(check.ORG_AND_USER_NAME, org_id, user_name)
        check.require_name(check.ORG_AND_USER_NAME, user_name)
        async with self._unit_of_work() as conn:
            user = await users.create(conn, org_id=org_id, user_name=user_name)
        if user is None:
            raise NotFoundError("Failed to create user.")
        return user

    async def update_user(self, org_id: str, user_id: str, new_user_name: str) -> User:
        check.require(check.UPDATE_USER, org_id, user_id, new_user_name)
        check.require_name(check.UPDATE_USER, new_user_name)
        async with self._unit_of_work() as conn:
            user = await users.rename(conn, org_id=org_id, user_id=user_id, user_name=new_user_name)
        if user is None:
            raise NotFoundError("User (`org_id`, `user_id`) does not exist.")
        return user

    async def delete_user(self, org_id: str, user_id: str) -> None:
        """Delete the user with its interactions, memories, embeddings and user-specific agents."""
        check.require(check.ORG_AND_USER, org_id, user_id)
        async with self._unit_of_work() as conn:
            await users.delete_one(conn, org_id=org_id, user_id=user_id)

    async def get_user(self, org_id: str, user_id: str) -> User:
        check.require(check.ORG_AND_USER, org_id, user_id)
        async with self._unit_of_work() as conn:
            user = await users.get(conn, org_id=org_id, user_id=user_id)
        if user is None:
            raise NotFoundError("User (`org_id`, `user_id`) does not exist.")
        return user

    async def get_all_org_users(self, org_id: str, *, skip: int = 0, limit: int | None = None) -> list[User]:
        """Every user of the organization, oldest first."""
        check.require(check.ORG_ID, org_id)
        skip, limit = _optional_paging(skip, limit)
        async with self._unit_of_work() as conn:
            return await users.list_for_org(conn, org_id=org_id, skip=skip, limit=limit)


def _optional_paging(skip: int, limit: int | None) -> tuple[int, int | None]:
    if limit is None:
        return check.paging(skip, 0)[0], None
    return check.paging(skip, limit)
