"""How vectors travel to PostgreSQL: as ``real[]`` parameters, in binary.

pgvector's text form ``[0.1,0.2,...]`` costs a shortest-decimal ``repr`` per number on the
client (about 0.25 ms for one 384-dimension vector in Python) and a parse per number on the
server. A ``real[]`` parameter goes in asyncpg's binary format instead, and the server casts
it to ``vector`` (pgvector's ``real[] -> vector`` cast). Nothing has to be registered on the
connections, so this works the same on memora_pg's engines, on an engine the caller passes
in, and behind pgbouncer.

Several vectors (the queries of one search) travel end to end in one ``real[]``; the n-th
(counted from 0) is its slice ``[n * dimensions + 1 : (n + 1) * dimensions]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import ColumnElement, bindparam, cast
from sqlalchemy.dialects.postgresql import ARRAY, REAL


def one(vector: Sequence[float] | None) -> list[float] | None:
    """The value of a vector parameter (None stays NULL)."""
    return None if vector is None else list(vector)


def many(vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The ``:embeddings`` and ``:dimensions`` parameters that :func:`nth_sql` reads."""
    return {
        "embeddings": list(chain.from_iterable(vectors)),
        "dimensions": len(vectors[0]) if vectors else 0,
    }


def param(name: str) -> ColumnElement[Any]:
    """A SQLAlchemy expression for the vector given as the statement parameter ``name`` (:func:`one`)."""
    return cast(bindparam(name, type_=ARRAY(REAL)), VECTOR())


def value(name: str, vector: Sequence[float]) -> ColumnElement[Any]:
    """A SQLAlchemy expression for ``vector``, bound now under ``name``."""
    return cast(bindparam(name, one(vector), type_=ARRAY(REAL)), VECTOR())
