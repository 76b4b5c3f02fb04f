"""The README's example of the upstream Memora agent on memora_pg runs, in the memora-core environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAIServer
from tests.snippets import Snippet, run_snippet, snippets

pytest.importorskip("memora", reason="runs in the memora-core environment (make test)")


MEMORA = [snippet for snippet in snippets("python") if snippet.needs_memora]


def test_the_readme_shows_the_agent() -> None:
    assert [snippet.path.name for snippet in MEMORA] == ["README.md"]


@pytest.mark.parametrize("snippet", MEMORA, ids=lambda snippet: snippet.name)
def test_every_snippet_of_the_agent_runs(
    snippet: Snippet, fresh_database: str, snippet_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    run_snippet(snippet, fresh_database, snippet_openai, tmp_path)
