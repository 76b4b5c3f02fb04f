"""The README's runnable examples (docs/examples) run, on the test server, with the default embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert names[:3] == ["update_memory", "search_memory", "agent turn"]
    assert spans[0]["parent_id"] == spans[2]["context"]["span_id"]
    assert spans[1]["attributes"]["db.system.name"] == "postgresql"
    assert "gen_ai.memory.query.text" not in spans[1]["attributes"]
