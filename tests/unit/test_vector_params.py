"""pgvector's binary format, as memora_pg writes vectors."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from sqlalchemy.dialects.postgresql import asyncpg

from memora_pg import vector_params


def test_a_vector_is_its_dimension_then_big_endian_float32() -> None:
    """The layout of pgvector's vector_send: dimensions, an unused uint16, the values."""
    data = vector_params.encode([1.0, -0.5, 0.25])
    assert data == struct.pack(">HH3f", 3, 0, 1.0, -0.5, 0.25)
    assert vector_params.decode(data).tolist() == [1.0, -0.5, 0.25]
    assert vector_params.decode(data).dtype == np.float32


def test_encoded_bytes_pass_through_and_none_stays_null() -> None:
    data = vector_params.encode(np.array([0.1, 0.2], dtype=np.float32))
    assert vector_params.encode(data) is data
    assert vector_params.one(None) is None
    assert vector_params.many([[1.0], [2.0]]) == [vector_params.encode([1.0]), vector_params.encode([2.0])]


def test_only_one_dimensional_vectors_are_encoded() -> None:
    with pytest.raises(ValueError, match="one dimension"):
        vector_params.encode([[1.0, 2.0]])


def test_a_statement_compiled_with_its_values_shows_the_vector_as_text() -> None:
    """For EXPLAIN and logs: the literal is pgvector's text form."""
    process = vector_params.BinaryVector().literal_processor(asyncpg.dialect())
    assert process(vector_params.encode([0.5, 2.0])) == "'[0.5,2.0]'"
