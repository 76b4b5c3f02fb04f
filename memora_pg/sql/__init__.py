"""The sources of memora_pg's server-side functions, one file per function and revision.

``functions/NAME.REVISION.sql`` is the text with which revision REVISION creates or replaces the function
NAME (``{schema}`` filled in, quoted, when it runs): a revision installs the version it names, and a later one that
changes the function adds a file of its own, so ``git diff`` between two versions shows the change. The
newest file of each function is its current source; tests/integration/test_function_sources.py checks
it against what a migrated database holds. A file, once a revision names it, is never edited: databases
were migrated with it.
"""

from __future__ import annotations

from importlib.resources import files

_FUNCTIONS = files(__package__) / "functions"


def function_source(name: str, revision: str) -> str:
    """The text with which ``revision`` creates or replaces the function ``name``."""
    return (_FUNCTIONS / f"{name}.{revision}.sql").read_text(encoding="utf-8")


def current_sources() -> dict[str, tuple[str, str]]:
    """Each function's newest version: name -> (revision, text)."""
    newest: dict[str, str] = {}
    for entry in _FUNCTIONS.iterdir():
        name, revision, suffix = entry.name.rsplit(".", 2)
        if suffix == "sql" and revision > newest.get(name, ""):
            newest[name] = revision
    return {name: (revision, function_source(name, revision)) for name, revision in sorted(newest.items())}
