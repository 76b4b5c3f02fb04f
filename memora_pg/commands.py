"""The ``memora-pg`` commands: each builds Settings from its arguments, calls one operation and prints
(``memora_pg.cli`` parses the arguments and picks the command)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TextIO

from memora_pg import driver, embedded
from memora_pg.config import Settings

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


def cmd_reembed(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import reembed

    embedder = parse_embedder(args.embedder, args.base_url)

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
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
    from memora_pg.db import Database
    from memora_pg.ops import text_search

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
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
    from memora_pg.db import Database
    from memora_pg.ops import transfer

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            with Progress("exporting", sys.stderr) as bar, _output(args.output) as out:
                counts = await transfer.export(database, out, org_id=args.org_id, progress=bar.update)
        print(json.dumps(counts) if args.json else "exported: " + _counts(counts), file=sys.stderr)
        return 0

    return _run(go())


def cmd_import(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.ops import transfer

    if args.source_kind is not None:
        return _import_from(args)
    if args.input is None:
        raise argparse.ArgumentTypeError("memora-pg import: give an export file, or --from")

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
            with Progress("importing") as bar:
                await database.migrate()
                source: Any = sys.stdin if args.input == "-" else Path(args.input)
                counts = await transfer.import_(database, source, progress=bar.update)
        _print(args, counts, "imported: " + _counts(counts))
        return 0

    return _run(go())


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


def cmd_report(args: argparse.Namespace) -> int:
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


def cmd_index(args: argparse.Namespace) -> int:
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


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--http {value!r}: use HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from memora_pg.mcp import run, tokens
    except ImportError as error:
        print(f"error: memora-pg mcp needs the MCP SDK: pip install 'memora-pg[mcp]' ({error})", file=sys.stderr)
        return 1
    if args.mcp_action == "token":
        return _run(_mcp_token(args, tokens))
    options = run.Options(
        settings=_settings(args),
        embedder=parse_embedder(args.embedder, args.embedder_base_url),
        llm_model=args.llm_model,
        llm_base_url=args.llm_base_url,
        org_id=args.org_id,
        user_id=args.user_id,
    )
    if args.http:
        host, port = _host_port(args.http)
        asyncio.run(run.serve_http(options, host, port))
    else:
        asyncio.run(run.serve_stdio(options))
    return 0


async def _mcp_token(args: argparse.Namespace, tokens: Any) -> int:
    from memora_pg.db import Database

    async with Database(settings=_settings(args)) as database:
        await database.ensure_schema(database.settings.embedding_dimensions)
        action = args.token_action
        if action == "create":
            token, info = await tokens.mint(
                database, org_id=args.token_org_id, user_id=args.token_user_id, name=args.token_name
            )
            data = {"token": token, **dataclasses.asdict(info)}
            bound = f", user {info.user_id}" if info.user_id else ""
            _print(args, data, f"{token}\n(token {info.token_id} for organization {info.org_id}{bound}: shown once)")
        elif action == "list":
            found = await tokens.listed(database, org_id=args.token_org_id)
            lines = [
                f"{t.token_id}  {t.org_id}  {t.user_id or '-'}  {t.name or '-'}  created {t.created_at:%Y-%m-%d %H:%M}"
                + (f"  REVOKED {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "")
                for t in found
            ]
            _print(args, [dataclasses.asdict(t) for t in found], "\n".join(lines) or "no access tokens")
        else:
            info = await tokens.revoke(database, args.token_id)
            _print(args, dataclasses.asdict(info), f"revoked {info.token_id} ({info.org_id})")
    return 0


def _import_from(args: argparse.Namespace) -> int:
    from memora_pg.db import Database
    from memora_pg.errors import InvalidInputError
    from memora_pg.ops.importers.langgraph import LangGraphSource, import_langgraph
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

    async def go() -> int:
        async with Database(settings=_settings(args)) as database:
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
                        raise InvalidInputError("--keep-vectors: LangGraph's vectors are of fields, not of entries")
                    source = LangGraphSource(args.source_url, args.source_schema, args.org_id or "default")
                    done = await import_langgraph(
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
