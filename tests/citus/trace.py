"""What a statement or a store call does on the cluster: its plan, and the commands the coordinator sends.

:func:`assert_router_plannable` checks a statement plans to one shard (every ``Task Count`` of its
EXPLAIN is 1 and nothing is planned as a distributed subplan). :func:`traced_engine` makes an
engine whose sessions run with ``citus.log_remote_commands`` on and hand the coordinator's
``issuing ...`` messages to a :class:`Trace`: which workers a call touched, how many commands
it sent, and whether it committed with two-phase commit (``PREPARE TRANSACTION``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

_SERVER = re.compile(r"on server \S+@(?P<host>[^:\s]+):(?P<port>\d+)")
_TASK_COUNT = re.compile(r"Task Count: (\d+)")


@dataclass(frozen=True)
class RemoteCommand:
    sql: str
    node: str  # host:port of the node it went to


@dataclass
class Trace:
    """The remote commands the coordinator issued while :meth:`capture` was active."""

    commands: list[RemoteCommand] = field(default_factory=list)
    active: bool = False

    @contextmanager
    def capture(self) -> Iterator[Trace]:
        self.commands.clear()
        self.active = True
        try:
            yield self
        finally:
            self.active = False

    def record(self, message: str, detail: str | None) -> None:
        if not self.active or not message.startswith("issuing "):
            return
        found = _SERVER.search(detail or "")
        node = f"{found['host']}:{found['port']}" if found else "?"
        self.commands.append(RemoteCommand(message.removeprefix("issuing "), node))

    @property
    def nodes(self) -> set[str]:
        """The nodes that received at least one command."""
        return {c.node for c in self.commands}

    @property
    def two_phase(self) -> bool:
        """True when the transaction was committed with PREPARE TRANSACTION / COMMIT PREPARED."""
        return any(c.sql.startswith("PREPARE TRANSACTION") for c in self.commands)

    def summary(self) -> str:
        return f"{len(self.commands)} remote commands on {len(self.nodes)} node(s), 2PC={self.two_phase}"


def traced_engine(url: str, trace: Trace) -> AsyncEngine:
    """An engine on ``url`` whose connections report every remote command to ``trace``."""
    engine = create_async_engine(
        url,
        connect_args={"server_settings": {"citus.log_remote_commands": "on", "client_min_messages": "log"}},
    )

    def listen(message: Any) -> None:
        trace.record(message.message, getattr(message, "detail", None))

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.driver_connection.add_log_listener(lambda _conn, message: listen(message))

    return engine


async def explain(conn: AsyncConnection, sql: str, params: Mapping[str, Any] | None = None) -> str:
    """The coordinator's EXPLAIN of one statement (not run), as text."""
    rows = await conn.execute(text("EXPLAIN (COSTS OFF) " + sql), dict(params or {}))
    return "\n".join(row[0] for row in rows)


async def assert_router_plannable(conn: AsyncConnection, sql: str, params: Mapping[str, Any] | None = None) -> str:
    """Assert ``sql`` plans to exactly one shard: one task, no distributed subplan. Returns the plan."""
    plan = await explain(conn, sql, params)
    counts = [int(n) for n in _TASK_COUNT.findall(plan)]
    assert counts, f"not a distributed plan:\n{plan}"
    assert counts == [1] * len(counts), f"not single-shard (task counts {counts}):\n{plan}"
    assert "Distributed Subplan" not in plan, f"planned in several steps:\n{plan}"
    return plan
