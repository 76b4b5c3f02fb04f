"""The embedded PostgreSQL: started when no URL is configured, reused, robust to races and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memora_pg import PostgresGraphDB, Settings, embedded

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMORA_PG_TEST_DATABASE_URL")), reason="the suite runs against an external server"
)


@pytest.fixture
def server_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    embedded.stop(tmp_path, 18)


async def test_graph_without_url_starts_the_embedded_server(server_dir: Path) -> None:
    """With no database URL, setup() starts PostgreSQL with pgvector in the data directory and migrates it."""
    graph = PostgresGraphDB(settings=Settings(embedded_data_dir=server_dir))
    await graph.setup()
    org = await graph.create_organization("Embedded")
    assert (await graph.get_organization(org.org_id)).org_name == "Embedded"
    await graph.close()
    assert embedded.status(server_dir) is not None
    assert (server_dir / "pg18" / "PG_VERSION").read_text().strip() == "18"


def test_second_start_reuses_the_running_server(server_dir: Path) -> None:
    """Starting a running server returns the same URL and leaves the same postmaster running."""
    first = embedded.ensure_running(server_dir)
    pid = int((server_dir / "pg18" / "postmaster.pid").read_text().split()[0])
    assert embedded.ensure_running(server_dir) == first
    assert int((server_dir / "pg18" / "postmaster.pid").read_text().split()[0]) == pid


START = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from memora_pg import embedded
    print(embedded.ensure_running(Path(sys.argv[1])))
    """
)


def test_two_processes_starting_at_once_share_one_server(server_dir: Path) -> None:
    """Two processes that start the same data directory at the same moment both get the one server."""
    procs = [
        subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", START, str(server_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    urls = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert len(urls) == 1
    assert embedded.status(server_dir) in urls


def test_start_after_a_crash_with_a_stale_pid_file(server_dir: Path) -> None:
    """A postmaster killed with SIGKILL leaves postmaster.pid behind; the next start recovers."""
    embedded.ensure_running(server_dir)
    pid_file = server_dir / "pg18" / "postmaster.pid"
    pid = int(pid_file.read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    assert pid_file.exists()
    assert embedded.status(server_dir) is None
    url = embedded.ensure_running(server_dir)
    assert embedded.status(server_dir) == url
    assert int(pid_file.read_text().split()[0]) != pid


def test_stop_and_status(server_dir: Path) -> None:
    """stop() ends a running server and reports whether there was one."""
    embedded.ensure_running(server_dir)
    assert embedded.stop(server_dir) is True
    assert embedded.status(server_dir) is None
    assert embedded.stop(server_dir) is False
