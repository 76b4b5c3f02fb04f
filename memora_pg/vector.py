"""``PgVectorDB``: Memora's ``BaseVectorDB`` on the memories table's own ``vector`` column.

The vectors are not a second store: each memory row carries its embedding and its
full-text vector. Writing a vector sets those columns (creating a standalone memory row for
an id that has none); deleting one clears them, so the memory stops being searchable while
its graph row stays, as upstream's vector delete leaves the graph node.

Searches rank through :mod:`memora_pg.graph.search`, as every face's do. By default
(``search_mode="hybrid"``) the score in [0, 1] fuses the cosine similarity and a BM25-style
full-text score (:mod:`memora_pg.graph.scoring`); the top ``search_top_k`` (10) with a score
above 0 are returned. ``"dense"`` scores by cosine similarity alone; ``"upstream"`` keeps
upstream Memora's Qdrant-style fusion (sum of 1/(rank + 2) over two lists of 12, kept above
0.35). The default search scores candidates only: the nearest memories (an exact sort of a
user's few, else the HNSW index), the memories holding a rare query word (the GIN index), and the
memories around each; so its cost follows the candidates, not the user's memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import tracing
from memora_pg.config import Settings
from memora_pg.contract import BaseVectorDB, MemorySearchScope
from memora_pg.db import Database
from memora_pg.embeddings import (
    Embedder,
    embed_checked,
    unrelated_similarity,
)
from memora_pg.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from memora_pg.face import EmbeddingFace
from memora_pg.graph import audit, memories, render, saves, search, timeline, users
from memora_pg.graph import validate as check
from memora_pg.graph.memories import NewMemory
from memora_pg.ids import parse_memory_id
from memora_pg.models import Memory, as_utc

MAX_QUERIES = 100
# The foreign key from a memory to its user (schema.NAMING_CONVENTION).
USER_KEY = "fk_memories_org_id_user_id_users"
MEMORY_KEY = "pk_memories"


def scope_value(scope: object) -> str:
    """The scope's value; memora_pg's and memora-core's enum members (and their plain values) are accepted."""
    value = getattr(scope, "value", scope)
    if value not in (MemorySearchScope.USER.value, MemorySearchScope.ORGANIZATION.value):
        raise InvalidInputError(f"memory_search_scope must be a MemorySearchScope, not {scope!r}")
    return str(value)


@tracing.instrument("memora", tracing.VECTOR)
class PgVectorDB(EmbeddingFace, BaseVectorDB):
    """Memora's vector DB on pgvector, on the same tables (and, when shared, the same transactions) as the graph."""

    def __init__(
        self,
        database: str | AsyncEngine | Database | None = None,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        schema: str | None = None,
        search_mode: str | None = None,
        exclude_superseded: bool = False,
    ) -> None:
        if isinstance(database, Database):
            self._db, self._owns_db = database, False
        else:
            base = settings or Settings()
            if schema is not None:
                base = Settings.model_validate({**base.model_dump(), "db_schema": schema})
            self._db, self._owns_db = Database(database, settings=base), True
        self._embedder = embedder
        self.search_mode = search.check_mode(search_mode or self._db.settings.search_mode, upstream=True)
        self.exclude_superseded = exclude_superseded
        self._db.migrate_on_first_use(self.new_database_dimensions)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts, checked against the database's dimension (called before a write opens)."""
        if not texts:
            return []
        await self.check_dimensions()
        return await embed_checked(self.embedder, texts, query=False)

    async def embed_memories(
        self, texts: Sequence[str], *, org_id: str, user_id: str, agent_id: str | None
    ) -> list[list[float]]:
        """Embed the texts of memories of ``user_id`` and ``agent_id`` as a read shows them: their own
        user's and agent's placeholders replaced by the names (:func:`render.for_embedding`). The names
        are read (one round trip) only when a text holds such a placeholder."""
        named = await self._as_embedded(texts, org_id=org_id, user_id=user_id, agent_id=agent_id)
        return await self.embed_documents(named)

    async def _as_embedded(self, texts: Sequence[str], *, org_id: str, user_id: str, agent_id: str | None) -> list[str]:
        """``texts`` (memories of ``user_id``, or the queries of that user's search) in the form both sides of
        the comparison are embedded in (:func:`render.for_embedding`): the user's and agent's placeholders and
        "the user" replaced by the names. The names are read (one round trip) only when a text refers to the
        user or agent that way."""
        given = list(texts)
        if not render.names_own_placeholders(given, user_id=user_id, agent_id=agent_id):
            return given
        (named,) = await self._db.execute_one(
            users.names(org_id=org_id, user_id=user_id, agent_id=agent_id), read_only=True, org_id=org_id
        )
        return [
            render.for_embedding(
                text, user_id=user_id, agent_id=agent_id, user_name=named.user_name, agent_label=named.agent_label
            )
            for text in given
        ]

    # -- writing -------------------------------------------------------------------------

    async def add_memories(
        self,
        org_id: str,
        user_id: str,
        agent_id: str,
        memory_ids: list[uuid.UUID] | list[str],
        memories: list[str],
        obtained_at: str,
    ) -> None:
        """Embed and upsert: a memory row gets these vectors; an id without a row becomes a standalone memory."""
        if not memories:
            raise InvalidInputError("At least one memory and its memory id is required")
        if len(memories) != len(memory_ids):
            raise InvalidInputError("Length of memories and memory_ids must match")
        check.require(check.ORG_USER_AGENT, org_id, user_id, agent_id)
        ids = [_memory_uuid(memory_id) for memory_id in memory_ids]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("Each memory id may appear once.")
        for memory in memories:
            check.memory_text(memory)
        try:
            at = as_utc(datetime.fromisoformat(obtained_at))
        except (TypeError, ValueError) as error:
            raise InvalidInputError("obtained_at must be an ISO 8601 datetime string") from error
        vectors = await self.embed_memories(memories, org_id=org_id, user_id=user_id, agent_id=agent_id)
        items = [
            NewMemory(memory_id=memory_id, text=text, embedding=vector)
            for memory_id, text, vector in zip(ids, memories, vectors, strict=True)
        ]
        audited = audit.entry(
            self._db.settings.audit,
            "vector.add_memories",
            user_id=user_id,
            agent_id=agent_id,
            ids={"memory_ids": [str(i) for i in ids]},
        )
        statement = saves.write(
            org_id=org_id,
            user_id=user_id,
            agent_id=agent_id,
            interaction_id=None,
            at=at,
            items=items,
            link=False,
            audited=audited,
            existing="upsert",
        )
        # A new id that a concurrent call stored first makes the write fail as a whole: run again, it is
        # then an update. An id of another user fails again.
        for attempt in range(2):
            try:
                await self._db.execute_one(statement, org_id=org_id)
                return
            except NotFoundError as error:
                if error.constraint_name == USER_KEY:
                    raise NotFoundError(check.USER_MISSING) from error
                raise
            except AlreadyExistsError as error:
                if error.constraint_name != MEMORY_KEY:
                    raise
                if attempt:
                    raise InvalidInputError("A memory id belongs to another user of the organization.") from error

    async def delete_memory(self, memory_id: str) -> None:
        """Make the memory unsearchable (its vector and full-text vector are cleared; the row stays)."""
        if memory_id:
            await self.delete_memories([memory_id])

    async def delete_memories(self, memory_ids: list[str]) -> None:
        ids = [parsed for parsed in (parse_memory_id(memory_id) for memory_id in memory_ids or []) if parsed]
        if not ids:
            return
        # Unscoped by its upstream signature: it finds the ids in any organization (and, under
        # row-level security, in none), so it is not audited per organization.
        async with self._db.transaction() as conn:
            await memories.make_unsearchable(conn, memory_ids=ids)

    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None:
        check.require(check.ORG_AND_USER, org_id, user_id)
        async with self._db.transaction(org_id=org_id) as conn:
            if await memories.make_unsearchable(conn, org_id=org_id, user_id=user_id):
                await audit.record(conn, org_id=org_id, audited=self._entry("vector.delete_all_user_memories", user_id))

    async def delete_all_organization_memories(self, org_id: str) -> None:
        check.require(check.ORG_ID, org_id)
        async with self._db.transaction(org_id=org_id) as conn:
            if await memories.make_unsearchable(conn, org_id=org_id):
                await audit.record(conn, org_id=org_id, audited=self._entry("vector.delete_all_organization_memories"))

    def _entry(self, method: str, user_id: str | None = None) -> audit.Entry | None:
        return audit.entry(self._db.settings.audit, method, user_id=user_id)

    # -- searching -----------------------------------------------------------------------

    async def search_memory(
        self,
        query: str,
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
        *,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
    ) -> list[tuple[Memory, float]]:
        if not query:
            raise InvalidInputError("A query is required")
        return (
            await self.search_memories(
                [query], memory_search_scope, org_id, user_id, agent_id, as_of=as_of, as_of_clock=as_of_clock
            )
        )[0]

    async def search_memories(
        self,
        queries: list[str],
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
        *,
        as_of: datetime | None = None,
        as_of_clock: str = "valid",
    ) -> list[list[tuple[Memory, float]]]:
        """One result list per query, best first; all queries in one round trip.

        With ``as_of``, only the versions current at that time are searched, by valid time
        (``as_of_clock="valid"``) or by system time (``"system"``).
        """
        at, clock = timeline.check_as_of(as_of), timeline.check_clock(as_of_clock)
        if not queries:
            raise InvalidInputError("At least one query is required")
        scope = scope_value(memory_search_scope)
        if scope == MemorySearchScope.USER.value and user_id is None:
            raise InvalidInputError("user_id is required in addition to org_id for user-specific search")
        check.require(check.ORG_ID, org_id)
        if scope == MemorySearchScope.USER.value:
            check.require(check.ORG_AND_USER, org_id, user_id)
        agent = check.optional_id(check.AGENT_ID, agent_id)
        if len(queries) > MAX_QUERIES:
            raise InvalidInputError(f"At most {MAX_QUERIES} queries are searched at once.")
        for query in queries:
            if not isinstance(query, str) or not query:
                raise InvalidInputError("A query is required")
            check.no_nul(query, "queries")
        await self.check_dimensions()
        user_scoped = scope == MemorySearchScope.USER.value
        asked = (
            await self._as_embedded(queries, org_id=org_id, user_id=user_id, agent_id=agent)
            if user_scoped and user_id is not None
            else queries
        )
        vectors = await embed_checked(self.embedder, asked, query=True)
        where = search.memories_where(
            org_id,
            user_id=user_id if user_scoped else None,
            agent_id=agent,
            current_only=self.exclude_superseded,
            as_of=at,
            clock=clock,
            schema=self._db.schema,
        )
        found = await search.find(
            self._db,
            search.MEMORIES,
            org_id=org_id,
            where=where,
            vectors=vectors,
            texts=queries,
            k=self._db.settings.search_top_k,
            scoped=user_scoped,
            unrelated_similarity=unrelated_similarity(self.embedder),
            embedder=self.embedder,
            mode=self.search_mode,
        )
        # A memory that neither arm relates to the query (score 0) is not a hit.
        return [[(render.hit_model(row), score) for row, score in hits if score > 0] for hits in found]


def _memory_uuid(value: object) -> uuid.UUID:
    parsed = parse_memory_id(value)
    if parsed is None:
        raise InvalidInputError(f"memory id {value!r} is not a UUID")
    return parsed
