"""A source file in memora_pg/sql is never edited once a revision names it (databases were migrated with
it): each file's hash is listed in sql_sources.sha256, and a file that changes, or a new one not yet
listed, fails here. A change to a function or a view is a new file, installed by a new revision."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from pathlib import Path

import memora_pg.sql

LISTED = Path(__file__).with_name("sql_sources.sha256")


def _hashes() -> dict[str, str]:
    root = Path(str(files(memora_pg.sql)))
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*.sql"))
    }


def _listed() -> dict[str, str]:
    rows = (line.split() for line in LISTED.read_text(encoding="utf-8").splitlines() if line.strip())
    return {name: digest for digest, name in rows}


def test_every_source_file_is_as_its_revision_shipped_it() -> None:
    found, listed = _hashes(), _listed()
    changed = sorted(name for name in found.keys() & listed.keys() if found[name] != listed[name])
    assert not changed, f"edited after a revision shipped it (add a new version instead): {changed}"
    assert sorted(listed.keys() - found.keys()) == [], "a listed source file is gone"
    assert sorted(found.keys() - listed.keys()) == [], (
        "a new source file: add its `sha256sum` line (run in memora_pg/sql) to tests/unit/sql_sources.sha256"
    )


def test_the_listing_covers_functions_views_and_their_citus_forms() -> None:
    folders = {name.rsplit("/", 1)[0] for name in _listed()}
    assert folders == {"functions", "functions/citus", "views"}
