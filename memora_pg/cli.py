"""The ``memora-pg`` command line: parse arguments, build Settings, call one operation, print.

Every command takes ``--database-url`` (else ``MEMORA_PG_DATABASE_URL`` / ``DATABASE_URL``,
else the embedded server) and ``--schema``. Exit codes: 0 success, 1 a memora_pg error or a
failed check, 2 a usage error, 3 "not running" for ``server status``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from memora_pg import embedded
from memora_pg.config import Settings
from memora_pg.errors import MemoraPGError

EXAMPLES = {
    "demo": "memora-pg demo",
    "db": "memora-pg db upgrade",
    "server": "memora-pg server start",
    "doctor": "memora-pg doctor --json",
    "reembed": "memora-pg reembed --embedder openai:text-embedding-3-small:1536",
    "text-search": "memora-pg text-search german",
    "export": "memora-pg export --org-id ORG -o acme.jsonl",
    "import": "memora-pg import acme.jsonl",
    "report": "memora-pg report --html report.html",
    "index": "memora-pg index drop",
}


# -- helpers ------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    if getattr(args, "schema", None):
        overrides["db_schema"] = args.schema
    if getattr(args, "postgres_version", None):
        overrides["embedded_postgres_version"] = args.postgres_version
    if getattr(args, "data_dir", None):
        overrides["embedded_data_dir"] = Path(args.data_dir)
    return Settings(**overrides)


def _run(call: Coroutine[Any, Any, int]) -> int:
    return asyncio.run(call)


class Progress:
    """A one-line progress bar on stderr (only on a terminal); ``update(done, total)``."""

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

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else text)


# -- commands -----------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from memora_pg.demo import run_demo

    asyncio.run(run_demo(_settings(args)))
    return 0


def _alembic(args: argparse.Namespace) -> Any:
    from memora_pg import migrations

    settings = _settings(args)
    return migrations.MigrationOptions.from_settings(settings), settings


def _cmd_db(args: argparse.Namespace) -> int:
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
            async with engine.connect() as conn:
                current = await migrations.current_revision(conn, settings.db_schema)
            head = migrations.head_revision()
            _print(
                args,
                {"schema": settings.db_schema, "revision": current, "head": head},
                f"schema {settings.db_schema!r}: revision {current or 'none'} (head {head})",
            )
            return 0

    return _run(online())


def _cmd_server(args: argparse.Namespace) -> int:
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


def _cmd_doctor(args: argparse.Namespace) -> int:
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


def parse_embedder(spec: str, base_url: str | None = None) -> Any:
    """``local``, ``hash:DIM`` or ``openai:MODEL[:DIM]`` as an embedder."""
    from memora_pg.embeddings import HashEmbedder, LocalEmbedder, OpenAIEmbedder

    kind, _, rest = spec.partition(":")
    if kind == "local" and not rest:
        return LocalEmbedder()
    if kind == "hash" and rest.isdigit():
        return HashEmbedder(int(rest))
    if kind == "openai" and rest:
        model, _, dims = rest.partition(":")
        return OpenAIEmbedder(model, base_url=base_url, dimensions=int(dims) if dims.isdigit() else None)
    raise argparse.ArgumentTypeError(f"--embedder {spec!r}: use local, hash:DIM or openai:MODEL[:DIM]")


def _cmd_reembed(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import reembed

    embedder = parse_embedder(args.embedder, args.base_url)

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            bar = Progress("re-embedding")
            try:
                result = await reembed.reembed(
                    database,
                    embedder,
                    org_id=args.org_id,
                    batch_size=args.batch_size,
                    progress=bar.update,
                    restart=args.restart,
                )
            finally:
                bar.close()
        data = result.as_dict() if hasattr(result, "as_dict") else vars(result)
        _print(args, data, "re-embedded: " + ", ".join(f"{k}={v}" for k, v in data.items()))
        return 0

    return _run(go())


def _cmd_text_search(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import text_search

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            if args.config is None:
                found = await text_search.current(database)
                _print(args, {"config": found}, found)
                return 0
            bar = Progress("rewriting full-text vectors")
            try:
                result = await text_search.switch(
                    database, args.config, batch_size=args.batch_size, progress=bar.update
                )
            finally:
                bar.close()
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


def _cmd_export(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import transfer

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            bar = Progress("exporting", sys.stderr)
            try:
                with _output(args.output) as out:
                    counts = await transfer.export(database, out, org_id=args.org_id, progress=bar.update)
            finally:
                bar.close()
        print(json.dumps(counts) if args.json else "exported: " + _counts(counts), file=sys.stderr)
        return 0

    return _run(go())


def _cmd_import(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import transfer

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            bar = Progress("importing")
            try:
                await database.migrate()
                source: Any = sys.stdin if args.input == "-" else Path(args.input)
                counts = await transfer.import_(database, source, progress=bar.update)
            finally:
                bar.close()
        _print(args, counts, "imported: " + _counts(counts))
        return 0

    return _run(go())


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


def _cmd_report(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import report

    async def go() -> Any:
        async with Database(settings=_settings(args)) as database:
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


def _cmd_index(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import indexes

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
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


# -- the parser ---------------------------------------------------------------------------------


def _command(
    commands: Any, name: str, func: Callable[[argparse.Namespace], int], help_text: str, description: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        description=description,
        epilog=f"Example: {EXAMPLES[name]}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--database-url",
        help="PostgreSQL URL (default: MEMORA_PG_DATABASE_URL, DATABASE_URL, else the embedded server)",
    )
    parser.add_argument("--schema", help="schema of memora_pg's tables (default: memora)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memora-pg",
        description="An AI agent's long-term memory in one PostgreSQL database.",
        epilog="Example: memora-pg demo",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _command(
        commands,
        "demo",
        _cmd_demo,
        "tell a short story on the embedded server (no server or API key)",
        "Create an organization, a user and an agent, save a conversation with memories, record a "
        "contradiction, search, and print resolved memories, a history and a short report.",
    )

    db = _command(
        commands,
        "db",
        _cmd_db,
        "migrate the schema (alembic, with memora_pg's settings)",
        "upgrade [REV]  bring the schema to REV (default head)\n"
        "downgrade REV  go back to REV ('base' removes every table)\n"
        "current        print the schema's revision\n"
        "history        list the migrations\n"
        "sql [REV]      print the upgrade script for a DBA, without a database\n"
        "distribute     print the Citus create_distributed_table calls",
    )
    db.add_argument("action", choices=["upgrade", "downgrade", "current", "history", "sql", "distribute"])
    db.add_argument("revision", nargs="?", default="head")
    db.add_argument("--from", dest="start", help="with sql: the revision the database is at")
    db.add_argument("--app-role", help="with distribute: also grant this (non-owner) role what it needs")

    server = _command(
        commands,
        "server",
        _cmd_server,
        "start, stop or locate the embedded PostgreSQL",
        "Manage the embedded PostgreSQL (16 or 18, with pgvector) that memora_pg uses when no "
        "database URL is set. 'url' prints a URL for psql or a BI tool (drop '+asyncpg').",
    )
    server.add_argument("action", choices=["start", "stop", "status", "url"])
    server.add_argument("--postgres-version", type=int, choices=[16, 18])
    server.add_argument("--data-dir", help="data directory (default: ~/.local/share/memora_pg)")

    doctor = _command(
        commands,
        "doctor",
        _cmd_doctor,
        "check the server, pgvector, schema and indexes",
        "Check the server and pgvector versions, that the schema is at head, the embedding "
        "dimension, that the HNSW and btree indexes exist and are used; print what to fix. "
        "Exits 1 when a check fails.",
    )
    doctor.add_argument("--embedding-dimensions", type=int, help="the dimension your embedder makes")

    reembed = _command(
        commands,
        "reembed",
        _cmd_reembed,
        "switch to another embedding model or dimension",
        "Re-embed every searchable memory (and AutoGen entry) in batches. Resumable: run it again "
        "after an interruption and it continues. Searches keep using the old vectors until the "
        "switch completes; the HNSW index is rebuilt for the new dimension.",
    )
    reembed.add_argument("--embedder", required=True, help="local | hash:DIM | openai:MODEL[:DIM]")
    reembed.add_argument("--base-url", help="OpenAI-compatible base URL for openai:MODEL")
    reembed.add_argument("--org-id", help="only this organization (same dimension only)")
    reembed.add_argument("--batch-size", type=int, default=256)
    reembed.add_argument(
        "--restart", action="store_true", help="drop an unfinished re-embedding to another target and start over"
    )

    search_config = _command(
        commands,
        "text-search",
        _cmd_text_search,
        "show or switch the text-search configuration of the lexical arm",
        "Without CONFIG, print the configuration the database's full-text vectors are written with. With "
        "CONFIG (english, simple, german, spanish, ... : any PostgreSQL text-search configuration), make it "
        "the database's and rewrite the stored vectors in batches. Resumable: run it again after an "
        "interruption and it continues.",
    )
    search_config.add_argument("config", nargs="?", help="the configuration to switch to")
    search_config.add_argument("--batch-size", type=int, default=2000)

    export = _command(
        commands,
        "export",
        _cmd_export,
        "write an organization (or all) as JSON Lines",
        "Stream organizations, users, agents, interactions with messages, memories with "
        "sources and vectors, contradiction edges, history and AutoGen entries, ids preserved.",
    )
    export.add_argument("--org-id", help="only this organization")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")

    load = _command(
        commands,
        "import",
        _cmd_import,
        "read a JSON Lines export into this database",
        "Import an export in one transaction with batched inserts; nothing is written if any "
        "line is bad or a record exists already.",
    )
    load.add_argument("input", help="the export file, or - for stdin")

    index = _command(
        commands,
        "index",
        _cmd_index,
        "switch between the hnsw and exact index modes",
        "hnsw: the HNSW index is kept up to date on every write; organization-wide searches use it.\n"
        "exact: no HNSW index; writes are far faster, user-scoped searches are unchanged (always exact),\n"
        "organization-wide searches scan exactly. 'build' and 'drop' use CONCURRENTLY: no write waits.\n"
        "'build' also rebuilds an index built with other parameters than MEMORA_PG_HNSW_M and\n"
        "MEMORA_PG_HNSW_EF_CONSTRUCTION (beside the old one, which serves searches until the new one\n"
        "replaces it), printing its progress on stderr.",
    )
    index.add_argument("action", choices=["status", "build", "drop"])

    report = _command(
        commands,
        "report",
        _cmd_report,
        "print headline numbers; write an HTML report",
        "Counts, contradiction rate, orphaned memories, growth and the timeline of memory versions (both clocks),"
        " from the SQL reporting views.",
    )
    report.add_argument("--org-id", help="only this organization")
    report.add_argument("--html", help="also write a self-contained HTML report with charts to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except MemoraPGError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
