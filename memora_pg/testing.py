"""Helpers for testing code built on memora_pg, without a model or a network.

* :class:`FakeEmbedder` (the same class as :class:`~memora_pg.embeddings.HashEmbedder`):
  deterministic word-overlap vectors.
* :func:`count_statements`: every statement an engine sends, for tests of round trips.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import driver
from memora_pg.embeddings.hashing import HashEmbedder

__all__ = ["FakeEmbedder", "HashEmbedder", "count_statements"]

FakeEmbedder = HashEmbedder
"""Alias of :class:`~memora_pg.embeddings.HashEmbedder` under the name tests look for."""


def count_statements(engine: AsyncEngine) -> list[str]:
    """Record every statement sent through ``engine`` (for tests and benchmarks of round trips)."""
    sent: list[str] = []
    driver.listen(engine, lambda statement, arguments: sent.append(statement))
    return sent
