"""How vectors travel to PostgreSQL: in pgvector's binary format.

pgvector's text form ``[0.1,0.2,...]`` costs a shortest-decimal ``repr`` per number on the
client (about 0.25 ms for one 384-dimension vector in Python) and a parse per number on the
server; a ``real[]`` array costs asyncpg a type check per number. The binary form is the
numbers as big-endian float32 behind a 4-byte header: numpy writes it in microseconds.

memora_pg registers this codec for the ``vector`` type on every connection it uses, once per
connection (:func:`register`, called by ``Database.transaction``), so its statements bind
vectors as ``vector`` and ``vector[]`` parameters. A value here is the encoded ``bytes``: asyncpg
passes ``bytes`` through the codec unchanged and, unlike a list, never takes them for a
nested array. Reading a ``vector`` column on such a connection gives a float32 numpy array, as
pgvector-python's own ``register_vector`` does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.engine import Dialect

# pgvector's vector_send: dimensions (uint16), unused (uint16), then the float32 values.
_HEADER = struct.Struct(">HH")

# The schema pgvector's types live in: asyncpg names a type with its schema.
VECTOR_SCHEMA = """
SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
WHERE e.extname = 'vector'
"""


def encode(value: Any) -> bytes:
    """pgvector's binary form of a vector (a sequence of numbers, or bytes already encoded)."""
    if isinstance(value, bytes):
        return value
    values = np.asarray(value, dtype=">f4")
    if values.ndim != 1:
        raise ValueError(f"a vector has one dimension, not {values.ndim}")
    return _HEADER.pack(values.shape[0], 0) + values.tobytes()


def decode(data: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(data, dtype=">f4", offset=_HEADER.size).astype(np.float32)


async def register(driver: Any) -> bool:
    """Register the codec on an asyncpg connection; False while pgvector is not installed."""
    schema = await driver.fetchval(VECTOR_SCHEMA)
    if schema is None:
        return False
    await driver.set_type_codec("vector", schema=schema, encoder=encode, decoder=decode, format="binary")
    return True


def one(vector: Sequence[float] | None) -> bytes | None:
    """The value of a ``vector`` parameter (None stays NULL)."""
    return None if vector is None else encode(vector)


def many(vectors: Sequence[Sequence[float] | npt.NDArray[Any] | None]) -> list[bytes | None]:
    """The value of a ``vector[]`` parameter (a None element stays NULL)."""
    return [None if vector is None else encode(vector) for vector in vectors]


def as_text(vector: Sequence[float] | npt.NDArray[Any]) -> str:
    """pgvector's text form of a vector, ``[x,y,...]`` (what a ``CAST(... AS vector)`` of text reads)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def parse(text: str) -> list[float]:
    """A vector from pgvector's text form ``[x,y,...]``."""
    inside = text.strip().strip("[]")
    return [float(x) for x in inside.split(",")] if inside.strip() else []


class BinaryVector(VECTOR):
    """pgvector's ``VECTOR`` for SQLAlchemy statements, its values bound as :func:`one` made them.

    The bind is cast to ``VECTOR`` in the SQL (``$1::VECTOR``), so the server expects a vector
    and asyncpg encodes the bytes with the registered codec.
    """

    cache_ok = True
    render_bind_cast = True

    def bind_processor(self, dialect: Dialect) -> Any:
        return None

    def literal_processor(self, dialect: Dialect) -> Any:
        """The vector as a pgvector text literal, for statements compiled with their values (EXPLAIN, logs)."""

        def process(value: Any) -> str:
            numbers = decode(value) if isinstance(value, bytes) else np.asarray(value, dtype=np.float32)
            return f"'{as_text(numbers)}'"

        return process
