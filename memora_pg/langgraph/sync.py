"""``MemoraStore``: the synchronous ``BaseStore``, a thin shell over :class:`AsyncMemoraStore`.

Each instance owns one event loop in a daemon thread (:class:`~memora_pg.loop_thread.LoopThread`), as the
mem0-style ``Memory`` does, so its calls work the same from plain scripts and from code that already runs an
event loop. Its a-methods await that same loop, so a graph may use either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from langgraph.store.base import BaseStore, Item, Op, Result, SearchItem

from memora_pg.db import Database
from memora_pg.langgraph.store import AsyncMemoraStore
from memora_pg.loop_thread import LoopThread, SyncShell


class MemoraStore(SyncShell, BaseStore):
    """LangGraph's long-term memory on memora_pg, synchronous; the arguments of :class:`AsyncMemoraStore`."""

    supports_ttl = True

    def __init__(self, **options: Any) -> None:
        self._loop = LoopThread("memora_pg-store", "This MemoraStore is closed.")
        try:
            # Made on its loop: its connections belong there.
            self._async = self._loop.run(_made(options))
        except BaseException:
            self._loop.stop()
            raise
        self.index_config = self._async.index_config
        self.ttl_config = self._async.ttl_config

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, conn_string: str, **options: Any) -> Iterator[MemoraStore]:
        """A store on the database at ``conn_string`` (a ``postgresql://`` URL), closed on exit; ``options``
        are those of :class:`AsyncMemoraStore` (``index``, ``ttl``, ``org_id``, ...)."""
        store = cls(database_url=conn_string, **options)
        try:
            yield store
        finally:
            store.close()

    @property
    def database(self) -> Database:
        return self._async.database

    @property
    def org_id(self) -> str:
        return self._async.org_id

    def setup(self) -> None:
        """Bring the schema to the current migration head now (see ``AsyncMemoraStore.setup``)."""
        self._loop.run(self._async.setup())

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._loop.run(self._async.abatch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._loop.run_async(self._async.abatch(list(ops)))

    def get(self, namespace: tuple[str, ...], key: str, **options: Any) -> Item | None:
        """``AsyncMemoraStore.aget``: ``refresh_ttl``, and ``as_of`` (a datetime: the version current then)."""
        return self._loop.run(self._async.aget(namespace, key, **options))

    async def aget(self, namespace: tuple[str, ...], key: str, **options: Any) -> Item | None:
        return await self._loop.run_async(self._async.aget(namespace, key, **options))

    def search(self, namespace_prefix: tuple[str, ...], /, **options: Any) -> list[SearchItem]:
        """``AsyncMemoraStore.asearch``: ``query``, ``filter``, ``limit``, ``offset``, ``refresh_ttl``, ``as_of``."""
        return self._loop.run(self._async.asearch(namespace_prefix, **options))

    async def asearch(self, namespace_prefix: tuple[str, ...], /, **options: Any) -> list[SearchItem]:
        return await self._loop.run_async(self._async.asearch(namespace_prefix, **options))

    def sweep_ttl(self) -> int:
        """Delete every version of the items whose time to live has run out; how many rows that was."""
        return self._loop.run(self._async.sweep_ttl())

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        self._loop.run(self._async.start_ttl_sweeper(sweep_interval_minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return self._loop.run(self._async.stop_ttl_sweeper(timeout))

    def close(self) -> None:
        """Stop the sweeper, release the connections and stop the instance's event loop; idempotent."""
        if self._loop.stopped:
            return
        self._loop.run(self._async.close())
        self._loop.stop()


async def _made(options: dict[str, Any]) -> AsyncMemoraStore:
    return AsyncMemoraStore(**options)


__all__ = ["MemoraStore"]
