"""Switching the database's text-search configuration (``memora-pg text-search CONFIG``).

The configuration lives in one place, the schema's ``search_config()`` function (migration
0006), which every writer and every search calls through ``to_search_text``. A switch first
replaces that function, so every write from then on uses the new configuration, then rewrites
the stored full-text vectors in batches, each batch its own short transaction. It needs no
bookkeeping to resume: a row still to rewrite is one whose vector differs from what
``to_search_text`` now gives, so running the command again continues where it stopped. While
the rows are rewritten, the lexical arm ranks old rows under the old stemming; the dense arm
is unaffected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text

from memora_pg.db import Database
from memora_pg.errors import InvalidInputError, MemoraPGError, sqlstate_of
from memora_pg.sql import current_sources
from memora_pg.sql_text import literal, render

# SQLSTATE 42704: undefined_object (no text-search configuration of that name).
_UNDEFINED_OBJECT = "42704"
_IDENTIFIER_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")

CURRENT = "SELECT CAST({schema}.search_config() AS text)"

# The function as its migration made it (memora_pg/sql/functions), with another configuration.
_, REPLACE = current_sources()["search_config"]

# Each table's searchable rows and their text (AutoGen's JSON entries by their serialized text).
SOURCES = {
    "memories": "memory",
    "autogen_contents": "coalesce(content_text, CAST(content_json AS text))",
}
KEYS = {"memories": "memory_id", "autogen_contents": "content_id"}

TOTAL = "SELECT count(*) FROM {schema}.{table} WHERE embedding IS NOT NULL"

# One batch: rows whose vector is not what the current configuration gives, rewritten.
REWRITE = """
WITH stale AS (
    SELECT org_id, {key} FROM {schema}.{table}
    WHERE embedding IS NOT NULL AND search_text IS DISTINCT FROM {schema}.to_search_text({source})
    LIMIT :batch_size
)
UPDATE {schema}.{table} AS t
SET search_text = {schema}.to_search_text({source})
FROM stale
WHERE t.org_id = stale.org_id AND t.{key} = stale.{key}
"""


@dataclass(frozen=True)
class Switched:
    previous: str
    config: str
    rewritten: int

    def as_dict(self) -> dict[str, object]:
        return {"previous": self.previous, "config": self.config, "rewritten": self.rewritten}


async def current(database: Database) -> str:
    """The configuration the database's full-text vectors are written with."""
    async with database.transaction(read_only=True) as conn:
        found: str = await conn.scalar(CURRENT)
    return found


async def switch(
    database: Database,
    config: str,
    *,
    batch_size: int = 2000,
    progress: Callable[[int, int], None] | None = None,
) -> Switched:
    """Make ``config`` the database's text-search configuration and rewrite the stored vectors."""
    if not config or not set(config) <= _IDENTIFIER_CHARS or config[0].isdigit():
        raise InvalidInputError(f"{config!r} is not a plain lower-case text-search configuration name.")
    if batch_size < 1:
        raise InvalidInputError("batch_size must be at least 1.")
    previous = await current(database)
    try:
        async with database.transaction() as conn:
            await conn.execute(text("SELECT CAST(:config AS regconfig)"), {"config": config})
            # The name is checked above (a plain identifier) and by the cast: it can be part of the DDL.
            await conn.execute(render(REPLACE, config=literal(config)))
    except MemoraPGError as error:
        if sqlstate_of(error) == _UNDEFINED_OBJECT:
            raise InvalidInputError(f"The server has no text-search configuration {config!r}.") from error
        raise
    totals = {}
    async with database.transaction(read_only=True) as conn:
        for table in SOURCES:
            totals[table] = int(await conn.scalar(render(TOTAL, table=table)) or 0)
    total, done = sum(totals.values()), 0
    for table, source in SOURCES.items():
        statement = render(REWRITE, table=table, key=KEYS[table], source=source)
        while True:
            async with database.transaction() as conn:
                changed = await conn.execute(statement, {"batch_size": batch_size})
            if not changed:
                break
            done += changed
            if progress is not None:
                progress(min(done, total), total)
    database.forget_text_search_config()
    return Switched(previous=previous, config=config, rewritten=done)
