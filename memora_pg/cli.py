"""The ``memora-pg`` command line: a thin shell that parses arguments, builds Settings and calls one thing."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from memora_pg import embedded
from memora_pg.config import Settings
from memora_pg.errors import MemoraPGError


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {}
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    return Settings(**overrides)


def _cmd_demo(args: argparse.Namespace) -> int:
    from memora_pg.demo import run_demo

    asyncio.run(run_demo(_settings(args)))
    return 0


def _cmd_server(args: argparse.Namespace) -> int:
    settings = _settings(args)
    base, version = settings.embedded_data_dir, settings.embedded_postgres_version
    if args.action == "start":
        print(embedded.ensure_running(base, version))
        return 0
    if args.action == "stop":
        print("stopped" if embedded.stop(base, version) else "not running")
        return 0
    url = embedded.status(base, version)
    if url is None:
        print("not running")
        return 3
    print(url if args.action == "url" else f"running: {url}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memora-pg",
        description="An AI agent's long-term memory in one PostgreSQL database.",
        epilog="Example: memora-pg demo",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo",
        help="run a short story on the embedded server (no server or API key needed)",
        description="Create an organization, a user and agents, save conversations with memories, "
        "record a contradiction, search and print what memora_pg knows.",
        epilog="Example: memora-pg demo --database-url postgresql://user:pass@localhost/app",
    )
    demo.add_argument("--database-url", help="run on this server instead of the embedded one")
    demo.set_defaults(func=_cmd_demo)

    server = commands.add_parser(
        "server",
        help="start, stop or locate the embedded PostgreSQL",
        description="Manage the embedded PostgreSQL 16/18 with pgvector that memora_pg uses when no URL is set.",
        epilog="Example: psql \"$(memora-pg server url | sed 's/+asyncpg//')\"",
    )
    server.add_argument("action", choices=["start", "stop", "status", "url"])
    server.set_defaults(func=_cmd_server)
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
