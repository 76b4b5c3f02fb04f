"""The statements of a re-embed, and the tables with vectors it works on (:mod:`memora_pg.ops.reembed`
runs them). ``{table}``, ``{key}``, ``{text}`` and ``{after}`` come from a :class:`VectorTable`, ``{schema}``
when the statement runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memora_pg.sql_text import literal, parts_of, quoted, render

# How long the switch waits for its table locks before it lets the application go on and tries again.
LOCK_TIMEOUT = "5s"
HNSW_INDEX = "ix_memories_embedding_hnsw"


@dataclass(frozen=True)
class VectorTable:
    name: str
    key: str
    text: str  # the select list giving the embedded text, or the JSON whose canonical text is embedded
    watched: str  # the columns whose update may make a new vector wrong
    changes: str  # the trigger's condition: the row's text changed, or it stopped being searchable


MEMORIES = VectorTable(
    name="memories",
    key="memory_id",
    # A memory is embedded as a save embeds it: its own user's and agent's placeholders as their names.
    text=(
        "memory AS text, NULL AS json, user_id AS owner_user, agent_id AS owner_agent,"
        " (SELECT user_name FROM {schema}.users AS u"
        " WHERE u.org_id = memories.org_id AND u.user_id = memories.user_id) AS user_name,"
        " (SELECT agent_label FROM {schema}.agents AS a"
        " WHERE a.org_id = memories.org_id AND a.agent_id = memories.agent_id) AS agent_label"
    ),
    watched="memory, embedding",
    changes="NEW.memory IS DISTINCT FROM OLD.memory OR NEW.embedding IS NULL",
)
AUTOGEN_CONTENTS = VectorTable(
    name="autogen_contents",
    key="content_id",
    text=(
        "content_text AS text, content_json AS json,"
        " NULL AS owner_user, NULL AS owner_agent, NULL AS user_name, NULL AS agent_label"
    ),
    watched="content_text, content_json, embedding",
    changes=(
        "NEW.content_text IS DISTINCT FROM OLD.content_text OR NEW.content_json IS DISTINCT FROM OLD.content_json"
        " OR NEW.embedding IS NULL"
    ),
)
STORE_ITEMS = VectorTable(
    name="store_items",
    key="item_id",
    # An item is embedded by the text of its indexed fields, which the row keeps.
    text=(
        "indexed_text AS text, NULL AS json,"
        " NULL AS owner_user, NULL AS owner_agent, NULL AS user_name, NULL AS agent_label"
    ),
    watched="indexed_text, embedding",
    changes="NEW.indexed_text IS DISTINCT FROM OLD.indexed_text OR NEW.embedding IS NULL",
)
TABLES = (MEMORIES, AUTOGEN_CONTENTS, STORE_ITEMS)


# {table}, {key}, {text} and {after} come from VectorTable constants, {schema} when the statement runs.

# The vector columns a re-embed reads from the catalog: the live one and its shadow.
COLUMNS = ("embedding", "embedding_next")

ORGANIZATION_EXISTS = "SELECT EXISTS (SELECT 1 FROM {schema}.organizations WHERE org_id = :org_id)"

ADD_SHADOW = "ALTER TABLE {schema}.{table} ADD COLUMN IF NOT EXISTS embedding_next vector({dimensions})"
DROP_SHADOW = "ALTER TABLE {schema}.{table} DROP COLUMN IF EXISTS embedding_next"
# COMMENT takes no parameters: the server quotes the literal.
COMMENT = """
SELECT format('COMMENT ON COLUMN %I.%I.%I IS %L',
              CAST(:schema AS text), CAST(:table AS text), CAST(:column AS text), CAST(:comment AS text))
"""
FORGET_COMMENT = "COMMENT ON COLUMN {schema}.{table}.embedding IS NULL"

FORGET_FUNCTION = """
CREATE OR REPLACE FUNCTION {schema}.memora_pg_reembed_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.embedding_next := NULL;
    RETURN NEW;
END
$$
"""
# A new vector belongs to the text it was computed from, and only to a searchable row.
FORGET_TRIGGER = """
CREATE OR REPLACE TRIGGER memora_pg_reembed BEFORE UPDATE OF {columns} ON {schema}.{table}
FOR EACH ROW WHEN ({changes}) EXECUTE FUNCTION {schema}.memora_pg_reembed_forget()
"""
DROP_TRIGGER = "DROP TRIGGER IF EXISTS memora_pg_reembed ON {schema}.{table}"
# Citus refuses triggers on distributed tables unless told they are safe; this one only changes
# the row it fires for (on the row's own shard), which is what Citus asks of a trigger.
CITUS_TRIGGERS = "SET LOCAL citus.enable_unsafe_triggers = on"
DROP_FUNCTION = "DROP FUNCTION IF EXISTS {schema}.memora_pg_reembed_forget()"

PROGRESS = """
SELECT count(embedding) AS searchable, count(embedding_next) AS done
FROM {schema}.{table} WHERE {scope}
"""

# One page of rows still to embed; xmin identifies the version whose text is read.
PAGE = """
SELECT org_id, {key} AS row_id, CAST(xmin AS text) AS version, {text}
FROM {schema}.{table}
WHERE embedding IS NOT NULL AND embedding_next IS NULL AND {after}
ORDER BY org_id, {key}
LIMIT :limit
"""

# Written only where the row is still the version whose text was embedded, and still searchable.
WRITE = """
UPDATE {schema}.{table} AS t SET embedding_next = given.embedding
FROM unnest(CAST(:org_ids AS text[]), CAST(:row_ids AS uuid[]), CAST(:versions AS text[]),
            CAST(:embeddings AS vector[])) AS given(org_id, row_id, version, embedding)
WHERE t.org_id = given.org_id AND t.{key} = given.row_id
  AND t.xmin = CAST(given.version AS xid) AND t.embedding IS NOT NULL AND t.embedding_next IS NULL
"""

MISSING = """
SELECT EXISTS (SELECT 1 FROM {schema}.{table} WHERE {scope} AND embedding IS NOT NULL AND embedding_next IS NULL)
"""

SET_LOCK_TIMEOUT = render("SET LOCAL lock_timeout = {timeout}", timeout=literal(LOCK_TIMEOUT))
LOCK = "LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE"


def locked(names: Sequence[str]) -> str:
    """LOCK's part ``tables``: these tables of the schema (``{schema}`` still open)."""
    return ", ".join(render("{schema}.{table}", table=quoted(name)) for name in names)


DROP_INDEX = render("DROP INDEX IF EXISTS {schema}.{index}", index=HNSW_INDEX)
DROP_OLD_COLUMN = "ALTER TABLE {schema}.{table} DROP COLUMN embedding"
PROMOTE_SHADOW = "ALTER TABLE {schema}.{table} RENAME COLUMN embedding_next TO embedding"
# The CHECK constraints on the old column (migration 0011's), which dropping it drops: each is made again on
# the new one, unchecked under the switch's lock (it holds for every row by then), and validated after it.
EMBEDDING_CHECKS = """
SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS definition
FROM pg_constraint AS c
JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
WHERE c.conrelid = to_regclass('{schema}.{table}') AND c.contype = 'c' AND a.attname = 'embedding'
ORDER BY c.conname
"""
ADD_CHECK = 'ALTER TABLE {schema}.{table} ADD CONSTRAINT "{name}" {definition} NOT VALID'
VALIDATE_CHECK = 'ALTER TABLE {schema}.{table} VALIDATE CONSTRAINT "{name}"'

# One organization: its searchable rows take their new vectors (rows already equal are skipped).
# The conditions are repeated in the UPDATE so that a row changed meanwhile is checked again.
ADOPT_PAGE = """
WITH page AS (
    SELECT org_id, {key} FROM {schema}.{table}
    WHERE {after} AND embedding IS NOT NULL AND embedding_next IS NOT NULL
      AND embedding IS DISTINCT FROM embedding_next
    ORDER BY {key}
    LIMIT :limit
)
UPDATE {schema}.{table} AS t SET embedding = t.embedding_next
FROM page
WHERE t.org_id = page.org_id AND t.{key} = page.{key} AND t.embedding IS NOT NULL AND t.embedding_next IS NOT NULL
RETURNING t.{key}
"""
ADOPT_FOR_ORGANIZATION = """
UPDATE {schema}.{table} SET embedding = embedding_next
WHERE org_id = :org_id AND embedding IS NOT NULL AND embedding_next IS NOT NULL
  AND embedding IS DISTINCT FROM embedding_next
"""

INDEX_VALID = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"
DROP_INDEX_CONCURRENTLY = render("DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}", index=HNSW_INDEX)

RUN_LOCK = "SELECT pg_try_advisory_lock(hashtext(:key))"
RUN_UNLOCK = "SELECT pg_advisory_unlock(hashtext(:key))"


def statement(template: str, table: VectorTable | None = None, **parts: object) -> str:
    """A statement template with its parts filled in: those given, and those of ``table`` it names. The
    ``after`` condition (:func:`after_key`) may name the table's key."""
    if table is not None:
        own = {"table": table.name, "key": table.key, "text": table.text}
        if "after" in parts:
            after = str(parts["after"])
            parts["after"] = render(after, **{name: own[name] for name in parts_of(after) & set(own)})
        parts = {**parts, **{name: own[name] for name in parts_of(template) & set(own)}}
    return render(template, **parts)


def scope_of(org_id: str | None) -> str:
    return "TRUE" if org_id is None else "org_id = :org_id"


def after_key(org_id: str | None, last: tuple[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Keyset pagination: the condition (and its parameters) for the rows after ``last`` (org_id, key)."""
    if org_id is None:
        if last is None:
            return "TRUE", {}
        return "(org_id, {key}) > (:after_org, :after_key)", {"after_org": last[0], "after_key": last[1]}
    if last is None:
        return "org_id = :org_id", {"org_id": org_id}
    return "org_id = :org_id AND {key} > :after_key", {"org_id": org_id, "after_key": last[1]}
