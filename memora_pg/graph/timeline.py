"""Memory through time: which versions were current at a given moment, by either clock.

Every version has two clocks (migration 0008):

* **valid time**, when the fact was true: from ``obtained_at`` (the interaction it came from)
  until the earliest ``obtained_at`` among its later versions (``valid_until``) or its expiry
  (``expires_at``), whichever comes first;
* **system time**, when memora_pg knew it: from ``stored_at`` (a row stored before 0008 has
  none and counts from ``obtained_at``) until the earliest ``stored_at`` among its later
  versions (``superseded_at``), or its expiry.

"Current at T" is one rule, kept in the database as ``current_in_valid_time(...)`` and
``current_in_system_time(...)``. Both are SQL functions that PostgreSQL inlines into the
statement calling them, so their conditions reach the indexes; the statements here only name
them. The writers keep ``valid_until`` and ``superseded_at`` (:mod:`memora_pg.graph.versions`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Boolean, ColumnElement, bindparam, func, literal, null, or_
from sqlalchemy.types import DateTime

from memora_pg.errors import InvalidInputError
from memora_pg.schema import memories
from memora_pg.sql_text import render

VALID = "valid"
SYSTEM = "system"
CLOCKS = (VALID, SYSTEM)


def check_clock(clock: object) -> str:
    """``as_of_clock`` checked: "valid" or "system"."""
    if clock not in CLOCKS:
        raise InvalidInputError(f"as_of_clock must be 'valid' or 'system', not {clock!r}")
    return str(clock)


def check_as_of(value: object, name: str = "as_of") -> datetime | None:
    """``as_of`` checked: None (now, the latest versions) or a datetime, naive meaning UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{name} must be a datetime, not {type(value).__name__}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def current_at(alias: str, clock: str, at: str = "CAST(:as_of AS timestamptz)") -> str:
    """SQL: the memory named ``alias`` was a current version at ``at`` by ``clock``."""
    if clock == SYSTEM:
        return render(
            "{schema}.current_in_system_time({m}.obtained_at, {m}.stored_at, {m}.superseded_at, {m}.expires_at, {at})",
            m=alias,
            at=at,
        )
    return render(
        "{schema}.current_in_valid_time({m}.obtained_at, {m}.valid_until, {m}.expires_at, {at})", m=alias, at=at
    )


def begun_by(alias: str, clock: str, at: str = "CAST(:as_of AS timestamptz)") -> str:
    """SQL: the version named ``alias`` had begun at ``at`` by ``clock`` (current then or since superseded)."""
    if clock == SYSTEM:
        return f"coalesce({alias}.stored_at, {alias}.obtained_at) <= {at}"
    return f"{alias}.obtained_at <= {at}"


def unexpired(alias: str) -> str:
    """SQL: the memory named ``alias`` has not expired (now)."""
    return f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"


def unexpired_condition() -> ColumnElement[bool]:
    """The Core form of :func:`unexpired`, for memories."""
    return or_(memories.c.expires_at.is_(None), memories.c.expires_at > func.now())


def current_condition(schema: str, clock: str, at: Any = None, *, expiry: bool = True) -> ColumnElement[bool]:
    """The Core form of :func:`current_at` for memories, ``at`` bound as ``where_as_of`` unless given;
    without ``expiry``, an expired memory still counts as current."""
    when = bindparam("where_as_of", type_=DateTime(timezone=True)) if at is None else literal(at, DateTime(True))
    functions = getattr(func, schema)
    c = memories.c
    expires = c.expires_at if expiry else null()
    condition: ColumnElement[bool]
    if clock == SYSTEM:
        condition = functions.current_in_system_time(
            c.obtained_at, c.stored_at, c.superseded_at, expires, when, type_=Boolean
        )
    else:
        condition = functions.current_in_valid_time(c.obtained_at, c.valid_until, expires, when, type_=Boolean)
    return condition
