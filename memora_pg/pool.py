"""Checking pooled connections as they leave the pool, in one round trip or none.

SQLAlchemy's own ``pool_pre_ping`` wraps its ping in a transaction (three round trips with
asyncpg). These listeners ping with one simple-protocol ``SELECT 1``, and skip the ping for a
connection that came back less than ``pool_pre_ping_idle`` seconds ago unless a non-blocking
poll of its socket shows the server closed it (``engine.create_engine`` installs them).
"""

from __future__ import annotations

import select
import time
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa_exc

_CHECKED_IN = "memora_pg_checked_in"


class PeekableConnection(asyncpg.Connection):  # type: ignore[misc]
    """An asyncpg connection that keeps its transport where memora_pg can read it (asyncpg hands it to
    the constructor, and keeps its own copy private): the pool polls its socket (socket_has_news).
    ``engine.create_engine`` makes its connections of this class (asyncpg's ``connection_class``)."""

    __slots__ = ("transport_for_peeking",)

    def __init__(self, protocol: Any, transport: Any, *rest: Any, **named: Any) -> None:
        super().__init__(protocol, transport, *rest, **named)
        self.transport_for_peeking = transport


def note_checkin(dbapi_connection: Any, record: Any) -> None:
    if record is not None:
        record.info[_CHECKED_IN] = time.monotonic()


def needs_ping(record: Any, idle: float, now: float) -> bool:
    """Whether a connection leaving the pool is pinged: unless it came back less than ``idle`` seconds ago."""
    checked_in = record.info.get(_CHECKED_IN) if record is not None else None
    return checked_in is None or now - checked_in >= idle


def pinger(idle: float) -> Any:
    def ping_if_idle(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if needs_ping(record, idle, time.monotonic()) or socket_has_news(driver):
            _ping(dbapi_connection, record, proxy)
        else:
            drop_closed_connection(dbapi_connection, record, proxy)

    return ping_if_idle


def socket_has_news(driver: Any) -> bool:
    """Whether the server closed the connection, or sent it something, while it sat in the pool.

    A poll of the socket with no wait, no round trip (one system call). asyncpg reads whatever the
    server sends as soon as the event loop runs, so the socket of an idle connection is silent; it
    is readable (an end of file, or the server's goodbye) only when the server closed the connection
    and the loop has not run since, e.g. a restart while the loop was blocked. Anything but silence,
    or a socket this cannot poll, means: ping.
    """
    transport = getattr(driver, "transport_for_peeking", None)  # a PeekableConnection's; else ping
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or not hasattr(select, "poll"):
        return True
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))  # an error, a hang-up or a closed descriptor shows here too
    except (OSError, ValueError):
        return True


def drop_closed_connection(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Replace a pooled connection that asyncpg already knows is closed, without a round trip:
    the pool then takes or opens another one."""
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is not None and driver.is_closed():
        raise sa_exc.DisconnectionError("the connection was closed")


def _ping(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """``pool_pre_ping`` in one round trip: a simple-protocol ``SELECT 1`` as the connection leaves the pool.

    SQLAlchemy's own pre-ping wraps its ping in a transaction (three round trips with asyncpg);
    a simple query outside a transaction is one, and safe behind pgbouncer. A connection
    that fails it (the server restarted or dropped it) is replaced by the pool.
    """
    drop_closed_connection(dbapi_connection, record, proxy)
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is None:
        return
    try:
        # run_async: SQLAlchemy's public way to await the driver inside a pool event.
        dbapi_connection.run_async(lambda connection: connection.execute("SELECT 1"))
    except Exception as error:  # any failure of the ping means: use another connection
        raise sa_exc.DisconnectionError(f"the connection failed its ping: {error!r}") from error
