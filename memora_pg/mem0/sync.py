"""``Memory``: the synchronous API of the seed, a thin shell over :class:`AsyncMemory`.

Each instance owns one event loop, running in a daemon thread (:class:`~memora_pg.loop_thread.LoopThread`),
so the synchronous calls work the same from plain scripts and from code that already runs an event loop
(notebooks, web frameworks): every call is handed to that loop and waited for.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from memora_pg.loop_thread import LoopThread, SyncShell
from memora_pg.mem0.config import MemoryConfig
from memora_pg.mem0.memory import AsyncMemory

T = TypeVar("T")


class Memory(SyncShell):
    """The mem0-style memory on PostgreSQL, synchronous (``add``, ``search``, ``get_all``, ...)."""

    def __init__(self, config: MemoryConfig | None = None, **options: Any) -> None:
        self._async = AsyncMemory(config, **options)
        self._loop = LoopThread("memora_pg-memory", "This Memory is closed.")

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> Memory:
        return cls(MemoryConfig.parse(config_dict))

    @property
    def config(self) -> MemoryConfig:
        return self._async.config

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(call)

    def add(self, messages: Any, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._async.add(messages, **kwargs))

    def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._async.search(query, **kwargs))

    def get(self, memory_id: str) -> dict[str, Any] | None:
        return self._run(self._async.get(memory_id))

    def get_all(self, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._async.get_all(**kwargs))

    def update(self, memory_id: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``AsyncMemory.update``: ``(memory_id, text=None, metadata=None, expiration_date=..., data=None)``."""
        return self._run(self._async.update(memory_id, *args, **kwargs))

    def delete(self, memory_id: str) -> dict[str, Any]:
        return self._run(self._async.delete(memory_id))

    def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        return self._run(self._async.delete_all(user_id=user_id, agent_id=agent_id, run_id=run_id))

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        return self._run(self._async.history(memory_id))

    def reset(self) -> None:
        self._run(self._async.reset())

    def close(self) -> None:
        """Release the connections and stop the instance's event loop; idempotent."""
        if self._loop.stopped:
            return
        self._run(self._async.close())
        self._loop.stop()
