"""The operations CLI on the cluster: export, import, reembed, index status/build, report and doctor."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import PostgresGraphDB, Settings
from memora_pg.cli import main
from memora_pg.embeddings import HashEmbedder
from tests.citus.conftest import migrate_and_distribute
from tests.citus.helpers import worlds
from tests.integration.helpers import World, chat, payload

COPY_SCHEMA = "memora_copy"  # import's target, and reembed's schema: the shared one is left as it is


def _populate(url: str, schema: str = "memora") -> list[World]:
    """Organizations with a user, an agent and an interaction with two memories, written by the store (one
    names its user by placeholder: a save reads the names it is embedded with, and a re-embed reads them too)."""

    async def go() -> list[World]:
        engine = create_async_engine(url)
        graph = PostgresGraphDB(
            engine, settings=Settings(database_url=url, db_schema=schema), embedder=HashEmbedder(384)
        )
        try:
            ws = await worlds(graph)
            for w in ws:
                await graph.save_interaction_with_memories(
                    w.org_id,
                    w.agent_id,
                    w.user_id,
                    payload(chat("hi", "yo"), [(f"user_{w.user_id} likes tea", [0]), ("is kind", [1])]),
                )
            return ws
        finally:
            await graph.close()
            await engine.dispose()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def copy_schema(database_url: str) -> str:
    """A second migrated, distributed schema on the cluster."""
    asyncio.run(migrate_and_distribute(database_url, COPY_SCHEMA))
    return COPY_SCHEMA


def test_cli_export(database_url: str, tmp_path: Path) -> None:
    """memora-pg export of one organization writes its records."""
    (w, *_) = _populate(database_url)
    out = tmp_path / "org.jsonl"
    assert main(["export", "--database-url", database_url, "--org-id", w.org_id, "-o", str(out)]) == 0
    assert w.org_id in out.read_text()


def test_cli_export_everything(database_url: str, tmp_path: Path) -> None:
    """memora-pg export without --org-id writes every organization."""
    ws = _populate(database_url)
    out = tmp_path / "all.jsonl"
    assert main(["export", "--database-url", database_url, "-o", str(out)]) == 0
    assert all(w.org_id in out.read_text() for w in ws)


def test_cli_import(database_url: str, copy_schema: str, tmp_path: Path) -> None:
    """memora-pg import of an export into another distributed schema writes the organization."""
    (w, *_) = _populate(database_url)
    out = tmp_path / "org.jsonl"
    assert main(["export", "--database-url", database_url, "--org-id", w.org_id, "-o", str(out)]) == 0
    assert main(["import", "--database-url", database_url, "--schema", copy_schema, str(out)]) == 0


def test_cli_reembed(database_url: str, copy_schema: str) -> None:
    """memora-pg reembed of one organization with a same-dimension embedder."""
    (w, *_) = _populate(database_url, copy_schema)
    code = main(
        [
            "reembed",
            "--database-url",
            database_url,
            "--schema",
            copy_schema,
            "--embedder",
            "hash:384",
            "--org-id",
            w.org_id,
        ]
    )
    assert code == 0


def test_cli_index_status_and_build(database_url: str) -> None:
    """memora-pg index status, then build (CREATE INDEX CONCURRENTLY on a distributed table)."""
    assert main(["index", "status", "--database-url", database_url, "--json"]) == 0
    assert main(["index", "build", "--database-url", database_url]) == 0


def test_cli_report(database_url: str, tmp_path: Path) -> None:
    """memora-pg report, for all organizations and for one, with the HTML file."""
    (w, *_) = _populate(database_url)
    assert main(["report", "--database-url", database_url, "--json"]) == 0
    assert (
        main(["report", "--database-url", database_url, "--org-id", w.org_id, "--html", str(tmp_path / "r.html")]) == 0
    )


def test_cli_doctor(database_url: str) -> None:
    """memora-pg doctor passes its checks on the distributed schema."""
    assert main(["doctor", "--database-url", database_url, "--embedding-dimensions", "384"]) == 0
