"""Running on Citus: every table distributed by ``org_id``, all co-located with ``organizations``.

memora_pg's schema is built for it (see ``schema.py``): ``org_id`` is in every primary key,
unique constraint and foreign key, at the same position on both sides of every foreign key,
so each organization's rows, constraints and joins live on one shard. Every statement of the
stores names one organization, so Citus routes it to that shard.

:func:`distribution_sql` is the one migration step a Citus cluster needs after
``alembic upgrade head`` (``memora-pg setup``): the ``create_distributed_table`` calls in
foreign-key order, and alembic's version table as a reference table so every node can read it.
:func:`distribution_problems` checks a migrated catalog for anything that would stop that
working; it runs on plain PostgreSQL, so the test suite keeps the schema distributable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text

from memora_pg import schema as tables
from memora_pg.driver import Connection
from memora_pg.errors import ConfigurationError
from memora_pg.sql import CITUS_FUNCTIONS, current_sources
from memora_pg.sql_text import literal, qualified, render

DISTRIBUTION_COLUMN = "org_id"
# The table every other one is co-located with: the tenant itself.
ANCHOR = "organizations"
# Tables replicated to every node instead of sharded: alembic's, and the MCP server's tokens, which
# are looked up by their hash before any organization is known.
REFERENCE_TABLES = ("alembic_version", "access_tokens")

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def distributed_tables() -> list[str]:
    """memora_pg's tables in the order Citus needs: every foreign key's target before the table itself."""
    ordered = [table.name for table in tables.metadata.sorted_tables if table.name not in REFERENCE_TABLES]
    ordered.remove(ANCHOR)
    return [ANCHOR, *ordered]


# memories_as_of() as Citus plans it: PL/pgSQL, whose queries Citus plans as any other. The script holds a
# statement a line, so the source's lines are joined (it has no comment but its leading ones).
_, _MEMORIES_AS_OF_SOURCE = current_sources(CITUS_FUNCTIONS)["memories_as_of"]
MEMORIES_AS_OF_PLPGSQL = (
    " ".join(line.strip() for line in _MEMORIES_AS_OF_SOURCE.splitlines() if not line.startswith("--")) + ";"
)


# The write functions (migration 0016) take the organization first, as ``p_org_id``: distributed by it,
# co-located with the tables, a call runs on the worker holding the organization's shards, also in a
# transaction block (``force_delegation``).
WRITE_FUNCTION_ARGUMENT = "p_org_id"
DISTRIBUTE_WRITE_FUNCTIONS = (
    "DO $$ DECLARE written regprocedure; BEGIN FOR written IN SELECT p.oid FROM pg_proc AS p "
    "WHERE p.pronamespace = '{schema}'::regnamespace AND p.proargnames[1] = '{argument}' ORDER BY p.proname "
    "LOOP PERFORM create_distributed_function(written, '{argument}', colocate_with => '{schema}.{anchor}', "
    "force_delegation => true); END LOOP; END $$;"
)


# Whether the schema is distributed is decided by what the database holds (is its tenant table distributed?),
# not by whether Citus is installed: a migration that must also distribute what it creates runs its
# statements only then.
_IF_DISTRIBUTED = """
DO $$
DECLARE
    distributed boolean := false;{declarations}
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = to_regclass($1))'
            INTO distributed USING {anchor};
    END IF;
    IF distributed THEN
{statements}
    END IF;
END $$
"""


def if_distributed(schema: str, statements: str, *, declarations: str = "") -> str:
    """One PL/pgSQL block that runs ``statements`` (PL/pgSQL, indented as they should read) only when the
    schema's tables are distributed by Citus; ``declarations`` are the variables they use."""
    declared = "".join(f"\n    {line}" for line in declarations.splitlines() if line.strip())
    anchor = literal(qualified(schema, ANCHOR))
    return render(_IF_DISTRIBUTED, anchor=anchor, declarations=declared, statements=statements.rstrip("\n"))


# A revision that creates write functions on a schema already distributed distributes them too (one
# connection per worker for the rest of the transaction: Citus refuses a function command after a parallel
# operation in the same transaction).
_DISTRIBUTE_FUNCTIONS = """\
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
        FOREACH written IN ARRAY ARRAY[{functions}]::regprocedure[] LOOP
            EXECUTE 'SELECT create_distributed_function($1, $2, colocate_with => $3, force_delegation => true)'
                USING written, {argument}, {anchor};
        END LOOP;
"""


def distribute_functions(schema: str, signatures: Sequence[str]) -> str:
    """The block that distributes the write functions ``signatures`` (each ``name(type, ...)``) by their
    organization, co-located with the tables, when the schema is distributed; nothing otherwise."""
    functions = ", ".join(literal(f"{qualified(schema)}.{signature}") for signature in signatures)
    statements = render(
        _DISTRIBUTE_FUNCTIONS,
        functions=functions,
        argument=literal(WRITE_FUNCTION_ARGUMENT),
        anchor=literal(qualified(schema, ANCHOR)),
    )
    return if_distributed(schema, statements, declarations="written regprocedure;")


_SCRIPT_HEAD = """\
-- memora_pg on Citus: run once on the coordinator, after the migrations of schema {schema}.
-- Every table is distributed by {column} and co-located with {schema}.{anchor}, so each
-- organization's rows, foreign keys and joins stay on one shard; alembic's version table and
-- the MCP server's access tokens become reference tables, readable on every node."""
_DISTRIBUTE_ANCHOR = "SELECT create_distributed_table('{schema}.{anchor}', '{column}');"
_DISTRIBUTE = (
    "SELECT create_distributed_table(to_regclass('{schema}.{table}'), '{column}', colocate_with => '{schema}.{anchor}')"
    " WHERE to_regclass('{schema}.{table}') IS NOT NULL;"
)
_REFERENCE = (
    "SELECT create_reference_table(to_regclass('{schema}.{table}')) WHERE to_regclass('{schema}.{table}') IS NOT NULL;"
)
_GRANTS = """\
-- The application role {role} (not the tables' owner, so row-level security applies to it):
-- Citus propagates these grants to the shards on every worker.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role};"""


def distribution_sql(schema: str, app_role: str | None = None) -> str:
    """The statements that distribute a migrated schema on a Citus coordinator, one per line.

    Run them once, in order, right after the migrations have created the tables (existing rows
    are moved to the shards by Citus). Later migrations run on the coordinator as before. The
    database's default for the propagation of SET LOCAL (row-level security's tenant) follows,
    and with ``app_role`` the grants an application role needs, on the coordinator and the shards.
    """
    if not _IDENTIFIER.match(schema):
        raise ConfigurationError(f"{schema!r} is not a plain lower-case SQL identifier")
    # The script names the schema bare (checked above to need no quotes), as a DBA reading it would.
    parts = {"schema": schema, "anchor": ANCHOR, "column": DISTRIBUTION_COLUMN}
    lines = [render(_SCRIPT_HEAD, **parts), render(_DISTRIBUTE_ANCHOR, **parts)]
    lines += [render(_DISTRIBUTE, **parts, table=name) for name in distributed_tables()[1:]]
    # A table of a later revision than the schema's is left to its migration (0012 and 0019 make their own).
    lines += [render(_REFERENCE, schema=schema, table=name) for name in REFERENCE_TABLES]
    lines += [
        "-- memories_as_of(): a SQL function whose body reads a distributed table cannot be planned by Citus",
        "-- (0A000), so the migrations' SQL form becomes the same function in PL/pgSQL.",
        render(MEMORIES_AS_OF_PLPGSQL, schema=schema),
        "-- The write functions, each distributed by its first argument, the organization: a save is one call",
        "-- that the coordinator hands to the organization's worker (one round trip, a one-phase commit).",
        render(DISTRIBUTE_WRITE_FUNCTIONS, schema=schema, argument=WRITE_FUNCTION_ARGUMENT, anchor=ANCHOR),
    ]
    lines += [
        "-- Row-level security: memora_pg names the organization with SET LOCAL memora.org_id, which the",
        "-- coordinator sends on to the workers when citus.propagate_set_commands is 'local' (memora_pg",
        "-- also sets it in each such transaction; this makes it the database's default).",
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET citus.propagate_set_commands = %L', "
        "current_database(), 'local'); END $$;",
    ]
    if app_role is not None:
        if not _IDENTIFIER.match(app_role):
            raise ConfigurationError(f"{app_role!r} is not a plain lower-case SQL identifier")
        lines.append(render(_GRANTS, schema=schema, role=app_role))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Problem:
    """Something in the catalog that stops a table from being distributed by ``org_id``."""

    relation: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.relation}: {self.detail} ({self.rule})"


# Each check returns (relation, rule, detail) rows, one per violation, for the schema :schema.

_TABLES_WITHOUT_TENANT = """
SELECT c.relname AS relation,
       CASE WHEN a.attname IS NULL THEN 'no-org-id' ELSE 'nullable-org-id' END AS rule,
       CASE WHEN a.attname IS NULL THEN 'has no org_id column' ELSE 'org_id may be null' END AS detail
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped
WHERE n.nspname = :schema AND c.relkind IN ('r', 'p')
  AND NOT c.relname = ANY(CAST(:reference_tables AS text[]))
  AND (a.attname IS NULL OR NOT a.attnotnull)
"""

# Primary keys, unique and exclusion constraints, and unique indexes without a constraint:
# Citus can enforce uniqueness only within a shard, so org_id must be part of it.
_KEYS_WITHOUT_TENANT = """
SELECT c.relname AS relation, 'key-without-org-id' AS rule,
       format('%s %s does not include org_id', CASE k.contype WHEN 'p' THEN 'primary key'
              WHEN 'u' THEN 'unique constraint' ELSE 'exclusion constraint' END, k.conname) AS detail
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped
WHERE n.nspname = :schema AND k.contype IN ('p', 'u', 'x')
  AND NOT c.relname = ANY(CAST(:reference_tables AS text[]))
  AND (a.attnum IS NULL OR NOT a.attnum = ANY(k.conkey))
UNION ALL
SELECT c.relname, 'unique-index-without-org-id', format('unique index %s does not include org_id', i.relname)
FROM pg_index AS x
JOIN pg_class AS c ON c.oid = x.indrelid
JOIN pg_class AS i ON i.oid = x.indexrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped
WHERE n.nspname = :schema AND x.indisunique
  AND NOT EXISTS (SELECT 1 FROM pg_constraint AS k WHERE k.conindid = x.indexrelid AND k.conrelid = c.oid)
  AND NOT c.relname = ANY(CAST(:reference_tables AS text[]))
  AND (a.attnum IS NULL OR NOT a.attnum = ANY(CAST(x.indkey AS int2[])))
"""

# A foreign key between co-located tables must carry org_id to org_id: same position on both sides.
_FOREIGN_KEYS = """
SELECT c.relname AS relation,
       CASE
           WHEN rn.nspname <> n.nspname THEN 'foreign-key-other-schema'
           WHEN mine.attnum IS NULL OR NOT mine.attnum = ANY(k.conkey) THEN 'foreign-key-without-org-id'
           ELSE 'foreign-key-org-id-misplaced'
       END AS rule,
       format('foreign key %s to %I.%I', k.conname, rn.nspname, r.relname) AS detail
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_class AS r ON r.oid = k.confrelid
JOIN pg_namespace AS rn ON rn.oid = r.relnamespace
LEFT JOIN pg_attribute AS mine ON mine.attrelid = c.oid AND mine.attname = 'org_id' AND NOT mine.attisdropped
LEFT JOIN pg_attribute AS theirs ON theirs.attrelid = r.oid AND theirs.attname = 'org_id' AND NOT theirs.attisdropped
WHERE n.nspname = :schema AND k.contype = 'f'
  AND NOT (rn.nspname = n.nspname AND r.relname = ANY(CAST(:reference_tables AS text[])))
  AND (rn.nspname <> n.nspname
       OR mine.attnum IS NULL OR theirs.attnum IS NULL
       OR array_position(k.conkey, mine.attnum) IS DISTINCT FROM array_position(k.confkey, theirs.attnum))
"""

# Sequences: only those behind a bigint identity (or bigserial) column of a table, which Citus
# keeps globally unique across nodes; an int or smallint one works only from the coordinator.
_SEQUENCES = """
SELECT s.relname AS relation, 'sequence' AS rule,
       CASE WHEN owner.refobjid IS NULL THEN 'a sequence no column owns'
            ELSE format('a %s sequence (only bigint ones can be used on every node)', format_type(q.seqtypid, NULL))
       END AS detail
FROM pg_class AS s
JOIN pg_namespace AS n ON n.oid = s.relnamespace
JOIN pg_sequence AS q ON q.seqrelid = s.oid
LEFT JOIN pg_depend AS owner
  ON owner.classid = 'pg_class'::regclass AND owner.objid = s.oid
 AND owner.refclassid = 'pg_class'::regclass AND owner.deptype IN ('a', 'i') AND owner.refobjsubid > 0
WHERE n.nspname = :schema AND s.relkind = 'S'
  AND (owner.refobjid IS NULL OR q.seqtypid <> 'bigint'::regtype)
"""

# Functions that read or write tables must be distributed one by one: the write functions (migration
# 0016) are, by their first argument (``p_org_id``, :data:`DISTRIBUTE_WRITE_FUNCTIONS`). Immutable ones
# (the full-text rule of migration 0006, the clocks' rules of 0008) are pure, and Citus copies them to
# every node with the objects that depend on them. A read-only set-returning function
# (``memories_as_of``, for reports; PL/pgSQL on Citus, migration 0008) is fine too: called on the
# coordinator, its query is planned there as any distributed query. User triggers run only on the
# coordinator.
_CODE = """
SELECT p.proname AS relation, 'function' AS rule,
       format('%s %s(%s) lives in the schema', CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END,
              p.proname, pg_get_function_identity_arguments(p.oid)) AS detail
FROM pg_proc AS p
JOIN pg_namespace AS n ON n.oid = p.pronamespace
WHERE n.nspname = :schema AND NOT (p.prokind = 'f' AND p.provolatile = 'i')
  AND NOT coalesce(p.prokind = 'f' AND p.proargnames[1] = :write_function_argument
                   AND p.proargtypes[0] = 'text'::regtype, false)
  AND NOT (p.prokind = 'f' AND p.provolatile = 's' AND p.proretset
           AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql')))
UNION ALL
SELECT c.relname, 'trigger', format('trigger %s', t.tgname)
FROM pg_trigger AS t
JOIN pg_class AS c ON c.oid = t.tgrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND NOT t.tgisinternal
"""

# All checks in one statement.
_PROBLEMS = render(
    "({tables}) UNION ALL ({keys}) UNION ALL ({foreign_keys}) UNION ALL ({sequences}) UNION ALL ({code})"
    " ORDER BY relation, rule, detail",
    tables=_TABLES_WITHOUT_TENANT,
    keys=_KEYS_WITHOUT_TENANT,
    foreign_keys=_FOREIGN_KEYS,
    sequences=_SEQUENCES,
    code=_CODE,
)


async def distribution_problems(conn: Connection, schema: str) -> list[Problem]:
    """Everything in ``schema`` that would stop distributing it by ``org_id``; ``[]`` when it is ready.

    Reads only the system catalogs, so it runs on plain PostgreSQL before a Citus cluster exists.
    """
    rows = await conn.fetch(
        text(_PROBLEMS),
        {
            "schema": schema,
            "reference_tables": list(REFERENCE_TABLES),
            "write_function_argument": WRITE_FUNCTION_ARGUMENT,
        },
    )
    return [Problem(row.relation, row.rule, row.detail) for row in rows]
