"""How a write reaches a Citus cluster in one statement: its rows as multi-row ``VALUES``.

On one server a write is one statement of data-modifying CTEs, each an ``INSERT ... SELECT`` over
the call's arrays, gated by the statement's ``scope`` (:mod:`memora_pg.graph.saves`). Citus plans
such an insert by pulling it to the coordinator and COPYing its rows into the shard, with a
two-phase commit and the worker's sequence. What it routes whole to the organization's one shard,
with identity defaults taken on the coordinator, is an ``INSERT ... VALUES`` whose values are
parameters and constants. Several of those, as the CTEs of one statement, are each planned as a
single-shard task on the same worker: one statement from the client, one worker, a one-phase commit.

An :class:`Insert` is one table's rows in that form: a ``head`` (``INSERT INTO ... (columns)``), a
``row`` whose ``{n}`` marks each parameter that differs from row to row, a ``tail`` (``ON
CONFLICT``) and the column it ``returning``. :func:`insert_together` writes several, in their order (a row's
parent table first: the foreign keys are checked at the end of each statement), in as few
statements as PostgreSQL's limit on a statement's parameters allows: one, for any usual call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from memora_pg.sql_text import parts_of, render
from memora_pg.statements import sql

# A statement's parameters: PostgreSQL's wire protocol counts them in 16 bits, asyncpg allows 32767.
PARAMETERS_PER_STATEMENT = 30_000


@dataclass(frozen=True)
class Insert:
    """One table's rows as a multi-row ``INSERT ... VALUES``: each of ``rows`` gives its parameters
    without the suffix ``{n}`` adds (a row of none takes the statement's common parameters alone)."""

    head: str
    row: str
    tail: str = ""
    returning: str | None = None
    rows: Sequence[dict[str, Any]] = field(default_factory=lambda: [{}])

    def of(self, rows: Sequence[dict[str, Any]]) -> Insert:
        """The same insert of ``rows``."""
        return Insert(self.head, self.row, self.tail, self.returning, rows)

    def one_row(self) -> str:
        """The text of this insert when its one row takes the statement's common parameters alone (a row
        without ``{n}``): what a one-server statement's CTE may run as it is."""
        if "n" in parts_of(self.row):
            raise ValueError("an insert whose row has {n} has no one-row text")
        return _values(self, [{}], {}, tag="")


@dataclass
class _Statement:
    """The CTEs gathered for one statement, with their parameters."""

    params: dict[str, Any]
    # Each CTE: the place of its insert, its text, and whether it returns rows.
    ctes: list[tuple[int, str, bool]] = field(default_factory=list)
    used: int = 0

    def text(self) -> str:
        arms = ",\n".join(f"rows_{k} AS (\n{insert}\n)" for k, (_, insert, _) in enumerate(self.ctes))
        columns = [f"ARRAY(SELECT * FROM rows_{k})" for k, (_, _, returns) in enumerate(self.ctes) if returns]
        return render("WITH {arms}\nSELECT {columns}", arms=arms, columns=", ".join(columns) or "1")


async def insert_together(conn: AsyncConnection, common: dict[str, Any], inserts: Sequence[Insert]) -> list[list[Any]]:
    """Write ``inserts`` in their order, as the CTEs of as few statements as the parameter limit allows
    (``common``: the parameters every row shares); for each insert, the first column of the rows it
    returns (none without a ``RETURNING``)."""
    returned: list[list[Any]] = [[] for _ in inserts]
    statement = _Statement(dict(common))
    for place, insert in enumerate(inserts):
        start = 0
        while start < len(insert.rows):
            per_row = max(1, len(insert.rows[start]))
            room = (PARAMETERS_PER_STATEMENT - len(common) - statement.used) // per_row
            if room == 0:
                await _send(conn, statement, returned)
                statement = _Statement(dict(common))
                continue
            chunk = insert.rows[start : start + room]
            text = _values(insert, chunk, statement.params, tag=f"_{len(statement.ctes)}_")
            statement.ctes.append((place, text, insert.returning is not None))
            statement.used += per_row * len(chunk)
            start += len(chunk)
    await _send(conn, statement, returned)
    return returned


def _values(insert: Insert, rows: Sequence[dict[str, Any]], params: dict[str, Any], *, tag: str) -> str:
    """``insert`` of ``rows`` as text, each row's parameters added to ``params`` under its own suffix."""
    numbered = "n" in parts_of(insert.row)
    values = []
    for i, row in enumerate(rows):
        values.append(render(insert.row, n=f"{tag}{i}") if numbered else insert.row)
        params.update({f"{name}{tag}{i}": value for name, value in row.items()})
    returning = "" if insert.returning is None else f"RETURNING {insert.returning}"
    return render(
        "{head}\nVALUES {values}\n{tail}\n{returning}",
        head=insert.head,
        values=",\n".join(values),
        tail=insert.tail,
        returning=returning,
    )


async def _send(conn: AsyncConnection, statement: _Statement, returned: list[list[Any]]) -> None:
    if not statement.ctes:
        return
    row = iter((await conn.execute(sql(conn, statement.text()), statement.params)).one())
    for place, _, returns in statement.ctes:
        if returns:
            returned[place].extend(next(row))
