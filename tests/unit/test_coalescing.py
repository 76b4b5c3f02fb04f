"""Concurrent embedding calls share batches; each gets its own vectors, errors and cancellations stay theirs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memora_pg.embeddings.coalescing import Coalescer


class Model:
    """A blocking batch function that records the batches it was given (a vector: the text's length)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on
        self.release = threading.Event()
        self.release.set()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.release.wait(5)
        self.batches.append(list(texts))
        if self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on}")
        return [[float(len(text))] for text in texts]


async def test_calls_that_arrive_together_share_one_batch() -> None:
    model = Model()
    line = Coalescer(model, size=64)
    texts = [["a" * n] for n in range(1, 21)]
    answers = await asyncio.gather(*(line.embed(t) for t in texts))
    assert answers == [[[float(n)]] for n in range(1, 21)]
    assert [len(batch) for batch in model.batches] == [20]


async def test_a_batch_takes_whole_calls_in_arrival_order_and_a_large_call_is_cut() -> None:
    model = Model()
    line = Coalescer(model, size=4)
    model.release.clear()
    first = asyncio.ensure_future(line.embed(["x"]))
    await asyncio.sleep(0.05)  # the first batch runs (held), the next callers wait in line
    waiting = [asyncio.ensure_future(line.embed(t)) for t in (["ab", "cd"], ["efg"], ["hi", "jk"], ["l"] * 9)]
    await asyncio.sleep(0)
    model.release.set()
    assert await first == [[1.0]]
    assert [await w for w in waiting] == [[[2.0], [2.0]], [[3.0]], [[2.0], [2.0]], [[1.0]] * 9]
    # ["hi", "jk"] did not fit beside the three texts before it: a batch of its own; nine texts: cut in fours
    assert [len(batch) for batch in model.batches] == [1, 3, 2, 4, 4, 1]


async def test_a_failed_batch_fails_its_callers_only() -> None:
    model = Model(fail_on="bad")
    line = Coalescer(model, size=64)
    results = await asyncio.gather(line.embed(["good"]), line.embed(["bad"]), return_exceptions=True)
    assert all(isinstance(result, RuntimeError) for result in results)
    assert await line.embed(["fine"]) == [[4.0]]


async def test_a_cancelled_caller_leaves_the_others_their_answers() -> None:
    model = Model()
    line = Coalescer(model, size=64)
    model.release.clear()
    leaving = asyncio.ensure_future(line.embed(["bye"]))
    staying = asyncio.ensure_future(line.embed(["stay"]))
    await asyncio.sleep(0.05)
    leaving.cancel()
    model.release.set()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert await staying == [[4.0]]
