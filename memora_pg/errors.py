"""The exception family of memora_pg, and the one place driver errors are translated.

Every error the package raises on purpose derives from :class:`MemoraPGError`.

Rules, applied everywhere:

* A caller's mistake (a malformed argument, a position outside the interaction, a text
  with a NUL byte, a wrong embedding dimension) is :class:`InvalidInputError`, which is also
  a ``ValueError`` and a ``TypeError`` so that code written against upstream Memora, which
  raises either, keeps working. Nothing is written.
* A missing organization, user, agent, interaction or memory is :class:`NotFoundError`
  (also a ``LookupError``) where the interface says "does not exist"; list methods return
  ``[]`` and deletes of missing entities are silent, as the seed documents.
* Anything the database or the driver raises that is not the caller's mistake (a lost
  connection, a timeout, a serialization failure) is :class:`DatabaseError`, with the
  driver's exception kept as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi


class MemoraPGError(Exception):
    """Base class of every error memora_pg raises on purpose.

    An error translated from the database carries the driver's ``sqlstate`` and, for a
    constraint violation, the violated ``constraint_name`` (both None otherwise), so callers
    can tell which key failed without reading message text.
    """

    sqlstate: str | None = None
    constraint_name: str | None = None


class InvalidInputError(MemoraPGError, ValueError, TypeError):
    """An argument is malformed; nothing was written."""


class NotFoundError(MemoraPGError, LookupError):
    """The organization, user, agent, interaction or memory does not exist."""


class AlreadyExistsError(MemoraPGError):
    """A record with that key exists already."""


class ConfigurationError(MemoraPGError):
    """The settings, the database schema and the embedder do not fit together."""


class SettingsError(ConfigurationError):
    """A setting names nothing memora_pg knows (a misspelt ``MEMORA_PG_*`` variable)."""


class SchemaNotMigratedError(ConfigurationError):
    """The database's schema is not at the revision this memora_pg needs (``revision`` None: never
    migrated); a command that only reads refuses rather than migrate it unasked."""

    def __init__(self, schema: str, revision: str | None, head: str) -> None:
        super().__init__(
            f"The schema {schema!r} is at revision {revision or 'none'}, not at {head}: "
            "migrate it to head first ('memora-pg db upgrade', setup() or 'alembic upgrade head')."
        )
        self.schema, self.revision, self.head = schema, revision, head


class EmbeddingError(MemoraPGError):
    """The embedder failed or returned vectors of the wrong shape; nothing was written."""


class LLMError(MemoraPGError):
    """The language model failed or returned output that could not be used; nothing was written."""


class DatabaseError(MemoraPGError):
    """The database failed for a reason that is not the caller's mistake.

    The driver's exception is kept in ``__cause__``.
    """


class TransientDatabaseError(DatabaseError):
    """Nothing was written, and running the call again may succeed: the transaction lost a race (a
    deadlock or a serialization failure) and was rolled back, or the connection failed before anything
    was committed (:class:`ConnectionLostError`). memora_pg retries it itself a few times first."""


class ConnectionLostError(TransientDatabaseError):
    """The server refused the connection or went away (restarting, shutting down, the backend killed,
    the network) before the call committed anything; a later call reconnects by itself."""


class CommitOutcomeUnknownError(DatabaseError):
    """The connection went away while a write was being committed: the write is either wholly saved or
    wholly absent, and nobody can tell which from the failure alone.

    ``ids`` holds the ids the write gives what it creates (``interaction_id``, ``memory_ids``) when
    the call knows them before it runs: look them up (``get_interaction``, ``get``) to learn which it
    was. Running the call again blindly may store the write twice. memora_pg never retries it.
    """

    def __init__(self, message: str, ids: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.ids: dict[str, object] = ids or {}


# SQLSTATE classes and codes, see https://www.postgresql.org/docs/current/errcodes-appendix.html
_UNIQUE_VIOLATION = "23505"
_FOREIGN_KEY_VIOLATION = "23503"
# data exceptions: bad encoding, NUL bytes, value out of range
_INVALID_INPUT_CLASSES = ("22",)
# serialization_failure, deadlock_detected
_RETRYABLE = ("40001", "40P01")
# connection_exception (class 08), admin_shutdown (a backend terminated, a fast shutdown), crash_shutdown,
# cannot_connect_now (the server is starting or stopping)
_CONNECTION_LOST = ("08", "57P01", "57P02", "57P03")
# undefined_table, undefined_function: a schema not migrated, or not migrated to this version
_MISSING_OBJECT = ("42P01", "42883")
MIGRATE_HINT = (
    "memora_pg's schema is missing here, or older than this version of memora_pg: every face brings it to head "
    "on its first call (or call `await store.setup()`), which needs a role that may create tables; otherwise run "
    "`memora-pg db upgrade` or `alembic upgrade head` as one; check MEMORA_PG_SCHEMA if the schema is elsewhere."
)


def _driver_errors(error: BaseException) -> tuple[object, ...]:
    """The driver's exception behind ``error`` (SQLAlchemy wraps asyncpg's, which may wrap another), then
    ``error`` itself."""
    orig = getattr(error, "orig", None) or error
    return (orig, getattr(orig, "__cause__", None), error)


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE of a driver error (wrapped by SQLAlchemy or not), or of a translated one."""
    if isinstance(error, MemoraPGError):
        return error.sqlstate
    for candidate in _driver_errors(error):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def _constraint_name(error: BaseException) -> str | None:
    for candidate in _driver_errors(error):
        name = getattr(candidate, "constraint_name", None)
        if isinstance(name, str):
            return name
    return None


def translate(error: BaseException) -> MemoraPGError:
    """Map a driver error (wrapped by SQLAlchemy, or asyncpg's own from ``memora_pg.driver``) to the
    package's family, by SQLSTATE and never by message text."""
    code = sqlstate_of(error)
    translated: MemoraPGError
    if code == _UNIQUE_VIOLATION:
        translated = AlreadyExistsError("A record with that key already exists.")
    elif code == _FOREIGN_KEY_VIOLATION:
        translated = NotFoundError("A record this write refers to does not exist.")
    elif code is not None and code.startswith(_INVALID_INPUT_CLASSES):
        translated = InvalidInputError(f"The database refused a value (SQLSTATE {code}).")
    elif code in _RETRYABLE:
        translated = TransientDatabaseError(f"The transaction lost a race and was rolled back (SQLSTATE {code}).")
    elif code is not None and code.startswith(_CONNECTION_LOST):
        translated = ConnectionLostError(
            f"The connection to the database failed (SQLSTATE {code}): {getattr(error, 'orig', error)!r}."
        )
    else:
        hint = f" {MIGRATE_HINT}" if code in _MISSING_OBJECT else ""
        translated = DatabaseError(
            f"The database call failed (SQLSTATE {code or 'unknown'}): {getattr(error, 'orig', error)!r}.{hint}"
        )
    translated.sqlstate = code
    translated.constraint_name = _constraint_name(error)
    return translated


# The errors SQLAlchemy's asyncpg adapter raises where it hands out a connection of its pool without its
# own wrapping (a connect that fails, e.g. "the database system is shutting down"); they carry the SQLSTATE.
_ADAPTED_ERRORS = (AsyncAdapt_asyncpg_dbapi.Error,)
# Failures of the connection itself, which carry no SQLSTATE: a closed connection, a refused or reset
# socket, a connect that timed out, and asyncpg's InternalClientError ("cannot switch to state ...;
# another operation is in progress"): the client side of a connection a restart cut off mid-operation,
# met by the next operation before it sends anything (seen under restarts in bench.soak).
_LOST_CONNECTION = (
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    ConnectionError,
    TimeoutError,
)


@contextmanager
def database_errors() -> Iterator[None]:
    """Translate driver errors raised inside the block into the package's family."""
    try:
        yield
    except MemoraPGError:
        raise
    except (sa_exc.DBAPIError, asyncpg.PostgresError, *_ADAPTED_ERRORS) as error:
        if sqlstate_of(error) is None and _lost_connection(error):
            raise ConnectionLostError(f"The connection to the database failed: {error!r}") from error
        raise translate(error) from error
    except _LOST_CONNECTION as error:
        raise ConnectionLostError(f"The connection to the database failed: {error!r}") from error
    except sa_exc.SQLAlchemyError as error:
        raise DatabaseError(f"The database call failed: {error!r}") from error


def _lost_connection(error: BaseException) -> bool:
    """Whether a driver error without SQLSTATE is the connection's own failure (SQLAlchemy's wrapping says
    so, or the error behind it is one)."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    return any(isinstance(cause, _LOST_CONNECTION) for cause in (*_driver_errors(error), error.__cause__))


@contextmanager
def sent(*, writes: bool, ids: dict[str, object] | None = None) -> Iterator[None]:
    """Around a statement that commits as it runs (autocommit): a write whose connection fails once it
    is sent may have been committed, which is :class:`CommitOutcomeUnknownError` (with ``ids``)."""
    try:
        with database_errors():
            yield
    except ConnectionLostError as error:
        if writes:
            raise CommitOutcomeUnknownError(
                f"The connection failed while the write was committing; it is wholly saved or wholly absent: {error}",
                ids,
            ) from error
        raise
