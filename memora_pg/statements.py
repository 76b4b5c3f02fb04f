"""The data layer's statements: named SQL constants and their parameters.

A raw SQL constant writes ``{schema}`` where a table's schema goes, and Core statements name no
schema; :mod:`memora_pg.driver` compiles both into the connection's schema (:func:`in_schema`, and
SQLAlchemy's ``schema_translate_map``), so the two kinds always agree on where the tables are. A
:class:`Statement` pairs a statement with its parameters, so that a call that is exactly one
statement can be run by ``Database.execute_one`` without a transaction block around it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, func, text
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import BindParameter, ColumnElement, TextClause
from sqlalchemy.sql.visitors import replacement_traverse

from memora_pg.sql_text import quoted, render


@lru_cache(maxsize=512)
def in_schema(template: str, schema: str) -> TextClause:
    """A named SQL constant with ``{schema}`` set to ``schema`` (a validated identifier)."""
    return text(render(template, schema=quoted(schema)))


@dataclass(frozen=True)
class Statement:
    """A statement and its parameters: a named SQL constant (``{schema}`` filled in when it runs)
    or a Core statement."""

    sql: str | Executable
    params: dict[str, Any] = field(default_factory=dict)


def function_call(function: str, arguments: tuple[str, ...]) -> str:
    """A call of one of the schema's functions, each argument given by name: ``p_name => :name`` (a write
    function's arguments are its parameters' names behind ``p_``, migration 0016)."""
    named = ",\n    ".join(f"p_{name} => :{name}" for name in arguments)
    return render("SELECT * FROM {schema}.{function}(\n    {arguments}\n)", function=function, arguments=named)


def from_json(value: Any) -> Any:
    """A json column's value: decoded already by the codec SQLAlchemy's dialect sets on each connection,
    but a ``json`` value built in SQL may come as text."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def to_search_text(schema: str, text_value: ColumnElement[Any]) -> ColumnElement[Any]:
    """The schema's full-text rule (migration 0006) applied to ``text_value``, for Core statements."""
    found: ColumnElement[Any] = getattr(func, schema).to_search_text(text_value)
    return found


class FilterShape:
    """A condition with its values taken out (bound as ``filter_0``, ``filter_1``, ... in the order
    they appear), equal to another exactly when SQLAlchemy would compile both alike: a mem0-style
    filter of a shape already seen reuses the search statement built for it."""

    def __init__(self, condition: ColumnElement[bool]) -> None:
        self.values: dict[str, Any] = {}

        def unbound(element: Any, **_: Any) -> Any:
            if isinstance(element, BindParameter):
                name = f"filter_{len(self.values)}"
                self.values[name] = element.effective_value
                return bindparam(
                    name, type_=element.type, expanding=element.expanding, literal_execute=element.literal_execute
                )
            return None

        self.condition: ColumnElement[bool] = replacement_traverse(condition, {}, unbound)
        cache_key = self.condition._generate_cache_key()  # private: memora_pg.private_api
        self.key = None if cache_key is None else cache_key.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FilterShape) and self.key is not None and self.key == other.key
