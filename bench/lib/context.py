"""What every figure of one scale shares: the database, the data, the embedder, the engines."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.lib import data
from bench.lib.load import SCHEMA
from bench.lib.report import Figure
from bench.lib.server import sqlalchemy_url
from memora_pg import Settings, driver
from memora_pg.engine import create_engine


class VectorBook:
    """memora_pg's embedder for the benchmark: it returns the precomputed vector of each text.

    Texts the run writes get theirs from :meth:`put` (or, if never put, a clustered vector
    derived from the text), so no model runs while anything is timed.
    """

    def __init__(self, space: data.VectorSpace) -> None:
        self.space = space
        self.vectors: dict[str, list[float]] = {}

    @property
    def dimensions(self) -> int:
        return data.DIMENSIONS

    def put(self, texts: Sequence[str], vectors: np.ndarray[Any, Any]) -> None:
        for text, vector in zip(texts, vectors, strict=True):
            self.vectors[text] = vector.tolist()

    def get(self, text: str) -> list[float]:
        found = self.vectors.get(text)
        if found is None:
            found = self.vectors[text] = self.space.fresh(text, 1)[0].tolist()
        return found

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.get(text) for text in texts]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.get(text) for text in texts]


class Statements:
    """Every statement (with its parameters) sent through an engine since the last :meth:`clear`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.sent: list[tuple[str, Any]] = []
        driver.listen(engine, lambda statement, arguments: self.sent.append((statement, arguments)))

    def clear(self) -> None:
        self.sent.clear()

    def __len__(self) -> int:
        return len(self.sent)


@dataclass
class Context:
    url: str
    layout: data.Layout
    space: data.VectorSpace
    book: VectorBook
    iterations: int
    warmup: int
    figures: list[Figure] = field(default_factory=list)
    engines: list[AsyncEngine] = field(default_factory=list)
    # Settings every store of the run gets (e.g. hnsw_ef_search for a sweep).
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def scale(self) -> str:
        return data.scale_label(self.layout.n)

    def settings(self, **values: Any) -> Settings:
        return Settings(db_schema=SCHEMA, **{**self.overrides, **values})

    def engine(self, connections: int) -> AsyncEngine:
        """The package's own engine (its defaults: statement cache, pre-ping) with ``connections`` connections."""
        engine = create_engine(sqlalchemy_url(self.url), self.settings(pool_size=connections, max_overflow=0))
        self.engines.append(engine)
        return engine

    async def dispose(self) -> None:
        for engine in self.engines:
            await engine.dispose()
        self.engines.clear()

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        print(figure.line(), flush=True)
        return figure


def small_run(prog: str, description: str | None, argv: list[str] | None) -> tuple[int, data.Layout, data.VectorSpace]:
    """The arguments of a benchmark of one scale (``--scale``, ``--iterations``): iterations, layout, vectors."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--scale", default="10k")
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args(argv)
    layout = data.Layout(data.parse_scale(args.scale))
    return args.iterations, layout, data.VectorSpace(layout)
