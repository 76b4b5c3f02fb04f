"""``memora-pg mcp``, driven by the MCP SDK's own client: every tool in process, then the real transports
(a stdio subprocess, and the streamable HTTP server as a subprocess with bearer tokens, as a role that
row-level security restricts)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import Settings
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import DatabaseError, InvalidInputError, NotFoundError
from memora_pg.mcp import Caller, build_server, tokens
from memora_pg.mem0.llm import OpenAILLM
from memora_pg.mem0.memory import AsyncMemory
from memora_pg.migrations import MigrationOptions, upgrade
from tests.fake_openai import FakeOpenAIServer

ORG = "mcp-org"
TOOLS = {
    "add_memory",
    "search_memories",
    "get_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "delete_all_memories",
    "memory_history",
}


def _result(result: CallToolResult) -> Any:
    """A tool's structured answer; the test fails with the tool's message if it was an error."""
    assert not result.is_error, _message(result)
    return result.structured_content


def _message(result: CallToolResult) -> str:
    return " ".join(part.text for part in result.content if isinstance(part, TextContent))


@pytest.fixture
async def memory(database_url: str) -> AsyncIterator[AsyncMemory]:
    settings = Settings(database_url=database_url, db_schema="memora")
    store = AsyncMemory(settings=settings, embedder=HashEmbedder(384))
    yield store
    await store.close()


async def _every_tool(client: Client) -> None:
    """Every tool, through whichever transport ``client`` speaks; the organization is left empty."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    hints = {name: tool.annotations for name, tool in listed.items() if tool.annotations is not None}
    assert hints["search_memories"].read_only_hint is True
    assert hints["delete_all_memories"].destructive_hint is True
    assert hints["add_memory"].destructive_hint is False
    assert "query" in listed["search_memories"].input_schema["required"]
    assert all(tool.description for tool in listed.values())

    ann = {"user_id": "ann"}
    added = _result(await client.call_tool("add_memory", {"text": "Ann drinks green tea every morning", **ann}))
    (tea,) = added["results"]
    assert tea["event"] == "ADD"
    after_tea = datetime.now(timezone.utc)
    sister = {"text": "Ann's sister lives in Lisbon", "metadata": {"k": 1}, **ann}
    _result(await client.call_tool("add_memory", sister))
    _result(await client.call_tool("add_memory", {"text": "Bob plays chess", "user_id": "bob"}))

    found = _result(await client.call_tool("search_memories", {"query": "what does Ann drink?", "top_k": 1, **ann}))
    assert [hit["id"] for hit in found["results"]] == [tea["id"]]
    bobs = _result(await client.call_tool("search_memories", {"query": "chess", "user_id": "bob"}))
    assert [hit["memory"] for hit in bobs["results"]] == ["Bob plays chess"]
    listed_anns = _result(await client.call_tool("get_memories", {"filters": {"k": {"eq": 1}}, **ann}))
    assert [m["memory"] for m in listed_anns["results"]] == ["Ann's sister lives in Lisbon"]
    assert len(_result(await client.call_tool("get_memories", ann))["results"]) == 2

    one = _result(await client.call_tool("get_memory", {"memory_id": tea["id"]}))
    assert one["memory"] == "Ann drinks green tea every morning"
    _result(await client.call_tool("update_memory", {"memory_id": tea["id"], "text": "Ann drinks black coffee"}))
    assert _result(await client.call_tool("get_memory", {"memory_id": tea["id"]}))["memory"] == (
        "Ann drinks black coffee"
    )
    # as_of: the memories the store held then (by the system clock), before the second one came
    then = {"as_of": after_tea.isoformat(), "as_of_clock": "system", **ann}
    assert [m["id"] for m in _result(await client.call_tool("get_memories", then))["results"]] == [tea["id"]]
    history = _result(await client.call_tool("memory_history", {"memory_id": tea["id"]}))
    assert [(e["event"], e["new_memory"]) for e in history["history"]] == [
        ("ADD", "Ann drinks green tea every morning"),
        ("UPDATE", "Ann drinks black coffee"),
    ]

    _result(await client.call_tool("delete_memory", {"memory_id": tea["id"]}))
    assert (await client.call_tool("get_memory", {"memory_id": tea["id"]})).is_error
    events = _result(await client.call_tool("memory_history", {"memory_id": tea["id"]}))["history"]
    assert events[-1]["event"] == "DELETE"
    _result(await client.call_tool("delete_all_memories", {"user_id": "bob"}))
    assert _result(await client.call_tool("get_memories", {"user_id": "bob"}))["results"] == []
    assert len(_result(await client.call_tool("get_memories", ann))["results"]) == 1
    _result(await client.call_tool("delete_all_memories", ann))
    assert _result(await client.call_tool("get_memories", ann))["results"] == []


async def test_every_tool_in_process(memory: AsyncMemory) -> None:
    server = build_server(memory, caller=lambda: Caller(org_id=ORG, default_user="ann"), can_infer=False)
    async with Client(server) as client:
        await _every_tool(client)
        # the default user applies only when a call names no one
        _result(await client.call_tool("add_memory", {"text": "Ann bikes to work"}))
        _result(await client.call_tool("add_memory", {"text": "Cy bikes too", "user_id": "cy"}))
        found = _result(await client.call_tool("search_memories", {"query": "bikes"}))
        assert [hit["memory"] for hit in found["results"]] == ["Ann bikes to work"]


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("add_memory", {}, "exactly one of text or messages"),
        ("add_memory", {"text": "x", "messages": [{"role": "user", "content": "y"}]}, "exactly one"),
        ("add_memory", {"text": "x", "infer": True}, "no language model"),
        ("add_memory", {"text": "nul \x00 byte"}, "InvalidInputError"),
        ("add_memory", {"messages": [{"role": "robot", "content": "y"}]}, "role"),
        ("search_memories", {"query": "   "}, "Invalid query"),
        ("search_memories", {"query": "x", "top_k": 0}, "top_k"),
        ("search_memories", {"query": "x", "filters": {"k": {"near": 1}}}, "DuragValidationError"),
        ("search_memories", {"query": "x", "user_id": "a", "filters": {"user_id": "b"}}, "given twice"),
        ("get_memories", {"as_of": "not a time"}, "as_of"),
        ("get_memory", {"memory_id": "not-an-id"}, "No memory with id"),
        ("get_memory", {}, "memory_id"),
        ("update_memory", {"memory_id": "00000000-0000-0000-0000-000000000000", "text": "x"}, "No memory"),
        ("update_memory", {"memory_id": "00000000-0000-0000-0000-000000000000"}, "text, metadata or both"),
        ("delete_memory", {"memory_id": "00000000-0000-0000-0000-000000000000"}, "No memory"),
        ("memory_history", {"memory_id": "00000000-0000-0000-0000-000000000000"}, "No memory"),
        ("no_such_tool", {}, "Unknown tool"),
    ],
)
async def test_bad_calls_are_tool_errors(memory: AsyncMemory, tool: str, arguments: dict[str, Any], says: str) -> None:
    """Bad arguments come back as a tool error naming the problem, never a traceback, and write nothing."""
    server = build_server(memory, caller=lambda: Caller(org_id=ORG, default_user="ann"), can_infer=False)
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
        assert result.is_error
        assert says in _message(result)
        assert "Traceback" not in _message(result)
        assert _result(await client.call_tool("get_memories", {}))["results"] == []


async def test_a_bound_user_cannot_reach_past_itself(memory: AsyncMemory) -> None:
    """A caller bound to a user (a token bound to one) adds, finds and changes only that user's memories."""
    owner = build_server(memory, caller=lambda: Caller(org_id=ORG), can_infer=False)
    bound = build_server(memory, caller=lambda: Caller(org_id=ORG, bound_user="ann"), can_infer=False)
    async with Client(owner) as admin, Client(bound) as ann:
        bobs = _result(await admin.call_tool("add_memory", {"text": "Bob's PIN is 1234", "user_id": "bob"}))
        bob_id = bobs["results"][0]["id"]
        _result(await ann.call_tool("add_memory", {"text": "Ann likes jazz"}))
        assert (await ann.call_tool("add_memory", {"text": "x", "user_id": "bob"})).is_error
        assert (await ann.call_tool("search_memories", {"query": "PIN", "filters": {"user_id": "bob"}})).is_error
        assert (await ann.call_tool("search_memories", {"query": "PIN", "filters": {"user_id": "*"}})).is_error
        hits = _result(await ann.call_tool("search_memories", {"query": "jazz PIN"}))
        assert [h["memory"] for h in hits["results"]] == ["Ann likes jazz"]
        for tool in ("get_memory", "delete_memory", "memory_history"):
            assert "No memory" in _message(await ann.call_tool(tool, {"memory_id": bob_id}))
        assert (await ann.call_tool("update_memory", {"memory_id": bob_id, "text": "PIN 0000"})).is_error
        assert (await ann.call_tool("delete_all_memories", {"user_id": "bob"})).is_error
        assert _result(await admin.call_tool("get_memory", {"memory_id": bob_id}))["memory"] == "Bob's PIN is 1234"


async def test_add_with_inference_uses_the_language_model(database_url: str) -> None:
    with FakeOpenAIServer() as llm:
        llm.script_chat(
            {"facts": ["Is vegetarian", "Lives in Oslo"]},
            {"memory": [{"id": "0", "text": t, "event": "ADD"} for t in ("Is vegetarian", "Lives in Oslo")]},
        )
        model = OpenAILLM("fake-model", api_key="sk-test", base_url=llm.base_url, timeout=2)
        settings = Settings(database_url=database_url, db_schema="memora")
        store = AsyncMemory(settings=settings, embedder=HashEmbedder(384), llm=model)
        server = build_server(store, caller=lambda: Caller(org_id=ORG, default_user="kim"), can_infer=True)
        try:
            async with Client(server) as client:
                turns = [{"role": "user", "content": "I'm vegetarian and I live in Oslo"}]
                added = _result(await client.call_tool("add_memory", {"messages": turns}))
                assert sorted(r["memory"] for r in added["results"]) == ["Is vegetarian", "Lives in Oslo"]
                raw = _result(await client.call_tool("add_memory", {"text": "verbatim", "infer": False}))
                assert [r["memory"] for r in raw["results"]] == ["verbatim"]
        finally:
            await store.close()


# -- the real transports ----------------------------------------------------------------------------


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memora_pg", "mcp", "--schema", "memora", "--embedder", "hash:384", *args]


async def test_stdio_subprocess(database_url: str) -> None:
    """``memora-pg mcp`` over stdio, as a desktop assistant starts it; what it writes, the mem0 face reads."""
    command = _command("--database-url", database_url, "--user-id", "desk")
    params = StdioServerParameters(command=command[0], args=command[1:], env=_child_env())
    async with Client(params) as client:
        await _every_tool(client)
        _result(await client.call_tool("add_memory", {"text": "The user's cat is called Miso"}))
        found = _result(await client.call_tool("search_memories", {"query": "cat's name"}))
        assert found["results"][0]["memory"] == "The user's cat is called Miso"
        assert (await client.call_tool("get_memory", {"memory_id": "nope"})).is_error
    # the default organization is the mem0 face's default collection
    store = AsyncMemory(settings=Settings(database_url=database_url, db_schema="memora"), embedder=HashEmbedder(384))
    try:
        everything = await store.get_all(filters={"user_id": "desk"})
        assert [m["memory"] for m in everything["results"]] == ["The user's cat is called Miso"]
    finally:
        await store.close()


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_PG_") and k != "DATABASE_URL"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _http_server(database_url: str, *options: str) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(  # noqa: S603 (our own command line)
        _command("--database-url", database_url, "--http", f"127.0.0.1:{port}", *options),
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                raise AssertionError(f"memora-pg mcp --http exited: {output}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.post(url, json={}, timeout=2).status_code == 401:
                    break
            assert time.monotonic() < deadline, "memora-pg mcp --http did not start"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


@contextlib.asynccontextmanager
async def _http_client(url: str, token: str) -> AsyncIterator[Client]:
    import httpx2

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def test_http_tenants_by_token_under_row_level_security(
    rls_database: tuple[str, str],
) -> None:
    """Two tokens, two organizations, served by a role row-level security restricts: nothing crosses, and
    a missing, wrong or revoked token gets 401 and touches nothing."""
    owner_url, app_url = rls_database
    owner = Database(owner_url, settings=Settings(database_url=owner_url, db_schema="memora"))
    try:
        token_a, _ = await tokens.mint(owner, org_id="tenant-a", name="a")
        token_b, info_b = await tokens.mint(owner, org_id="tenant-b", name="b")
        token_ann, _ = await tokens.mint(owner, org_id="tenant-a", user_id="ann", name="ann's assistant")
        # the role that serves requests reads tokens, and cannot mint one
        app = Database(app_url, settings=Settings(database_url=app_url, db_schema="memora", row_level_security=True))
        try:
            with pytest.raises(DatabaseError):
                await tokens.mint(app, org_id="tenant-a")
        finally:
            await app.close()

        with _http_server(app_url) as url:
            async with _http_client(url, token_a) as a:
                await _every_tool(a)
                secret = _result(await a.call_tool("add_memory", {"text": "A's launch date is May 3", "user_id": "u"}))
                secret_id = secret["results"][0]["id"]
                _result(await a.call_tool("add_memory", {"text": "Ann prefers email", "user_id": "ann"}))
            async with _http_client(url, token_b) as b:
                _result(await b.call_tool("add_memory", {"text": "B's launch date is June 9", "user_id": "u"}))
                hits = _result(await b.call_tool("search_memories", {"query": "launch date", "user_id": "u"}))
                assert [h["memory"] for h in hits["results"]] == ["B's launch date is June 9"]
                assert (await b.call_tool("get_memory", {"memory_id": secret_id})).is_error
                assert (await b.call_tool("memory_history", {"memory_id": secret_id})).is_error
                _result(await b.call_tool("delete_all_memories", {"user_id": "u"}))
            async with _http_client(url, token_ann) as ann:
                mine = _result(await ann.call_tool("get_memories", {}))
                assert [m["memory"] for m in mine["results"]] == ["Ann prefers email"]
                assert (await ann.call_tool("get_memory", {"memory_id": secret_id})).is_error

            await tokens.revoke(owner, info_b.token_id)
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "delete_all_memories", "arguments": {"user_id": "u"}},
            }
            headers = {"Accept": "application/json, text/event-stream"}
            for bad in (None, "mpg_wrong", token_b, token_a + "x"):
                sent = headers | ({"Authorization": f"Bearer {bad}"} if bad else {})
                async with httpx.AsyncClient(timeout=10) as http:
                    answer = await http.post(url, content=json.dumps(call), headers=sent)
                assert answer.status_code == 401, (bad, answer.text)

        # the rows, as the owner sees them: each organization its own, B's deleted, A's untouched
        engine = create_async_engine(owner_url)
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(text("SELECT org_id, memory FROM memora.memories ORDER BY 1, 2"))).all()
        finally:
            await engine.dispose()
        assert [tuple(r) for r in rows] == [
            ("tenant-a", "A's launch date is May 3"),
            ("tenant-a", "Ann prefers email"),
        ]
    finally:
        await owner.close()


async def test_tokens_are_stored_hashed_and_revocable(database_url: str) -> None:
    database = Database(database_url, settings=Settings(database_url=database_url, db_schema="memora"))
    try:
        token, info = await tokens.mint(database, org_id="org-t", user_id="u1", name="laptop")
        assert token.startswith("mpg_")
        assert len(token) > 40
        bearer = await tokens.bearer(database, token)
        assert bearer == tokens.Bearer(info.token_id, "org-t", "u1")
        async with (await database.engine()).connect() as conn:
            stored = (await conn.execute(text("SELECT token_hash FROM memora.access_tokens"))).scalars().all()
        assert token.encode() not in b"".join(stored)
        assert [t.token_id for t in await tokens.listed(database, org_id="org-t")] == [info.token_id]
        revoked = await tokens.revoke(database, info.token_id)
        assert revoked.revoked_at is not None
        assert await tokens.bearer(database, token) is None
        with pytest.raises(NotFoundError):
            await tokens.revoke(database, "no-such-token")
        with pytest.raises(InvalidInputError):
            await tokens.mint(database, org_id="")
    finally:
        async with (await database.engine()).begin() as conn:
            await conn.execute(text("DELETE FROM memora.access_tokens"))
        await database.close()


async def test_a_role_granted_before_the_tokens_existed_can_read_them(fresh_database: str) -> None:
    """Migration 0012 gives the roles that read the memories SELECT on access_tokens."""
    engine = create_async_engine(fresh_database)
    role = "memora_app_before_0012"
    try:
        await upgrade(engine, MigrationOptions(schema="memora"), "0011")
        async with engine.begin() as conn:
            if not await conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}):
                await conn.execute(text(f"CREATE ROLE {role} LOGIN"))
            await conn.execute(text(f"GRANT USAGE ON SCHEMA memora TO {role}"))
            await conn.execute(text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA memora TO {role}"))
        await upgrade(engine, MigrationOptions(schema="memora"))
        async with engine.connect() as conn:
            privileges = await conn.execute(
                text(
                    "SELECT has_table_privilege(:r, 'memora.access_tokens', 'SELECT'),"
                    " has_table_privilege(:r, 'memora.access_tokens', 'INSERT')"
                ),
                {"r": role},
            )
            assert tuple(privileges.one()) == (True, False)
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"REASSIGN OWNED BY {role} TO CURRENT_USER"))
            await conn.execute(text(f"DROP OWNED BY {role}"))
            await conn.execute(text(f"DROP ROLE {role}"))
        await engine.dispose()


async def _minted(database_url: str, org_id: str) -> str:
    owner = Database(database_url, settings=Settings(database_url=database_url, db_schema="memora"))
    try:
        token, _ = await tokens.mint(owner, org_id=org_id, name="behind a proxy")
        return str(token)
    finally:
        await owner.close()


def test_http_behind_a_reverse_proxy(database_url: str) -> None:
    """A proxy's Host is answered once allowed (not 421), another is refused, so is an Origin not allowed,
    and the OAuth metadata advertises the public URL, not the bound address."""
    token = asyncio.run(_minted(database_url, "proxied"))
    public = "https://memory.example.com"
    options = ("--allow-rls-bypass", "--allowed-host", "proxy.internal:*", "--public-url", public)
    with _http_server(database_url, *options) as url:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}

        def status(**more: str) -> int:
            return httpx.post(url, json=call, headers={**headers, **more}, timeout=10).status_code

        assert status(Host="memory.example.com") == 200
        assert status(Host="proxy.internal:8443", Origin=public) == 200
        assert status(Host="rebound.example.net") == 421
        assert status(Host="memory.example.com", Origin="https://elsewhere.example.net") == 403
        base = url.removesuffix("/mcp")
        metadata = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
        assert metadata["resource"] == public + "/mcp"
        assert [server.rstrip("/") for server in metadata["authorization_servers"]] == [public]


def test_http_refuses_a_role_that_bypasses_row_level_security(database_url: str) -> None:
    """The test database's role owns the tables: over HTTP every token would see every organization,
    so the server does not start without --allow-rls-bypass, and says why in one line."""
    port = _free_port()
    done = subprocess.run(  # noqa: S603 (our own command line)
        _command("--database-url", database_url, "--http", f"127.0.0.1:{port}"),
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: the database role is ")
    assert "--allow-rls-bypass" in line
