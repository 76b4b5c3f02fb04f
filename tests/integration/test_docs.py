"""The docs match the code: every Python snippet of README.md and docs/*.md runs, and every command line
of their shell blocks is one the named program takes (tests/snippets finds them)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from importlib.metadata import metadata
from pathlib import Path

import pytest
from alembic.config import CommandLine

from memora_pg.cli import build_parser
from memora_pg.config import environment_names
from tests.fake_openai import FakeOpenAIServer
from tests.snippets import ROOT, Command, Snippet, commands, run_snippet, snippets

# The snippets of the upstream Memora agent run in its environment: tests/upstream/test_readme.py.
PYTHON = [snippet for snippet in snippets("python") if not snippet.needs_memora]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", PYTHON, ids=lambda snippet: snippet.name)
def test_every_python_snippet_runs(
    snippet: Snippet, fresh_database: str, snippet_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """It runs, and prints what its comments say it prints (``print(x)  # what``)."""
    out = run_snippet(snippet, fresh_database, snippet_openai, tmp_path)
    for said in _PRINTS.findall(snippet.code):
        assert said in out, f"{snippet.name} prints {out!r}, not {said!r}"


_PRINTS = re.compile(r"^\s*print\(.*\)\s+# (.+?)\s*$", re.MULTILINE)


def test_the_snippets_are_found() -> None:
    """The finder sees the blocks it should (a regression here would make the tests above vacuous)."""
    names = {snippet.path.name for snippet in PYTHON}
    assert {"README.md", "observability.md", "reporting.md", "scaling.md"} <= names
    assert len(PYTHON) >= 8
    assert len(commands()) >= 30


# -- the command lines ----------------------------------------------------------------------------

_OPTION = re.compile(r"^--[a-z][a-z0-9-]*")
_EXTRAS = re.compile(r"memora-pg\[([\w,-]+)\]")


def _known_variable(name: str) -> bool:
    return name in environment_names() or name == "DATABASE_URL" or name.startswith("MEMORA_PG_TEST_")


def _check_memora_pg(words: list[str]) -> None:
    try:
        build_parser().parse_args(words)
    except SystemExit as refused:
        pytest.fail(f"memora-pg refuses {words}: exit {refused.code}")


def _check_bench(words: list[str]) -> None:
    """``python -m bench.X ...``: the module answers --help, and names every option the line gives."""
    module = words[words.index("-m") + 1]
    helped = subprocess.run(  # noqa: S603 (our own module)
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    for word in words:
        option = _OPTION.match(word)
        if option:
            assert option[0] in helped.stdout, f"python -m {module} has no {option[0]}"


def _check_alembic(words: list[str]) -> None:
    try:
        CommandLine().parser.parse_args(words)
    except SystemExit as refused:
        pytest.fail(f"alembic refuses {words}: exit {refused.code}")


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, re.MULTILINE))


def _check_pip(words: list[str]) -> None:
    extras = metadata("memora-pg").get_all("Provides-Extra") or []
    for word in words:
        for named in _EXTRAS.findall(word):
            for extra in named.split(","):
                assert extra in extras, f"memora-pg has no extra {extra!r}"


def _check_compose(words: list[str]) -> None:
    compose = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    for option, value in itertools.pairwise(words):
        if option == "--profile":
            assert f"profiles: [{value}]" in compose, f"docker-compose.yml has no profile {value!r}"
    last = words[-1]
    if not last.startswith("-") and last not in ("up", "down"):
        assert f"\n  {last}:" in compose, f"docker-compose.yml has no service {last!r}"


def check(command: Command) -> None:
    for name in command.assigned:
        assert _known_variable(name), f"{name} is not a variable memora_pg reads"
    words = command.words
    if not words:
        return
    program = words[0].removeprefix(".venv/bin/")
    if program == "memora-pg":
        _check_memora_pg(words[1:])
    elif program == "python" and "-m" in words:
        _check_bench(words)
    elif program == "alembic":
        _check_alembic(words[1:])
    elif program == "make":
        assert set(words[1:]) <= _make_targets(), f"the Makefile has no target {words[1:]}"
    elif program == "pytest":
        for path in (word for word in words[1:] if not word.startswith("-")):
            assert (ROOT / path).exists(), f"no {path}"
    elif program == "bash":
        assert (ROOT / words[1]).is_file(), f"no {words[1]}"
    elif program == "pip":
        _check_pip(words)
    elif words[:2] == ["docker", "compose"]:
        _check_compose(words[2:])
    else:
        pytest.fail(f"{command.name}: a command the docs test does not know how to check")


@pytest.mark.parametrize("command", commands(), ids=lambda command: command.name)
def test_every_command_line_is_one_its_program_takes(command: Command) -> None:
    check(command)


@pytest.mark.parametrize(
    "line",
    [
        "memora-pg mcp token create --org-id acme --frobnicate",
        "MEMORA_PG_SERCH_MODE=dense memora-pg demo",
        "make tset",
        "pip install 'memora-pg[otle]'",
    ],
)
def test_a_wrong_command_line_is_caught(line: str, tmp_path: Path) -> None:
    """The checks can fail: a misspelt option, variable, target or extra is refused."""
    (command,) = commands([Snippet(ROOT / "README.md", 1, "bash", line + "\n")])
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        check(command)
