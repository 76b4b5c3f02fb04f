"""Timing: samples, their median and p95, and paired runs of memora_pg against its raw baseline.

The two sides of a figure run interleaved (memora_pg, raw, memora_pg, raw, …) after the same
warm-up, so that noise from other work on the machine falls on both alike. The warm-up also
lets PostgreSQL settle on its plans: a prepared statement is planned for its parameters for
its first five executions and may then switch to a generic plan, so both sides are timed
only once their statements are past that point.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Call = Callable[[int], Awaitable[Any]]


@dataclass
class Sample:
    """Seconds per call."""

    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def p95(self) -> float:
        if len(self.seconds) < 2:
            return self.median
        return statistics.quantiles(self.seconds, n=20, method="inclusive")[-1]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.seconds) if self.seconds else float("nan")


async def timed(call: Call, i: int) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call(i)
    return time.perf_counter() - started, result


@dataclass
class Run:
    """One side of a figure: its timings and what its timed calls returned."""

    sample: Sample = field(default_factory=Sample)
    results: list[Any] = field(default_factory=list)


async def interleaved(calls: Mapping[str, Call], *, iterations: int, warmup: int) -> dict[str, Run]:
    """Warm every side up, then time them in turn: call ``i`` of every side, then call ``i + 1``.

    The order of the sides rotates from one ``i`` to the next. Call ``i`` of every side often
    reads the same rows (the same user): the side that goes first reads them from cold CPU caches
    and the ones after it from warm ones, so a fixed order would favour the sides listed last.
    """
    names = list(calls)
    for i in range(warmup):
        for call in calls.values():
            await call(i)
    runs = {name: Run() for name in calls}
    for i in range(warmup, warmup + iterations):
        turn = i % len(names)
        for name in names[turn:] + names[:turn]:
            elapsed, result = await timed(calls[name], i)
            runs[name].sample.seconds.append(elapsed)
            runs[name].results.append(result)
    return runs


async def throughput(call: Callable[[int, int], Awaitable[Any]], *, workers: int, per_worker: int) -> float:
    """Calls per second of ``workers`` concurrent loops of ``per_worker`` calls (``call(worker, i)``)."""

    async def loop(worker: int) -> None:
        for i in range(per_worker):
            await call(worker, i)

    started = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in range(workers)))
    return workers * per_worker / (time.perf_counter() - started)
