"""mem0-style filter dicts compiled to one SQLAlchemy boolean over the ``memories`` table.

The language is the seed's (durag ``Memory.search``)::

    {"key": "value"}                      exact match (same as {"key": {"eq": "value"}})
    {"key": [v, ...]}                     any of the values (same as {"key": {"in": [...]}}, as in mem0)
    {"key": {"eq" | "ne": v}}             JSON equality; v may be a string, number, bool, None, list or dict
    {"key": {"in" | "nin": [v, ...]}}     equal to one of the values / to none of them
    {"key": {"gt" | "gte" | "lt" | "lte": v}}   v a number or a string
    {"key": {"contains" | "icontains": "text"}} substring of a scalar's text (icontains: ignoring case)
    {"key": "*"}                          the key is present, whatever its value (even null)
    {"AND": [f, ...]}  {"OR": [f, ...]}  {"NOT": [f, ...]}   NOT: none of its list holds

Several keys in one dict, and several operators in one operator dict, are ANDed. Only the
upper-case names are logical operators; ``and``, ``or`` and ``not`` are ordinary keys, and
``{"key": {"eq": "*"}}`` matches the string ``"*"``.

Keys: ``user_id`` and ``agent_id`` are the columns of the same name, where ``''`` means "no
user" / "no agent" (so their wildcard is ``<> ''``); they take string operands only. Every
other key, ``run_id`` included, is a key of the ``metadata`` jsonb column.

Semantics, mem0's (its pgvector store's SQL), except that no stored value can ever make a
query fail:

* Where both sides are numbers they compare as numbers, a numeric string (``"10"``, stored or
  given) counting as the number it spells: ``{"n": 10}`` matches ``10``, ``10.0`` and
  ``"10"``; ``{"n": {"gt": "6"}}`` matches ``7.5`` and ``"10"``. Other strings compare as
  strings (by code point, as jsonpath does), and a value of another type simply does not
  match: ``{"gt": 10}`` is false for ``"abc"``, ``true``, ``[20]`` or a missing key (mem0
  raises on a stored non-numeric string instead). ``contains`` looks into the text of a
  string, number or bool (``{"contains": "1"}`` matches ``10``), never an array or object.
* Three-valued, as SQL is for mem0: a condition on a key the memory lacks is *unknown*, and
  ``ne``, ``nin`` and ``NOT`` are false there as well: ``{"tag": {"ne": "a"}}`` keeps only
  memories that have a ``tag``. The compiler carries, for each condition, both "surely
  true" and "surely false" as two-valued SQL (Kleene logic), so the emitted SQL is never NULL.
* ``icontains`` folds case with the database's ``lower()``, i.e. its LC_CTYPE (Unicode-aware
  under ``C.UTF-8`` or any UTF-8 locale; ASCII only under the plain ``C`` locale).

Every key and value travels as a bound parameter; the SQL text is built only from this
module's constants. Invalid filters raise :class:`DuragValidationError` naming the place.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final, NamedTuple, TypeAlias

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Integer,
    Numeric,
    Text,
    and_,
    bindparam,
    case,
    cast,
    false,
    func,
    literal_column,
    not_,
    or_,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from memora_pg.mem0.errors import DuragValidationError
from memora_pg.schema import memories

MAX_DEPTH: Final = 32
"""Deepest nesting of filter dicts (the top-level dict is depth 1), and of a JSON operand."""
MAX_CONDITIONS: Final = 1000
"""Most conditions in one filter: each operator on a key counts one, each in/nin value one."""
ENTITY_KEYS: Final = ("user_id", "agent_id", "run_id")
WILDCARD: Final = "*"

Json: TypeAlias = str | int | float | bool | list["Json"] | dict[str, "Json"] | None
Comparable: TypeAlias = str | int | float

_LOGICAL: Final = ("AND", "OR", "NOT")
_OPERATORS: Final = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains")
# "strict" matters: in lax mode jsonpath unwraps arrays, and `[5, 20] > 10` would be true.
# In strict mode an array, object or bool, or a string against a number, is "unknown" -> NULL.
_RANGE_PATHS: Final = {
    "gt": "'strict $ > $v'::jsonpath",
    "gte": "'strict $ >= $v'::jsonpath",
    "lt": "'strict $ < $v'::jsonpath",
    "lte": "'strict $ <= $v'::jsonpath",
}
_RANGE_OPERATORS: Final[dict[str, Callable[[Any, Any], ColumnElement[bool]]]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
    "=": operator.eq,
}
_ENTITY_COLUMNS: Final = {"user_id": memories.c.user_id, "agent_id": memories.c.agent_id}
_ZERO: Final = literal_column("0", Integer)
_STRING: Final = literal_column("'string'", Text)
_NUMBER: Final = literal_column("'number'", Text)
_SCALARS: Final = ("string", "number", "boolean")
# A numeric string: what both Python's Decimal and PostgreSQL's numeric read, short enough
# (with a small exponent) that the cast can never overflow. The same test runs in SQL.
NUMERIC_PATTERN: Final = r"^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$"
_NUMERIC_RE: Final = re.compile(NUMERIC_PATTERN)
MAX_NUMERIC_CHARS: Final = 100


def numeric_string(value: str) -> Decimal | None:
    """The number a numeric string spells (``" 10 "``, ``"7.5"``, ``"1e3"``), else None."""
    if len(value) > MAX_NUMERIC_CHARS or not _NUMERIC_RE.match(value):
        return None
    return Decimal(value.strip())


def compile_filters(filters: Mapping[str, Any]) -> ColumnElement[bool]:
    """The WHERE condition for ``filters`` over ``memories`` (``true`` for an empty dict).

    The caller adds the ``org_id`` condition. Raises :class:`DuragValidationError` for a
    malformed filter, before anything runs.
    """
    if not isinstance(filters, Mapping):
        raise DuragValidationError(f"filters must be a dict, not {type(filters).__name__}.")
    return _Compiler().mapping(filters, "filters", depth=1).true


def entity_ids(filters: Mapping[str, Any] | None) -> dict[str, str]:
    """The top-level exact-match values of ``user_id``, ``agent_id`` and ``run_id``.

    Only a plain string or ``{"eq": string}`` at the top level pins an id; the wildcard and
    the empty string (no user / no agent) do not. The whole filter is validated first, so a
    malformed filter never scopes anything.
    """
    if filters is None:
        return {}
    compile_filters(filters)
    return pinned_ids(filters)


def pinned_ids(filters: Mapping[str, Any]) -> dict[str, str]:
    """:func:`entity_ids` of filters already compiled (validated): without compiling them again."""
    found: dict[str, str] = {}
    for key in ENTITY_KEYS:
        value = filters.get(key)
        if isinstance(value, Mapping):
            value = value.get("eq")
        elif value == WILDCARD:
            continue
        if isinstance(value, str) and value:
            found[key] = value
    return found


def uses_user_scope(filters: Mapping[str, Any] | None) -> bool:
    """True when the top-level filters pin ``user_id`` to one value (as :func:`entity_ids` does).

    For filters already validated (compiled): this one does not compile them again.
    """
    return filters is not None and "user_id" in pinned_ids(filters)


# -- targets: what a key names ----------------------------------------------------------------


def _value_of(key: str) -> ColumnElement[Any]:
    """``metadata -> :key``: the key's jsonb value, NULL when the key is missing."""
    return memories.c.metadata.op("->", return_type=JSONB)(bindparam("key", key, Text, unique=True))


def _text_of(key: str) -> ColumnElement[str]:
    """``metadata ->> :key``: the key's value as text (a string's own characters)."""
    return memories.c.metadata.op("->>", return_type=Text)(bindparam("key", key, Text, unique=True))


class _MetadataKey:
    """A key of the ``metadata`` jsonb column."""

    def __init__(self, key: str) -> None:
        self.key = key

    def operand(self, value: object, where: str) -> Json:
        return _json(value, where, depth=1)

    def equals(self, value: Json) -> ColumnElement[bool]:
        # GIN (ix_memories_metadata, jsonb_ops): containment of a one-key object.
        contained: ColumnElement[bool] = memories.c.metadata.contains({self.key: value})
        if isinstance(value, (list, dict)):
            # For arrays and objects @> means "includes", not "equals": the index finds the
            # candidates, the jsonb equality (numeric-aware, [1] = [1.0]) keeps the exact ones.
            return and_(contained, _value_of(self.key) == bindparam("value", value, JSONB, unique=True))
        spellings = _other_spellings(value)
        if spellings:
            # A number also equals the numeric string spelling it (10 = "10"), and a numeric
            # string the number it spells ("7" = 7, 7.0), as mem0's text comparison has it:
            # still one GIN containment per spelling, ORed.
            return or_(contained, *(memories.c.metadata.contains({self.key: other}) for other in spellings))
        return contained

    def numerically(self, op: str, number: Decimal) -> ColumnElement[bool]:
        """The stored number or numeric string ``op`` ``number``; false for anything else, never an error.

        The CASE casts only a jsonb number or a string that passed the numeric test (and is short),
        so no stored value can make the cast fail.
        """
        text = _text_of(self.key)
        kind = func.jsonb_typeof(_value_of(self.key))
        compared = _RANGE_OPERATORS[op](cast(text, Numeric), bindparam("number", number, Numeric, unique=True))
        numeric_text = and_(kind == _STRING, func.length(text) <= MAX_NUMERIC_CHARS, text.regexp_match(NUMERIC_PATTERN))
        return case((kind == _NUMBER, compared), (numeric_text, compared), else_=false())

    def one_of(self, values: list[Json]) -> ColumnElement[bool]:
        # GIN: one @> per value, ORed (a BitmapOr of index scans).
        return or_(false(), *(self.equals(value) for value in values))

    def compare(self, op: str, value: Comparable) -> ColumnElement[bool]:
        # No index: ranges are not GIN-indexable; evaluated on the rows the other conditions leave.
        number = _number_of(value)
        if number is not None:
            return self.numerically(op, number)
        # A string operand: jsonpath's code-point order. The operand is a bound jsonb variable,
        # silent => true, and the "unknown" of a type mismatch (NULL) or a missing key (NULL
        # input) becomes false.
        matched = func.jsonb_path_match(
            _value_of(self.key),
            literal_column(_RANGE_PATHS[op]),
            bindparam("vars", {"v": value}, JSONB, unique=True),
            true(),
            type_=Boolean,
        )
        return func.coalesce(matched, false(), type_=Boolean)

    def contains(self, needle: str, *, fold_case: bool) -> ColumnElement[bool]:
        # No index: strpos over the text of a scalar (string, number, bool, as mem0's LIKE on
        # ->>); the CASE keeps arrays, objects, null and missing keys out and the result never NULL.
        text: ColumnElement[str] = _text_of(self.key)
        wanted: ColumnElement[str] = bindparam("needle", needle, Text, unique=True)
        if fold_case:
            text, wanted = func.lower(text), func.lower(wanted)
        is_scalar = func.jsonb_typeof(_value_of(self.key)).in_(_SCALARS)
        return case((is_scalar, func.strpos(text, wanted) > _ZERO), else_=false())

    def present(self) -> ColumnElement[bool]:
        # GIN (jsonb_ops): key existence.
        present: ColumnElement[bool] = memories.c.metadata.has_key(self.key)
        return present


class _EntityColumn:
    """``user_id`` or ``agent_id``: a NOT NULL text column where '' means none."""

    def __init__(self, key: str, column: ColumnElement[str]) -> None:
        self.key = key
        self.column = column

    def operand(self, value: object, where: str) -> str:
        if not isinstance(value, str):
            raise DuragValidationError(f"{where}: {self.key} takes strings, not {type(value).__name__}.")
        return _text(value, where)

    def equals(self, value: Json) -> ColumnElement[bool]:
        # btree: user_id leads ix_memories_user_recent after org_id; agent_id is served by
        # ix_memories_user_agent_recent when user_id is pinned too.
        return self.column == value

    def one_of(self, values: list[Json]) -> ColumnElement[bool]:
        # btree: IN (...) over the same indexes, one index probe per value.
        return self.column.in_(values) if values else false()

    def compare(self, op: str, value: Comparable) -> ColumnElement[bool]:
        # No index: COLLATE "C" gives code-point order, the order jsonpath uses for metadata.
        return _RANGE_OPERATORS[op](self.column.collate("C"), value)

    def contains(self, needle: str, *, fold_case: bool) -> ColumnElement[bool]:
        # No index.
        text: ColumnElement[str] = self.column
        wanted: ColumnElement[str] = bindparam("needle", needle, Text, unique=True)
        if fold_case:
            text, wanted = func.lower(text), func.lower(wanted)
        return func.strpos(text, wanted) > _ZERO

    def present(self) -> ColumnElement[bool]:
        # btree-friendly, though not selective: '' is the stored "none".
        return self.column != ""


_Target: TypeAlias = _MetadataKey | _EntityColumn


# -- the compiler -----------------------------------------------------------------------------


class _Known(NamedTuple):
    """A condition in Kleene's three-valued logic, as two two-valued SQL conditions."""

    true: ColumnElement[bool]
    """Where the condition surely holds."""
    false: ColumnElement[bool]
    """Where it surely does not; neither means unknown (a key the memory lacks)."""

    def negated(self) -> _Known:
        return _Known(self.false, self.true)


def _leaf(target: _Target, holds: ColumnElement[bool]) -> _Known:
    """A condition on one key: unknown where the memory lacks the key (as SQL NULL is in mem0's store)."""
    return _Known(holds, and_(target.present(), not_(holds)))


def _and(parts: list[_Known]) -> _Known:
    return _Known(_all([p.true for p in parts]), or_(false(), *(p.false for p in parts)))


def _or(parts: list[_Known]) -> _Known:
    return _Known(or_(false(), *(p.true for p in parts)), _all([p.false for p in parts]))


class _Compiler:
    """One pass over a filter: validates, counts conditions, and builds the expression."""

    def __init__(self) -> None:
        self.conditions = 0

    def spend(self, count: int, where: str) -> None:
        self.conditions += count
        if self.conditions > MAX_CONDITIONS:
            raise DuragValidationError(f"{where}: filters may hold at most {MAX_CONDITIONS} conditions.")

    def mapping(self, filters: Mapping[str, Any], where: str, *, depth: int) -> _Known:
        if depth > MAX_DEPTH:
            raise DuragValidationError(f"{where}: filters may nest at most {MAX_DEPTH} levels deep.")
        clauses = []
        for key, value in filters.items():
            inner = f"{where}[{_show(key)}]"
            if key in _LOGICAL:
                clauses.append(self.logical(key, value, inner, depth=depth))
            else:
                clauses.append(self.field(_key(key, inner), value, inner))
        return _and(clauses)

    def logical(self, name: str, branches: object, where: str, *, depth: int) -> _Known:
        if not isinstance(branches, (list, tuple)) or not branches:
            raise DuragValidationError(f"{where}: {name} takes a non-empty list of filter dicts.")
        compiled = []
        for index, branch in enumerate(branches):
            inner = f"{where}[{index}]"
            if not isinstance(branch, Mapping) or not branch:
                raise DuragValidationError(f"{inner}: each {name} entry must be a non-empty filter dict.")
            compiled.append(self.mapping(branch, inner, depth=depth + 1))
        if name == "AND":
            return _and(compiled)
        if name == "OR":
            return _or(compiled)
        # mem0 negates each entry and ANDs them: none of the list holds.
        return _or(compiled).negated()

    def field(self, target: _Target, value: object, where: str) -> _Known:
        if isinstance(value, Mapping):
            if not value:
                raise DuragValidationError(f"{where}: an operator dict needs at least one operator.")
            return _and([self.operator(target, op, operand, f"{where}[{_show(op)}]") for op, operand in value.items()])
        if isinstance(value, str) and value == WILDCARD:
            self.spend(1, where)
            present = target.present()
            return _Known(present, not_(present))
        if isinstance(value, (list, tuple)):
            # mem0: a bare list is any of its values (write {'eq': [...]} for this exact list).
            return self.operator(target, "in", value, where)
        return self.operator(target, "eq", value, where)

    def operator(self, target: _Target, op: object, operand: object, where: str) -> _Known:
        if op not in _OPERATORS:
            raise DuragValidationError(
                f"{where}: unknown operator {_show(op)}; use one of {', '.join(_OPERATORS)} "
                "(to match a dict value exactly, write {'eq': {...}})."
            )
        self.spend(1, where)
        if op in ("eq", "ne"):
            # ne/nin are the negations in three-valued logic: unknown (false) where the key is missing.
            clause = _leaf(target, target.equals(target.operand(operand, where)))
            return clause.negated() if op == "ne" else clause
        if op in ("in", "nin"):
            if not isinstance(operand, (list, tuple)):
                raise DuragValidationError(f"{where}: {op} takes a list of values, not {type(operand).__name__}.")
            self.spend(max(len(operand) - 1, 0), where)
            values = [target.operand(value, f"{where}[{index}]") for index, value in enumerate(operand)]
            clause = _leaf(target, target.one_of(values))
            return clause.negated() if op == "nin" else clause
        if op in _RANGE_PATHS:
            return _leaf(target, target.compare(str(op), _comparable(target, operand, where)))
        if not isinstance(operand, str):
            raise DuragValidationError(f"{where}: {op} takes a string, not {type(operand).__name__}.")
        return _leaf(target, target.contains(_text(operand, where), fold_case=op == "icontains"))


# -- validation helpers -----------------------------------------------------------------------


def _all(clauses: list[ColumnElement[bool]]) -> ColumnElement[bool]:
    return and_(true(), *clauses)


def _other_spellings(value: object) -> list[Json]:
    """The values that equal ``value`` as mem0 compares them but not as jsonb does: the canonical
    strings of a number, or the number a numeric string spells."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, float):
        return [repr(value), *([str(int(value))] if value.is_integer() else [])] if math.isfinite(value) else []
    if isinstance(value, str):
        number = numeric_string(value)
        if number is None or not number.is_finite():
            return []
        if number == number.to_integral_value() and abs(number) < 10**18:
            return [int(number)]
        as_float = float(number)
        return [as_float] if math.isfinite(as_float) else []
    return []


def _number_of(value: object) -> Decimal | None:
    """The number an operand is or spells (a numeric string), else None (bools are no numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str):
        return numeric_string(value)
    return None


def _key(key: object, where: str) -> _Target:
    if not isinstance(key, str):
        raise DuragValidationError(f"{where}: filter keys must be strings, not {type(key).__name__}.")
    if not key:
        raise DuragValidationError(f"{where}: filter keys must not be empty.")
    _text(key, where)
    column = _ENTITY_COLUMNS.get(key)
    return _EntityColumn(key, column) if column is not None else _MetadataKey(key)


def _text(value: str, where: str) -> str:
    if "\x00" in value:
        raise DuragValidationError(f"{where}: strings in filters must not contain NUL characters.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DuragValidationError(f"{where}: strings in filters must be valid Unicode (no lone surrogates).") from None
    return value


def _comparable(target: _Target, operand: object, where: str) -> Comparable:
    if isinstance(operand, bool) or not isinstance(operand, (str, int, float)):
        raise DuragValidationError(f"{where}: range operators take a number or a string, not {type(operand).__name__}.")
    if isinstance(target, _EntityColumn):
        return target.operand(operand, where)
    if isinstance(operand, str):
        return _text(operand, where)
    if isinstance(operand, float) and not math.isfinite(operand):
        raise DuragValidationError(f"{where}: numbers in filters must be finite.")
    return operand


def _json(value: object, where: str, *, depth: int) -> Json:
    """A plain JSON copy of ``value``, or the reason it cannot be one."""
    if depth > MAX_DEPTH:
        raise DuragValidationError(f"{where}: values may nest at most {MAX_DEPTH} levels deep.")
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return _text(value, where)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DuragValidationError(f"{where}: numbers in filters must be finite.")
        return value
    if isinstance(value, (list, tuple)):
        return [_json(item, f"{where}[{index}]", depth=depth + 1) for index, item in enumerate(value)]
    if isinstance(value, Mapping):
        copy: dict[str, Json] = {}
        for key, item in value.items():
            inner = f"{where}[{_show(key)}]"
            if not isinstance(key, str):
                raise DuragValidationError(f"{inner}: keys of a dict value must be strings.")
            copy[_text(key, inner)] = _json(item, inner, depth=depth + 1)
        return copy
    raise DuragValidationError(
        f"{where}: unsupported value of type {type(value).__name__}; use a string, number, bool, None, list or dict."
    )


def _show(value: object, limit: int = 40) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
