"""The ``memora-pg`` command line: parse arguments, build Settings, call one operation, print.

Every command takes ``--database-url`` (else ``MEMORA_PG_DATABASE_URL`` / ``DATABASE_URL``,
else the embedded server) and ``--schema``. Exit codes: 0 success, 1 a memora_pg error or a
failed check, 2 a usage error or a schema not at head, 3 "not running" for ``server status``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from pydantic import ValidationError

from memora_pg import commands, mcp_commands
from memora_pg.config import Settings, problems
from memora_pg.errors import MemoraPGError, SchemaNotMigratedError, SettingsError

EXAMPLES = {
    "demo": "memora-pg demo",
    "db": "memora-pg db upgrade",
    "server": "memora-pg server start",
    "doctor": "memora-pg doctor --json",
    "reembed": "memora-pg reembed --embedder openai:text-embedding-3-small:1536",
    "text-search": "memora-pg text-search german",
    "export": "memora-pg export --org-id ORG -o acme.jsonl",
    "import": "memora-pg import acme.jsonl   |   memora-pg import --from mem0 --source-url URL --history-db H.db",
    "report": "memora-pg report --html report.html",
    "index": "memora-pg index drop",
    "mcp": "memora-pg mcp --http 127.0.0.1:8765   (after: memora-pg mcp token create --org-id acme)",
}


# -- the parser ---------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line, as every other error of the command line: the
    usage it would print before them is one ``--help`` away."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _command(
    subparsers: Any, name: str, func: Callable[[argparse.Namespace], int], help_text: str, description: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=description,
        epilog=f"Example: {EXAMPLES[name]}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common_options(parser)
    parser.set_defaults(func=func)
    return parser


def _common_options(parser: argparse.ArgumentParser, *, again: bool = False) -> None:
    """``--database-url``, ``--schema`` and ``--json``. ``again``: on a nested subcommand, where they may
    come after it too (``mcp token create --database-url URL``); there they default to nothing, so that
    one given before the subcommand is kept."""
    unset: Any = argparse.SUPPRESS if again else None
    parser.add_argument(
        "--database-url",
        default=unset,
        help="PostgreSQL URL (default: MEMORA_PG_DATABASE_URL, DATABASE_URL, else the embedded server)",
    )
    parser.add_argument("--schema", default=unset, help="schema of memora_pg's tables (default: memora)")
    parser.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS if again else False, help="machine-readable output"
    )
    _verbose_option(parser, again=True)


def _verbose_option(parser: argparse.ArgumentParser, *, again: bool = False) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS if again else False,
        help="also print the log lines and warnings of memora_pg's dependencies (the embedded server's start...)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="memora-pg",
        description="An AI agent's long-term memory in one PostgreSQL database.",
        epilog="Example: memora-pg demo",
    )
    _verbose_option(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _command(
        subparsers,
        "demo",
        commands.cmd_demo,
        "tell a short story on the embedded server (no server or API key)",
        "Create an organization, a user and an agent, save a conversation with memories, record a "
        "contradiction, search, and print resolved memories, a history and a short report.",
    )

    db = _command(
        subparsers,
        "db",
        commands.cmd_db,
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
        subparsers,
        "server",
        commands.cmd_server,
        "start, stop or locate the embedded PostgreSQL",
        "Manage the embedded PostgreSQL (16 or 18, with pgvector) that memora_pg uses when no "
        "database URL is set. 'url' prints a URL for psql or a BI tool (drop '+asyncpg').",
    )
    server.add_argument("action", choices=["start", "stop", "status", "url"])
    server.add_argument("--postgres-version", type=int, choices=[16, 18])
    server.add_argument("--data-dir", help="data directory (default: ~/.local/share/memora_pg)")

    doctor = _command(
        subparsers,
        "doctor",
        commands.cmd_doctor,
        "check the server, pgvector, schema and indexes",
        "Check the server and pgvector versions, that the schema is at head, the embedding "
        "dimension, that the HNSW and btree indexes exist and are used; print what to fix. "
        "Exits 1 when a check fails.",
    )
    doctor.add_argument("--embedding-dimensions", type=int, help="the dimension your embedder makes")

    reembed = _command(
        subparsers,
        "reembed",
        commands.cmd_reembed,
        "switch to another embedding model or dimension",
        "Re-embed every searchable memory (and AutoGen entry) in batches. Resumable: run it again "
        "after an interruption and it continues. Searches keep using the old vectors until the "
        "switch completes; the HNSW index is rebuilt for the new dimension.",
    )
    reembed.add_argument(
        "--embedder", required=True, type=commands.embedder_spec, help="local | hash:DIM | openai:MODEL[:DIM]"
    )
    reembed.add_argument("--base-url", help="OpenAI-compatible base URL for openai:MODEL")
    reembed.add_argument("--org-id", help="only this organization (same dimension only)")
    reembed.add_argument("--batch-size", type=int, default=256)
    reembed.add_argument(
        "--restart", action="store_true", help="drop an unfinished re-embedding to another target and start over"
    )

    search_config = _command(
        subparsers,
        "text-search",
        commands.cmd_text_search,
        "show or switch the text-search configuration of the lexical arm",
        "Without CONFIG, print the configuration the database's full-text vectors are written with. With "
        "CONFIG (english, simple, german, spanish, ... : any PostgreSQL text-search configuration), make it "
        "the database's and rewrite the stored vectors in batches. Resumable: run it again after an "
        "interruption and it continues.",
    )
    search_config.add_argument("config", nargs="?", help="the configuration to switch to")
    search_config.add_argument("--batch-size", type=int, default=2000)

    export = _command(
        subparsers,
        "export",
        commands.cmd_export,
        "write an organization (or all) as JSON Lines",
        "Stream organizations, users, agents, interactions with messages, memories with "
        "sources and vectors, contradiction edges, history and AutoGen entries, ids preserved.",
    )
    export.add_argument("--org-id", help="only this organization")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")

    load = _command(
        subparsers,
        "import",
        commands.cmd_import,
        "read a JSON Lines export into this database",
        "Import an export in one transaction with batched inserts; nothing is written if any "
        "line is bad or a record exists already.",
    )
    load.add_argument("input", nargs="?", help="the export file, or - for stdin (not with --from)")
    load.add_argument(
        "--from",
        dest="source_kind",
        choices=["mem0", "langgraph"],
        help="bring in another store's memories instead of an export: mem0 (its pgvector collection and history),"
        " langgraph (a PostgresStore's items)",
    )
    load.add_argument("--source-url", help="--from: the source's PostgreSQL URL (only read)")
    load.add_argument("--collection", default="mem0", help="--from mem0: its collection (table); default mem0")
    load.add_argument("--source-schema", default="public", help="--from: the source's schema (mem0: its collection's)")
    load.add_argument("--history-db", help="--from mem0: its SQLite history file (history_db_path)")
    load.add_argument(
        "--into",
        choices=["store", "autogen"],
        default="store",
        help="--from langgraph: as the items of memora_pg's LangGraph store, MemoraStore (store, the default), or "
        "as AutoGen-face entries (autogen)",
    )
    load.add_argument("--org-id", help="--from langgraph: the organization of the items (default: 'default')")
    load.add_argument(
        "--embedder",
        default="local",
        type=commands.embedder_spec,
        help="--from: the target's embedder: local (default), hash:DIM, openai:MODEL[:DIM]",
    )
    load.add_argument("--base-url", help="--from: an OpenAI-compatible endpoint for --embedder openai:...")
    load.add_argument(
        "--keep-vectors",
        action="store_true",
        help="--from: copy the source's vectors, once a sample shows the embedder makes the same ones",
    )
    load.add_argument(
        "--deleted-history",
        action="store_true",
        help="--from mem0: also the history of memories mem0 deleted (a history file of this collection alone)",
    )
    load.add_argument("--dry-run", action="store_true", help="--from: count and check, write nothing")
    load.add_argument(
        "--verify", action="store_true", help="--from mem0: compare the source with memora_pg, write nothing"
    )
    load.add_argument("--batch-size", type=int, default=500, help="--from: rows per transaction (default 500)")

    index = _command(
        subparsers,
        "index",
        commands.cmd_index,
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
        subparsers,
        "report",
        commands.cmd_report,
        "print headline numbers; write an HTML report",
        "Counts, contradiction rate, orphaned memories, growth and the timeline of memory versions (both clocks),"
        " from the SQL reporting views.",
    )
    report.add_argument("--org-id", help="only this organization")
    report.add_argument("--html", help="also write a self-contained HTML report with charts to this file")

    mcp = _command(
        subparsers,
        "mcp",
        mcp_commands.cmd_mcp,
        "serve memory to agents over the Model Context Protocol (needs memora_pg[mcp])",
        "Without --http: over stdio, for one local assistant, acting for --org-id and --user-id.\n"
        "With --http HOST:PORT: streamable HTTP at /mcp for many clients; each request's bearer token\n"
        "(memora-pg mcp token create) decides its organization, under row-level security.",
    )
    mcp.add_argument(
        "--http", metavar="HOST:PORT", type=mcp_commands.host_port, help="serve streamable HTTP instead of stdio"
    )
    mcp.add_argument(
        "--public-url",
        help="--http: the URL clients reach the server at through a proxy, for the OAuth metadata; its host is "
        "allowed (MEMORA_PG_MCP_PUBLIC_URL)",
    )
    mcp.add_argument(
        "--allowed-host",
        action="append",
        metavar="HOST[:PORT]",
        help="--http: a Host header to answer besides the bound address (a reverse proxy's name; HOST:* for any "
        "port); repeatable (MEMORA_PG_MCP_ALLOWED_HOSTS, comma-separated)",
    )
    mcp.add_argument(
        "--allowed-origin",
        action="append",
        metavar="URL",
        help="--http: an Origin header to accept from browser clients; repeatable (MEMORA_PG_MCP_ALLOWED_ORIGINS)",
    )
    mcp.add_argument(
        "--allow-rls-bypass",
        action="store_true",
        help="--http: serve even as a role row-level security does not restrict (a superuser or the tables' "
        "owner), where every token sees every organization",
    )
    mcp.add_argument("--org-id", help="stdio: the organization (default: the mem0 face's, mem0:mem0)")
    mcp.add_argument("--user-id", help="stdio: the user of calls that name no one (default: default)")
    mcp.add_argument(
        "--embedder",
        default="local",
        type=commands.embedder_spec,
        help="local (default), hash:DIM or openai:MODEL[:DIM] (OPENAI_API_KEY)",
    )
    mcp.add_argument("--embedder-base-url", help="an OpenAI-compatible endpoint for --embedder openai:...")
    mcp.add_argument(
        "--llm-model", help="a chat model for add_memory's fact extraction (OpenAI-compatible; OPENAI_API_KEY)"
    )
    mcp.add_argument("--llm-base-url", help="the endpoint of --llm-model (default: OpenAI's)")
    token_commands = mcp.add_subparsers(dest="mcp_action", metavar="token")
    token = token_commands.add_parser("token", help="create, list or revoke the HTTP transport's access tokens")
    token_actions = token.add_subparsers(dest="token_action", required=True, metavar="ACTION")
    create = token_actions.add_parser("create", help="a new token (printed once; only its hash is kept)")
    create.add_argument("--org-id", dest="token_org_id", required=True, help="the organization it acts for")
    create.add_argument("--user-id", dest="token_user_id", help="bind it to this user")
    create.add_argument("--name", dest="token_name", default="", help="a label, e.g. who holds it")
    listing = token_actions.add_parser("list", help="tokens and their state, never the tokens themselves")
    listing.add_argument("--org-id", dest="token_org_id", help="only this organization's")
    revoke = token_actions.add_parser("revoke", help="revoke a token by its id (from list)")
    revoke.add_argument("token_id")
    for action in (create, listing, revoke):
        _common_options(action, again=True)
    return parser


def quiet_unless_verbose(verbose: bool) -> None:
    """A run prints what it was asked for, and the warnings and errors of memora_pg; ``-v`` adds the
    dependencies' log lines (the embedded server's start, the MCP SDK's sessions) and warnings.

    The root logger is configured before any dependency can: the MCP SDK configures it at INFO on its
    own unless it has a handler already.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        warnings.filterwarnings("ignore")
        warnings.filterwarnings("default", module=r"memora_pg(\.|$)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_unless_verbose(args.verbose)
    try:
        code: int = args.func(args)
    except ValidationError as error:
        if error.title != Settings.__name__:
            raise
        # A bad value of a setting is a usage error: one line for each, naming it.
        for line in problems(error):
            print(f"error: {line}", file=sys.stderr)
        return 2
    except MemoraPGError as error:
        print(f"error: {error}", file=sys.stderr)
        # A misspelt setting, or a database this command cannot use as it stands (upgrade it first, or
        # name the right one): like a bad argument, fixed in how the command was called.
        return 2 if isinstance(error, SettingsError | SchemaNotMigratedError) else 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
