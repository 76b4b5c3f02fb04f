"""Rows that a write passes as arrays: each table's insert defined once, sent in either of two forms.

A write statement inserts the rows of each table from arrays, one array parameter per value that
differs from row to row, as a data-modifying CTE that reads the statement's ``scope`` (one row
naming the organization, user, agent, interaction and time, or none when nothing may be written)::

    new_memories AS (
        INSERT INTO memories (...) SELECT scope.org_id, given.memory_id, ...
        FROM scope, unnest(CAST(:memory_ids AS uuid[]), ...) WITH ORDINALITY AS given(memory_id, ..., n)
        ...
    )

On a Citus cluster the same rows go as a statement of their own, a multi-row ``INSERT ... VALUES``
with the scope's values bound: Citus routes it to the organization's one shard and commits in one
phase, where a CTE's rows, or an ``INSERT ... SELECT FROM unnest(...)``, would be pulled to the
coordinator and committed in two (:mod:`memora_pg.graph.saves`).

:class:`Rows` holds what both forms share: the table and its columns, each column's value, what
the insert does on a conflict and returns. A value names its parts: a scope column (``{org_id}``,
``{user_id}``, ``{agent_id}``, ``{interaction_id}``, ``{obtained_at}``), a given value (``{memory}``),
``{schema}``. :meth:`Rows.cte` and :meth:`Rows.statement` fill them in (with :func:`render`, as every
statement is filled), so a column is added in one place and both forms have it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memora_pg.driver import Connection
from memora_pg.sql_text import parts_of, render

# The scope's columns, each as its parameter: in a CTE, read from the statement's ``scope`` (:data:`SCOPE`
# when the statement takes them as parameters); in a statement of their own, bound.
SCOPE_COLUMNS = {
    "org_id": "CAST(:org_id AS text)",
    "user_id": "CAST(:user_id AS text)",
    "agent_id": "CAST(:agent_id AS text)",
    "interaction_id": "CAST(:interaction_id AS text)",
    "obtained_at": "CAST(:obtained_at AS timestamptz)",
}

# The scope's parameters as one row.
SCOPE_ROW = "SELECT " + ",\n           ".join(f"{value} AS {column}" for column, value in SCOPE_COLUMNS.items())

# The scope of rows written outside a new interaction: the parameters, as one row.
SCOPE = f"\nscope AS (\n    {SCOPE_ROW}\n)"

# A parameter a value binds itself (``:audit_method``), not a cast's ``::``.
_BOUND = re.compile(r"(?<!:):([a-z_]+)")

# Rows per statement of its own: each row binds a handful of parameters, PostgreSQL allows 32767.
ROWS_PER_STATEMENT = 1000


@dataclass(frozen=True)
class Given:
    """A value that differs from row to row: the array parameter holding it, and its SQL type."""

    array: str
    type: str


@dataclass(frozen=True)
class Rows:
    """One table's insert of a write's rows (see the module's docstring)."""

    name: str  # the CTE's name
    into: str  # the table and its columns
    values: str  # one row's values, over the scope's columns and the given values
    given: Mapping[str, Given] = field(default_factory=dict)
    tail: str = ""  # ON CONFLICT ... and RETURNING ...
    # A boolean parameter that says whether the row is written at all (a row of no given value).
    when: str | None = None

    def __post_init__(self) -> None:
        shared = set(self.given) & set(SCOPE_COLUMNS)
        if shared:
            raise ValueError(f"{self.name}: given values named like the scope's columns: {sorted(shared)}")

    def cte(self) -> str:
        """The insert as a CTE arm of a write statement, its rows from the arrays."""
        values = self._values({column: f"scope.{column}" for column in SCOPE_COLUMNS}, lambda name, _: f"given.{name}")
        source = "scope"
        order = ""
        if self.given:
            arrays = ",\n                ".join(
                f"CAST(:{given.array} AS {given.type}[])" for given in self.given.values()
            )
            source += f",\n         unnest({arrays})\n         WITH ORDINALITY AS given({', '.join(self.given)}, n)"
            order = "\n    ORDER BY given.n"
        where = f"\n    WHERE CAST(:{self.when} AS boolean)" if self.when else ""
        tail = f"\n    {self.tail}" if self.tail else ""
        return (
            f"\n{self.name} AS (\n    INSERT INTO {self.into}\n    SELECT {values}\n"
            f"    FROM {source}{where}{order}{tail}\n)"
        )

    def statement(self, rows: int) -> str:
        """The insert as a statement of its own, of ``rows`` rows: row ``i``'s given values are bound as
        ``name_i`` (:meth:`row_params`)."""
        values = ",\n       ".join(f"({self._row(i)})" for i in range(rows))
        tail = f"\n{self.tail}" if self.tail else ""
        return f"INSERT INTO {self.into}\nVALUES {values}{tail}"

    def count(self, params: Mapping[str, Any]) -> int:
        """How many rows ``params`` (the write statement's) give."""
        if not self.given:
            return 1 if self.when is None or params[self.when] else 0
        return len(params[next(iter(self.given.values())).array])

    def row_params(self, params: Mapping[str, Any], start: int, stop: int) -> dict[str, Any]:
        """The parameters of :meth:`statement` for rows ``start`` to ``stop`` of ``params``."""
        bound = {name: params[name] for name in parts_of(self.values) & set(SCOPE_COLUMNS)}
        bound.update({name: params[name] for name in _BOUND.findall(self.values)})
        for name, given in self.given.items():
            values = params[given.array]
            bound.update({f"{name}_{i}": values[start + i] for i in range(stop - start)})
        return bound

    def _row(self, i: int) -> str:
        """Row ``i`` of :meth:`statement`: the scope's values bound, the given ones as ``name_i``."""
        return self._values(SCOPE_COLUMNS, lambda name, given: f"CAST(:{name}_{i} AS {given.type})")

    def _values(self, scope: Mapping[str, str], given: Callable[[str, Given], str]) -> str:
        """One row's values: each scope column as ``scope`` writes it, each given value as ``given`` does."""
        parts = parts_of(self.values)
        filled = {column: value for column, value in scope.items() if column in parts}
        filled.update({name: given(name, value) for name, value in self.given.items()})
        return render(self.values, **filled)


async def insert(conn: Connection, rows: Rows, params: Mapping[str, Any]) -> list[Any]:
    """Insert the rows ``params`` give (a write statement's parameters) with statements of their own,
    at most :data:`ROWS_PER_STATEMENT` rows each, in the caller's transaction; the first column of
    what they return."""
    returned: list[Any] = []
    total = rows.count(params)
    for start in range(0, total, ROWS_PER_STATEMENT):
        stop = min(start + ROWS_PER_STATEMENT, total)
        returned.extend(await conn.scalars(rows.statement(stop - start), rows.row_params(params, start, stop)))
    return returned
