"""The one way memora_pg runs a statement: SQLAlchemy compiles it, asyncpg runs it.

Every statement of the data layer (the faces, the graph, the operations) runs through a
:class:`Connection`: a connection checked out of the engine's pool, either in a transaction
(:func:`transaction`) or in autocommit for a call that is one statement (:func:`checkout`). It has
one way to send a statement (compiled, bound, announced to the listeners), read in the shapes callers
need (``fetch``, ``first``, ``one``, ``scalar``, ``scalars``, ``execute`` for the row count, ``stream``),
one row type (:class:`Row`), and one error family (``errors.database_errors`` around it).

What stays SQLAlchemy's: the pool with its checkout listeners (the ping), the dialect's compilation of
Core statements and its bind processors, and alembic's migrations. What is asyncpg's: the statement's
execution, its prepared-statement cache, and the rows, used as asyncpg decodes them. Going through
SQLAlchemy's execution instead costs, on every call, a ``Connection``, the statement's cache key, its
parameters' and rows' processing and a ``Row`` per row: 0.5-1.3 ms, more than the server spends on a
user's search.

A statement is compiled once per shape (SQL constant, or SQLAlchemy's cache key) and schema. The first run of a
Core statement with typed result columns checks, from the types PostgreSQL describes, that SQLAlchemy
would return every column as asyncpg does; a column SQLAlchemy would convert is a programming error
(cast it in SQL), never a silently different value.

Everything used here is SQLAlchemy's public API: ``compile()`` with the schema rendered in, the compiled
statement's ``binds``, ``positiontup``, ``construct_params`` and ``construct_expanded_state``, each type's
``dialect_impl().bind_processor()`` and ``result_processor()``, and ``AsyncConnection`` for the checkout
(``docs/execution.md`` says why, with the figures). The two private names left, a statement's cache key
and the engine's echo, are listed in :mod:`memora_pg.private_api`.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import event
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler

from memora_pg import fair_checkout, vector_params
from memora_pg.errors import CommitOutcomeUnknownError, ConfigurationError, ConnectionLostError, MemoraPGError
from memora_pg.statements import Statement, in_schema

# The mark, in a pooled connection's ``info``, that pgvector's codec is registered on it.
VECTOR_CODEC = "memora_pg_vector_codec"


class Row(asyncpg.Record):  # type: ignore[misc]
    """A row: by attribute, by position, by name, ``_asdict()``, ``_mapping``."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _asdict(self) -> dict[str, Any]:
        return dict(self.items())

    @property
    def _mapping(self) -> Mapping[str, Any]:
        return self

    @property
    def _fields(self) -> tuple[str, ...]:
        return tuple(self.keys())


# A statement as the data layer writes it: a named SQL constant (``{schema}`` filled in here) or a
# SQLAlchemy statement (a Core statement, or ``text()``).
Sql = str | Executable


class Prepared:
    """A statement compiled for asyncpg in one schema: its SQL and how a call's parameters become its
    arguments.

    ``compiled`` is kept when the statement holds values of its own (they come from SQLAlchemy's
    ``construct_params``) or expands a list into one parameter per item (its SQL then depends on the
    call's values: SQLAlchemy's ``construct_expanded_state``).
    """

    __slots__ = (
        "checked",
        "compiled",
        "dialect",
        "expanding",
        "names",
        "processors",
        "result_types",
        "sql",
    )

    def __init__(self, compiled: SQLCompiler) -> None:
        self.dialect: Dialect = compiled.dialect
        self.sql: str = compiled.string  # compiled with its schema rendered in (see _compile)
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.expanding = bool(compiled.literal_execute_params or compiled.post_compile_params)
        # A tuple's processors (one per element) are SQLAlchemy's to apply, as it expands the tuples.
        self.processors: tuple[Callable[[Any], Any] | None, ...] = (
            () if self.expanding else tuple(_bind_processor(compiled.binds.get(n), self.dialect) for n in self.names)
        )
        self.result_types = tuple(column.type for column in getattr(compiled.statement, "exported_columns", ()))
        own_values = any(b.value is not None or b.callable is not None for b in compiled.binds.values())
        self.compiled: SQLCompiler | None = compiled if own_values or self.expanding else None
        # Whether the result columns are known to come back as asyncpg gives them (see check_columns).
        self.checked = not self.result_types

    def bind(self, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """The SQL and its positional arguments for a call's values (or the statement's own, by the key
        of their bind), processed."""
        if self.expanding:
            assert self.compiled is not None
            state = self.compiled.construct_expanded_state(params)
            names = state.positiontup or ()
            found = [state.parameters[name] for name in names]
            return state.statement, [
                _processed(state.processors.get(name), value) for name, value in zip(names, found, strict=True)
            ]
        values = self.compiled.construct_params(params) if self.compiled is not None else params
        return self.sql, [
            _processed(process, values[name]) for name, process in zip(self.names, self.processors, strict=True)
        ]

    def check_columns(self, oids: Sequence[int]) -> None:
        """Refuse a statement one of whose columns (PostgreSQL type ``oids``, as the server describes
        them) SQLAlchemy would convert: the data layer uses rows as asyncpg gives them."""
        converted = [
            str(column_type)
            for column_type, oid in zip(self.result_types, oids, strict=False)
            if not _unconverted(column_type, oid, self.dialect)
        ]
        if len(oids) != len(self.result_types) or converted:
            raise TypeError(
                f"a column of this statement is one SQLAlchemy would convert ({', '.join(converted) or 'count'}): "
                f"cast it in SQL to what the caller needs: {self.sql[:120]!r}"
            )
        self.checked = True


def _processed(process: Callable[[Any], Any] | None, value: Any) -> Any:
    return process(value) if process is not None and value is not None else value


def _bind_processor(bind: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """How SQLAlchemy converts a parameter of ``bind``'s type for this dialect (None: it sends it as given)."""
    if bind is None:
        return None
    process: Callable[[Any], Any] | None = bind.type.dialect_impl(dialect).bind_processor(dialect)
    return process


def _unconverted(column_type: Any, oid: int, dialect: Dialect) -> bool:
    try:
        return column_type.dialect_impl(dialect).result_processor(dialect, oid) is None
    except (TypeError, KeyError, ValueError):
        return False


# What a call binds besides its own parameters: the values a statement object holds, by the key of
# the bind they stand for in the statement it was compiled from (none when it is that statement).
OwnValues = dict[str, Any]


class _Compiled:
    """One dialect's compiled statements: SQL constants by (template, schema); SQLAlchemy statements by
    identity and schema (the builders keep theirs, so a usual call finds its statement here), and
    else by their shape (SQLAlchemy's cache key), so that a statement built anew for every call with
    other values is compiled once too."""

    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self.templates: dict[tuple[str, str], Prepared] = {}
        self.objects: weakref.WeakKeyDictionary[Any, dict[str, tuple[Prepared, OwnValues]]] = (
            weakref.WeakKeyDictionary()
        )
        self.shapes: dict[tuple[Any, str], tuple[Prepared, Sequence[Any]]] = {}


_BY_DIALECT: weakref.WeakKeyDictionary[Dialect, _Compiled] = weakref.WeakKeyDictionary()


def prepared(statement: Sql, schema: str, dialect: Dialect) -> tuple[Prepared, OwnValues]:
    """``statement`` compiled by ``dialect`` (an asyncpg engine's) for ``schema``, once per statement of
    its shape, with the values it holds that the compiled statement does not."""
    cache = _BY_DIALECT.get(dialect)
    if cache is None:
        cache = _BY_DIALECT[dialect] = _Compiled()
    if isinstance(statement, str):
        key = (statement, schema)
        found = cache.templates.get(key)
        if found is None:
            if len(cache.templates) >= cache.MAX_ENTRIES:
                cache.templates.clear()
            found = cache.templates[key] = _compile(in_schema(statement, schema), schema, dialect)
        return found, {}
    by_schema = cache.objects.get(statement)
    if by_schema is None:
        by_schema = cache.objects[statement] = {}
    entry = by_schema.get(schema)
    if entry is None:
        entry = by_schema[schema] = _by_shape(cache, statement, schema, dialect)
    return entry


def _by_shape(cache: _Compiled, statement: Executable, schema: str, dialect: Dialect) -> tuple[Prepared, OwnValues]:
    shape = statement._generate_cache_key()  # type: ignore[attr-defined]  # private: memora_pg.private_api
    if shape is None:  # a statement SQLAlchemy cannot cache either: compiled for itself
        return _compile(statement, schema, dialect), {}
    found = cache.shapes.get((shape.key, schema))
    if found is None:
        if len(cache.shapes) >= cache.MAX_ENTRIES:
            cache.shapes.clear()
        cache.shapes[(shape.key, schema)] = (_compile(statement, schema, dialect), shape.bindparams)
        return cache.shapes[(shape.key, schema)][0], {}
    compiled, compiled_binds = found
    # The binds of two statements of one shape line up in order (as SQLAlchemy's cache relies on).
    return compiled, {
        bind.key: value.effective_value for bind, value in zip(compiled_binds, shape.bindparams, strict=True)
    }


def _compile(executable: Executable, schema: str, dialect: Dialect) -> Prepared:
    _asyncpg_only(dialect)
    # render_schema_translate: the schema is in the SQL text, as asyncpg gets it (a statement is compiled
    # per schema), rather than left as tokens for SQLAlchemy's execution to fill in.
    compiled = executable.compile(  # type: ignore[attr-defined]
        dialect=dialect, schema_translate_map={None: schema}, render_schema_translate=True
    )
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"not a statement with parameters ({type(executable).__name__}): send DDL with script()")
    return Prepared(compiled)


def _asyncpg_only(dialect: Dialect) -> None:
    if dialect.driver != "asyncpg":
        raise ConfigurationError(
            f"memora_pg runs its statements on asyncpg; this engine's driver is {dialect.driver}: "
            "make the engine with a postgresql+asyncpg:// URL"
        )


def row_count(status: str) -> int:
    """The rows a command touched, from its command tag (``INSERT 0 5``, ``DELETE 3``; 0 for ``SET``)."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class Connection:
    """A connection of an engine's pool, checked out for one block (``async with``): every statement
    memora_pg sends goes through one of these methods. ``on_citus`` says whether it talks to a Citus
    coordinator (set by ``Database``); ``raw`` is the asyncpg connection, for what only asyncpg does
    (COPY, cursors).

    At the end of the block the connection goes back to the pool, also when the server refused a
    statement; one that failed, or whose statement was interrupted, is never handed out again.
    """

    __slots__ = ("_checked_out", "_engine", "_gate", "discarded", "on_citus", "raw", "schema")

    def __init__(self, engine: AsyncEngine, schema: str) -> None:
        self._engine = engine
        self._gate: fair_checkout.FairGate | None = None
        self._checked_out: AsyncConnection | None = None
        self.raw: Any = None
        self.schema = schema
        self.on_citus = False
        self.discarded = False

    async def __aenter__(self) -> Connection:
        _asyncpg_only(self._engine.dialect)
        # In line first, so that connections go to callers in the order they asked (fair_checkout).
        gate = self._gate = fair_checkout.gate_of(self._engine)
        if gate is not None:
            await gate.enter()
        try:
            # SQLAlchemy's AsyncConnection checks the pooled connection out and back in (its pool events,
            # reset and invalidation run where they can await); nothing is executed through it.
            checked_out = self._checked_out = await self._engine.connect()
            try:
                pooled = checked_out.sync_connection.connection  # type: ignore[union-attr]  # started: it has one
                self.raw = pooled.driver_connection  # a checked-out connection always has one
                if not pooled.info.get(VECTOR_CODEC) and await vector_params.register(self.raw):
                    pooled.info[VECTOR_CODEC] = True
            except BaseException:
                await _give_back(checked_out, reusable=False)
                raise
        except BaseException:
            if gate is not None:
                gate.leave()
            raise
        return self

    async def __aexit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        reusable = not self.discarded and (
            error is None or (_refused(error) and not self.raw.is_closed() and not self.raw.is_in_transaction())
        )
        try:
            assert self._checked_out is not None
            # Broken, cancelled or interrupted mid-statement: never hand this connection out again.
            await _give_back(self._checked_out, reusable=reusable)
        finally:
            if self._gate is not None:
                self._gate.leave()

    def discard(self) -> None:
        """Close this connection at the end of the block instead of pooling it (it holds a session's
        lock or setting that must not outlive the work)."""
        self.discarded = True

    async def _sent(self, statement: Sql, params: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
        query, own = prepared(statement, self.schema, self._engine.dialect)
        sql, arguments = query.bind({**own, **(params or {})} if own else params or {})
        if not query.checked:
            described = await self.raw.prepare(sql)
            query.check_columns([attribute.type.oid for attribute in described.get_attributes()])
        _announce(self._engine, sql, arguments)
        return sql, arguments

    async def fetch(self, statement: Sql, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Every row of ``statement``."""
        sql, arguments = await self._sent(statement, params)
        rows: list[Row] = await self.raw.fetch(sql, *arguments, record_class=Row)
        return rows

    async def first(self, statement: Sql, params: Mapping[str, Any] | None = None) -> Row | None:
        """The first row of ``statement``, or None when it has none."""
        sql, arguments = await self._sent(statement, params)
        row: Row | None = await self.raw.fetchrow(sql, *arguments, record_class=Row)
        return row

    async def one(self, statement: Sql, params: Mapping[str, Any] | None = None) -> Row:
        """The row of a statement that always returns one (an aggregate, an ``INSERT ... RETURNING``)."""
        row = await self.first(statement, params)
        if row is None:
            raise AssertionError(f"the statement returned no row: {str(statement)[:120]!r}")
        return row

    async def scalar(self, statement: Sql, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row, or None when there is no row."""
        sql, arguments = await self._sent(statement, params)
        return await self.raw.fetchval(sql, *arguments)

    async def scalars(self, statement: Sql, params: Mapping[str, Any] | None = None) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in await self.fetch(statement, params)]

    async def execute(self, statement: Sql, params: Mapping[str, Any] | None = None) -> int:
        """Run ``statement`` for its effect; the number of rows it touched."""
        sql, arguments = await self._sent(statement, params)
        status: str = await self.raw.execute(sql, *arguments) if arguments else await self.raw.execute(sql)
        return row_count(status)

    async def run(self, statement: Statement) -> list[Row]:
        """The rows of ``statement``."""
        return await self.fetch(statement.sql, statement.params)

    async def script(self, sql: str) -> None:
        """Send ``sql`` exactly as written, without parameters (a ``SET``, DDL read from the catalog)."""
        _announce(self._engine, sql, ())
        await self.raw.execute(sql)

    async def stream(
        self, statement: Sql, params: Mapping[str, Any] | None = None, *, batch: int = 1000
    ) -> AsyncIterator[Row]:
        """The rows of ``statement``, ``batch`` at a time through a cursor (inside a transaction)."""
        sql, arguments = await self._sent(statement, params)
        async for row in self.raw.cursor(sql, *arguments, prefetch=batch, record_class=Row):
            yield row


async def _give_back(checked_out: AsyncConnection, *, reusable: bool) -> None:
    """Return a connection to its pool, or close it for good (the pool opens another when needed)."""
    try:
        if not reusable:
            await checked_out.invalidate()
    finally:
        await checked_out.close()


def checkout(engine: AsyncEngine, schema: str) -> Connection:
    """A connection of ``engine``'s pool for an ``async with`` block, outside a transaction block (each
    statement commits as it runs)."""
    return Connection(engine, schema)


@asynccontextmanager
async def transaction(engine: AsyncEngine, schema: str, *, snapshot: bool = False) -> AsyncIterator[Connection]:
    """A connection of ``engine``'s pool in a transaction: committed when the block ends, rolled back
    when it raises. A ``snapshot`` is read-only and sees one state of the database throughout
    (REPEATABLE READ), for a report or an export that must add up while agents write."""
    isolation = "repeatable_read" if snapshot else None
    async with checkout(engine, schema) as conn, conn.raw.transaction(isolation=isolation, readonly=snapshot):
        yield conn


def _refused(error: BaseException) -> bool:
    """Whether the server answered a statement with an error, or memora_pg's own code raised between
    statements (the connection is fine), rather than the connection failing or a call being interrupted."""
    if isinstance(error, MemoraPGError):
        return not isinstance(error, ConnectionLostError | CommitOutcomeUnknownError)
    return isinstance(error, asyncpg.PostgresError) and not isinstance(error, asyncpg.PostgresConnectionError)


# Who is told of each statement sent, by pool (an engine and its schema-mapped copies share one).
_LISTENERS: weakref.WeakKeyDictionary[Any, list[Callable[[str, Sequence[Any]], None]]] = weakref.WeakKeyDictionary()


def listen(engine: AsyncEngine, callback: Callable[[str, Sequence[Any]], None]) -> None:
    """Call ``callback(sql, arguments)`` before each statement sent on ``engine``'s pool: the data
    layer's (sent here) and the migrations' (alembic's, through SQLAlchemy's ``before_cursor_execute``).
    The one way to watch what memora_pg sends."""
    _LISTENERS.setdefault(engine.sync_engine.pool, []).append(callback)

    def relay(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        callback(statement, parameters)

    event.listen(engine.sync_engine, "before_cursor_execute", relay)


def _announce(engine: AsyncEngine, sql: str, arguments: Sequence[Any]) -> None:
    sync_engine = engine.sync_engine
    for callback in _LISTENERS.get(sync_engine.pool, ()):
        callback(sql, arguments)
    if sync_engine._should_log_info():  # the engine's echo (private: memora_pg.private_api)
        sync_engine.logger.info("%s", sql)
        sync_engine.logger.info("[memora_pg.driver] %r", tuple(arguments))
