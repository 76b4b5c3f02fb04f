"""``memora-pg doctor``: is this database ready for memora_pg, and what to fix if not."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from sqlalchemy import text

from memora_pg import catalog, migrations
from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.ops import indexes
from memora_pg.schema import metadata
from memora_pg.sql_text import qualified
from memora_pg.statements import in_schema

Status = Literal["ok", "warn", "fail"]

MIN_SERVER = 140000
ITERATIVE_SCANS = (0, 8, 0)

# The plan of a user's listing, the read that most needs its index (any user: the plan is what matters).
LISTING_PLAN = """
EXPLAIN SELECT memory_id FROM {schema}.memories
WHERE org_id = 'o' AND user_id = 'u'
ORDER BY obtained_at DESC, seq DESC LIMIT 10
"""


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Everything doctor needs from the catalog but the vector dimension (catalog.vector_dimensions), in one statement.
FACTS = """
SELECT current_setting('server_version_num')::int AS server_version_num,
       current_setting('server_version') AS server_version,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector_version,
       (SELECT coalesce(array_agg(indexname::text), '{}') FROM pg_indexes WHERE schemaname = :schema) AS indexes,
       (SELECT coalesce(array_agg(c.relname::text), '{}') FROM pg_index i
          JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = :schema AND NOT i.indisvalid) AS invalid_indexes,
       (SELECT count(*) FROM pg_class WHERE oid = to_regclass(:memories)) AS has_memories,
       (SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(:memories)) AS memory_rows,
       (SELECT extversion FROM pg_extension WHERE extname = 'citus') AS citus_version,
       (SELECT c.reloptions FROM pg_class c WHERE c.oid = to_regclass(:hnsw)) AS hnsw_options
"""

# On a Citus coordinator: how each of the schema's tables is distributed (column, co-location group).
DISTRIBUTION = """
SELECT c.relname AS name, CAST(p.partmethod AS text) AS method, p.colocationid AS colocation,
       CAST(NULL AS text) AS column_name
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_dist_partition AS p ON p.logicalrelid = c.oid
WHERE n.nspname = :schema AND c.relkind IN ('r', 'p')
ORDER BY c.relname
"""


def _passes(name: str, ok: bool, ok_text: str, fail_text: str, hint: str) -> Check:
    """The check ``name``: ``ok_text`` when it passes, else a failure saying ``fail_text`` and what to do."""
    return Check(name, "ok", ok_text) if ok else Check(name, "fail", fail_text, hint)


def _version(value: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (value or "0").split(".") if part.isdigit())


async def diagnose(database: Database, *, embedder_dimensions: int | None = None) -> list[Check]:
    """Every check, in order; none of them writes."""
    schema = database.schema
    checks: list[Check] = []
    names = {
        "schema": schema,
        "memories": qualified(schema, "memories"),
        "hnsw": qualified(schema, indexes.HNSW_INDEX),
    }
    async with database.transaction() as conn:
        facts = await conn.one(text(FACTS), names)
        dimensions = await catalog.vector_dimensions(conn, schema)
        revision = await migrations.current_revision(conn, schema)
        distribution = None
        if facts.citus_version is not None:
            distribution = await conn.fetch(text(DISTRIBUTION), {"schema": schema})
        plan = None
        if facts.has_memories:
            # Is the user-scoped listing served by its index? (seq scans off: usable, whatever the table's size)
            await conn.execute(text("SET LOCAL enable_seqscan = off"))
            rows = await conn.fetch(in_schema(LISTING_PLAN, schema))
            plan = "\n".join(r[0] for r in rows)

    version = facts.server_version_num
    checks.append(
        Check("server", "ok", f"PostgreSQL {facts.server_version}")
        if version >= MIN_SERVER
        else Check("server", "fail", f"PostgreSQL {facts.server_version}", "Use PostgreSQL 14 or newer.")
    )
    if facts.citus_version is not None:
        checks.append(_citus_check(facts.citus_version, distribution or []))
    vector = facts.vector_version
    if vector is None:
        checks.append(Check("pgvector", "fail", "the vector extension is not installed", "Run memora-pg db upgrade."))
    elif _version(vector) < ITERATIVE_SCANS:
        checks.append(
            Check(
                "pgvector",
                "warn",
                f"pgvector {vector}: no iterative index scans, so filtered organization-wide searches may return "
                "fewer results than asked",
                "ALTER EXTENSION vector UPDATE (pgvector 0.8 or newer).",
            )
        )
    else:
        checks.append(Check("pgvector", "ok", f"pgvector {vector}, iterative index scans available"))

    head = migrations.head_revision()
    checks.append(
        _passes(
            "schema",
            revision == head,
            f"schema {schema!r} at revision {revision} (head)",
            f"schema {schema!r} at revision {revision or 'none'}, head is {head}",
            "Run memora-pg db upgrade (or alembic upgrade head).",
        )
    )

    if dimensions is not None and embedder_dimensions is not None:
        checks.append(
            _passes(
                "dimensions",
                dimensions == embedder_dimensions,
                f"vector({dimensions}) matches the embedder",
                f"the database stores vector({dimensions}), the embedder makes {embedder_dimensions}",
                "Configure an embedder of that dimension, or run memora-pg reembed.",
            )
        )
    elif dimensions is not None:
        checks.append(Check("dimensions", "ok", f"vector({dimensions})"))

    expected = {str(index.name) for table in metadata.sorted_tables for index in table.indexes if index.name}
    missing = sorted(expected - set(facts.indexes)) if revision == head else []
    if "ix_memories_embedding_hnsw" in missing:
        # Dropped on purpose, for fast writes: exact mode (see memora-pg index).
        missing.remove("ix_memories_embedding_hnsw")
        checks.append(
            Check(
                "index mode",
                "warn",
                "exact: no HNSW index, organization-wide searches scan exactly",
                "memora-pg index build, for organization-wide searches at scale.",
            )
        )
    if missing:
        checks.append(
            Check("indexes", "fail", "missing: " + ", ".join(missing), "Run memora-pg index build (CONCURRENTLY).")
        )
    elif revision == head:
        checks.append(Check("indexes", "ok", f"{len(expected)} indexes present (HNSW and btree)"))
    if indexes.HNSW_INDEX in facts.indexes:
        checks.append(_build_parameters(facts.hnsw_options, database.settings))
    if facts.invalid_indexes:
        checks.append(
            Check(
                "invalid indexes",
                "fail",
                "invalid (an interrupted CREATE INDEX CONCURRENTLY?): " + ", ".join(facts.invalid_indexes),
                "DROP INDEX CONCURRENTLY and create it again.",
            )
        )
    if plan is not None:
        used = "ix_memories_user_recent" in plan or "ix_memories_user_agent_recent" in plan
        checks.append(
            Check("plans", "ok", "user listings use the (org_id, user_id, obtained_at) index")
            if used
            else Check("plans", "warn", "user listings do not use their index:\n" + plan, "Run ANALYZE on memories.")
        )
    return checks


def _build_parameters(reloptions: list[str] | None, settings: Settings) -> Check:
    """Whether the HNSW index was built with the settings' parameters (an older default's index stays)."""
    built = indexes.built_parameters(reloptions)
    wanted = {"m": settings.hnsw_m, "ef_construction": settings.hnsw_ef_construction}
    shown = f"m = {built['m']}, ef_construction = {built['ef_construction']}"
    if built == wanted:
        return Check("index parameters", "ok", f"HNSW built with {shown}")
    return Check(
        "index parameters",
        "warn",
        f"HNSW built with {shown}; the settings ask for m = {wanted['m']}, "
        f"ef_construction = {wanted['ef_construction']}",
        "memora-pg index build rebuilds it without blocking (organization-wide recall depends on it).",
    )


def _citus_check(version: str, tables: Any) -> Check:
    """On a Citus coordinator: are memora_pg's tables distributed by org_id and co-located?"""
    from memora_pg.citus import DISTRIBUTION_COLUMN, REFERENCE_TABLES

    fix = "Run the statements memora-pg db distribute prints, once, on the coordinator."
    local = sorted(t.name for t in tables if t.method is None)
    wrong = sorted(
        t.name
        for t in tables
        if t.method is not None
        and t.name not in REFERENCE_TABLES
        and (t.method != "h" or (t.column_name is not None and t.column_name != DISTRIBUTION_COLUMN))
    )
    groups = {t.colocation for t in tables if t.method == "h"}
    if not tables or len(local) == len(tables):
        return Check("citus", "fail", f"Citus {version}: the tables are not distributed", fix)
    if local or wrong:
        detail = "; ".join(
            part
            for part in (
                "not distributed: " + ", ".join(local) if local else "",
                f"not hash-distributed by {DISTRIBUTION_COLUMN}: " + ", ".join(wrong) if wrong else "",
            )
            if part
        )
        return Check("citus", "fail", f"Citus {version}: {detail}", fix)
    if len(groups) != 1:
        return Check(
            "citus",
            "fail",
            f"Citus {version}: the tables are in {len(groups)} co-location groups, not one",
            "Distribute every table with colocate_with => the organizations table (memora-pg db distribute).",
        )
    distributed = sum(1 for t in tables if t.method == "h")
    return Check(
        "citus",
        "ok",
        f"Citus {version}: {distributed} tables distributed by {DISTRIBUTION_COLUMN}, co-located "
        f"(group {groups.pop()}), {len(tables) - distributed} reference table(s)",
    )


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0
