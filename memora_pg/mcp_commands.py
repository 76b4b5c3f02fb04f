"""The ``memora-pg mcp`` commands: the MCP server over stdio or HTTP, and its access tokens (``memora_pg.cli``
parses the arguments; the shared helpers are :mod:`memora_pg.commands`')."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from memora_pg.commands import _database, _print, _run, _settings, _warn, parse_embedder


def host_port(value: str) -> tuple[str, int]:
    """``--http``'s ``HOST:PORT`` (an IPv6 host in brackets), checked as the parser reads it."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{value!r}: use HOST:PORT, e.g. 127.0.0.1:8765")
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
    bypass = asyncio.run(_mcp_database_ready(args, options.embedder))
    if args.http:
        host, port = args.http
        _check_http(options, host, bypass, allow_bypass=args.allow_rls_bypass)
        asyncio.run(run.serve_http(options, host, port))
    else:
        if bypass and options.settings.url() is not None:
            _warn(
                f"the database role is {bypass}, so row-level security does not restrict it; over stdio this "
                "server acts for --org-id alone"
            )
        asyncio.run(run.serve_stdio(options))
    return 0


async def _mcp_database_ready(args: argparse.Namespace, embedder: Any) -> str | None:
    """The schema brought to head before the server starts (said on stderr), and why row-level security
    does not restrict the database role, if it does not."""
    from memora_pg import catalog

    async with (
        _database(args, migrate=True, dimensions=lambda: embedder.dimensions) as database,
        database.transaction(read_only=True) as conn,
    ):
        return await catalog.row_security_bypass(conn, database.schema)


def _check_http(options: Any, host: str, bypass: str | None, *, allow_bypass: bool) -> None:
    """Refuse to serve many tenants as a role that sees every tenant's rows; warn of a public address
    the OAuth metadata cannot name."""
    from memora_pg.errors import ConfigurationError
    from memora_pg.mcp import run

    if bypass and not allow_bypass:
        raise ConfigurationError(
            f"the database role is {bypass}, so row-level security does not restrict it and every token would "
            "see every organization: connect as a role that does not own the tables (docs/security.md), or "
            "pass --allow-rls-bypass"
        )
    if host in run.WILDCARDS and not options.settings.mcp_public_url:
        _warn(
            f"serving on every interface ({host or '*'}) without --public-url: the OAuth metadata advertises "
            "the bound address, which clients cannot reach; give the URL clients use"
        )


async def _mcp_token(args: argparse.Namespace, tokens: Any) -> int:
    action = args.token_action
    async with _database(args, migrate=action == "create") as database:
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
