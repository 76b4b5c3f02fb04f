"""The snippets of README.md and docs/*.md, as a reader finds them: each fenced Python block, and each
command line of the shell blocks.

A Python block runs as the reader would run it (tests/snippets/run.py): a whole program as it is; a
fragment (``await`` at its top level, names from the examples before it) inside an event loop, with
those names bound to real stores on the test's server. The server a snippet names as a placeholder
(``PLACEHOLDER_URL``) is the test's database, and OpenAI's endpoint is a fake one on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The database server the README's examples name, and the test's server in their runs.
PLACEHOLDER_URL = "postgresql://app:secret@db.internal/app"

_FENCE = re.compile(r"^```(?P<language>[\w-]*)\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def needs_memora(self) -> bool:
        """Whether it imports the upstream Memora agent, installed only in the memora-core environment."""
        return bool(re.search(r"^\s*(from|import) memora\b(?!_pg)", self.code, re.MULTILINE))


def snippets(*languages: str) -> list[Snippet]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            if match["language"] in languages:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Snippet(path, line, match["language"], match["code"]))
    return found


@dataclass(frozen=True)
class Command:
    """One command of a shell block: its words after any ``NAME=value`` prefixes, and those names."""

    snippet: Snippet
    words: list[str]
    assigned: list[str]

    @property
    def name(self) -> str:
        return f"{self.snippet.name} {' '.join(self.words)[:60]}"


def commands(blocks: list[Snippet] | None = None) -> list[Command]:
    """Every command line of the shell blocks (of the docs, or ``blocks``), continuation lines joined and
    comments dropped."""
    found = []
    for snippet in snippets("bash", "sh", "console") if blocks is None else blocks:
        for line in snippet.code.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            assigned = []
            while words and _ASSIGNMENT.match(words[0]):
                assigned.append(words.pop(0).split("=", 1)[0])
            if words[:1] == ["export"]:
                assigned += [word.split("=", 1)[0] for word in words[1:]]
                words = []
            if words or assigned:
                found.append(Command(snippet, words, assigned))
    return found


def run_snippet(snippet: Snippet, database_url: str, openai: FakeOpenAIServer, workdir: Path) -> str:
    """Run the snippet in a process of its own, as a reader would, on the test's database; its stdout."""
    script = workdir / "snippet.py"
    script.write_text(snippet.code.replace(PLACEHOLDER_URL, database_url), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_PG_", "OPENAI_")) and k != "DATABASE_URL"}
    env |= {
        "MEMORA_PG_DATABASE_URL": database_url,
        "OPENAI_BASE_URL": openai.base_url,
        "OPENAI_API_KEY": "sk-test",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(  # noqa: S603 (the docs' own snippet)
        [sys.executable, "-m", "tests.snippets.run", str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{snippet.name} failed:\n{done.stderr[-3000:]}"
    return done.stdout
