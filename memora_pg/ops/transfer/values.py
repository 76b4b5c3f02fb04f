"""How each value of a record is read back: JSON numbers kept as written, vectors as their text, and one
decoder per column kind (``DECODERS``), each raising ``ValueError`` or ``TypeError`` for a value it cannot
take (``records.decode`` names the line and the column)."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any


class Number(str):
    """A JSON number with a fraction or an exponent, kept as its text.

    An embedding's numbers are the shortest decimals of float32 values: handed to pgvector as
    text they come back bit for bit, and no float is ever formatted again (the slow part).
    """

    __slots__ = ()


class VectorText(str):
    """An embedding as the text of its JSON array, its numbers unparsed (see ``records._parse``)."""

    __slots__ = ()


def no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, not {value!r}")
    if "\x00" in value:
        raise ValueError("text may not contain NUL characters")
    return value


def _integer(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, not {value!r}")
    return value


def _uuid(value: Any) -> uuid.UUID:
    return uuid.UUID(_text(value))


def _timestamp(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_text(value))
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset")
    return parsed


def _json(value: Any) -> Any:
    if type(value) is Number:
        return float(value)
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json(item) for item in value]
    return value


def _bytes(value: Any) -> bytes:
    try:
        return base64.b64decode(_text(value), validate=True)
    except binascii.Error as error:
        raise ValueError(f"not base64: {error}") from error


def vector_length(value: Any) -> int | None:
    if type(value) is VectorText:
        return value.count(",") + 1 if value != "[]" else 0
    return len(value) if isinstance(value, list) else None


def _vector(value: list[Any] | VectorText) -> str:
    """pgvector's text form of the vector: the exported decimals, untouched."""
    if type(value) is VectorText:
        return value
    kinds = set(map(type, value))
    if not kinds <= {Number, int}:
        raise TypeError("expected a list of numbers")
    if int in kinds:  # pgvector prints integral values without a fraction: 0, 1
        value = [str(x) for x in value]
    return "[" + ",".join(value) + "]"


DECODERS: dict[str, Callable[[Any], Any]] = {
    "text": _text,
    "integer": _integer,
    "boolean": _boolean,
    "uuid": _uuid,
    "timestamp": _timestamp,
    "json": _json,
    "bytes": _bytes,
    "vector": _vector,
    "searchable": _boolean,
}
