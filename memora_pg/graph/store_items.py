"""LangGraph's store items in the ``store_items`` table (migration 0019): what ``memora_pg.langgraph`` reads
and writes, as plain async functions that take a connection and never commit, like the rest of ``graph/``.

An item is a JSON object under a namespace and a key. The namespace is LangGraph's tuple of labels joined
by ``.`` (no label may hold one), so a namespace prefix is a range of the btree: ``("users",)`` is the
namespace ``users`` and every namespace from ``users.`` up to ``users/``, bytewise (``/`` follows ``.``).

Every version of an item is a row; the current one is not superseded. :data:`PUT` closes the current
version of each key given and adds the new one; a read as of a time takes the version current then. A
version past its ``expires_at`` is gone for every reader (:func:`live`), until :data:`SWEEP` deletes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, and_, bindparam, cast, func, or_, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from memora_pg import vector_params
from memora_pg.driver import Connection, Row
from memora_pg.errors import InvalidInputError
from memora_pg.graph import nearest
from memora_pg.schema import store_items
from memora_pg.statements import FilterShape, Statement, from_json, function_call

c = store_items.c

# What a read returns of an item.
RETURNED = ("namespace", "key", "value", "created_at", "updated_at", "ttl_ms")

# The items as the hybrid search ranks them: neighbours by write order within a namespace.
STORE_ITEMS = nearest.Corpus(
    store_items,
    id_column="item_id",
    neighbourhood=None,
    returned=RETURNED,
    order_prefix=("org_id", "namespace"),  # ix_store_items_namespace
    scope_index=("org_id", "namespace"),
)

PUT = function_call(
    "put_store_items",
    (
        "org_id",
        "org_name",
        "namespaces",
        "keys",
        "values",
        "embeddings",
        "texts",
        "ttl_ms",
        "created_at",
        "updated_at",
        "expires_at",
    ),
)

# The items asked for, current (or as of a time), by their place in the request.
_GET = """
SELECT asked.n - 1 AS asked_no, item.namespace, item.key, item.value, item.created_at, item.updated_at,
       item.ttl_ms
FROM unnest(CAST(:namespaces AS text[]), CAST(:keys AS text[])) WITH ORDINALITY AS asked(namespace, key, n)
JOIN {{schema}}.store_items AS item
  ON item.org_id = :org_id AND item.namespace = asked.namespace AND item.key = asked.key
WHERE {version}
"""
_CURRENT = "item.superseded_at IS NULL AND (item.expires_at IS NULL OR item.expires_at > now())"
_AS_OF = (
    "item.updated_at <= :as_of AND (item.superseded_at IS NULL OR item.superseded_at > :as_of)"
    " AND (item.expires_at IS NULL OR item.expires_at > :as_of)"
)
GET_CURRENT = _GET.format(version=_CURRENT)
GET_AS_OF = _GET.format(version=_AS_OF)

# One item, the usual get. Its own statement because, with arrays bound, PostgreSQL judges the generic plan
# dearer (it cannot see their length) and plans the statement anew on every call; with the key bound as
# text it keeps the generic plan after five calls, and a get is then one execution of a planned statement.
_GET_ONE = """
SELECT 0 AS asked_no, item.namespace, item.key, item.value, item.created_at, item.updated_at, item.ttl_ms
FROM {{schema}}.store_items AS item
WHERE item.org_id = :org_id AND item.namespace = :namespace AND item.key = :key AND {version}
"""
GET_ONE_CURRENT = _GET_ONE.format(version=_CURRENT)
GET_ONE_AS_OF = _GET_ONE.format(version=_AS_OF)

# A read restarts the time to live of the current versions it read (those that have one).
REFRESH = """
UPDATE {schema}.store_items AS item SET expires_at = now() + item.ttl_ms * interval '1 millisecond'
FROM unnest(CAST(:namespaces AS text[]), CAST(:keys AS text[])) AS read(namespace, key)
WHERE item.org_id = :org_id AND item.namespace = read.namespace AND item.key = read.key
  AND item.superseded_at IS NULL AND item.ttl_ms IS NOT NULL AND item.expires_at > now()
"""

# The keys whose current version has expired, every version of them (the sweeper's one statement).
SWEEP = """
DELETE FROM {schema}.store_items AS item
USING {schema}.store_items AS expired
WHERE expired.org_id = :org_id AND expired.superseded_at IS NULL AND expired.expires_at <= now()
  AND item.org_id = expired.org_id AND item.namespace = expired.namespace AND item.key = expired.key
"""

# The distinct namespaces of the current items matching a pattern, cut to a depth, in order.
_NAMESPACES = """
SELECT DISTINCT array_to_string((string_to_array(item.namespace, '.'))[1:coalesce(:max_depth, 2147483647)], '.')
    AS namespace
FROM {{schema}}.store_items AS item
WHERE item.org_id = :org_id AND {current}{matched}
ORDER BY 1
LIMIT :limit OFFSET :offset
"""


@dataclass(frozen=True)
class Write:
    """One put (``value``) or delete (None) of a key; ``text`` is what was embedded as ``embedding``. The
    times are now unless given (an import gives its source's)."""

    namespace: str
    key: str
    value: Mapping[str, Any] | None
    embedding: Sequence[float] | None = None
    text: str | None = None
    ttl_ms: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None


def joined(namespace: Sequence[str]) -> str:
    """A namespace as the table holds it."""
    return ".".join(namespace)


def split(namespace: str) -> tuple[str, ...]:
    return tuple(namespace.split("."))


def put(*, org_id: str, org_name: str, writes: Sequence[Write]) -> Statement:
    """Each write's key closed and, for a put, its new version added (one function call); the
    organization made on first sight. Its row says how many versions were closed and added."""
    return Statement(
        PUT,
        {
            "org_id": org_id,
            "org_name": org_name,
            "namespaces": [w.namespace for w in writes],
            "keys": [w.key for w in writes],
            "values": [None if w.value is None else json.dumps(w.value) for w in writes],
            "embeddings": vector_params.many([w.embedding for w in writes]),
            "texts": [w.text if w.embedding is not None else None for w in writes],
            "ttl_ms": [w.ttl_ms for w in writes],
            "created_at": _times([w.created_at for w in writes]),
            "updated_at": _times([w.updated_at for w in writes]),
            "expires_at": _times([w.expires_at for w in writes]),
        },
    )


def _times(times: list[datetime | None]) -> list[datetime | None] | None:
    """A write's times, or NULL (the function's "now") when none is given, as for every store write."""
    return times if any(t is not None for t in times) else None


def decoded(row: Row | Mapping[str, Any]) -> dict[str, Any]:
    """An item's returned columns, its value decoded and its namespace split."""
    found = {name: row[name] for name in RETURNED}
    found["value"] = from_json(found["value"])
    found["namespace"] = split(found["namespace"])
    return found


def get(*, org_id: str, keys: Sequence[tuple[str, str]], as_of: datetime | None = None) -> Statement:
    """The items asked for as (namespace, key): current, or as of a time (rows: :func:`got`)."""
    params: dict[str, Any] = {"org_id": org_id}
    if as_of is not None:
        params["as_of"] = as_of
    if len(keys) == 1:
        [(params["namespace"], params["key"])] = keys
        return Statement(GET_ONE_CURRENT if as_of is None else GET_ONE_AS_OF, params)
    params["namespaces"] = [namespace for namespace, _ in keys]
    params["keys"] = [key for _, key in keys]
    return Statement(GET_CURRENT if as_of is None else GET_AS_OF, params)


def got(rows: Sequence[Row]) -> dict[int, dict[str, Any]]:
    """The rows of :func:`get` by the place of their key in the request."""
    return {row["asked_no"]: decoded(row) for row in rows}


def refresh(*, org_id: str, keys: Sequence[tuple[str, str]]) -> Statement:
    """The time to live of these current items restarted."""
    return Statement(REFRESH, {"org_id": org_id, "namespaces": [n for n, _ in keys], "keys": [k for _, k in keys]})


async def sweep(conn: Connection, *, org_id: str) -> int:
    """Every version of the organization's expired items deleted; how many rows that was."""
    return await conn.execute(SWEEP, {"org_id": org_id})


# -- which items a search or a listing looks at ---------------------------------------------------


def prefix_condition(namespace: ColumnElement[Any], prefixed: bool) -> ColumnElement[bool]:
    """The namespace is the prefix (``:where_prefix``) or below it.

    Bytewise, every namespace from the prefix up to the prefix and ``/`` (the byte after ``.``) is the
    prefix, one below it (the prefix and ``.``), or a sibling whose label goes on with a byte before ``.``
    (``users-old`` beside ``users``): the range bounds the btree scan, the last term leaves the siblings out.
    """
    if not prefixed:
        return true()
    in_range = and_(namespace >= bindparam("where_prefix"), namespace < bindparam("where_prefix_high"))
    return and_(in_range, or_(namespace == bindparam("where_prefix"), namespace > bindparam("where_prefix_low")))


def prefix_params(prefix: Sequence[str]) -> dict[str, str]:
    if not prefix:
        return {}
    text = joined(prefix)
    return {"where_prefix": text, "where_prefix_low": text + ".", "where_prefix_high": text + "/"}


def live(timed: bool) -> ColumnElement[bool]:
    """The current versions not expired; or, ``timed``, the versions current at ``:where_as_of``."""
    if not timed:
        return and_(c.superseded_at.is_(None), or_(c.expires_at.is_(None), c.expires_at > func.now()))
    at = bindparam("where_as_of", type_=DateTime(timezone=True))
    return and_(
        c.updated_at <= at,
        or_(c.superseded_at.is_(None), c.superseded_at > at),
        or_(c.expires_at.is_(None), c.expires_at > at),
    )


def scope_condition(prefixed: bool, timed: bool) -> ColumnElement[bool]:
    """The organization's items under the prefix (when ``prefixed``), current or as of a time."""
    return and_(c.org_id == bindparam("where_org_id"), prefix_condition(c.namespace, prefixed), live(timed))


# -- the filter on an item's value ----------------------------------------------------------------

_RANGE = {"$gt": "__gt__", "$gte": "__ge__", "$lt": "__lt__", "$lte": "__le__"}
OPERATORS = ("$eq", "$ne", *_RANGE)


def _json_type(value: Any) -> str:
    """jsonb_typeof's name of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _jsonb(value: Any) -> ColumnElement[Any]:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"A filter's value must be JSON, not {value!r}: {error}") from None
    return cast(bindparam("value", text, unique=True), JSONB)


def _term(field: str, operator: str, value: Any) -> ColumnElement[bool]:
    found = c.value[field]
    if operator == "$eq":
        return found == _jsonb(value)
    if operator == "$ne":
        return found != _jsonb(value)
    if operator in _RANGE:
        # jsonb orders a number before any string: a range compares values of the filter's own type only.
        compared: ColumnElement[bool] = getattr(found, _RANGE[operator])(_jsonb(value))
        return and_(func.jsonb_typeof(found) == bindparam("type", _json_type(value), unique=True), compared)
    raise InvalidInputError(f"Unknown filter operator {operator!r}: use one of {', '.join(OPERATORS)}.")


def filter_condition(filter: Mapping[str, Any] | None) -> ColumnElement[bool] | None:
    """LangGraph's filter on the top-level fields of an item's value: ``{field: value}`` (equal), or
    ``{field: {"$gt": value, ...}}`` with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``. A missing
    field matches no operator. None for no filter."""
    if not filter:
        return None
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"`filter` must be a dict, not {type(filter).__name__}.")
    terms: list[ColumnElement[bool]] = []
    for field, wanted in filter.items():
        if not isinstance(field, str):
            raise InvalidInputError(f"A filter's field must be a string, not {field!r}.")
        if isinstance(wanted, Mapping) and wanted and all(isinstance(k, str) and k.startswith("$") for k in wanted):
            terms += [_term(field, operator, value) for operator, value in wanted.items()]
        else:
            terms.append(_term(field, "$eq", wanted))
    return and_(*terms)


def filtered(filter: Mapping[str, Any] | None) -> FilterShape | None:
    """The filter as a shape whose search statement is built once (its values bound)."""
    condition = filter_condition(filter)
    return None if condition is None else FilterShape(condition)


# -- listing the namespaces -----------------------------------------------------------------------

_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


def namespace_pattern(path: Sequence[str], match_type: str) -> str:
    """A POSIX regular expression of the namespaces that start (``prefix``) or end (``suffix``) with
    ``path``, where a ``*`` label matches any one label."""
    labels = "\\.".join("[^.]+" if label == "*" else _REGEX_SPECIAL.sub(r"\\\1", label) for label in path)
    if match_type == "prefix":
        return f"^{labels}(\\.|$)"
    if match_type == "suffix":
        return f"(^|\\.){labels}$"
    raise InvalidInputError(f"Unknown namespace match type {match_type!r}: use 'prefix' or 'suffix'.")


def namespaces(*, org_id: str, patterns: Sequence[str], max_depth: int | None, limit: int, offset: int) -> Statement:
    """The namespaces of the organization's current items that match every pattern, cut to ``max_depth``
    (rows: :func:`listed_namespaces`)."""
    matched = "".join(f" AND item.namespace ~ :pattern_{n}" for n in range(len(patterns)))
    params: dict[str, Any] = {"org_id": org_id, "max_depth": max_depth, "limit": limit, "offset": offset}
    params.update({f"pattern_{n}": pattern for n, pattern in enumerate(patterns)})
    return Statement(_NAMESPACES.format(current=_CURRENT, matched=matched), params)


def listed_namespaces(rows: Sequence[Row]) -> list[tuple[str, ...]]:
    return [split(row["namespace"]) for row in rows]


# -- a listing of items, most recently updated first ----------------------------------------------


def listing(
    *,
    org_id: str,
    prefix: Sequence[str],
    filter: ColumnElement[bool] | None,
    as_of: datetime | None,
    limit: int,
    offset: int,
) -> Statement:
    """The items under ``prefix`` matching ``filter``, most recently updated first (a search without a
    query; rows: :func:`decoded`)."""
    condition = scope_condition(bool(prefix), as_of is not None)
    if filter is not None:
        condition = and_(condition, filter)
    statement = (
        select(*(c[name] for name in RETURNED))
        .where(condition)
        .order_by(c.updated_at.desc(), c.seq.desc())
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    params: dict[str, Any] = {"where_org_id": org_id, **prefix_params(prefix), "limit": limit, "offset": offset}
    if as_of is not None:
        params["where_as_of"] = as_of
    return Statement(statement, params)
