"""memora_pg as an MCP server (``memora-pg mcp``; needs ``memora_pg[mcp]``): the mem0-style memory's
tools over stdio or streamable HTTP, with bearer tokens that decide each request's organization."""

from __future__ import annotations

from memora_pg.mcp.server import Caller, build_server

__all__ = ["Caller", "build_server"]
