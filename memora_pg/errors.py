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


class EmbeddingError(MemoraPGError):
    """The embedder failed or returned vectors of the wrong shape; nothing was written."""


class LLMError(MemoraPGError):
    """The language model failed or returned output that could not be used; nothing was written."""


class DatabaseError(MemoraPGError):
    """The database failed for a reason that is not the caller's mistake.

    The driver's exception is kept in ``__cause__``.
    """


class TransientDatabaseError(DatabaseError):
    """The transaction lost a race (a deadlock or a serialization failure) and was rolled back;
    running it again may succeed. memora_pg's graph writes retry it themselves."""


# SQLSTATE classes and codes, see https://www.postgresql.org/docs/current/errcodes-appendix.html
_UNIQUE_VIOLATION = "23505"
_FOREIGN_KEY_VIOLATION = "23503"
# data exceptions: bad encoding, NUL bytes, value out of range
_INVALID_INPUT_CLASSES = ("22",)
# serialization_failure, deadlock_detected
_RETRYABLE = ("40001", "40P01")
# undefined_table, undefined_function: a schema not migrated, or not migrated to this version
_MISSING_OBJECT = ("42P01", "42883")
MIGRATE_HINT = (
    "memora_pg's schema is missing here, or older than this version of memora_pg: every face brings it to head "
    "on its first call (or call `await store.setup()`), which needs a role that may create tables; otherwise run "
    "`memora-pg db upgrade` or `alembic upgrade head` as one; check MEMORA_PG_SCHEMA if the schema is elsewhere."
)


def _driver_errors(error: BaseException) -> tuple[object, ...]:
    """The driver's exception behind ``error`` (SQLAlchemy wraps asyncpg's, which may wrap another)."""
    orig = getattr(error, "orig", error)
    return (orig, getattr(orig, "__cause__", None))


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


def translate(error: sa_exc.DBAPIError | asyncpg.PostgresError) -> MemoraPGError:
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
    else:
        hint = f" {MIGRATE_HINT}" if code in _MISSING_OBJECT else ""
        translated = DatabaseError(
            f"The database call failed (SQLSTATE {code or 'unknown'}): {getattr(error, 'orig', error)!r}.{hint}"
        )
    translated.sqlstate = code
    translated.constraint_name = _constraint_name(error)
    return translated


@contextmanager
def database_errors() -> Iterator[None]:
    """Translate driver errors raised inside the block into the package's family."""
    try:
        yield
    except MemoraPGError:
        raise
    except (sa_exc.DBAPIError, asyncpg.PostgresError) as error:
        raise translate(error) from error
    except (sa_exc.SQLAlchemyError, asyncpg.InterfaceError, OSError, ConnectionError) as error:
        raise DatabaseError(f"The database call failed: {error!r}") from error
