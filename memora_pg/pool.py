"""Checking pooled connections as they leave the pool, in one round trip or none.

SQLAlchemy's own ``pool_pre_ping`` wraps its ping in a transaction (three round trips with
asyncpg). These listeners ping with one simple-protocol ``SELECT 1``, and skip the ping for a
connection that came back less than ``pool_pre_ping_idle`` seconds ago unless a non-blocking
peek at its socket shows the server closed it (``engine.create_engine`` installs them).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from sqlalchemy import exc as sa_exc

try:  # SQLAlchemy 2.1
    from sqlalchemy.util.concurrency import await_ as _await
except ImportError:  # SQLAlchemy 2.0
    from sqlalchemy.util.concurrency import await_only as _await  # type: ignore[no-redef,unused-ignore]

_CHECKED_IN = "memora_pg_checked_in"


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

    A non-blocking peek at the socket, no round trip. asyncpg reads whatever the server sends
    as soon as the event loop runs, so the socket of an idle connection is silent; it holds an
    end of file (or the server's goodbye) only when the server closed the connection and the
    loop has not run since, e.g. a restart while the loop was blocked. Anything but silence,
    or a socket this cannot peek at, means: ping.
    """
    transport = getattr(driver, "_transport", None)  # private: memora_pg.private_api
    sock = transport.get_extra_info("socket") if transport is not None else None
    flags = getattr(socket, "MSG_PEEK", 0) | getattr(socket, "MSG_DONTWAIT", 0)
    if sock is None or not hasattr(socket, "MSG_DONTWAIT"):
        return True
    try:
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as peek:
            peek.recv(1, flags)
    except BlockingIOError:
        return False
    except OSError:
        return True
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
        _await(driver.execute("SELECT 1"))
    except Exception as error:  # any failure of the ping means: use another connection
        raise sa_exc.DisconnectionError(f"the connection failed its ping: {error!r}") from error
