"""The README's runnable examples (docs/examples) run, on the test server, with the default embedder."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.mem0.memory import AsyncMemory

ROOT = Path(__file__).resolve().parents[2]


def _run(example: str, database_url: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_PG_") and k != "DATABASE_URL"}
    env |= {"MEMORA_PG_DATABASE_URL": database_url, "MEMORA_PG_SCHEMA": "memora", "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(  # noqa: S603 (our own example)
        [sys.executable, str(ROOT / "docs" / "examples" / example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_mcp_client_example(database_url: str) -> None:
    out = _run("mcp_client.py", database_url)
    assert "tools: add_memory, search_memories" in out
    assert "found: 'Ada is learning the cello'" in out


@pytest.mark.slow
def test_agent_framework_example(database_url: str) -> None:
    out = _run("agent_framework_memory.py", database_url)
    assert "session 1: Noted." in out
    assert "session 2: I'm vegetarian, please remember it." in out


@pytest.mark.slow
def test_tracing_example(database_url: str) -> None:
    spans = [json.loads(line) for line in _run("tracing.py", database_url).splitlines() if line.startswith("{")]
    names = [span["name"] for span in spans]
    assert names[:3] == ["create_memory", "search_memory", "agent turn"]
    assert spans[0]["parent_id"] == spans[2]["context"]["span_id"]
    assert spans[1]["attributes"]["gen_ai.memory.record.count"] == 1
    assert spans[1]["kind"] == "SpanKind.CLIENT"  # the test's server, not the embedded one
    assert "gen_ai.memory.query.text" not in spans[1]["attributes"]


@pytest.mark.slow
async def test_the_examples_leave_other_users_alone(database_url: str, engine: AsyncEngine) -> None:
    """Each example writes as a user of its own and deletes only that: a user "ada" of the same
    organization keeps her memory however many examples run, and no example leaves memories behind."""
    memory = AsyncMemory(settings=Settings(database_url=database_url, db_schema="memora"), embedder=HashEmbedder(384))
    try:
        await memory.add("Ada keeps bees", user_id="ada", infer=False)
        await asyncio.to_thread(_run, "agent_framework_memory.py", database_url)
        await asyncio.to_thread(_run, "tracing.py", database_url)
        assert [m["memory"] for m in (await memory.get_all(filters={"user_id": "ada"}))["results"]] == [
            "Ada keeps bees"
        ]
        async with engine.connect() as conn:
            left = await conn.scalar(text("SELECT count(*) FROM memora.memories WHERE user_id LIKE 'example-%'"))
        assert left == 0
    finally:
        await memory.delete_all(user_id="ada")
        await memory.close()
