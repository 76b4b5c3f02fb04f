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

from sqlalchemy import exc as sa_exc


class MemoraPGError(Exception):
    """Base class of every error memora_pg raises on purpose."""


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
_INVALID_INPUT_CLASSES = ("22",)
_RETRYABLE = (
    "40001",
    "40P01",
)  # serialization_failure, deadlock_detected  # data exceptions: bad encoding, NUL bytes, value out of range


def _sqlstate(error: BaseException) -> str | None:
    orig = getattr(error, "orig", None)
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def translate(error: sa_exc.DBAPIError) -> MemoraPGError:
    """Map a driver error to the package's family, by SQLSTATE and never by message text."""
    code = _sqlstate(error)
    if code == _UNIQUE_VIOLATION:
        return AlreadyExistsError("A record with that key already exists.")
    if code == _FOREIGN_KEY_VIOLATION:
        return NotFoundError("A record this write refers to does not exist.")
    if code is not None and code.startswith(_INVALID_INPUT_CLASSES):
        return InvalidInputError(f"The database refused a value (SQLSTATE {code}).")
    if code in _RETRYABLE:
        return TransientDatabaseError(f"The transaction lost a race and was rolled back (SQLSTATE {code}).")
    return DatabaseError(f"The database call failed (SQLSTATE {code or 'unknown'}): {error.orig!r}")


@contextmanager
def database_errors() -> Iterator[None]:
    """Translate driver errors raised inside the block into the package's family."""
    try:
        yield
    except MemoraPGError:
        raise
    except sa_exc.DBAPIError as error:
        raise translate(error) from error
    except (sa_exc.SQLAlchemyError, OSError, ConnectionError) as error:
        raise DatabaseError(f"The database call failed: {error!r}") from error
