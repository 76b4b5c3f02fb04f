"""The ``memora-pg`` commands: each builds Settings from its arguments, calls one operation and prints
(``memora_pg.cli`` parses the arguments and picks the command)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memora_pg import driver, embedded
from memora_pg.config import Settings
from memora_pg.errors import MemoraPGError, SchemaNotMigratedError, SettingsError

if TYPE_CHECKING:
    from memora_pg.db import Database

# -- helpers ------------------------------------------------------------------------------------


# The options that set a setting (option, setting): given, they win over the environment.
OPTION_SETTINGS = (
    ("database_url", "database_url"),
    ("schema", "db_schema"),
    ("postgres_version", "embedded_postgres_version"),
    ("data_dir", "embedded_data_dir"),
    ("allowed_host", "mcp_allowed_hosts"),
    ("allowed_origin", "mcp_allowed_origins"),
    ("public_url", "mcp_public_url"),
)


def _settings(args: argparse.Namespace) -> Settings:
    given = {setting: getattr(args, option, None) for option, setting in OPTION_SETTINGS}
    return Settings(**{setting: value for setting, value in given.items() if value})


def _run(call: Coroutine[Any, Any, int]) -> int:
    return asyncio.run(call)


@contextlib.asynccontextmanager
async def _database(
    args: argparse.Namespace, *, migrate: bool = False, dimensions: int | Callable[[], int] | None = None
) -> AsyncIterator[Database]:
    """The database the arguments name, its schema at head.

    A command that only reads, or that changes what the schema holds, refuses a schema that is not
    at head (:class:`SchemaNotMigratedError`) rather than create one unasked. A command that writes
    new records (``migrate=True``: import, ``mcp token create``, the MCP server) brings it to head, and
    says so on stderr; a new database's vector columns get ``dimensions`` (default: the settings'; a
    callable is called only when the migration runs, as an embedder may have to ask its endpoint).
    """
    from memora_pg import migrations
    from memora_pg.db import Database

    async with Database(settings=_settings(args)) as database:
        try:
            async with database.transaction(read_only=True) as conn:
                await migrations.require_head(conn, database.schema)
        except SchemaNotMigratedError as behind:
            if not migrate:
                raise
            _say(f"migrating the schema {database.schema!r} from revision {behind.revision or 'none'} to {behind.head}")
            await database.migrate(dimensions() if callable(dimensions) else dimensions)
        yield database


async def _revision(database: Database) -> str | None:
    """The schema's revision (None before the first migration)."""
    from memora_pg import migrations

    async with database.transaction(read_only=True) as conn:
        return await migrations.current_revision(conn, database.schema)


def _say(message: str) -> None:
    """A line on stderr about what a command did beside what it was asked (stdout stays its answer)."""
    print(f"memora-pg: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    _say(f"warning: {message}")


class Progress:
    """A one-line progress bar on stderr (only on a terminal): ``with Progress(label) as bar:``, then
    ``bar.update(done, total)``; leaving the block ends the line, whatever happened in it."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()

    def update(self, done: int, total: int | None = None) -> None:
        if not self.live:
            return
        if total:
            width = 30
            filled = int(width * min(done, total) / total)
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        else:
            self.stream.write(f"\r{self.label} {done}")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.live:
            self.stream.write("\n")


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else text)


# -- commands -----------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from memora_pg.demo import run_demo

    asyncio.run(run_demo(_settings(args)))
    return 0


def _alembic(args: argparse.Namespace) -> Any:
    from memora_pg import migrations

    settings = _settings(args)
    return migrations.MigrationOptions.from_settings(settings), settings


def cmd_db(args: argparse.Namespace) -> int:
    from alembic import command
    from memora_pg import migrations
    from memora_pg.db import Database

    options, settings = _alembic(args)
    if args.action == "sql":
        # Offline: needs no database; the script a DBA reviews and runs.
        config = migrations.alembic_config(options)
        command.upgrade(config, f"{args.start}:{args.revision}" if args.start else args.revision, sql=True)
        return 0
    if args.action == "history":
        command.history(migrations.alembic_config(options))
        return 0
    if args.action == "distribute":
        from memora_pg.citus import distribution_sql

        print(distribution_sql(settings.db_schema, app_role=args.app_role))
        return 0

    async def online() -> int:
        async with Database(settings=settings) as database:
            engine = await database.raw_engine()
            if args.action == "upgrade":
                await migrations.upgrade(engine, options, args.revision)
            elif args.action == "downgrade":
                if not args.revision or args.revision == "head":
                    raise SystemExit("memora-pg db downgrade needs a target revision, e.g. 'base' or '0002'")
                await migrations.downgrade(engine, options, args.revision)
            async with driver.checkout(engine, settings.db_schema) as conn:
                current = await migrations.current_revision(conn, settings.db_schema)
            head = migrations.head_revision()
            _print(
                args,
                {"schema": settings.db_schema, "revision": current, "head": head},
                f"schema {settings.db_schema!r}: revision {current or 'none'} (head {head})",
            )
            return 0

    return _run(online())


def cmd_server(args: argparse.Namespace) -> int:
    settings = _settings(args)
    base, version = settings.embedded_data_dir, settings.embedded_postgres_version
    if args.action == "start":
        started = embedded.ensure_running(base, version)
        _print(args, {"running": True, "url": started}, started)
        return 0
    if args.action == "stop":
        stopped = embedded.stop(base, version)
        _print(args, {"stopped": stopped}, "stopped" if stopped else "not running")
        return 0
    url = embedded.status(base, version)
    if url is None:
        _print(args, {"running": False}, "not running")
        return 3
    if args.action == "url":
        print(url)
    else:
        _print(
            args,
            {"running": True, "url": url, "data_dir": str(embedded.data_directory(base, version))},
            f"running: {url}\ndata: {embedded.data_directory(base, version)}",
        )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import doctor

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            checks = await doctor.diagnose(database, embedder_dimensions=args.embedding_dimensions)
        lines = []
        for check in checks:
            mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}[check.status]
            lines.append(f"[{mark}] {check.name}: {check.detail}" + (f"\n       fix: {check.fix}" if check.fix else ""))
        _print(args, [c.as_dict() for c in checks], "\n".join(lines))
        return doctor.exit_code(checks)

    return _run(go())


EMBEDDER_FORMS = "local, hash:DIM or openai:MODEL[:DIM]"


def embedder_spec(spec: str) -> str:
    """``--embedder``'s value, checked as the parser reads it (a bad one is a one-line usage error)."""
    kind, _, rest = spec.partition(":")
    model, _, dims = rest.partition(":")
    if (kind == "local" and not rest) or (kind == "hash" and rest.isdigit() and int(rest) > 0):
        return spec
    if kind == "openai" and model and (not dims or (dims.isdigit() and int(dims) > 0)):
        return spec
    raise argparse.ArgumentTypeError(f"{spec!r}: use {EMBEDDER_FORMS}")


def parse_embedder(spec: str, base_url: str | None = None) -> Any:
    """``local``, ``hash:DIM`` or ``openai:MODEL[:DIM]`` as an embedder."""
    from memora_pg.embeddings import HashEmbedder, LocalEmbedder, OpenAIEmbedder

    try:
        embedder_spec(spec)
    except argparse.ArgumentTypeError as error:
        raise SettingsError(f"--embedder {error}") from None
    kind, _, rest = spec.partition(":")
    if kind == "local":
        return LocalEmbedder()
    if kind == "hash":
        return HashEmbedder(int(rest))
    model, _, dims = rest.partition(":")
    return OpenAIEmbedder(model, base_url=base_url, dimensions=int(dims) if dims else None)


def cmd_reembed(args: argparse.Namespace) -> int:
    from memora_pg.ops import reembed

    embedder = parse_embedder(args.embedder, args.base_url)

    async def go() -> int:
        async with _database(args) as database:
            with Progress("re-embedding") as bar:
                result = await reembed.reembed(
                    database,
                    embedder,
                    org_id=args.org_id,
                    batch_size=args.batch_size,
                    progress=bar.update,
                    restart=args.restart,
                )
        data = result.as_dict() if hasattr(result, "as_dict") else vars(result)
        _print(args, data, "re-embedded: " + ", ".join(f"{k}={v}" for k, v in data.items()))
        return 0

    return _run(go())


def cmd_text_search(args: argparse.Namespace) -> int:
    from memora_pg.ops import text_search

    async def go() -> int:
        async with _database(args) as database:
            if args.config is None:
                found = await text_search.current(database)
                _print(args, {"config": found}, found)
                return 0
            with Progress("rewriting full-text vectors") as bar:
                result = await text_search.switch(
                    database, args.config, batch_size=args.batch_size, progress=bar.update
                )
        data = result.as_dict()
        _print(args, data, f"text search: {result.previous} -> {result.config}, {result.rewritten} vectors rewritten")
        return 0

    return _run(go())


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    if path in (None, "-"):
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as handle:
        yield handle


def cmd_export(args: argparse.Namespace) -> int:
    from memora_pg.ops import transfer

    async def go() -> int:
        async with _database(args) as database:
            with Progress("exporting", sys.stderr) as bar, _output(args.output) as out:
                counts = await transfer.export(database, out, org_id=args.org_id, progress=bar.update)
        print(json.dumps(counts) if args.json else "exported: " + _counts(counts), file=sys.stderr)
        return 0

    return _run(go())


def cmd_import(args: argparse.Namespace) -> int:
    from memora_pg.ops import transfer

    if args.source_kind is not None:
        return _import_from(args)
    if args.input is None:
        raise SettingsError("memora-pg import: give an export file, or --from")

    async def go() -> int:
        async with _database(args, migrate=True) as database:
            with Progress("importing") as bar:
                source: Any = sys.stdin if args.input == "-" else Path(args.input)
                counts = await transfer.import_(database, source, progress=bar.update)
        _print(args, counts, "imported: " + _counts(counts))
        return 0

    return _run(go())


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


def cmd_report(args: argparse.Namespace) -> int:
    from memora_pg.ops import report

    async def go() -> Any:
        async with _database(args) as database:
            return await report.headline(database, org_id=args.org_id)

    found = asyncio.run(go())
    if args.html:
        Path(args.html).write_text(report.render_html(found), encoding="utf-8")
    if args.json:
        print(json.dumps(report.as_dict(found), indent=2, default=str))
    else:
        print(report.render_text(found))
        if args.html:
            print(f"HTML report written to {args.html}")
    return 0


def _build_progress(phase: str, done: int, total: int) -> None:
    """A running index build's progress, on stderr (stdout stays the command's answer)."""
    share = f" ({100 * done / total:.0f}%)" if total else ""
    print(f"building the HNSW index: {phase}, {done:,} of {total:,} rows{share}", file=sys.stderr, flush=True)


def cmd_index(args: argparse.Namespace) -> int:
    from memora_pg.ops import indexes

    async def go() -> int:
        async with _database(args) as database:
            if args.action == "build":
                await indexes.build_missing(database)
                found = await indexes.build_hnsw(database, progress=_build_progress)
            elif args.action == "drop":
                found = await indexes.drop_hnsw(database)
            else:
                found = await indexes.state(database)
            settings = database.settings
        text_ = f"index mode: {found.mode}"
        if found.mode == "hnsw":
            text_ += f" (m = {found.m}, ef_construction = {found.ef_construction})"
            if not found.valid:
                text_ += " INVALID: run memora-pg index build"
            elif not found.built_as(settings):
                text_ += (
                    f"; the settings ask for m = {settings.hnsw_m}, ef_construction = "
                    f"{settings.hnsw_ef_construction}: 'memora-pg index build' rebuilds it without blocking"
                )
        _print(args, dataclasses.asdict(found), text_)
        return 0

    return _run(go())


def _import_from(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.errors import InvalidInputError
    from memora_pg.ops.importers.langgraph import LangGraphSource, import_langgraph
    from memora_pg.ops.importers.langgraph_items import import_langgraph_items
    from memora_pg.ops.importers.mem0 import Mem0Source, import_mem0
    from memora_pg.ops.importers.mem0_verify import verify_mem0

    if not args.source_url:
        raise InvalidInputError(f"memora-pg import --from {args.source_kind} needs --source-url")
    mem0 = Mem0Source(
        url=args.source_url,
        collection=args.collection,
        schema=args.source_schema,
        history_db=Path(args.history_db) if args.history_db else None,
    )
    embedder = parse_embedder(args.embedder, args.base_url)

    # --verify only reads the target, so it refuses one not at head. An import writes, so it brings the
    # target to head, once the source answers (the importer's target_ready), and that is said when done;
    # a dry run writes nothing, and into a target without the schema every row would be new.
    async def go() -> int:
        if args.verify:
            async with _database(args) as database:
                return await imported(database)
        async with Database(settings=_settings(args)) as database:
            before = await _revision(database)
            try:
                return await imported(database)
            finally:
                # Said even when the import failed after migrating; a failure to read it never hides the
                # import's own error.
                with contextlib.suppress(MemoraPGError):
                    after = await _revision(database)
                    if after != before:
                        _say(f"migrated the schema {database.schema!r} from revision {before or 'none'} to {after}")

    async def imported(database: Database) -> int:
        if args.verify:
            if args.source_kind != "mem0":
                raise InvalidInputError("--verify compares a mem0 source")
            differences = await verify_mem0(database, mem0, embedder, deleted_history=args.deleted_history)
            _print(args, differences, "\n".join(differences) or "no differences")
            return 1 if differences else 0
        with Progress("importing") as bar:
            done: Any
            if args.source_kind == "mem0":
                done = await import_mem0(
                    database,
                    mem0,
                    embedder,
                    keep_vectors=args.keep_vectors,
                    deleted_history=args.deleted_history,
                    dry_run=args.dry_run,
                    batch_size=args.batch_size,
                    progress=bar.update,
                )
            else:
                if args.keep_vectors:
                    raise InvalidInputError("--keep-vectors: LangGraph's vectors are of fields, not of items")
                source = LangGraphSource(args.source_url, args.source_schema, args.org_id or "default")
                into = import_langgraph_items if args.into == "store" else import_langgraph
                done = await into(
                    database,
                    source,
                    embedder,
                    dry_run=args.dry_run,
                    batch_size=args.batch_size,
                    progress=bar.update,
                )
        data = done.as_dict()
        counts = {k: v for k, v in data.items() if k != "refused"}
        lines = [("would import: " if args.dry_run else "imported: ") + _counts(counts)]
        lines += [f"refused {r.source} {r.key}: {r.reason}" for r in done.refused]
        _print(args, data, "\n".join(lines))
        return 0

    return _run(go())
