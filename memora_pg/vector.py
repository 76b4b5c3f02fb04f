"""``PgVectorDB``: Memora's ``BaseVectorDB`` on the memories table's own ``vector`` column.

The vectors are not a second store: each memory row carries its embedding and its
full-text vector. Writing a vector sets those columns (creating a standalone memory row for
an id that has none); deleting one clears them, so the memory stops being searchable while
its graph row stays, as upstream's vector delete leaves the graph node.

Search follows memora-semantics.md §12.3. In the default hybrid mode two candidate lists are
made per query: the 12 nearest memories by cosine similarity (kept when similarity >= 0.4)
and the 12 best PostgreSQL full-text matches. They are fused by reciprocal rank as upstream's
Qdrant does: score = sum over the lists that hold a memory of 1 / (rank + 2), rank counted from
0, so 1.0 means first in both lists, 0.5 first in one. The top 10 with score > 0.35 are
returned. In dense mode the score is the cosine similarity itself (>= 0.4, top 10).

User-scoped searches sort the user's memories exactly (the btree on (org_id, user_id) finds
them), so they always return the true nearest neighbours. Organization-wide searches use
the HNSW index with pgvector's iterative scans, so filters never leave fewer results than
exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg import vector_params
from memora_pg.config import Settings
from memora_pg.contract import BaseVectorDB, MemorySearchScope
from memora_pg.db import Database, sql
from memora_pg.embeddings import Embedder, default_embedder, embed_checked
from memora_pg.errors import EmbeddingError, InvalidInputError, NotFoundError
from memora_pg.graph import validate as check
from memora_pg.models import Memory, as_utc

DENSE_CANDIDATES = 12
LEXICAL_CANDIDATES = 12
MIN_SIMILARITY = 0.4
MIN_FUSED_SCORE = 0.35
TOP_K = 10
MAX_QUERIES = 100


def dimensions_for_new_database(embedder: Callable[[], Embedder], settings: Settings) -> int:
    """The embedder's dimension; the configured one when the default embedder is not installed."""
    try:
        return embedder().dimensions
    except EmbeddingError:
        return settings.embedding_dimensions


def scope_value(scope: object) -> str:
    """The scope's value; memora_pg's and memora-core's enum members (and their plain values) are accepted."""
    value = getattr(scope, "value", scope)
    if value not in (MemorySearchScope.USER.value, MemorySearchScope.ORGANIZATION.value):
        raise InvalidInputError(f"memory_search_scope must be a MemorySearchScope, not {scope!r}")
    return str(value)


class PgVectorDB(BaseVectorDB):
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
        mode = search_mode or self._db.settings.search_mode
        if mode not in ("hybrid", "dense"):
            raise InvalidInputError("search_mode must be 'hybrid' or 'dense'")
        self.search_mode = mode
        self.exclude_superseded = exclude_superseded

    # -- plumbing ------------------------------------------------------------------------

    @property
    def database(self) -> Database:
        return self._db

    @property
    def embedder(self) -> Embedder:
        """The embedder; without one given, the offline default (multilingual-e5-small) on first use."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def new_database_dimensions(self) -> int:
        """The vector dimension a new database gets: the embedder's, or the configured one."""
        return dimensions_for_new_database(lambda: self.embedder, self._db.settings)

    async def setup(self, *args: Any, **kwargs: Any) -> None:
        """Bring the schema to head (the vector column gets the embedder's dimension) and check the dimension."""
        await self._db.migrate(self.new_database_dimensions())
        await self.check_dimensions()

    async def close(self) -> None:
        if self._owns_db:
            await self._db.close()

    async def check_dimensions(self) -> int:
        """The database's vector dimension; an embedder of another one is a ConfigurationError naming both."""
        return await self._db.check_embedder(self.embedder.dimensions)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts, checked against the database's dimension (called before a write opens)."""
        if not texts:
            return []
        await self.check_dimensions()
        return await embed_checked(self.embedder, texts, query=False)

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
        for memory in memories:
            check.memory_text(memory)
        try:
            at = as_utc(datetime.fromisoformat(obtained_at))
        except (TypeError, ValueError) as error:
            raise InvalidInputError("obtained_at must be an ISO 8601 datetime string") from error
        vectors = await self.embed_documents(memories)
        try:
            async with self._db.transaction(org_id=org_id) as conn:
                await upsert(
                    conn,
                    org_id=org_id,
                    user_id=user_id,
                    agent_id=agent_id,
                    memory_ids=ids,
                    texts=memories,
                    vectors=vectors,
                    obtained_at=at,
                    text_search_config=self._db.settings.text_search_config,
                )
                await self._db.audit(
                    conn,
                    org_id=org_id,
                    method="vector.add_memories",
                    user_id=user_id,
                    agent_id=agent_id,
                    ids={"memory_ids": [str(i) for i in ids]},
                )
        except NotFoundError as error:
            raise NotFoundError("User (`org_id`, `user_id`) does not exist.") from error

    async def delete_memory(self, memory_id: str) -> None:
        """Make the memory unsearchable (its vector and full-text vector are cleared; the row stays)."""
        if memory_id:
            await self.delete_memories([memory_id])

    async def delete_memories(self, memory_ids: list[str]) -> None:
        ids = [parsed for parsed in (_maybe_uuid(memory_id) for memory_id in memory_ids or []) if parsed]
        if not ids:
            return
        # Unscoped by its upstream signature: it finds the ids in any organization (and, under
        # row-level security, in none), so it is not audited per organization.
        async with self._db.transaction() as conn:
            await conn.execute(sql(conn, UNSEARCHABLE_BY_ID), {"memory_ids": ids})

    async def delete_all_user_memories(self, org_id: str, user_id: str) -> None:
        check.require(check.ORG_AND_USER, org_id, user_id)
        async with self._db.transaction(org_id=org_id) as conn:
            result = await conn.execute(sql(conn, UNSEARCHABLE_FOR_USER), {"org_id": org_id, "user_id": user_id})
            if result.rowcount:
                await self._db.audit(conn, org_id=org_id, method="vector.delete_all_user_memories", user_id=user_id)

    async def delete_all_organization_memories(self, org_id: str) -> None:
        check.require(check.ORG_ID, org_id)
        async with self._db.transaction(org_id=org_id) as conn:
            result = await conn.execute(sql(conn, UNSEARCHABLE_FOR_ORG), {"org_id": org_id})
            if result.rowcount:
                await self._db.audit(conn, org_id=org_id, method="vector.delete_all_organization_memories")

    # -- searching -----------------------------------------------------------------------

    async def search_memory(
        self,
        query: str,
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[tuple[Memory, float]]:
        if not query:
            raise InvalidInputError("A query is required")
        return (await self.search_memories([query], memory_search_scope, org_id, user_id, agent_id))[0]

    async def search_memories(
        self,
        queries: list[str],
        memory_search_scope: MemorySearchScope,
        org_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[list[tuple[Memory, float]]]:
        """One result list per query, best first; all queries in one round trip."""
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
        vectors = await embed_checked(self.embedder, queries, query=True)
        # A user-scoped search is one statement; an organization-wide one sets its HNSW options first.
        user_scoped = scope == MemorySearchScope.USER.value
        async with self._db.transaction(read_only=True, org_id=org_id, one_statement=user_scoped) as conn:
            return await search(
                conn,
                vectors=vectors,
                texts=queries,
                org_id=org_id,
                user_id=user_id if user_scoped else None,
                agent_id=agent,
                mode=self.search_mode,
                exclude_superseded=self.exclude_superseded,
                settings=self._db.settings,
            )


def _maybe_uuid(value: object) -> uuid.UUID | None:
    from memora_pg.ids import parse_memory_id

    return parse_memory_id(value)


def _memory_uuid(value: object) -> uuid.UUID:
    parsed = _maybe_uuid(value)
    if parsed is None:
        raise InvalidInputError(f"memory id {value!r} is not a UUID")
    return parsed


# -- statements ----------------------------------------------------------------------------

UPSERT = """
INSERT INTO {schema}.memories AS m
    (org_id, memory_id, user_id, agent_id, memory, obtained_at, embedding, search_text)
SELECT :org_id, given.memory_id, :user_id, :agent_id, given.memory, :obtained_at,
       given.embedding, to_tsvector(CAST(:ts_config AS regconfig), given.memory)
FROM unnest(CAST(:memory_ids AS uuid[]), CAST(:memories AS text[]), CAST(:embeddings AS vector[]))
     AS given(memory_id, memory, embedding)
ON CONFLICT (org_id, memory_id) DO UPDATE
SET memory = excluded.memory, agent_id = excluded.agent_id, obtained_at = excluded.obtained_at,
    embedding = excluded.embedding, search_text = excluded.search_text
WHERE m.user_id = excluded.user_id
RETURNING m.memory_id
"""

UNSEARCHABLE_BY_ID = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE memory_id = ANY(CAST(:memory_ids AS uuid[]))
"""
UNSEARCHABLE_FOR_USER = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE org_id = :org_id AND user_id = :user_id AND embedding IS NOT NULL
"""
UNSEARCHABLE_FOR_ORG = """
UPDATE {schema}.memories SET embedding = NULL, search_text = NULL
WHERE org_id = :org_id AND embedding IS NOT NULL
"""


async def upsert(
    conn: AsyncConnection,
    *,
    org_id: str,
    user_id: str,
    agent_id: str,
    memory_ids: Sequence[uuid.UUID],
    texts: Sequence[str],
    vectors: Sequence[Sequence[float]],
    obtained_at: datetime,
    text_search_config: str,
) -> None:
    written = await conn.execute(
        sql(conn, UPSERT),
        {
            "org_id": org_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "obtained_at": obtained_at,
            "ts_config": text_search_config,
            "memory_ids": list(memory_ids),
            "memories": list(texts),
            "embeddings": vector_params.many(vectors),
        },
    )
    if len(written.all()) != len(set(memory_ids)):
        raise InvalidInputError("A memory id belongs to another user of the organization.")


@lru_cache(maxsize=32)
def search_sql(*, user_scope: bool, agent: bool, mode: str, exclude_superseded: bool) -> str:
    """The search statement for one combination of scope, agent filter and mode."""
    filters = "m.org_id = :org_id AND m.embedding IS NOT NULL"
    if user_scope:
        filters += " AND m.user_id = :user_id"
    if agent:
        filters += " AND m.agent_id = :agent_id"
    if exclude_superseded:
        filters += (
            " AND NOT EXISTS (SELECT 1 FROM {schema}.memory_updates AS newer"
            " WHERE newer.org_id = m.org_id AND newer.old_memory_id = m.memory_id)"
        )
    # "+ 0" keeps the HNSW index out of user-scoped searches: the user's rows (found with the
    # btree) are sorted exactly, which is faster at a user's scale and never misses a neighbour.
    order = "(m.embedding <=> q.embedding) + 0" if user_scope else "m.embedding <=> q.embedding"
    # Likewise "IS TRUE" keeps the full-text GIN index out of user-scoped searches: a common word
    # matches much of the organization, while the user's rows are few (and read by the dense arm anyway).
    matches = "(m.search_text @@ q.terms) IS TRUE" if user_scope else "m.search_text @@ q.terms"
    dense = f"""
        SELECT nearest.memory_id, nearest.distance,
               row_number() OVER (ORDER BY nearest.distance, nearest.seq) - 1 AS rank
        FROM (
            SELECT m.memory_id, m.seq, m.embedding <=> q.embedding AS distance
            FROM {{schema}}.memories AS m
            WHERE {filters}
            ORDER BY {order}
            LIMIT {DENSE_CANDIDATES}
        ) AS nearest
        WHERE 1 - nearest.distance >= {MIN_SIMILARITY}"""
    if mode == "dense":
        fused = f"""
        SELECT dense.memory_id, 1 - dense.distance AS score, dense.rank AS dense_rank, 0 AS lexical_rank
        FROM ({dense}) AS dense"""
        keep = "true"
    else:
        lexical = f"""
        SELECT m.memory_id,
               row_number() OVER (ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq) - 1 AS rank
        FROM {{schema}}.memories AS m
        WHERE {filters} AND {matches}
        -- ts_rank (how often the words occur), not ts_rank_cd: cover density costs several times more per row
        ORDER BY ts_rank(m.search_text, q.terms) DESC, m.seq
        LIMIT {LEXICAL_CANDIDATES}"""
        fused = f"""
        SELECT coalesce(dense.memory_id, lexical.memory_id) AS memory_id,
               coalesce(1.0 / (dense.rank + 2), 0) + coalesce(1.0 / (lexical.rank + 2), 0) AS score,
               coalesce(dense.rank, {DENSE_CANDIDATES}) AS dense_rank,
               coalesce(lexical.rank, {LEXICAL_CANDIDATES}) AS lexical_rank
        FROM ({dense}) AS dense
        FULL JOIN ({lexical}) AS lexical ON lexical.memory_id = dense.memory_id"""
        keep = f"fused.score > {MIN_FUSED_SCORE}"
    return f"""
-- MATERIALIZED: each query's vector is parsed once, not once per row it is compared with.
WITH q AS MATERIALIZED (
    SELECT given.query_no,
           given.embedding,
           -- any word of the query may match (upstream's lexical arm is a sparse model, not a phrase)
           CAST(replace(CAST(plainto_tsquery(CAST(:ts_config AS regconfig), given.query) AS text), ' & ', ' | ')
                AS tsquery) AS terms
    FROM unnest(CAST(:query_nos AS int[]), CAST(:embeddings AS vector[]), CAST(:queries AS text[]))
         AS given(query_no, embedding, query)
)
SELECT q.query_no, m.org_id, m.user_id, m.agent_id, m.memory_id, m.memory, m.obtained_at, hit.score
FROM q
CROSS JOIN LATERAL (
    SELECT fused.memory_id, fused.score, fused.dense_rank, fused.lexical_rank
    FROM ({fused}) AS fused
    WHERE {keep}
    ORDER BY fused.score DESC, fused.dense_rank, fused.lexical_rank
    LIMIT {TOP_K}
) AS hit
JOIN {{schema}}.memories AS m ON m.org_id = :org_id AND m.memory_id = hit.memory_id
ORDER BY q.query_no, hit.score DESC, hit.dense_rank, hit.lexical_rank
"""


async def search(
    conn: AsyncConnection,
    *,
    vectors: Sequence[Sequence[float]],
    texts: Sequence[str],
    org_id: str,
    user_id: str | None,
    agent_id: str | None,
    mode: str,
    exclude_superseded: bool,
    settings: Settings,
) -> list[list[tuple[Memory, float]]]:
    if user_id is None:
        # Organization-wide: HNSW with iterative scans, so the tenant filter never starves the top-k.
        await conn.execute(
            text(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.ef_search', :ef, true)"
            ),
            {"ef": str(settings.hnsw_ef_search)},
        )
    template = search_sql(
        user_scope=user_id is not None, agent=agent_id is not None, mode=mode, exclude_superseded=exclude_superseded
    )
    params: dict[str, Any] = {
        "org_id": org_id,
        "ts_config": settings.text_search_config,
        "query_nos": list(range(len(texts))),
        "embeddings": vector_params.many(vectors),
        "queries": list(texts),
    }
    if user_id is not None:
        params["user_id"] = user_id
    if agent_id is not None:
        params["agent_id"] = agent_id
    results: list[list[tuple[Memory, float]]] = [[] for _ in texts]
    for row in await conn.execute(sql(conn, template), params):
        memory = Memory(
            org_id=row.org_id,
            user_id=row.user_id,
            agent_id=row.agent_id,
            interaction_id=None,
            memory_id=str(row.memory_id),
            memory=row.memory,
            obtained_at=row.obtained_at,
            message_sources=None,
        )
        results[row.query_no].append((memory, float(row.score)))
    return results
