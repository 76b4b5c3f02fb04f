"""Re-embedding: move a database, or one organization, to another embedding model or dimension.

``await reembed(database, embedder)`` computes every searchable row's vector again with
``embedder`` and switches the database to it; ``org_id=`` limits the work to one organization.
New vectors go into a shadow column, ``embedding_next``, in resumable batches while searches
keep the old ones; a short locked switch then renames it to ``embedding`` (the whole database,
and the HNSW index is built again CONCURRENTLY) or copies it there (one organization). After a
whole-database switch, create new store objects with an embedder of the new model. Only one
re-embed runs per schema at a time. The design, step by step: docs/reembedding.md.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import catalog, driver, vector_params
from memora_pg.db import Database
from memora_pg.driver import Connection
from memora_pg.embeddings import Embedder, embed_checked
from memora_pg.errors import (
    ConfigurationError,
    DatabaseError,
    InvalidInputError,
    NotFoundError,
    database_errors,
    sqlstate_of,
)
from memora_pg.graph import render
from memora_pg.graph.autogen_contents import canonical_json
from memora_pg.ops import reembed_statements as q  # q.NAME: one of the re-embed's statements
from memora_pg.ops.indexes import build_session, create_hnsw
from memora_pg.statements import from_json

__all__ = ["ReembedBusyError", "ReembedResult", "embedder_name", "reembed"]

MAX_BATCH_SIZE = 10_000
HNSW_MAX_DIMENSIONS = 2_000  # pgvector indexes vectors of at most 2,000 dimensions
SWITCH_ATTEMPTS = 10
_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout


class ReembedBusyError(DatabaseError):
    """The re-embed cannot go on now (another run, or writes that keep coming); its progress is kept."""


@dataclass(frozen=True)
class ReembedResult:
    """What one call of :func:`reembed` did."""

    model: str
    dimensions: int  # the dimension of the vector columns afterwards
    org_id: str | None
    embedded: dict[str, int]  # rows embedded by this call, per table
    already_done: int  # rows a previous, interrupted call had embedded
    batches: int
    elapsed_seconds: float
    resumed: bool  # a previous call's progress was found and continued

    @property
    def total_embedded(self) -> int:
        return sum(self.embedded.values())

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for JSON output."""
        return {**dataclasses.asdict(self), "total_embedded": self.total_embedded}


@dataclass(frozen=True)
class _Target:
    """What a switch moves to; kept as JSON in the shadow column's comment."""

    model: str
    dimensions: int
    org_id: str | None

    def comment(self) -> str:
        return json.dumps({"model": self.model, "dimensions": self.dimensions, "org_id": self.org_id}, sort_keys=True)

    @classmethod
    def from_comment(cls, comment: str | None) -> _Target | None:
        try:
            state = json.loads(comment or "")
            return cls(model=str(state["model"]), dimensions=int(state["dimensions"]), org_id=state["org_id"])
        except (ValueError, TypeError, KeyError):
            return None

    def describe(self) -> str:
        where = "the whole database" if self.org_id is None else f"organization {self.org_id!r}"
        return f"{self.model!r} ({self.dimensions} dimensions) for {where}"


def embedder_name(embedder: Embedder) -> str:
    """The name a switch records for its target: the embedder's ``model``, else its class (and ``variant``)."""
    model = getattr(embedder, "model", None)
    if isinstance(model, str) and model:
        return model
    variant = getattr(embedder, "variant", None)
    name = type(embedder).__name__
    return f"{name}({variant})" if isinstance(variant, str) else name


# -- the run ---------------------------------------------------------------------------------


@dataclass
class _Run:
    database: Database
    embedder: Embedder
    target: _Target
    tables: tuple[q.VectorTable, ...]
    batch_size: int
    progress: Callable[[int, int], None] | None
    embedded: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    done: int = 0
    total: int = 0

    @property
    def org_params(self) -> dict[str, Any]:
        return {} if self.target.org_id is None else {"org_id": self.target.org_id}

    def report(self) -> None:
        self.total = max(self.total, self.done)
        if self.progress is not None:
            self.progress(self.done, self.total)


async def reembed(
    database: Database,
    embedder: Embedder,
    *,
    org_id: str | None = None,
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
    restart: bool = False,
) -> ReembedResult:
    """Embed every searchable row again with ``embedder`` and switch to the new vectors (see the module).

    ``org_id`` limits the work to one organization (same dimension only). ``progress`` is
    called with (rows done, rows in all) at the start and after every batch; rows done include
    those of an interrupted earlier run. Running again after an interruption continues it;
    ``restart=True`` discards the progress of an earlier run with another target.

    Raises :class:`InvalidInputError` for a bad ``batch_size`` or, with ``org_id``, another
    dimension; :class:`NotFoundError` for a missing organization; :class:`ConfigurationError`
    when an unfinished re-embed with another target exists; :class:`EmbeddingError` when the
    embedder fails (the batches before stay done); :class:`ReembedBusyError` when another
    re-embed runs or the switch could not get its locks.
    """
    started = time.monotonic()
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidInputError(f"batch_size must be an integer from 1 to {MAX_BATCH_SIZE:,}, not {batch_size!r}.")
    dimensions = embedder.dimensions
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= HNSW_MAX_DIMENSIONS:
        raise InvalidInputError(
            f"The embedder's dimensions must be an integer from 1 to {HNSW_MAX_DIMENSIONS:,} "
            f"(the most an HNSW index holds), not {dimensions!r}."
        )
    settings = database.settings
    if org_id is None and settings.hnsw_ef_construction < 2 * settings.hnsw_m:
        # pgvector's rule; found only when the index is built again, after the switch, it would be too late.
        raise ConfigurationError(
            f"hnsw_ef_construction ({settings.hnsw_ef_construction}) must be at least twice hnsw_m ({settings.hnsw_m})."
        )
    target = _Target(model=embedder_name(embedder), dimensions=dimensions, org_id=org_id)
    engine = await database.engine()
    with database_errors():
        async with _only_run(engine, database.schema) as session:
            run = _Run(database, embedder, target, (), batch_size, progress)
            resumed, finished = await _prepare(run, session, restart=restart)
            already_done = 0
            if not finished:
                already_done = await _count(run)
                run.report()
                await _fill(run)
                await _switch(run)
                if org_id is None:
                    await _build_index(run, session)
            final = await _dimensions(run)
    # The Database checked and cached the old dimension; it must read the column again.
    database.forget_dimensions()
    return ReembedResult(
        model=target.model,
        dimensions=final,
        org_id=org_id,
        embedded={table.name: run.embedded.get(table.name, 0) for table in run.tables},
        already_done=already_done,
        batches=run.batches,
        elapsed_seconds=time.monotonic() - started,
        resumed=resumed,
    )


@asynccontextmanager
async def _only_run(engine: AsyncEngine, schema: str) -> AsyncIterator[Connection]:
    """A connection outside any transaction, holding the schema's re-embed lock for the run."""
    key = {"key": f"memora_pg reembed {schema}"}
    async with driver.checkout(engine, schema) as conn:
        if not await conn.scalar(text(q.RUN_LOCK), key):
            raise ReembedBusyError(f"Another re-embed of the schema {schema!r} is running.")
        try:
            yield conn
        except BaseException:
            # The session may be mid-statement or hold a changed setting: it is closed, not pooled,
            # and its lock dies with it.
            conn.discard()
            raise
        await conn.execute(text(q.RUN_UNLOCK), key)


# -- preparing: a new switch, or the one in progress -----------------------------------------


async def _prepare(run: _Run, session: Connection, *, restart: bool) -> tuple[bool, bool]:
    """Set up the shadow columns, or check those found; (resumed, already finished)."""
    target = run.target
    async with run.database.transaction() as conn:
        columns = await catalog.vector_columns(conn, run.database.schema, columns=q.COLUMNS)
        # Row-level security that applies to this role would hide rows from the checks before the switch.
        if await catalog.row_security_applies(conn, run.database.schema, catalog.VECTOR_TABLES):
            raise ConfigurationError(
                "Row-level security applies to this database role, so a re-embed would not see every row: "
                "run it as the tables' owner or a role with BYPASSRLS."
            )
        if target.org_id is not None and not await conn.scalar(q.ORGANIZATION_EXISTS, {"org_id": target.org_id}):
            raise NotFoundError(f"Organization {target.org_id!r} does not exist.")
    if ("memories", "embedding") not in columns:
        raise ConfigurationError(
            f"The schema {run.database.schema!r} has no memories table: call setup() or run 'alembic upgrade head'."
        )
    run.tables = tuple(table for table in q.TABLES if (table.name, "embedding") in columns)
    current = columns["memories", "embedding"].dimensions
    if target.org_id is not None and target.dimensions != current:
        raise InvalidInputError(
            f"The database stores vectors of {current} dimensions for every organization; one organization "
            f"cannot move to {target.dimensions}. Re-embed the whole database (no org_id) to change the dimension."
        )

    resumed = False
    # A whole-database switch whose index was not built yet: finish it (no embedding needed).
    pending = _Target.from_comment(columns["memories", "embedding"].comment)
    if pending is not None:
        await _build_index(run, session)
        if pending == target and ("memories", "embedding_next") not in columns:
            return True, True

    shadows = [row for (table, column), row in columns.items() if column == "embedding_next"]
    if shadows:
        found = {_Target.from_comment(row.comment) for row in shadows}
        if found == {target} and all(row.dimensions == target.dimensions for row in shadows):
            resumed = True
        elif restart:
            await _drop_shadows(run)
        else:
            other = next(iter(found - {target, None}), None)
            what = other.describe() if other is not None else "an unknown target"
            raise ConfigurationError(
                f"An unfinished re-embed to {what} is in progress. Run it again with that embedder to finish "
                f"it, or pass restart=True to discard its progress and re-embed to {target.describe()}."
            )
    await _add_shadows(run)
    return resumed, False


async def _add_shadows(run: _Run) -> None:
    async with run.database.transaction() as conn:
        await conn.execute(text(q.SET_LOCK_TIMEOUT))
        await conn.execute(q.FORGET_FUNCTION)
        for table in run.tables:
            await conn.execute(q.statement(q.ADD_SHADOW, table, dimensions=run.target.dimensions))
            comment = await conn.scalar(
                text(q.COMMENT),
                {
                    "schema": run.database.schema,
                    "table": table.name,
                    "column": "embedding_next",
                    "comment": run.target.comment(),
                },
            )
            await conn.script(comment)
            if conn.on_citus:
                await conn.execute(text(q.CITUS_TRIGGERS))
            await conn.execute(q.statement(q.FORGET_TRIGGER, table, columns=table.watched, changes=table.changes))


async def _drop_shadows(run: _Run) -> None:
    async with run.database.transaction() as conn:
        await conn.execute(text(q.SET_LOCK_TIMEOUT))
        if conn.on_citus:
            await conn.execute(text(q.CITUS_TRIGGERS))
        for table in run.tables:
            await conn.execute(q.statement(q.DROP_TRIGGER, table))
            await conn.execute(q.statement(q.DROP_SHADOW, table))
    await _drop_function(run)


async def _drop_function(run: _Run) -> None:
    """The triggers' function, once no trigger uses it, in a transaction of its own: Citus refuses a
    function command after the ALTER TABLE of a distributed table in the same transaction."""
    async with run.database.transaction() as conn:
        await conn.execute(q.DROP_FUNCTION)


# -- filling the shadow columns --------------------------------------------------------------


async def _count(run: _Run) -> int:
    """Set the progress counters; the rows an earlier run had done already."""
    run.done = run.total = 0
    async with run.database.transaction() as conn:
        for table in run.tables:
            row = await conn.one(q.statement(q.PROGRESS, table, scope=q.scope_of(run.target.org_id)), run.org_params)
            run.total += int(row.searchable)
            run.done += int(row.done)
    return run.done


async def _fill(run: _Run) -> None:
    """One pass over every table: each row still without a new vector gets one."""
    for table in run.tables:
        await _fill_table(run, table)


async def _fill_table(run: _Run, table: q.VectorTable) -> None:
    last: tuple[str, Any] | None = None
    while True:
        after, params = q.after_key(run.target.org_id, last)
        async with run.database.transaction() as conn:
            rows = await conn.fetch(q.statement(q.PAGE, table, after=after), {"limit": run.batch_size, **params})
        if not rows:
            return
        last = (rows[-1].org_id, rows[-1].row_id)
        vectors = await embed_checked(run.embedder, [_text_of(row) for row in rows], query=False)
        async with run.database.transaction() as conn:
            written = await conn.execute(
                q.statement(q.WRITE, table),
                {
                    "org_ids": [row.org_id for row in rows],
                    "row_ids": [row.row_id for row in rows],
                    "versions": [row.version for row in rows],
                    "embeddings": vector_params.many(vectors),
                },
            )
        run.batches += 1
        run.embedded[table.name] = run.embedded.get(table.name, 0) + written
        run.done += written
        run.report()


def _text_of(row: Any) -> str:
    if row.owner_user is not None:
        return render.for_embedding(
            str(row.text),
            user_id=row.owner_user,
            agent_id=row.owner_agent,
            user_name=row.user_name,
            agent_label=row.agent_label,
        )
    if row.text is not None:
        return str(row.text)
    # JSON entries were embedded as their canonical text; the same text is embedded again.
    return canonical_json(from_json(row.json), "JSON content")


# -- the switch ------------------------------------------------------------------------------


async def _switch(run: _Run) -> None:
    if run.target.org_id is not None:
        await _adopt(run)
    for _attempt in range(SWITCH_ATTEMPTS):
        if await _try_switch(run):
            return
        await _fill(run)
    raise ReembedBusyError(
        f"The switch was tried {SWITCH_ATTEMPTS} times, and each time new rows without a new vector had appeared "
        "or the tables could not be locked in time. The rows embedded so far are kept: run the re-embed again."
    )


async def _missing(conn: Connection, run: _Run) -> bool:
    for table in run.tables:
        if await conn.scalar(q.statement(q.MISSING, table, scope=q.scope_of(run.target.org_id)), run.org_params):
            return True
    return False


async def _try_switch(run: _Run) -> bool:
    """Switch under the lock if nothing is left to embed; False to embed the newcomers first."""
    remade: list[tuple[q.VectorTable, str]] = []
    async with run.database.transaction() as conn:
        if await _missing(conn, run):
            return False
    try:
        async with run.database.transaction() as conn:
            await conn.execute(text(q.SET_LOCK_TIMEOUT))
            await conn.execute(q.statement(q.LOCK, tables=q.locked([table.name for table in run.tables])))
            if conn.on_citus:
                await conn.execute(text(q.CITUS_TRIGGERS))
            if await _missing(conn, run):
                return False
            if run.target.org_id is not None:
                await _adopt_in(conn, run)
                for table in run.tables:
                    await conn.execute(q.statement(q.DROP_TRIGGER, table))
                    await conn.execute(q.statement(q.DROP_SHADOW, table))
            else:
                await conn.execute(q.DROP_INDEX)
                for table in run.tables:
                    checks = await conn.fetch(q.statement(q.EMBEDDING_CHECKS, table))
                    await conn.execute(q.statement(q.DROP_TRIGGER, table))
                    await conn.execute(q.statement(q.DROP_OLD_COLUMN, table))
                    await conn.execute(q.statement(q.PROMOTE_SHADOW, table))
                    for check in checks:
                        added = q.statement(q.ADD_CHECK, table, name=check.name, definition=check.definition)
                        await conn.execute(added)
                        remade.append((table, check.name))
                    if table is not q.MEMORIES:
                        await conn.execute(q.statement(q.FORGET_COMMENT, table))
    except DatabaseError as error:
        if sqlstate_of(error) == _LOCK_NOT_AVAILABLE:
            return False
        raise
    for table, name in remade:
        async with run.database.transaction() as conn:
            await conn.execute(q.statement(q.VALIDATE_CHECK, table, name=name))
    await _drop_function(run)
    return True


async def _adopt(run: _Run) -> None:
    """One organization's rows take their new vectors, a batch per transaction, in key order."""
    for table in run.tables:
        last: tuple[str, Any] | None = None
        while True:
            after, params = q.after_key(run.target.org_id, last)
            async with run.database.transaction() as conn:
                page = q.statement(q.ADOPT_PAGE, table, after=after)
                keys = await conn.scalars(page, {"limit": run.batch_size, **params})
            if not keys:
                break
            last = ("", max(keys))


async def _adopt_in(conn: Connection, run: _Run) -> None:
    """The rows whose vector the application wrote again since they took their new one (few: no pages)."""
    for table in run.tables:
        await conn.execute(q.statement(q.ADOPT_FOR_ORGANIZATION, table), run.org_params)


# -- the index, and the check ----------------------------------------------------------------


async def _build_index(run: _Run, session: Connection) -> None:
    """Build the HNSW index of the new column without blocking writes, then clear the pending mark."""
    settings = run.database.settings
    valid = await session.scalar(text(q.INDEX_VALID), {"name": f'"{run.database.schema}".{q.HNSW_INDEX}'})
    if valid is not True:
        if valid is False:
            # An interrupted CREATE INDEX CONCURRENTLY leaves an invalid index behind.
            await session.execute(q.DROP_INDEX_CONCURRENTLY)
        async with build_session(session, settings):
            await session.execute(text(create_hnsw(run.database.schema, settings)))
    await session.execute(q.statement(q.FORGET_COMMENT, q.MEMORIES))


async def _dimensions(run: _Run) -> int:
    """The dimension of every vector column; they must all be the target's."""
    async with run.database.transaction() as conn:
        columns = await catalog.vector_columns(conn, run.database.schema, columns=q.COLUMNS)
    found = {table: vector.dimensions for (table, column), vector in columns.items() if column == "embedding"}
    wrong = {name: dims for name, dims in found.items() if dims != run.target.dimensions}
    if wrong or any(column == "embedding_next" for _, column in columns):
        raise DatabaseError(f"After the switch the vector columns are {found}, not {run.target.dimensions}.")
    return found["memories"]
