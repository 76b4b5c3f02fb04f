"""Engines and units of work.

Every public method of the stores runs inside exactly one ``unit_of_work``: one
transaction on one pooled connection, committed when the block ends and rolled back
when anything raises, with driver errors translated into the package's family.

With ``read_database_url`` set, a ``Database`` has a second engine on a read-only replica:
transactions opened with ``read_only=True`` (the stores' gets, listings and searches) run
there, everything else on the primary. ``Database.primary_reads()`` sends reads to the
primary for a block of code that must read its own writes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import TypeVar

import asyncpg  # type: ignore[import-untyped]
from pydantic import SecretStr
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import driver
from memora_pg.config import Settings
from memora_pg.engine import asyncpg_url, create_engine, create_engine_from_settings, scoped
from memora_pg.errors import (
    CommitOutcomeUnknownError,
    ConfigurationError,
    ConnectionLostError,
    DatabaseError,
    SchemaNotMigratedError,
    TransientDatabaseError,
    database_errors,
    sent,
    sqlstate_of,
)
from memora_pg.sql_text import literal, render
from memora_pg.statements import Statement

T = TypeVar("T")

# Attempts of a transaction that lost a race (see Database.retrying).
RETRIES = 3

# SQLSTATE 25006: a write on a hot standby, or in a transaction that is READ ONLY.
READ_ONLY_SQL_TRANSACTION = "25006"

# True inside ``Database.primary_reads()``: reads go to the primary for read-your-writes.
_PRIMARY_READS: ContextVar[bool] = ContextVar("memora_pg_primary_reads", default=False)
# Set while this task brings the schema to head (ensure_schema), so that its own statements do not wait for
# it (other tasks do, on the lock).
_FIRST_USE: ContextVar[bool] = ContextVar("memora_pg_first_use", default=False)


@asynccontextmanager
async def unit_of_work(
    engine: AsyncEngine, schema: str, *, read_only: bool = False, snapshot: bool = False
) -> AsyncIterator[driver.Connection]:
    """One transaction: committed at the end of the block, rolled back if it raises.

    A connection lost before the commit is ``ConnectionLostError`` (the server rolled the transaction
    back: nothing was written); lost during the commit of a transaction that wrote, it is
    ``CommitOutcomeUnknownError``. A ``snapshot`` is read-only and sees one state throughout
    (``driver.transaction``).
    """
    committing = False
    try:
        with deployment_errors(engine):
            async with driver.transaction(engine, schema, snapshot=snapshot) as conn:
                yield conn
                committing = True
    except ConnectionLostError as error:
        if committing and not read_only:
            raise CommitOutcomeUnknownError(
                f"The connection failed while the transaction was committing; it is wholly saved or wholly absent: "
                f"{error}"
            ) from error
        raise


@contextmanager
def deployment_errors(engine: AsyncEngine) -> Iterator[None]:
    """``database_errors``, with the two failures that a deployment setting causes named as such.

    An exhausted pool (SQLAlchemy's ``TimeoutError``) is a ``DatabaseError`` about the pool,
    and a write refused as read-only (SQLSTATE 25006: the URL names a replica) is a
    ``ConfigurationError``; everything else is translated by ``errors.database_errors``.
    """
    with database_errors():
        try:
            yield
        except sa_exc.TimeoutError as error:
            raise DatabaseError(
                f"No pooled connection became free within pool_timeout ({_pool_status(engine)}): raise "
                "MEMORA_PG_POOL_SIZE, MEMORA_PG_MAX_OVERFLOW or MEMORA_PG_POOL_TIMEOUT, or hold connections "
                "for less time."
            ) from error
        except (sa_exc.DBAPIError, asyncpg.PostgresError) as error:
            if sqlstate_of(error) == READ_ONLY_SQL_TRANSACTION:
                raise ConfigurationError(
                    "The database refused a write because it is read-only (SQLSTATE 25006): writes need the "
                    "primary. Check that MEMORA_PG_DATABASE_URL names the primary, not a replica "
                    "(replicas belong in MEMORA_PG_READ_DATABASE_URL)."
                ) from error
            raise


def _pool_status(engine: AsyncEngine) -> str:
    pool = engine.sync_engine.pool
    try:
        return pool.status()
    except NotImplementedError:  # pragma: no cover - every pool that can time out reports its status
        return type(pool).__name__


class Database:
    """One database for the graph and its vector store: the engine, created on first use.

    An engine passed in stays the caller's (``close()`` leaves it open); one made from a URL
    or the embedded server is disposed by ``close()``. The graph and the vector store it
    creates share one ``Database``, so they share the pool and the transactions.

    With ``settings.read_database_url`` (and ``read_from_replica``, the default), a second
    engine on that replica serves the transactions opened with ``read_only=True``; it is
    always this object's own and ``close()`` disposes of it.
    """

    def __init__(self, database: str | AsyncEngine | None = None, *, settings: Settings) -> None:
        if isinstance(database, str):
            settings = settings.model_copy(update={"database_url": SecretStr(database)})
        self.settings = settings
        self._given = database if isinstance(database, AsyncEngine) else None
        # The embedded server runs beside the application, on this machine, for it alone.
        self.embedded = self._given is None and settings.url() is None
        self._raw: AsyncEngine | None = self._given
        self._scoped: AsyncEngine | None = scoped(self._given, settings.db_schema) if self._given else None
        self._lock = asyncio.Lock()
        self._replica: AsyncEngine | None = None
        self._replica_scoped: AsyncEngine | None = None
        self._dimensions: dict[str, int] = {}
        self._text_search: str | None = None
        self._citus: bool | None = None
        self._ready_lock = asyncio.Lock()
        self._migrated = False
        self._first_use_dimensions: Callable[[], int] | None = None
        self.closed = False

    @property
    def schema(self) -> str:
        return self.settings.db_schema

    async def engine(self) -> AsyncEngine:
        """The engine, mapped into memora_pg's schema; started (and the embedded server too) on first use."""
        if self._scoped is None:
            async with self._lock:
                if self._scoped is None:
                    self._raw = await create_engine_from_settings(self.settings)
                    self._scoped = scoped(self._raw, self.schema)
        return self._scoped

    async def raw_engine(self) -> AsyncEngine:
        await self.engine()
        assert self._raw is not None
        return self._raw

    @property
    def namespace(self) -> str:
        """``database|schema``, as OpenTelemetry's ``db.namespace`` names a PostgreSQL schema (the schema
        alone before the engine exists)."""
        if self._raw is None or not self._raw.url.database:
            return self.schema
        return f"{self._raw.url.database}|{self.schema}"

    def identity(self) -> tuple[str, str] | None:
        """Which database and schema this is, once the engine exists (to recognise a shared one)."""
        if self._raw is None:
            return None
        return (self._raw.url.render_as_string(hide_password=True), self.schema)

    async def read_engine(self) -> AsyncEngine:
        """The engine reads go to: the replica's when one is configured, else the primary's.

        Inside ``primary_reads()`` it is always the primary's.
        """
        replica_url = self.settings.read_url()
        if replica_url is None or _PRIMARY_READS.get():
            return await self.engine()
        if self._replica_scoped is None:
            async with self._lock:
                if self._replica_scoped is None:
                    self._replica = create_engine(asyncpg_url(replica_url), self.settings)
                    self._replica_scoped = scoped(self._replica, self.schema)
        return self._replica_scoped

    @staticmethod
    @contextmanager
    def primary_reads() -> Iterator[None]:
        """Send reads to the primary inside the block (read-your-writes despite replication lag).

        It holds for every memora_pg store used in the block, including tasks started inside
        it (a context variable), and for nothing outside it.
        """
        token = _PRIMARY_READS.set(True)
        try:
            yield
        finally:
            _PRIMARY_READS.reset(token)

    @asynccontextmanager
    async def transaction(
        self, *, read_only: bool = False, org_id: str | None = None
    ) -> AsyncIterator[driver.Connection]:
        """One transaction on a pooled connection; driver errors come out as the package's errors.

        ``read_only=True`` marks a transaction that only reads: it runs on the replica when one
        is configured. A write in it is refused there as a ``ConfigurationError``.

        With ``row_level_security`` on, the transaction is scoped to ``org_id`` (``SET LOCAL``
        through ``set_config(..., true)``): the database's policies then show and accept only
        that organization's rows, and nothing at all when no organization is given.
        """
        await self._first_use()
        engine = await (self.read_engine() if read_only else self.engine())
        async with unit_of_work(engine, self.schema, read_only=read_only) as conn:
            citus = await self._on_citus(conn)
            if self.settings.row_level_security:
                if citus:
                    # set_config() stays on the coordinator; a SET LOCAL reaches the workers too.
                    await conn.script(PROPAGATE_SET_LOCAL)
                    await conn.script(tenant_set_local(org_id or ""))
                else:
                    await conn.execute(TENANT, {"org_id": org_id or ""})
            yield conn

    async def _on_citus(self, conn: driver.Connection) -> bool:
        """Whether the database is a Citus coordinator (asked once per Database), marked on ``conn``."""
        if self._citus is None:
            self._citus = bool(await conn.scalar(CITUS_PRESENT))
        conn.on_citus = self._citus
        return self._citus

    async def citus(self) -> bool:
        """Whether the database is a Citus coordinator (asked once)."""
        if self._citus is None:
            async with self.transaction():
                pass
        return bool(self._citus)

    async def execute_one(
        self, statement: Statement, *, read_only: bool = False, org_id: str | None = None, writes: bool | None = None
    ) -> Sequence[driver.Row]:
        """Run one statement as its own transaction and return its rows; run again when it lost a race.

        A single statement is as atomic as a transaction, so it runs in autocommit mode and the two
        round trips of BEGIN and COMMIT are saved. Row-level security needs a real transaction (its
        tenant setting lasts for one).

        ``writes`` says whether the statement writes (by default, unless ``read_only``): a write whose
        connection fails once it was sent is ``CommitOutcomeUnknownError``, a read's is ``ConnectionLostError``.
        A read that must see the primary passes ``writes=False`` without ``read_only``.
        """
        writes = not read_only if writes is None else writes
        await self._first_use()
        if self.settings.row_level_security:
            return await self.retrying(lambda conn: conn.run(statement), read_only=read_only, org_id=org_id)

        # A write whose connection fails once it is sent may have committed (autocommit): see errors.sent.
        ids = {name: statement.params[name] for name in _CREATED_IDS if statement.params.get(name)}

        async def attempt() -> Sequence[driver.Row]:
            engine = await (self.read_engine() if read_only else self.engine())
            with deployment_errors(engine):
                async with driver.checkout(engine, self.schema) as conn:
                    with sent(writes=writes, ids=ids):
                        return await conn.fetch(statement.sql, statement.params)

        return await _again_after_lost_races(attempt)

    async def retrying(
        self, work: Callable[[driver.Connection], Awaitable[T]], *, read_only: bool = False, org_id: str | None = None
    ) -> T:
        """``work`` in one transaction, run again (in a new transaction) when it lost a race.

        Only the transaction runs again, never what the caller did before it (embedding, model
        calls): compute those first, then pass the transaction's work here.
        """

        async def attempt() -> T:
            async with self.transaction(read_only=read_only, org_id=org_id) as conn:
                return await work(conn)

        return await _again_after_lost_races(attempt)

    async def migrate(self, dimensions: int | None = None) -> None:
        """Bring the schema to head; on a new database the vector columns get ``dimensions``."""
        from memora_pg import migrations

        options = migrations.MigrationOptions.from_settings(self.settings, dimensions)
        engine = await self.raw_engine()
        with deployment_errors(engine):
            await migrations.upgrade(engine, options)
        self._dimensions.clear()
        self._migrated = True

    async def ensure_schema(self, dimensions: int | Callable[[], int]) -> None:
        """Bring the schema to head on this object's first use; a new database's vector columns get
        ``dimensions`` (or what the callable gives, called only when a migration runs).

        The faces call this (through ``Face.ensure_ready``) before their first statement, so every
        public method works on an empty database without a setup call. This object migrates at most
        once (a lock serialises its concurrent first calls); several processes starting at once are
        safe too, as the migration takes an advisory lock and finds the schema at head when it gets it.
        """
        # Inside this task's own check the statements below must not wait for it (the lock is not reentrant).
        if self._migrated or _FIRST_USE.get():
            return
        token = _FIRST_USE.set(True)
        try:
            async with self._ready_lock:
                if self._migrated:
                    return
                from memora_pg import migrations

                # A schema already at head is left alone, with no DDL: the application's role may be
                # one that cannot create (a deploy role migrates, or row-level security confines it).
                async with self.transaction(read_only=True) as conn:
                    revision = await migrations.current_revision(conn, self.schema)
                head = migrations.head_revision()
                if revision != head:
                    if not self.settings.auto_migrate:
                        raise SchemaNotMigratedError(self.schema, revision, head)
                    await self.migrate(dimensions() if callable(dimensions) else dimensions)
                self._migrated = True
        finally:
            _FIRST_USE.reset(token)

    def migrate_on_first_use(self, dimensions: Callable[[], int]) -> None:
        """Bring the schema to head before this object's first statement (:meth:`ensure_schema`), a new
        database's vector columns getting ``dimensions()``: what every face does, so that none needs a
        ``setup()`` call. The first face to ask sets the dimensions; a second one changes nothing."""
        if self._first_use_dimensions is None:
            self._first_use_dimensions = dimensions

    async def _first_use(self) -> None:
        if self._first_use_dimensions is not None:
            await self.ensure_schema(self._first_use_dimensions)

    def forget_dimensions(self) -> None:
        """Read the vector columns' dimensions again on next use (after a re-embedding switched them)."""
        self._dimensions.clear()

    async def check_embedder(self, embedder_dimensions: int, table: str = "memories") -> int:
        """The dimension of ``table``'s vector column (read once); another dimension is a ConfigurationError."""
        stored = self._dimensions.get(table)
        if stored is None:
            from memora_pg import catalog

            async with self.transaction() as conn:
                found = await catalog.vector_dimensions(conn, self.schema, table)
            if found is None:
                raise ConfigurationError(
                    f"The schema {self.schema!r} has no {table} table: call setup() or run 'alembic upgrade head'."
                )
            stored = self._dimensions[table] = int(found)
        if embedder_dimensions != stored:
            raise ConfigurationError(
                f"The embedder makes vectors of {embedder_dimensions} dimensions but the database stores {stored}: "
                f"use an embedder of {stored} dimensions, or re-embed the database for the new one."
            )
        await self._check_text_search()
        return stored

    async def _check_text_search(self) -> None:
        """A configured text-search configuration must be the database's (read once)."""
        wanted = self.settings.text_search_config
        if wanted is None:
            return
        if self._text_search is None:
            async with self.transaction() as conn:
                self._text_search = str(await conn.scalar("SELECT CAST({schema}.search_config() AS text)"))
        if self._text_search != wanted:
            raise ConfigurationError(
                f"MEMORA_PG_TEXT_SEARCH_CONFIG is {wanted!r} but the database's full-text vectors are written with "
                f"{self._text_search!r}: unset it, or run 'memora-pg text-search {wanted}' to switch the database."
            )

    def forget_text_search_config(self) -> None:
        """Read the database's text-search configuration again on next use (after a switch)."""
        self._text_search = None

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._replica is not None:
            await self._replica.dispose()
        if self._given is None and self._raw is not None:
            await self._raw.dispose()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _again_after_lost_races(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, run up to RETRIES times while it fails with a ``TransientDatabaseError``.

    Concurrent writers that touch the same chains in different orders can deadlock under READ
    COMMITTED; PostgreSQL then aborts one of them (SQLSTATE 40P01, or 40001) and rolls its
    transaction back. A connection lost before the commit (``ConnectionLostError``) leaves nothing
    written either. So running it again never doubles a write; a write whose commit was cut off is
    ``CommitOutcomeUnknownError``, which is not transient and is never run again.
    """
    for attempt_no in range(RETRIES):
        try:
            return await attempt()
        except TransientDatabaseError:
            if attempt_no == RETRIES - 1:
                raise
            await asyncio.sleep(random.uniform(0.01, 0.05) * (attempt_no + 1))  # noqa: S311 - jitter, not secrets
    raise AssertionError("unreachable")


# The parameters of a write statement that name what it creates, given to CommitOutcomeUnknownError.ids.
_CREATED_IDS = ("interaction_id", "memory_ids")

TENANT = "SELECT set_config('memora.org_id', :org_id, true)"

# Whether the database has Citus (a coordinator): the tenant is then set so that it reaches the workers,
# and a search and an import leave the planner's statistics alone.
CITUS_PRESENT = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"

# On Citus, the tenant is a SET LOCAL, which the coordinator sends to every worker the transaction
# uses once this is set (``memora-pg db distribute`` also sets it for the database).
PROPAGATE_SET_LOCAL = "SET LOCAL citus.propagate_set_commands = 'local'"
# The tenant as Citus sees it; a SET takes no bind parameter, so the id is a quoted constant.
SET_TENANT = "SET LOCAL memora.org_id = {org_id}"


def tenant_set_local(org_id: str) -> str:
    """The SET LOCAL naming the transaction's organization."""
    return render(SET_TENANT, org_id=literal(org_id))
