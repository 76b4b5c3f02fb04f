"""The sources of memora_pg's server-side code: one file per function or view and revision.

``functions/NAME.REVISION.sql`` is the text with which revision REVISION creates or replaces the function
NAME, ``views/NAME.REVISION.sql`` the same for a view, and ``functions/citus/NAME.REVISION.sql`` the form
a function takes on a schema distributed by Citus. A revision installs the version it names, and a later
one that changes the object adds a file of its own, so ``git diff`` between two versions shows the
change. The newest file of each object is its current source; tests/integration/test_server_sources.py
checks it against what a migrated database holds. A file, once a revision names it, is never edited:
databases were migrated with it.

A source writes ``{schema}`` where the schema's name stands as an identifier, ``{schema_name}`` where it
stands as a string (a catalog lookup), and any other part its revision fills in (:func:`installed`).
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import TYPE_CHECKING

from memora_pg.sql_text import literal, parts_of, quoted, render

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["current_sources", "function_source", "installed", "replacing", "view_source"]

_SOURCES = files(__package__)
FUNCTIONS = "functions"
VIEWS = "views"
CITUS_FUNCTIONS = "functions/citus"


def _folder(kind: str) -> Traversable:
    folder = _SOURCES
    for part in kind.split("/"):
        folder = folder / part
    return folder


def _source(kind: str, name: str, revision: str) -> str:
    return str((_folder(kind) / f"{name}.{revision}.sql").read_text(encoding="utf-8"))


def function_source(name: str, revision: str, *, on_citus: bool = False) -> str:
    """The text with which ``revision`` creates or replaces the function ``name`` (its Citus form)."""
    return _source(CITUS_FUNCTIONS if on_citus else FUNCTIONS, name, revision)


def view_source(name: str, revision: str) -> str:
    """The text with which ``revision`` creates or replaces the view ``name``."""
    return _source(VIEWS, name, revision)


def installed(source: str, schema: str, /, **parts: object) -> str:
    """``source`` as it runs in ``schema``: the schema's name put in, quoted, and the revision's ``parts``."""
    names = {"schema_name": literal(schema)} if "schema_name" in parts_of(source) else {}
    return render(source, schema=quoted(schema), **names, **parts)


def replacing(source: str) -> str:
    """``source`` as CREATE OR REPLACE: a downgrade's way back to an earlier version over the later one."""
    return re.sub(r"^CREATE (FUNCTION|VIEW)\b", r"CREATE OR REPLACE \1", source, count=1, flags=re.MULTILINE)


def current_sources(kind: str = FUNCTIONS) -> dict[str, tuple[str, str]]:
    """Each object's newest version, of ``kind`` (:data:`FUNCTIONS`, :data:`VIEWS`, :data:`CITUS_FUNCTIONS`):
    name -> (revision, text)."""
    newest: dict[str, str] = {}
    for entry in _folder(kind).iterdir():
        if not entry.is_file() or not entry.name.endswith(".sql"):
            continue
        name, revision, _ = entry.name.rsplit(".", 2)
        if revision > newest.get(name, ""):
            newest[name] = revision
    return {name: (revision, _source(kind, name, revision)) for name, revision in sorted(newest.items())}
