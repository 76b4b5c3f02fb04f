"""Running the MCP server: over stdio for one local assistant, or over HTTP for many, by bearer token.

Over stdio the server acts for one organization and user, the ones the command line names (by
default the mem0 face's default collection, so what an assistant remembers is what
``Memory()`` sees). Over HTTP every request's token decides the organization, and every
transaction runs under row-level security for it (``memora.org_id``, set per transaction); with a
database role that does not own the tables, PostgreSQL itself keeps tenants apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from memora_pg.config import Settings
from memora_pg.db import Database
from memora_pg.embeddings import Embedder
from memora_pg.errors import ConfigurationError
from memora_pg.mcp import tokens
from memora_pg.mcp.server import Caller, build_server, token_caller
from memora_pg.mem0.llm import OpenAILLM
from memora_pg.mem0.memory import AsyncMemory

logger = logging.getLogger(__name__)

PATH = "/mcp"

# The addresses that answer on every interface: a server bound to one has no single URL of its own.
WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 (names them, binds nothing)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class DatabaseTokenVerifier:
    """The SDK's ``TokenVerifier``: a token is valid while ``access_tokens`` holds its hash unrevoked.

    A database failure is raised, not taken for a bad token: the client gets a 500, not a 401
    that would tell it to throw its token away.
    """

    def __init__(self, database: Database) -> None:
        self._database = database

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await tokens.bearer(self._database, token)
        if found is None:
            return None
        return AccessToken(
            token=token,
            client_id=found.token_id,
            scopes=[],
            subject=found.user_id,
            claims={"org_id": found.org_id, "user_id": found.user_id},
        )


@dataclass(frozen=True)
class Options:
    """What ``memora-pg mcp`` was asked for."""

    settings: Settings
    embedder: Embedder | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    org_id: str | None = None
    user_id: str | None = None


def base_url(options: Options, host: str, port: int) -> str:
    """The URL clients reach the server at: the public URL when one is set (without the ``/mcp`` path),
    else the address it binds."""
    public = options.settings.mcp_public_url
    if public:
        public = public.rstrip("/")
        return public.removesuffix(PATH)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"  # an IPv6 address in brackets


def transport_security(options: Options, host: str, port: int) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding protection: the Host and Origin headers a request may carry.

    The SDK turns it on by itself for a loopback address, allowing only loopback names; so behind a
    reverse proxy every request, whose Host is the proxy's name, is refused (421) unless that name is
    allowed. Here the names the settings give (``mcp_allowed_hosts``, the public URL's host) are allowed
    beside the bound address, and naming any turns the protection on for a server on every interface too.
    None leaves the SDK's own choice (off for a server bound to every interface with no name given).
    """
    settings = options.settings
    hosts = list(settings.mcp_allowed_hosts)
    origins = list(settings.mcp_allowed_origins)
    if settings.mcp_public_url:
        public = urlsplit(settings.mcp_public_url)
        hosts.append(public.netloc)
        origins.append(f"{public.scheme}://{public.netloc}")
    if host in LOOPBACK:
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    elif host not in WILDCARDS:
        address = f"[{host}]" if ":" in host else host
        hosts.append(f"{address}:{port}")
        origins.append(f"http://{address}:{port}")
    elif not hosts:
        return None
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def memory(options: Options) -> AsyncMemory:
    llm = OpenAILLM(options.llm_model, base_url=options.llm_base_url) if options.llm_model else None
    return AsyncMemory(settings=options.settings, embedder=options.embedder, llm=llm)


def stdio_server(options: Options) -> tuple[MCPServer, AsyncMemory]:
    """The server of one local caller: ``options.org_id`` (default: the mem0 face's default
    collection) and ``options.user_id`` (default ``default``) when a call names no one."""
    store = memory(options)
    caller = Caller(org_id=options.org_id or store.org_id, default_user=options.user_id or "default")
    store.for_organization(caller.org_id)  # checks the organization's id before the first call
    return build_server(store, caller=lambda: caller, can_infer=options.llm_model is not None), store


def http_server(options: Options, host: str, port: int) -> tuple[MCPServer, AsyncMemory]:
    """The server of many callers, each request's by its bearer token, under row-level security."""
    if options.org_id or options.user_id:
        raise ConfigurationError("over HTTP, each request's token names its organization and user: drop --org-id")
    store = memory(replace(options, settings=options.settings.model_copy(update={"row_level_security": True})))
    url = base_url(options, host, port)
    auth = AuthSettings(issuer_url=url, resource_server_url=url + PATH, validate_token_resource=False)
    server = build_server(
        store,
        caller=token_caller,
        can_infer=options.llm_model is not None,
        token_verifier=DatabaseTokenVerifier(store.database),
        auth=auth,
    )
    return server, store


async def serve_stdio(options: Options) -> None:
    server, store = stdio_server(options)
    try:
        await store.ensure_ready()
        await server.run_stdio_async()
    finally:
        await store.close()


async def serve_http(options: Options, host: str, port: int) -> None:
    import uvicorn

    server, store = http_server(options, host, port)
    try:
        await store.ensure_ready()
        app = server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            host=host,
            transport_security=transport_security(options, host, port),
        )
        config: Any = uvicorn.Config(app, host=host, port=port, log_level="warning")
        logger.info("memora-pg MCP server on http://%s:%d%s", host, port, PATH)
        await uvicorn.Server(config).serve()
    finally:
        await store.close()
