"""A minute of every face under load while the server restarts, backends are killed and statements time out:
the ledger of what callers were told must match the database (``bench.soak``; the long runs are in
docs/reliability.md)."""

from __future__ import annotations

import os

import pytest

from bench import soak

pytestmark = pytest.mark.skipif(
    os.environ.get("MEMORA_PG_TEST_DATABASE_URL") is not None
    or os.environ.get("MEMORA_PG_TEST_POSTGRES", "18") != "18",
    reason="the soak restarts its own embedded server; it runs once, in the PostgreSQL 18 run",
)


async def test_a_minute_of_load_and_faults_loses_nothing_and_types_every_error() -> None:
    server = soak.embedded_server()
    try:
        faults = soak.fault_schedule(soak.SHORT_SCHEDULE)
        report = await soak.soak(server, seconds=60, clients=8, faults=faults)
    finally:
        server.close()
    print("\n".join(report.lines))
    assert report.problems == []
    assert not report.untyped
    # The run did what it is for: faults of every kind, and writes acknowledged before and after them.
    assert {name for name, _, _ in report.ledger.faults} == {"restart", "kill", "timeout"}
    acknowledged = [e for e in report.ledger.entries if e.outcome == "ack" and e.kind == "memora save"]
    last_fault_end = max(end for _, _, end in report.ledger.faults)
    assert any(e.started > last_fault_end for e in acknowledged)
