"""An event loop of its own in a daemon thread: what the synchronous faces (the mem0-style ``Memory``,
LangGraph's ``MemoraStore``) run their async twin on.

The calls work the same from plain scripts and from code that already runs an event loop (notebooks, web
frameworks, a LangGraph graph): each is handed to the thread's loop and waited for. The async twin's
connections belong to that loop, so every call of the instance goes there, also an awaited one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

T = TypeVar("T")


class LoopThread:
    """A running event loop in a daemon thread named ``name``, until :meth:`stop`."""

    def __init__(self, name: str, closed_message: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed_message = closed_message
        self.stopped = False

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        """``call`` run on the loop, waited for from this thread."""
        self._check(call)
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    async def run_async(self, call: Coroutine[Any, Any, T]) -> T:
        """``call`` run on the loop, awaited from another loop."""
        self._check(call)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    def _check(self, call: Coroutine[Any, Any, Any]) -> None:
        if self.stopped:
            call.close()
            raise RuntimeError(self._closed_message)

    def stop(self) -> None:
        """Stop the loop and its thread; idempotent."""
        if self.stopped:
            return
        self.stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def abandon(self) -> None:
        """Stop the loop of an instance never closed (from ``__del__``): best effort, no waiting."""
        if not self.stopped and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)


class SyncShell:
    """What a synchronous face shares: its loop thread (``_loop``), ``with``, and a loop stopped when an
    instance never closed is collected. The face defines ``close``."""

    _loop: LoopThread

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort for instances never closed
        if hasattr(self, "_loop"):
            self._loop.abandon()
