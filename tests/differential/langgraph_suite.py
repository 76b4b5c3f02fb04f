"""Run LangGraph's own store tests against memora_pg's stores, and account for every test that fails.

``python -m tests.differential.langgraph_suite SOURCE`` (``make langgraph-suite`` downloads SOURCE: the sdist
of the ``langgraph-checkpoint-postgres`` release that ``.venv-diff`` pins). SOURCE is that sdist, unpacked or
not, or the ``libs/checkpoint-postgres`` folder of a ``langgraph`` checkout. Its ``tests/test_store.py`` and
``tests/test_async_store.py`` are copied, unchanged, into a scratch folder beside
``langgraph_suite_conftest.py`` (as their ``conftest.py``), which swaps PostgresStore for MemoraStore in their
fixtures. Nothing of theirs enters this repository.

Every failure must match one of :data:`DIFFERENCES`, the deliberate differences that ``docs/langgraph.md``
lists; any other failure, or a test that errors for another reason, fails the run.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
COPIED = ("__init__.py", "embed_test_utils.py", "test_store.py", "test_async_store.py")
PYTEST_INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"


@dataclass(frozen=True)
class Difference:
    """A failure memora_pg means to have: tests named like ``test``, failing with a message like ``message``."""

    reason: str
    test: str
    message: str


DIFFERENCES = (
    Difference(
        "`score` is memora_pg's hybrid score of one vector per item (the indexed fields' text joined), not the "
        "best cosine of a vector per field",
        r"test_scores|test_embed_with_path.*",
        r"assert [-0-9.e]+ == [-0-9.e]+ ± ",
    ),
    Difference(
        "the test edits PostgresStore's own table (`store`, `prefix`) through its private `_cursor()`; memora_pg "
        "never returns an expired item, which tests/integration/test_langgraph_store.py checks",
        r"test_omit_expired_.*",
        r"no attribute '_cursor'",
    ),
    Difference(
        "60,000 calls at once on one store, whose puts embed with the default embedder (PostgresStore embeds "
        "nothing without an index): on a small machine a call can wait for a connection longer than "
        "pool_timeout (30 s), and memora_pg fails it with DatabaseError where PostgresStore waits without limit",
        r"test_large_batches_async",
        r"No pooled connection became free within pool_timeout",
    ),
    Difference(
        "the test counts psycopg pool checkouts inside PostgresStore (`_ainternal.get_connection`); memora_pg "
        "runs a batch on one pooled connection of its own",
        r"test_abatch_uses_single_pool_checkout",
        r"assert 0 == 1",
    ),
)


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # passed, failed, error or skipped
    message: str

    @property
    def function(self) -> str:
        return self.test.split("::")[-1].split("[")[0]

    def difference(self) -> Difference | None:
        for difference in DIFFERENCES:
            if re.fullmatch(difference.test, self.function) and re.search(difference.message, self.message):
                return difference
        return None


def tests_folder(source: Path, scratch: Path) -> Path:
    """The ``tests`` folder of an sdist (a .tar.gz, or unpacked) or of a checkout's ``libs/checkpoint-postgres``."""
    if source.is_file():
        with tarfile.open(source) as archive:
            archive.extractall(scratch / "source", filter="data")
        (source,) = (scratch / "source").iterdir()
    for candidate in (source / "tests", source / "libs" / "checkpoint-postgres" / "tests"):
        if (candidate / "test_store.py").is_file():
            return candidate
    raise SystemExit(f"{source} holds no tests/test_store.py of langgraph-checkpoint-postgres")


def prepared(source: Path, scratch: Path) -> Path:
    """A scratch ``tests`` package: their test modules, unchanged, and the swapping conftest."""
    theirs = tests_folder(source, scratch)
    package = scratch / "run" / "tests"
    package.mkdir(parents=True)
    for name in COPIED:
        shutil.copyfile(theirs / name, package / name)
    shutil.copyfile(HERE / "langgraph_suite_conftest.py", package / "conftest.py")
    (package.parent / "pytest.ini").write_text(PYTEST_INI)
    return package.parent


def outcomes(report: Path) -> list[Outcome]:
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - the report pytest just wrote
        test = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        status, message = "passed", ""
        for child in case:
            if child.tag in {"failure", "error", "skipped"}:
                status = {"failure": "failed"}.get(child.tag, child.tag)
                message = f"{child.get('message') or ''}\n{child.text or ''}"
        found.append(Outcome(test, status, message))
    return found


def summary(found: list[Outcome]) -> tuple[str, list[Outcome]]:
    """The report to print, and the failures no difference explains."""
    counts = collections.Counter(outcome.status for outcome in found)
    unexplained = []
    by_reason: collections.Counter[str] = collections.Counter()
    for outcome in found:
        if outcome.status in {"failed", "error"}:
            difference = outcome.difference()
            if difference is None:
                unexplained.append(outcome)
            else:
                by_reason[difference.reason] += 1
    lines = [
        f"LangGraph's store tests on memora_pg: {counts['passed']} of {len(found)} passed, "
        f"{counts['failed'] + counts['error']} failed, {counts['skipped']} skipped",
        "",
        "| failures | deliberate difference |",
        "| --- | --- |",
        *(f"| {count} | {reason} |" for reason, count in by_reason.most_common()),
    ]
    if unexplained:
        lines += ["", f"{len(unexplained)} failures no listed difference explains:"]
        lines += [f"  {outcome.test}: {outcome.message.strip().splitlines()[0][:200]}" for outcome in unexplained]
    return "\n".join(lines), unexplained


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the langgraph-checkpoint-postgres sdist, or a checkout's folder")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, e.g. -k search")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="langgraph-suite-") as folder:
        scratch = Path(folder)
        run = prepared(args.source.resolve(), scratch)
        report = scratch / "report.xml"
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=line", f"--junitxml={report}"]
        tests = ["tests/test_store.py", "tests/test_async_store.py"]
        subprocess.run([*command, *tests, *args.pytest_args], cwd=run, check=False)  # noqa: S603 - our own argv
        if not report.exists():
            print("pytest wrote no report", file=sys.stderr)
            return 2
        text, unexplained = summary(outcomes(report))
    print(text)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
