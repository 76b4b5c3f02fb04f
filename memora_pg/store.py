"""``PostgresGraphDB``: Memora's ``BaseGraphDB`` on PostgreSQL (a face over the data layer, ``memora_pg.graph``).

Every public method validates its arguments first (with upstream's messages), computes any
embeddings, then runs exactly one transaction that calls the data functions of
``memora_pg.graph`` and returns pydantic models. Graph rows and their vectors commit together.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import interaction_writes as writes
from memora_pg import tracing
from memora_pg.config import Settings
from memora_pg.contract import BaseGraphDB, BaseVectorDB
from memora_pg.db import Database
from memora_pg.driver import Connection, Row
from memora_pg.embeddings import Embedder
from memora_pg.errors import InvalidInputError, NotFoundError
from memora_pg.face import Face
from memora_pg.graph import agents, audit, erase, interactions, memories, orgs, saves, timeline, users, versions
from memora_pg.graph import validate as check
from memora_pg.graph.render import to_model
from memora_pg.graph.versions import Requested
from memora_pg.ids import new_short_id, parse_memory_id
from memora_pg.models import Agent, Interaction, MemoriesAndInteraction, Memory, Organization, User
from memora_pg.vector import PgVectorDB

T = TypeVar("T")
logger = logging.getLogger(__name__)


_DEFAULT: Any = object()


@tracing.instrument("memora", tracing.GRAPH)
class PostgresGraphDB(Face, BaseGraphDB):
    """The Memora graph on PostgreSQL: one database, one transaction per call.

    ``database`` is a ``postgresql://`` URL, an existing SQLAlchemy ``AsyncEngine`` (which the
    caller keeps owning), or None for the configured URL (``MEMORA_PG_DATABASE_URL`` or
    ``DATABASE_URL``) and otherwise the embedded server.

    Unless ``associated_vector_db`` is given, the graph makes a :class:`PgVectorDB` on the same
    engine with ``embedder`` (default: the offline multilingual-e5-small model), so graph rows
    and their embeddings are written in one transaction. ``associated_vector_db=None`` stores
    no embeddings. Any other vector DB is called as upstream Memora calls it: inside the
    graph's transaction, after the graph's statements and before the commit (not atomic).
    """

    def __init__(
        self,
        database: str | AsyncEngine | None = None,
        *,
        embedder: Embedder | None = None,
        associated_vector_db: BaseVectorDB | None = _DEFAULT,
        settings: Settings | None = None,
        schema: str | None = None,
    ) -> None:
        base = settings or Settings()
        if schema is not None:
            base = Settings.model_validate({**base.model_dump(), "db_schema": schema})
        self._db = Database(database, settings=base)
        self.settings = self._db.settings
        if associated_vector_db is _DEFAULT:
            associated_vector_db = PgVectorDB(self._db, embedder=embedder)
        self.associated_vector_db = associated_vector_db
        # No setup() needed: the first statement brings the schema to head, the vectors sized as setup() sizes them.
        self._db.migrate_on_first_use(self.new_database_dimensions)

    # -- plumbing ------------------------------------------------------------------------

    def get_associated_vector_db(self) -> BaseVectorDB | None:
        return self.associated_vector_db

    def new_database_dimensions(self) -> int:
        """The vector dimension a new database gets: the associated PgVectorDB's embedder's, or the configured one."""
        store = self.associated_vector_db
        if isinstance(store, PgVectorDB):
            return store.new_database_dimensions()
        return self.settings.embedding_dimensions

    async def check_dimensions(self) -> int | None:
        """The associated vector DB's embedder checked against the database, when it is memora_pg's own on it."""
        native, _ = await self._vector_stores()
        return None if native is None else await native.check_dimensions()

    async def _vector_stores(self) -> tuple[PgVectorDB | None, BaseVectorDB | None]:
        """The associated vector DB as memora_pg's own on this server (writes are then atomic), or as another."""
        return await writes.vector_stores(self.associated_vector_db, self._db)

    # -- organizations -------------------------------------------------------------------

    async def create_organization(self, org_name: str) -> Organization:
        check.require_name(check.ORG_NAME, org_name)
        org_id = new_short_id()
        async with self._db.transaction(org_id=org_id) as conn:
            org = await orgs.create(conn, org_id=org_id, org_name=org_name)
            await self._record_audit(conn, org_id=org_id, method="create_organization")
        return org

    async def update_organization(self, org_id: str, new_org_name: str) -> Organization:
        check.require(check.ORG_AND_NEW_NAME, org_id, new_org_name)
        check.require_name(check.ORG_AND_NEW_NAME, new_org_name)
        return await self._audited(
            org_id,
            lambda conn: orgs.rename(conn, org_id=org_id, org_name=new_org_name),
            method="update_organization",
            missing=check.ORG_MISSING,
            ids=lambda _: {},
        )

    async def delete_organization(self, org_id: str) -> None:
        """Delete the organization and everything it owns, embeddings included, in one transaction."""
        await self.erase_organization(org_id)

    async def erase_organization(self, org_id: str) -> dict[str, int]:
        """``delete_organization``, returning how many rows of each kind were removed.

        Every table's rows of the organization go, audit rows and history included; nothing of it
        remains to search for afterwards.
        """
        check.require(check.ORG_ID, org_id)
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> dict[str, int]:
            counts = await erase.erase_organization(conn, org_id=org_id)
            if foreign is not None:
                await foreign.delete_all_organization_memories(org_id)
            return counts

        return await self._db.retrying(work, org_id=org_id)

    async def get_organization(self, org_id: str) -> Organization:
        check.require(check.ORG_ID, org_id)
        return await self._found(org_id, lambda conn: orgs.get(conn, org_id=org_id), missing=check.ORG_MISSING)

    async def get_all_organizations(self, *, skip: int = 0, limit: int | None = None) -> list[Organization]:
        """Every organization, oldest first; ``skip``/``limit`` page through them."""
        skip, limit = check.optional_paging(skip, limit)
        # Under row-level security this lists only... nothing: no organization is named.
        async with self._db.transaction(read_only=True) as conn:
            return await orgs.list_all(conn, skip=skip, limit=limit)

    # -- agents --------------------------------------------------------------------------

    async def create_agent(self, org_id: str, agent_label: str, user_id: str | None = None) -> Agent:
        check.require(check.ORG_AND_AGENT_LABEL, org_id, agent_label)
        check.require_name(check.ORG_AND_AGENT_LABEL, agent_label)
        owner = check.optional_id(check.AGENT_USER_ID, user_id)
        return await self._audited(
            org_id,
            lambda conn: agents.create(conn, org_id=org_id, agent_label=agent_label, user_id=owner),
            method="create_agent",
            missing="Failed to create agent.",
            ids=lambda agent: {"user_id": owner, "agent_id": agent.agent_id},
        )

    async def update_agent(self, org_id: str, agent_id: str, new_agent_label: str) -> Agent:
        check.require(check.UPDATE_AGENT, org_id, agent_id, new_agent_label)
        check.require_name(check.UPDATE_AGENT, new_agent_label)
        return await self._audited(
            org_id,
            lambda conn: agents.relabel(conn, org_id=org_id, agent_id=agent_id, agent_label=new_agent_label),
            method="update_agent",
            missing=check.AGENT_MISSING,
            ids=lambda _: {"agent_id": agent_id},
        )

    async def delete_agent(self, org_id: str, agent_id: str) -> None:
        """Delete only the agent; interactions and memories keep its id and stay readable."""
        check.require(check.ORG_AND_AGENT, org_id, agent_id)
        async with self._db.transaction(org_id=org_id) as conn:
            if await agents.delete_one(conn, org_id=org_id, agent_id=agent_id):
                await self._record_audit(conn, org_id=org_id, method="delete_agent", agent_id=agent_id)

    async def get_agent(self, org_id: str, agent_id: str) -> Agent:
        check.require(check.ORG_AND_AGENT, org_id, agent_id)
        return await self._found(
            org_id, lambda conn: agents.get(conn, org_id=org_id, agent_id=agent_id), missing=check.AGENT_MISSING
        )

    async def get_all_org_agents(self, org_id: str, *, skip: int = 0, limit: int | None = None) -> list[Agent]:
        """Every agent of the organization, user-specific ones included; oldest first."""
        check.require(check.ORG_ID, org_id)
        skip, limit = check.optional_paging(skip, limit)
        return await self._read(org_id, lambda conn: agents.list_for_org(conn, org_id=org_id, skip=skip, limit=limit))

    async def get_all_user_agents(
        self, org_id: str, user_id: str, *, skip: int = 0, limit: int | None = None
    ) -> list[Agent]:
        """Only the agents created for this user (not the org-wide ones); oldest first."""
        check.require(check.ORG_AND_USER, org_id, user_id)
        skip, limit = check.optional_paging(skip, limit)
        return await self._read(
            org_id, lambda conn: agents.list_for_org(conn, org_id=org_id, user_id=user_id, skip=skip, limit=limit)
        )

    # -- users ---------------------------------------------------------------------------

    async def create_user(self, org_id: str, user_name: str) -> User:
        check.require(check.ORG_AND_USER_NAME, org_id, user_name)
        check.require_name(check.ORG_AND_USER_NAME, user_name)
        return await self._audited(
            org_id,
            lambda conn: users.create(conn, org_id=org_id, user_name=user_name),
            method="create_user",
            missing="Failed to create user.",
            ids=lambda user: {"user_id": user.user_id},
        )

    async def update_user(self, org_id: str, user_id: str, new_user_name: str) -> User:
        check.require(check.UPDATE_USER, org_id, user_id, new_user_name)
        check.require_name(check.UPDATE_USER, new_user_name)
        return await self._audited(
            org_id,
            lambda conn: users.rename(conn, org_id=org_id, user_id=user_id, user_name=new_user_name),
            method="update_user",
            missing=check.USER_MISSING,
            ids=lambda _: {"user_id": user_id},
        )

    async def delete_user(self, org_id: str, user_id: str) -> None:
        """Delete the user with its interactions, memories, embeddings and user-specific agents."""
        await self.erase_user(org_id, user_id)

    async def erase_user(self, org_id: str, user_id: str) -> dict[str, int]:
        """``delete_user``, returning how many rows of each kind were removed.

        History events, AutoGen entries and audit rows that name the user go too. The erase is
        audited without naming the user: the audit row holds only the counts.
        """
        check.require(check.ORG_AND_USER, org_id, user_id)
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> dict[str, int]:
            counts = await erase.erase_user(conn, org_id=org_id, user_id=user_id)
            if counts["users"]:
                await self._record_audit(conn, org_id=org_id, method="erase_user", ids={"removed": counts})
            if foreign is not None:
                await foreign.delete_all_user_memories(org_id, user_id)
            return counts

        return await self._db.retrying(work, org_id=org_id)

    async def get_user(self, org_id: str, user_id: str) -> User:
        check.require(check.ORG_AND_USER, org_id, user_id)
        return await self._found(
            org_id, lambda conn: users.get(conn, org_id=org_id, user_id=user_id), missing=check.USER_MISSING
        )

    async def get_all_org_users(self, org_id: str, *, skip: int = 0, limit: int | None = None) -> list[User]:
        """Every user of the organization, oldest first."""
        check.require(check.ORG_ID, org_id)
        skip, limit = check.optional_paging(skip, limit)
        return await self._read(org_id, lambda conn: users.list_for_org(conn, org_id=org_id, skip=skip, limit=limit))

    # -- interactions --------------------------------------------------------------------

    async def save_interaction_with_memories(
        self, org_id: str, agent_id: str, user_id: str, memories_and_interaction: MemoriesAndInteraction
    ) -> tuple[str, datetime]:
        """Store a new interaction, its messages and its memories (with their vectors) atomically.

        A missing user or agent is ``NotFoundError`` and a source position outside the message
        list is ``InvalidInputError``; in both cases nothing is written.
        """
        check.require(check.ORG_USER_AGENT, org_id, user_id, agent_id)
        write = await self._prepare(memories_and_interaction, org_id=org_id, user_id=user_id, agent_id=agent_id)
        interaction_id = new_short_id()
        audited = self._entry(
            "save_interaction_with_memories", user_id=user_id, agent_id=agent_id, ids=writes.ids(interaction_id, write)
        )
        linear = self.settings.contradiction_chains == "linear"
        statement = saves.save(
            org_id=org_id,
            user_id=user_id,
            agent_id=agent_id,
            interaction_id=interaction_id,
            at=write.at,
            messages=write.messages,
            items=write.items,
            audited=audited,
            link=not linear,
        )
        if not linear and write.foreign is None:
            saved = saves.saved(await self._db.execute_one(statement, org_id=org_id), write.items)
            writes.owners_exist(saved)
            unlinked = saved.unlinked
        else:

            async def save_then_link(conn: Connection) -> list[uuid.UUID]:
                saved = saves.saved(await conn.run(statement), write.items)
                writes.owners_exist(saved)
                return await writes.linked_and_foreign(
                    conn, org_id, user_id, agent_id, write, saved.unlinked, linear=linear
                )

            unlinked = await self._db.retrying(save_then_link, org_id=org_id)
        writes.warn_unlinked(unlinked)
        return interaction_id, write.at

    async def update_interaction_and_memories(
        self,
        org_id: str,
        agent_id: str,
        user_id: str,
        interaction_id: str,
        updated_memories_and_interaction: MemoriesAndInteraction,
    ) -> tuple[str, datetime]:
        """Reconcile the stored messages with the new complete list (§7) and add the new memories.

        The interaction row is locked for the whole transaction, so concurrent updates of one
        interaction apply one after the other and the stored list always equals one caller's list.
        """
        check.require(check.ORG_USER_AGENT, org_id, user_id, agent_id)
        check.require(check.ORG_USER_INTERACTION, org_id, user_id, interaction_id)
        write = await self._prepare(updated_memories_and_interaction, org_id=org_id, user_id=user_id, agent_id=agent_id)
        audited = self._entry(
            "update_interaction_and_memories", user_id=user_id, agent_id=agent_id, ids=writes.ids(interaction_id, write)
        )

        async def work(conn: Connection) -> list[uuid.UUID]:
            locked = await interactions.lock_for_update(
                conn, org_id=org_id, user_id=user_id, interaction_id=interaction_id, agent_id=agent_id
            )
            if locked is None:
                raise NotFoundError(check.INTERACTION_MISSING)
            stored, agent_exists = locked
            writes.owners_exist(saves.Saved(True, agent_exists, []))
            start = interactions.divergence(stored, write.messages)
            if start < len(stored):
                await interactions.truncate_messages(conn, org_id=org_id, interaction_id=interaction_id, start=start)
            await interactions.append_messages(
                conn, org_id=org_id, interaction_id=interaction_id, start=start, new=write.messages[start:]
            )
            await interactions.touch(conn, org_id=org_id, interaction_id=interaction_id, agent_id=agent_id, at=write.at)
            linear = self.settings.contradiction_chains == "linear"
            return await writes.to_interaction(
                conn, org_id, user_id, agent_id, interaction_id, write, audited, linear=linear
            )

        writes.warn_unlinked(await self._db.retrying(work, org_id=org_id))
        return interaction_id, write.at

    async def _prepare(self, given: object, *, org_id: str, user_id: str, agent_id: str) -> writes.Write:
        native, foreign = await self._vector_stores()
        return await writes.prepare(given, native, foreign, org_id=org_id, user_id=user_id, agent_id=agent_id)

    async def get_interaction(
        self, org_id: str, user_id: str, interaction_id: str, with_messages: bool = True, with_memories: bool = True
    ) -> Interaction:
        check.require(check.ORG_USER_INTERACTION, org_id, user_id, interaction_id)
        statement = interactions.one(
            org_id=org_id,
            user_id=user_id,
            interaction_id=interaction_id,
            with_messages=bool(with_messages),
            with_memories=bool(with_memories),
        )
        rows = await self._db.execute_one(statement, read_only=True, org_id=org_id)
        if not rows:
            raise NotFoundError(check.INTERACTION_MISSING)
        return interactions.interaction_of(rows[0])

    async def get_all_user_interactions(
        self,
        org_id: str,
        user_id: str,
        with_their_messages: bool = True,
        with_their_memories: bool = True,
        skip: int = 0,
        limit: int = 100,
    ) -> list[Interaction]:
        """The user's interactions, most recently updated first, in one statement."""
        check.require(check.ORG_AND_USER, org_id, user_id)
        skip, limit = check.paging(skip, limit)
        statement = interactions.page(
            org_id=org_id,
            user_id=user_id,
            with_messages=bool(with_their_messages),
            with_memories=bool(with_their_memories),
            skip=skip,
            limit=limit,
        )
        return [
            interactions.interaction_of(row)
            for row in await self._db.execute_one(statement, read_only=True, org_id=org_id)
        ]

    async def delete_user_interaction_and_its_memories(self, org_id: str, user_id: str, interaction_id: str) -> None:
        """Delete the interaction, its messages and the memories it produced; raises if it does not exist."""
        check.require(check.ORG_USER_INTERACTION, org_id, user_id, interaction_id)
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> None:
            doomed = await interactions.memory_ids(conn, org_id=org_id, user_id=user_id, interaction_id=interaction_id)
            if doomed is None:
                raise NotFoundError(check.INTERACTION_MISSING)
            await interactions.delete_one(
                conn, org_id=org_id, user_id=user_id, interaction_id=interaction_id, memory_ids=doomed
            )
            await self._record_audit(
                conn,
                org_id=org_id,
                method="delete_user_interaction_and_its_memories",
                user_id=user_id,
                ids={"interaction_id": interaction_id, "memory_ids": [str(m) for m in doomed]},
            )
            if foreign is not None and doomed:
                await foreign.delete_memories([str(memory_id) for memory_id in doomed])

        await self._db.retrying(work, org_id=org_id)

    async def delete_all_user_interactions_and_their_memories(self, org_id: str, user_id: str) -> None:
        check.require(check.ORG_AND_USER, org_id, user_id)
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> None:
            if await interactions.delete_for_user(conn, org_id=org_id, user_id=user_id):
                await self._record_audit(
                    conn, org_id=org_id, method="delete_all_user_interactions_and_their_memories", user_id=user_id
                )
            if foreign is not None:
                await foreign.delete_all_user_memories(org_id, user_id)

        await self._db.retrying(work, org_id=org_id)

    # -- memories ------------------------------------------------------------------------

    async def fetch_user_memories_resolved(
        self, org_user_mem_ids: list[dict[str, str]], *, as_of: datetime | None = None, as_of_clock: str = "valid"
    ) -> list[Memory]:
        """The newest version(s) of each requested memory, rendered, de-duplicated, in request order.

        With ``as_of``, the versions of each memory's lineage that were current at that time, by valid
        time (``as_of_clock="valid"``: when the facts were true) or by system time (``"system"``: what
        memora_pg had stored then).
        """
        return (
            await self.fetch_user_memories_resolved_batch([org_user_mem_ids], as_of=as_of, as_of_clock=as_of_clock)
        )[0]

    async def fetch_user_memories_resolved_batch(
        self,
        batch_org_user_mem_ids: list[list[dict[str, str]]],
        *,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
    ) -> list[list[Memory]]:
        """One list per input list, resolved in one statement per organization named (usually one);
        ``as_of`` as in :meth:`fetch_user_memories_resolved`."""
        at, clock = timeline.check_as_of(as_of), timeline.check_clock(as_of_clock)
        if not isinstance(batch_org_user_mem_ids, list | tuple):
            raise InvalidInputError("batch_org_user_mem_ids must be a list of lists of dicts.")
        requests: list[Requested] = []
        for batch, entries in enumerate(batch_org_user_mem_ids):
            if not isinstance(entries, list | tuple):
                raise InvalidInputError("batch_org_user_mem_ids must be a list of lists of dicts.")
            for position, entry in enumerate(entries):
                request = check.requested(batch, position, entry)
                if request is not None:
                    requests.append(request)
        if len(requests) > check.MAX_FETCH_ENTRIES:
            raise InvalidInputError(f"At most {check.MAX_FETCH_ENTRIES} memories are fetched at once.")
        if not batch_org_user_mem_ids:
            return []
        # Under row-level security the transaction sees one organization: the first one named.
        org_id = requests[0].org_id if requests else None
        statements = versions.resolving(requests, as_of=at, clock=clock)
        rows: Sequence[Row] = []
        if len(statements) == 1:
            # One statement (one organization, the usual case): autocommit, no BEGIN and COMMIT.
            rows = await self._db.execute_one(statements[0], read_only=True, org_id=org_id)
        elif statements:
            async with self._db.transaction(read_only=True, org_id=org_id) as conn:
                rows = [row for statement in statements for row in await conn.run(statement)]
        return versions.resolved(rows, len(batch_org_user_mem_ids), merged=len(statements) > 1)

    async def get_user_memory(self, org_id: str, user_id: str, memory_id: str) -> Memory:
        """That exact version (no resolution), rendered, with its surviving sources."""
        check.require(check.ORG_USER_MEMORY, org_id, user_id, memory_id)
        parsed = parse_memory_id(memory_id)
        rows: Sequence[Row] = []
        if parsed is not None:
            statement = memories.one(org_id=org_id, user_id=user_id, memory_id=parsed)
            rows = await self._db.execute_one(statement, read_only=True, org_id=org_id)
        if not rows:
            raise NotFoundError(check.MEMORY_MISSING)
        return to_model(rows[0])

    async def get_user_memory_history(
        self, org_id: str, user_id: str, memory_id: str, *, as_of: datetime | None = None, as_of_clock: str = "valid"
    ) -> list[Memory]:
        """``[the memory, the one it superseded, …, the oldest]``; ``[]`` for a missing memory.

        With ``as_of``, the versions that had begun by then (``as_of_clock`` as in
        :meth:`fetch_user_memories_resolved`); ``[]`` when the memory itself had not.
        """
        check.require(check.ORG_USER_MEMORY, org_id, user_id, memory_id)
        at, clock = timeline.check_as_of(as_of), timeline.check_clock(as_of_clock)
        parsed = parse_memory_id(memory_id)
        if parsed is None:
            return []
        statement = versions.history_of(org_id=org_id, user_id=user_id, memory_id=parsed, as_of=at, clock=clock)
        return [to_model(row) for row in await self._db.execute_one(statement, read_only=True, org_id=org_id)]

    async def get_all_user_memories(
        self,
        org_id: str,
        user_id: str,
        agent_id: str | None = None,
        skip: int = 0,
        limit: int = 1000,
        *,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
    ) -> list[Memory]:
        """Every stored version of the user's memories, newest first (ties: newest written first).

        With ``as_of``, only the versions current at that time (``as_of_clock`` as in
        :meth:`fetch_user_memories_resolved`).
        """
        check.require(check.ORG_AND_USER, org_id, user_id)
        at, clock = timeline.check_as_of(as_of), timeline.check_clock(as_of_clock)
        agent = check.optional_id(check.AGENT_ID, agent_id)
        skip, limit = check.paging(skip, limit)
        statement = memories.listing(
            org_id=org_id, user_id=user_id, agent_id=agent, skip=skip, limit=limit, as_of=at, clock=clock
        )
        return [to_model(row) for row in await self._db.execute_one(statement, read_only=True, org_id=org_id)]

    async def delete_user_memory(self, org_id: str, user_id: str, memory_id: str) -> None:
        """Delete that one memory with its sources; its successors are re-attached to its predecessor."""
        check.require(check.ORG_USER_MEMORY, org_id, user_id, memory_id)
        parsed = parse_memory_id(memory_id)
        if parsed is None:
            return
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> None:
            deleted = await memories.delete_one(conn, org_id=org_id, user_id=user_id, memory_id=parsed)
            if deleted:
                await self._record_audit(
                    conn, org_id=org_id, method="delete_user_memory", user_id=user_id, ids={"memory_id": str(parsed)}
                )
            if foreign is not None and deleted:
                await foreign.delete_memory(str(parsed))

        await self._db.retrying(work, org_id=org_id)

    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None:
        """Delete every memory of the user; interactions and messages stay."""
        check.require(check.ORG_AND_USER, org_id, user_id)
        foreign = await self._foreign_vector_db()

        async def work(conn: Connection) -> None:
            if await memories.delete_for_user(conn, org_id=org_id, user_id=user_id):
                await self._record_audit(conn, org_id=org_id, method="delete_all_user_memories", user_id=user_id)
            if foreign is not None:
                await foreign.delete_all_user_memories(org_id, user_id)

        await self._db.retrying(work, org_id=org_id)

    def _entry(self, method: str, **fields: Any) -> audit.Entry | None:
        return audit.entry(self.settings.audit, method, **fields)

    async def _foreign_vector_db(self) -> BaseVectorDB | None:
        return (await self._vector_stores())[1]
