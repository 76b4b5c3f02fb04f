"""A connection that fails is a typed error: lost before anything committed (retry-safe), or during a
write's commit (outcome unknown). Never the driver's own exception."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi

from memora_pg.errors import (
    CommitOutcomeUnknownError,
    ConnectionLostError,
    DatabaseError,
    TransientDatabaseError,
    database_errors,
    sent,
)


def _adapted(orig: Exception) -> Exception:
    """What SQLAlchemy's asyncpg adapter raises where it hands out a pooled connection without wrapping it:
    its own error, the driver's behind it."""
    error = AsyncAdapt_asyncpg_dbapi.Error(str(orig))
    error.orig = orig
    error.sqlstate = error.pgcode = getattr(orig, "sqlstate", None)
    return error


@pytest.mark.parametrize(
    "raised",
    [
        _adapted(asyncpg.exceptions.CannotConnectNowError("the database system is shutting down")),
        _adapted(asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InterfaceError("cannot perform operation: connection is closed"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=["adapted 57P03", "adapted 08003", "57P01", "08003", "interface", "refused"],
)
def test_a_lost_connection_is_connection_lost(raised: Exception) -> None:
    with pytest.raises(ConnectionLostError) as caught, database_errors():
        raise raised
    assert isinstance(caught.value, TransientDatabaseError)
    assert caught.value.__cause__ is raised


def test_a_write_whose_connection_fails_once_sent_has_an_unknown_outcome() -> None:
    ids: dict[str, object] = {"interaction_id": "i1", "memory_ids": ["m1"]}
    with pytest.raises(CommitOutcomeUnknownError) as caught, sent(writes=True, ids=ids):
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    assert caught.value.ids == ids
    assert not isinstance(caught.value, TransientDatabaseError), "a blind retry could store the write twice"


def test_a_read_whose_connection_fails_is_only_lost() -> None:
    with pytest.raises(ConnectionLostError), sent(writes=False):
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")


def test_a_refusal_while_sending_stays_what_it_is() -> None:
    """A statement the server refuses (here a timeout) was rolled back: not an unknown outcome."""
    with pytest.raises(DatabaseError, match="57014") as caught, sent(writes=True):
        raise asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout")
    assert not isinstance(caught.value, CommitOutcomeUnknownError | ConnectionLostError)


def test_a_connection_left_mid_operation_is_lost() -> None:
    """asyncpg's "cannot switch to state ...; another operation is in progress": a connection a restart cut
    off mid-operation, met before anything is sent; lost, so a retry (on another connection) is safe."""
    with pytest.raises(ConnectionLostError), database_errors():
        raise asyncpg.exceptions._base.InternalClientError("cannot switch to state 12")
