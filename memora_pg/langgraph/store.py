"""``AsyncMemoraStore``: LangGraph's ``BaseStore`` on memora_pg's tables.

A batch runs as LangGraph's Postgres store runs one: its reads see the store as it was before the
batch, and of several writes of one key the last wins. It is embedded first (no model call inside a
transaction), then run as one transaction: the gets in one statement, each search and listing in one,
every put and delete in one function call (``put_store_items``), and the refresh of the read items' time
to live in one more, when they have one.

Beyond ``BaseStore``: ``get``/``aget`` and ``search``/``asearch`` take ``as_of=`` (a datetime) and read
the versions current then; a put over a key keeps the version it replaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base import validate_op_namespace as _validate_labels
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.driver import Connection, Row
from memora_pg.embeddings import Embedder, embed_checked, unrelated_similarity
from memora_pg.errors import ConfigurationError, InvalidInputError
from memora_pg.face import EmbeddingFace
from memora_pg.graph import search, store_items, timeline
from memora_pg.graph.validate import no_nul
from memora_pg.langgraph.index import Index, check_unit_length, index
from memora_pg.statements import Statement

logger = logging.getLogger(__name__)

DEFAULT_ORG_ID = "default"
# The most ops one batch may hold, and the most items one search may return.
MAX_OPS = 10_000
MAX_LIMIT = 1_000


@dataclass(frozen=True)
class _Read:
    """A get or a search of a batch, and the time it reads as of (None: now)."""

    op: GetOp | SearchOp | ListNamespacesOp
    as_of: datetime | None = None


def _checked_as_of(as_of: object) -> datetime | None:
    return None if as_of is None else timeline.check_as_of(as_of)


def _check_page(limit: object, offset: object) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"`limit` must be an integer from 0 to {MAX_LIMIT}, not {limit!r}.")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(f"`offset` must be a non-negative integer, not {offset!r}.")
    return limit, offset


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInputError(f"An item's key must be a string, not {type(key).__name__}.")
    no_nul(key, "An item's key")
    return key


def _check_value(value: object) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInputError(f"An item's value must be a dict, not {type(value).__name__}.")
    return value


class AsyncMemoraStore(EmbeddingFace, BaseStore):
    """LangGraph's long-term memory on memora_pg: a ``BaseStore`` whose items are versioned rows of
    memora_pg's schema, isolated per organization by row-level security, searched by memora_pg's
    hybrid ranking (or dense, by the ``search_mode`` setting).

    ``database_url`` or ``engine`` names the database (neither: the embedded default server);
    ``settings`` the rest. ``org_id`` is the organization every item belongs to (``"default"``);
    ``org_from_namespace=True`` instead places each item in the organization its namespace's first label
    names (``("acme", "users", "alice")``: ``acme``), so that one store serves many tenants and row-level
    security isolates them; every operation then names its organization (a search its prefix's first label,
    a listing a prefix condition's), and a batch runs as one transaction per organization it names.
    ``index`` is LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``); without ``embed`` the
    store embeds with ``embedder`` or memora_pg's default, and ``index=False`` embeds nothing (a query
    is then ignored, as by a LangGraph store without an index). ``ttl`` is LangGraph's ``TTLConfig``;
    with ``sweep_interval_minutes`` the sweeper runs while the store is open.
    """

    supports_ttl = True
    _vector_table = "store_items"

    def __init__(
        self,
        *,
        database_url: str | None = None,
        engine: AsyncEngine | None = None,
        database: Database | None = None,
        settings: Settings | None = None,
        index: IndexConfig | Mapping[str, Any] | bool | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
        embedder: Embedder | None = None,
        org_id: str | None = None,
        org_from_namespace: bool = False,
    ) -> None:
        given = [x for x in (database_url, engine, database) if x is not None]
        if len(given) > 1:
            raise InvalidInputError("Pass one of `database_url`, `engine` and `database`.")
        if database is not None:
            if not isinstance(database, Database):
                raise InvalidInputError("`database` must be a memora_pg Database.")
            if settings is not None:
                raise InvalidInputError("A given `database` has its settings: pass one or the other.")
            self._db, self._owns_db = database, False
        else:
            self._db = Database(database_url if database_url is not None else engine, settings=settings or Settings())
        search.check_mode(self._db.settings.search_mode)
        self._db.migrate_on_first_use(self.new_database_dimensions)
        self._indexed = index is not False
        self._index: Index = _index_of(index)
        if embedder is not None and self._index.embedder is not None:
            raise InvalidInputError("Pass `embedder` or `index['embed']`, not both.")
        self._embedder = self._index.embedder or embedder
        self.index_config = cast(IndexConfig | None, self._index.config if self._indexed else None)
        self.ttl_config = cast(TTLConfig | None, _ttl_config(ttl))
        if not isinstance(org_from_namespace, bool):
            raise InvalidInputError("`org_from_namespace` must be True or False.")
        if org_from_namespace and org_id is not None:
            raise InvalidInputError("Pass `org_id` or `org_from_namespace=True`, not both.")
        self._org_from_namespace = org_from_namespace
        # The organizations this store has written (namespace tenancy): those its TTL sweep visits.
        self._orgs_written: set[str] = set()
        if org_id is not None:
            if not isinstance(org_id, str) or not org_id:
                raise InvalidInputError("`org_id` must be a non-empty string.")
            no_nul(org_id, "`org_id`")
        self._org_id = org_id or DEFAULT_ORG_ID
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | Mapping[str, Any] | bool | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncMemoraStore]:
        """A store on the database at ``conn_string`` (a ``postgresql://`` URL), closed on exit."""
        async with cls(database_url=conn_string, index=index, ttl=ttl, **options) as store:
            yield store

    @property
    def org_id(self) -> str:
        return self._org_id

    def new_database_dimensions(self) -> int:
        if not self._indexed:
            return self._db.settings.embedding_dimensions
        return super().new_database_dimensions()

    async def check_dimensions(self) -> int:
        if not self._indexed:
            return 0
        return await super().check_dimensions()

    async def ensure_ready(self) -> None:
        await super().ensure_ready()
        self._loop = asyncio.get_running_loop()
        interval = (self.ttl_config or {}).get("sweep_interval_minutes")
        if interval and self._sweeper is None:
            await self.start_ttl_sweeper(interval)

    async def close(self) -> None:
        await self.stop_ttl_sweeper()
        await super().close()

    # -- time to live ----------------------------------------------------------------------------

    async def sweep_ttl(self) -> int:
        """Delete every version of the items whose time to live has run out; how many rows that was. With
        ``org_from_namespace``, in each organization the store has written since it opened (row-level
        security shows it no other)."""
        swept = 0
        for org_id in sorted(self._orgs_written) if self._org_from_namespace else [self._org_id]:
            swept += await self._db.retrying(functools.partial(store_items.sweep, org_id=org_id), org_id=org_id)
        return swept

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` (the TTL config's, else 5) until the store closes."""
        if self._sweeper is not None:
            return self._sweeper
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5

        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(minutes * 60)
                try:
                    swept = await self.sweep_ttl()
                except Exception:  # the sweeper outlives a failed sweep; the next one tries again
                    logger.exception("memora_pg: the LangGraph store's TTL sweep failed")
                else:
                    logger.debug("memora_pg: swept %d expired item versions", swept)

        self._sweeper = asyncio.get_running_loop().create_task(sweep_forever(), name="memora_pg-store-ttl-sweeper")
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True once it has stopped (or none ran)."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(sweeper, timeout)
        return sweeper.done()

    # -- BaseStore -------------------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._run([op if isinstance(op, PutOp) else _Read(op) for op in ops])

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The batch, from a thread other than the store's event loop's (LangGraph's sync API)."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncMemoraStore need its event loop running in another thread: "
                "use the a-methods (await store.aget(...)), or MemoraStore."
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    async def aget(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
        as_of: datetime | None = None,
    ) -> Item | None:
        """The item, or None; with ``as_of``, its version current then (memora_pg's extension)."""
        refresh = _refresh(self.ttl_config, refresh_ttl) and as_of is None
        [found] = await self._run([_Read(GetOp(tuple(namespace), str(key), refresh), _checked_as_of(as_of))])
        return cast(Item | None, found)

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        as_of: datetime | None = None,
    ) -> list[SearchItem]:
        """The items under the prefix, ranked by ``query`` (else most recently updated first); with
        ``as_of``, among the versions current then (memora_pg's extension)."""
        refresh = _refresh(self.ttl_config, refresh_ttl) and as_of is None
        op = SearchOp(tuple(namespace_prefix), filter, limit, offset, query, refresh)
        [found] = await self._run([_Read(op, _checked_as_of(as_of))])
        return cast(list[SearchItem], found)

    # -- one batch -------------------------------------------------------------------------------

    async def _run(self, ops: Sequence[PutOp | _Read]) -> list[Result]:
        ops = list(ops)
        if len(ops) > MAX_OPS:
            raise InvalidInputError(f"A batch is limited to {MAX_OPS:,} operations, not {len(ops):,}.")
        for op in ops:
            _check(op.op if isinstance(op, _Read) else op)
        # Each organization's operations (namespace tenancy), known before anything runs.
        places: dict[str, list[int]] = {}
        if self._org_from_namespace:
            for n, op in enumerate(ops):
                places.setdefault(_org_of(op.op if isinstance(op, _Read) else op), []).append(n)
        await self.ensure_ready()
        if not self._org_from_namespace:
            return await self._run_in(self._org_id, ops, *await self._prepared(ops))
        # In a transaction of their own, in the order they first come; all of them embedded first, so that an
        # embedder's failure leaves every organization as it was.
        groups = {org_id: [ops[n] for n in indices] for org_id, indices in places.items()}
        prepared = {org_id: await self._prepared(group) for org_id, group in groups.items()}
        results: list[Result] = [None] * len(ops)
        for org_id, indices in places.items():
            done = await self._run_in(org_id, groups[org_id], *prepared[org_id])
            for n, result in zip(indices, done, strict=True):
                results[n] = result
        return results

    async def _prepared(self, ops: Sequence[PutOp | _Read]) -> tuple[list[store_items.Write], dict[str, list[float]]]:
        """The writes (the last put of each key, embedded) and the searches' query vectors of ``ops``."""
        writes = await self._writes(_last_of_each_key([op for op in ops if isinstance(op, PutOp)]))
        return writes, await self._query_vectors([op.op for op in ops if isinstance(op, _Read)])

    async def _run_in(
        self,
        org_id: str,
        ops: Sequence[PutOp | _Read],
        writes: list[store_items.Write],
        queries: dict[str, list[float]],
    ) -> list[Result]:
        """The operations of one organization: reads first, then one write call, then the TTL refresh."""
        results: list[Result] = [None] * len(ops)
        org = {"org_id": org_id}
        if not writes and _read_statements(ops) <= 1:
            # One read (a get, a search): its statement alone, in autocommit, as any face's single read.
            refreshed = await self._reads(self._db, org_id, ops, queries, results)
            if refreshed:
                await self._db.execute_one(store_items.refresh(**org, keys=refreshed), org_id=org_id)
            return results

        async def work(conn: Connection) -> None:
            refreshed = await self._reads(_OnConnection(self._db, conn), org_id, ops, queries, results)
            if writes:
                await conn.run(store_items.put(**org, org_name=org_id, writes=writes))
            if refreshed:
                await conn.run(store_items.refresh(**org, keys=refreshed))

        read_only = not writes and not any(_refreshes(op) for op in ops if isinstance(op, _Read))
        await self._db.retrying(work, read_only=read_only, org_id=org_id)
        if writes:
            self._orgs_written.add(org_id)
        return results

    async def _writes(self, puts: Sequence[PutOp]) -> list[store_items.Write]:
        """The puts and deletes, each put's indexed text embedded (one call for the batch)."""
        texts: list[str | None] = []
        for op in puts:
            indexed = self._indexed and op.value is not None and op.index is not False
            fields = None if op.index is None or op.index is False else list(op.index)
            texts.append(self._index.text(op.value, fields) if indexed and op.value is not None else None)
        embedded = [text for text in texts if text is not None]
        stored = await embed_checked(self.embedder, embedded, query=False) if embedded else []
        check_unit_length(self._index, stored)
        vectors = iter(stored)
        default_ttl = (self.ttl_config or {}).get("default_ttl")
        return [
            store_items.Write(
                namespace=store_items.joined(op.namespace),
                key=op.key,
                value=op.value,
                embedding=next(vectors) if text is not None else None,
                text=text,
                ttl_ms=_ttl_ms(op.ttl, default_ttl),
            )
            for op, text in zip(puts, texts, strict=True)
        ]

    async def _query_vectors(self, reads: Sequence[GetOp | SearchOp | ListNamespacesOp]) -> dict[str, list[float]]:
        """Each distinct query of the batch's searches, embedded (one call)."""
        if not self._indexed:
            return {}
        wanted = sorted({op.query for op in reads if isinstance(op, SearchOp) and op.query and op.query.strip()})
        vectors = await embed_checked(self.embedder, wanted, query=True)
        return dict(zip(wanted, vectors, strict=True))

    async def _reads(
        self,
        runner: search.Runner,
        org_id: str,
        ops: Sequence[PutOp | _Read],
        queries: Mapping[str, list[float]],
        results: list[Result],
    ) -> list[tuple[str, str]]:
        """The batch's reads, their results in place; the current items read whose time to live restarts."""
        refreshed: list[tuple[str, str]] = []
        for as_of, asked in _gets(ops).items():
            keys = [(store_items.joined(get.namespace), get.key) for _, get in asked]
            statement = store_items.get(org_id=org_id, keys=keys, as_of=as_of)
            found = store_items.got(await runner.execute_one(statement, read_only=True, org_id=org_id))
            for place, (n, get) in enumerate(asked):
                row = found.get(place)
                results[n] = None if row is None else _item(row)
                if row is not None and get.refresh_ttl and row["ttl_ms"] is not None:
                    refreshed.append(keys[place])
        for n, op in enumerate(ops):
            if not isinstance(op, _Read):
                continue
            if isinstance(op.op, SearchOp):
                rows = await self._search(runner, org_id, op.op, op.as_of, queries)
                results[n] = [_search_item(row, score) for row, score in rows]
                if op.op.refresh_ttl:
                    timed = [row for row, _ in rows if row["ttl_ms"] is not None]
                    refreshed += [(store_items.joined(row["namespace"]), row["key"]) for row in timed]
            elif isinstance(op.op, ListNamespacesOp):
                results[n] = await self._namespaces(runner, org_id, op.op)
        return refreshed

    async def _search(
        self,
        runner: search.Runner,
        org_id: str,
        op: SearchOp,
        as_of: datetime | None,
        queries: Mapping[str, list[float]],
    ) -> list[tuple[dict[str, Any], float | None]]:
        limit, offset = _check_page(op.limit, op.offset)
        vector = queries.get(op.query or "")
        if vector is None or limit == 0:
            statement = store_items.listing(
                org_id=org_id,
                prefix=op.namespace_prefix,
                filter=store_items.filter_condition(op.filter),
                as_of=as_of,
                limit=limit,
                offset=offset,
            )
            rows = await runner.execute_one(statement, read_only=True, org_id=org_id)
            return [(store_items.decoded(row), None) for row in rows]
        where = search.store_where(org_id, op.namespace_prefix, filter=store_items.filtered(op.filter), as_of=as_of)
        (hits,) = await search.find(
            runner,
            search.STORE_ITEMS,
            org_id=org_id,
            where=where,
            vectors=[vector],
            texts=[cast(str, op.query)],
            k=limit + offset,
            scoped=bool(op.namespace_prefix),
            unrelated_similarity=unrelated_similarity(self.embedder),
            embedder=self.embedder,
        )
        return [(store_items.decoded(row), score) for row, score in hits[offset:]]

    async def _namespaces(self, runner: search.Runner, org_id: str, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = _check_page(op.limit, op.offset)
        if op.max_depth is not None and (isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int)):
            raise InvalidInputError(f"`max_depth` must be None or an integer, not {op.max_depth!r}.")
        patterns = [
            store_items.namespace_pattern(condition.path, condition.match_type)
            for condition in op.match_conditions or ()
            if condition.path
        ]
        statement = store_items.namespaces(
            org_id=org_id, patterns=patterns, max_depth=op.max_depth, limit=limit, offset=offset
        )
        return store_items.listed_namespaces(await runner.execute_one(statement, read_only=True, org_id=org_id))


class _OnConnection:
    """A search's runner on the batch's own connection: its statement runs in the batch's transaction."""

    def __init__(self, database: Database, conn: Connection) -> None:
        self.settings = database.settings
        self._database = database
        self._conn = conn

    @property
    def schema(self) -> str:
        return self._database.schema

    async def citus(self) -> bool:
        return await self._database.citus()

    async def execute_one(
        self, statement: Statement, *, read_only: bool = False, org_id: str | None = None, writes: bool | None = None
    ) -> Sequence[Row]:
        return await self._conn.run(statement)


# -- the pieces of a batch -----------------------------------------------------------------------


def _index_of(config: IndexConfig | Mapping[str, Any] | bool | None) -> Index:
    if config is False or config is None or config is True:
        return index(None)
    return index(config)


def _ttl_config(ttl: TTLConfig | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigurationError(f"`ttl` must be a dict like LangGraph's TTLConfig, not {type(ttl).__name__}.")
    unknown = set(ttl) - {"refresh_on_read", "default_ttl", "sweep_interval_minutes", "omit_expired"}
    if unknown:
        raise ConfigurationError(f"Unknown `ttl` keys: {', '.join(sorted(map(str, unknown)))}.")
    default_ttl = ttl.get("default_ttl")
    if default_ttl is not None:
        _ttl_ms(default_ttl, None)
    return dict(ttl)


def _ttl_ms(ttl: object, default: float | None) -> int | None:
    """LangGraph's time to live (minutes) in milliseconds, as the table keeps it."""
    if isinstance(ttl, NotProvided):
        ttl = default
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < 1e9:
        raise InvalidInputError(f"`ttl` must be None or a positive number of minutes, not {ttl!r}.")
    return max(1, round(ttl * 60_000))


def _refresh(config: TTLConfig | None, refresh_ttl: bool | None) -> bool:
    if refresh_ttl is not None:
        return bool(refresh_ttl)
    return bool((config or {}).get("refresh_on_read", True))


def _refreshes(read: _Read) -> bool:
    return isinstance(read.op, GetOp | SearchOp) and bool(read.op.refresh_ttl)


def _check(op: Op) -> None:
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise InvalidInputError(f"Unknown store operation {type(op).__name__}.")
    _validate_labels(op)
    if isinstance(op, GetOp | PutOp):
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        _check_key(op.key)
    if isinstance(op, PutOp):
        _check_value(op.value)
    if isinstance(op, SearchOp):
        _check_page(op.limit, op.offset)
        if op.query is not None:
            if not isinstance(op.query, str):
                raise InvalidInputError(f"`query` must be a string, not {type(op.query).__name__}.")
            no_nul(op.query, "`query`")
        store_items.filter_condition(op.filter)


def _org_of(op: Op) -> str:
    """The organization an operation names under namespace tenancy: its namespace's first label."""
    if isinstance(op, GetOp | PutOp):
        return op.namespace[0]
    if isinstance(op, SearchOp):
        if not op.namespace_prefix:
            raise InvalidInputError(
                "With org_from_namespace, a search names its organization: the first label of its namespace prefix."
            )
        return op.namespace_prefix[0]
    assert isinstance(op, ListNamespacesOp)
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix" and condition.path and condition.path[0] != "*":
            return condition.path[0]
    raise InvalidInputError(
        "With org_from_namespace, a namespace listing names its organization: a prefix whose first label it is."
    )


def _gets(ops: Sequence[PutOp | _Read]) -> dict[datetime | None, list[tuple[int, GetOp]]]:
    """The batch's gets, by the time they read as of (one statement each), with their places."""
    gets: dict[datetime | None, list[tuple[int, GetOp]]] = {}
    for n, op in enumerate(ops):
        if isinstance(op, _Read) and isinstance(op.op, GetOp):
            gets.setdefault(op.as_of, []).append((n, op.op))
    return gets


def _read_statements(ops: Sequence[PutOp | _Read]) -> int:
    """How many statements the batch's reads take: one for its gets of one time, one per search and listing."""
    others = sum(1 for op in ops if isinstance(op, _Read) and not isinstance(op.op, GetOp))
    return len(_gets(ops)) + others


def _last_of_each_key(puts: Sequence[PutOp]) -> list[PutOp]:
    """Of several writes of one key in a batch, the last."""
    last: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in puts:
        last[(tuple(op.namespace), op.key)] = op
    return list(last.values())


def _fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name in ("namespace", "key", "value", "created_at", "updated_at")}


def _item(row: Mapping[str, Any]) -> Item:
    return Item(**_fields(row))


def _search_item(row: Mapping[str, Any], score: float | None) -> SearchItem:
    return SearchItem(**_fields(row), score=score)
