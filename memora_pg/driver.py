"""One statement on the pooled connection's asyncpg connection, prepared once.

``Database.execute_one`` runs a call that is one statement (a search, a resolved fetch, a
listing, a save) outside a transaction block. Through SQLAlchemy such a call pays, every time,
for a ``Connection`` and its isolation-level switch, the statement's cache key, its parameters'
and rows' processing and a ``Row`` per row: more than the server spends on a user's search.
Here the statement is compiled by SQLAlchemy once per statement object and schema, and each
call checks a connection out of the same pool, runs the compiled SQL with asyncpg's own
prepared-statement cache, and checks it back in. What stays SQLAlchemy's: the pool and its
checkout listeners (the ping), the dialect's compilation and bind processors. What stays the
package's: error translation (``errors.database_errors``) and, as with SQLAlchemy, a
connection that failed mid-statement is invalidated rather than returned.

A statement this cannot run exactly as SQLAlchemy would (expanding ``IN`` parameters, result
columns SQLAlchemy converts, a Core statement object not seen before) is run by SQLAlchemy:
:func:`prepared` returns None for it.

SQLAlchemy offers no public way to the compiled parts this reuses: the five private attributes it reads
are listed, with why, in :mod:`memora_pg.private_api`, and a test checks each on the installed version.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import event
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util.concurrency import greenlet_spawn

from memora_pg import vector_params
from memora_pg.errors import CommitOutcomeUnknownError, ConnectionLostError, MemoraPGError
from memora_pg.statements import Statement, in_schema

# The mark, in a pooled connection's ``info``, that pgvector's codec is registered on it (here, or
# by ``db.with_vector_codec`` for a connection SQLAlchemy handed out).
VECTOR_CODEC = "memora_pg_vector_codec"


class Row(asyncpg.Record):  # type: ignore[misc]
    """A row as the data layer reads SQLAlchemy's: by attribute, by position, ``_asdict()``, ``_mapping``."""

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


class Prepared:
    """A statement compiled for asyncpg: its SQL and how a call's parameters become its arguments.

    ``compiled`` is kept when the statement holds values of its own: they come from SQLAlchemy's
    ``construct_params``. A statement with typed result columns runs here once its first run has
    shown that SQLAlchemy returns them unconverted (:meth:`check_columns`).
    """

    __slots__ = ("compiled", "dialect", "names", "processors", "result_types", "sql", "usable")

    def __init__(self, compiled: SQLCompiler, schema: str) -> None:
        self.dialect: Dialect = compiled.dialect
        translate: dict[str | None, str | None] = {None: schema}
        self.sql: str = compiled.preparer._render_schema_translates(compiled.string, translate)
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        # Each a callable: _compile left out the statements with a tuple's processors.
        processors: Mapping[str, Any] = compiled._bind_processors or {}
        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(processors.get(n) for n in self.names)
        self.result_types = tuple(column[3] for column in compiled._result_columns)
        own_values = any(b.value is not None or b.callable is not None for b in compiled.binds.values())
        self.compiled: SQLCompiler | None = compiled if own_values else None
        # Whether this path runs it; None until its first run (through SQLAlchemy) has shown the
        # types of its columns.
        self.usable: bool | None = None if self.result_types else True

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments of the SQL: the call's values (or the statement's own), processed."""
        values = self.compiled.construct_params(params) if self.compiled is not None else params
        found = []
        for name, process in zip(self.names, self.processors, strict=True):
            value = values[name]
            found.append(process(value) if process is not None and value is not None else value)
        return found

    def check_columns(self, description: Sequence[Any]) -> None:
        """Decide, from the DB-API description of the statement's rows (a PostgreSQL type OID per
        column) on its first run through SQLAlchemy, whether SQLAlchemy returns every column as
        asyncpg gives it (no result processor): then later calls run here."""
        if self.usable is None:
            self.usable = len(description) == len(self.result_types) and all(
                _unconverted(column_type, column[1], self.dialect)
                for column_type, column in zip(self.result_types, description, strict=True)
            )


def _unconverted(column_type: Any, oid: int, dialect: Dialect) -> bool:
    try:
        return column_type._cached_result_processor(dialect, oid) is None
    except (TypeError, KeyError, ValueError):
        return False


class _Compiled:
    """One dialect's compiled statements: raw SQL constants by (template, schema); Core statements
    by identity (the builders cache theirs, so a usual call finds its statement here), compiled
    on their second call, as one built anew for every call is better left to SQLAlchemy, whose
    cache recognises it by its shape."""

    MAX_TEMPLATES = 1024

    def __init__(self) -> None:
        self.templates: dict[tuple[str, str], Prepared | None] = {}
        self.objects: weakref.WeakKeyDictionary[Any, dict[str, Prepared | None]] = weakref.WeakKeyDictionary()
        self.sighted: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


_BY_DIALECT: weakref.WeakKeyDictionary[Dialect, _Compiled] = weakref.WeakKeyDictionary()


def prepared(statement: Statement, schema: str, dialect: Dialect) -> Prepared | None:
    """``statement`` compiled by ``dialect`` (the engine's) for asyncpg in ``schema``; None when
    SQLAlchemy must run it (or the engine's driver is not asyncpg)."""
    if dialect.driver != "asyncpg":
        return None
    cache = _BY_DIALECT.get(dialect)
    if cache is None:
        cache = _BY_DIALECT[dialect] = _Compiled()
    if isinstance(statement.sql, str):
        key = (statement.sql, schema)
        if key not in cache.templates:
            if len(cache.templates) >= cache.MAX_TEMPLATES:
                cache.templates.clear()
            cache.templates[key] = _compile(in_schema(statement.sql, schema), schema, dialect)
        found = cache.templates[key]
    else:
        by_schema = cache.objects.get(statement.sql)
        if by_schema is None:
            if not cache.sighted.get(statement.sql):
                cache.sighted[statement.sql] = True
                return None
            by_schema = cache.objects[statement.sql] = {}
        if schema not in by_schema:
            by_schema[schema] = _compile(statement.sql, schema, dialect)
        found = by_schema[schema]
    return None if found is None or found.usable is False else found


def _compile(executable: Executable, schema: str, dialect: Dialect) -> Prepared | None:
    compiled = executable.compile(dialect=dialect, schema_translate_map={None: schema})  # type: ignore[attr-defined]
    if not isinstance(compiled, SQLCompiler) or not compiled.positional:
        return None
    if compiled.literal_execute_params or compiled.post_compile_params:
        return None  # expanding IN lists: the SQL depends on the values
    if any(not callable(process) for process in (compiled._bind_processors or {}).values()):
        return None  # a tuple's processors, one per element
    return Prepared(compiled, schema)


# Who is told of each statement sent here, by pool (an engine and its schema-mapped copies share one).
_LISTENERS: weakref.WeakKeyDictionary[Any, list[Callable[[str, Sequence[Any]], None]]] = weakref.WeakKeyDictionary()


def listen(engine: AsyncEngine, callback: Callable[[str, Sequence[Any]], None]) -> None:
    """Call ``callback(sql, arguments)`` before each statement sent on ``engine``'s pool, on either path:
    this module's (statements run here) and SQLAlchemy's (its ``before_cursor_execute`` event, which does
    not see this module's statements). The one way to watch what memora_pg sends."""
    _LISTENERS.setdefault(engine.sync_engine.pool, []).append(callback)

    def relay(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        callback(statement, parameters)

    event.listen(engine.sync_engine, "before_cursor_execute", relay)


def _announce(engine: AsyncEngine, sql: str, arguments: Sequence[Any]) -> None:
    sync_engine = engine.sync_engine
    for callback in _LISTENERS.get(sync_engine.pool, ()):
        callback(sql, arguments)
    if sync_engine._should_log_info():  # the engine's echo: its statements are logged as SQLAlchemy logs its own
        sync_engine.logger.info("%s", sql)
        sync_engine.logger.info("[memora_pg.driver] %r", tuple(arguments))


async def fetch(
    engine: AsyncEngine, query: Prepared, params: Mapping[str, Any], *, sending: AbstractContextManager[Any]
) -> Sequence[Row]:
    """Run ``query`` with ``params`` on a connection of ``engine``'s pool, outside a transaction block.

    ``sending`` wraps the statement once it is sent (``errors.sent``): a connection that fails then may
    have committed it, unlike one that fails to connect.
    """
    arguments = query.arguments(params)
    _announce(engine, query.sql, arguments)
    pooled = await engine.raw_connection()
    try:
        connection: Any = pooled.driver_connection  # a checked-out connection always has one
        if not pooled.info.get(VECTOR_CODEC) and await vector_params.register(connection):
            pooled.info[VECTOR_CODEC] = True
        with sending:
            rows: list[Row] = await connection.fetch(query.sql, *arguments, record_class=Row)
    except BaseException as error:
        if _refused(error):
            # The server refused the statement; the connection is as good as before.
            await greenlet_spawn(pooled.close)
        else:
            # Broken, cancelled or interrupted mid-statement: never hand this connection out again.
            await greenlet_spawn(pooled.invalidate)
        raise
    await greenlet_spawn(pooled.close)
    return rows


def _refused(error: BaseException) -> bool:
    """Whether the server answered the statement with an error (the connection is fine), rather than the
    connection failing or the call being interrupted."""
    if isinstance(error, MemoraPGError):
        return not isinstance(error, ConnectionLostError | CommitOutcomeUnknownError)
    return isinstance(error, asyncpg.PostgresError) and not isinstance(error, asyncpg.PostgresConnectionError)
