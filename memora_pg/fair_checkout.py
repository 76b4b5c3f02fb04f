"""Connections go to waiting callers in the order they asked: no caller starves while others go on.

SQLAlchemy's async pool waits on an ``asyncio.Queue``. A connection put back wakes the first waiter,
but the waiter only takes it when it next runs; a task that returned its connection and asks again
at once finds it still in the queue and takes it first. The woken waiter finds the queue empty and
queues again, at the back. Under steady load a newcomer can wait until ``pool_timeout`` while the
others go on at full speed.

A ``FairGate`` in front of every checkout (``driver.Connection``) admits as many callers as the pool
has connections (``pool_size + max_overflow``). A caller that finds none free waits in line, and a
caller that leaves hands its place straight to the first in line, so a caller waits for at most the
callers ahead of it. Behind the gate the pool always has a connection for whoever was admitted. The
gate is per pool, so an engine the user passes in gets one too; a pool without a bound (``NullPool``,
``max_overflow=-1``) gets none.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool


class FairGate:
    """At most ``capacity`` holders at a time, admitted in the order they arrived.

    ``waits`` keeps the time each of the last ``kept`` callers spent waiting (0 when admitted at once),
    and ``longest`` the longest wait of all, in seconds, for the benchmarks' figures.
    """

    def __init__(self, capacity: int, timeout: float | None, kept: int = 100_000) -> None:
        self.capacity = capacity
        self.timeout = timeout
        self._free = capacity
        self._line: deque[asyncio.Future[None]] = deque()
        self.waits: deque[float] = deque(maxlen=kept)
        self.longest = 0.0

    @property
    def waiting(self) -> int:
        return sum(not waiter.done() for waiter in self._line)

    async def enter(self) -> None:
        """Wait for a place (at most ``timeout``: SQLAlchemy's ``TimeoutError``, as the pool raises it)."""
        if self._free > 0 and not self._line:
            self._free -= 1
            self.waits.append(0.0)
            return
        started = time.monotonic()
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(place)
        try:
            await asyncio.wait_for(place, self.timeout)
        except BaseException as error:
            if place.done() and not place.cancelled():
                self.leave()  # handed a place just as it gave up (cancelled): the next in line gets it
            else:
                place.cancel()
                self._forget(place)
            if isinstance(error, asyncio.TimeoutError):
                raise sa_exc.TimeoutError(
                    f"No place in line for a connection within {self.timeout} s "
                    f"({self.capacity} connections, {self.waiting} callers waiting)"
                ) from None
            raise
        waited = time.monotonic() - started
        self.waits.append(waited)
        self.longest = max(self.longest, waited)

    def leave(self) -> None:
        """Give the place to the first caller still in line, or free it."""
        while self._line:
            place = self._line.popleft()
            if place.done():
                continue
            try:
                place.set_result(None)
            except RuntimeError:  # its event loop is closed: that caller is gone
                continue
            return
        self._free += 1

    def _forget(self, place: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):  # already handed its place and gone
            self._line.remove(place)


_GATES: weakref.WeakKeyDictionary[Any, FairGate | None] = weakref.WeakKeyDictionary()


def gate_of(engine: AsyncEngine) -> FairGate | None:
    """The gate in front of ``engine``'s pool (shared by its schema-mapped copies), None for an unbounded pool."""
    pool = engine.sync_engine.pool
    if pool not in _GATES:
        _GATES[pool] = _gate_for(pool)
    return _GATES[pool]


def _gate_for(pool: Any) -> FairGate | None:
    if not isinstance(pool, QueuePool):
        return None
    overflow = pool._max_overflow  # private: memora_pg.private_api
    if overflow < 0:
        return None
    return FairGate(pool.size() + overflow, pool.timeout())
