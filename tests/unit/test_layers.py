"""The layers hold: the data layer (memora_pg/graph) imports no face, and no Database, so a rule of the data
layer never depends on an interface's dialect. Read from the sources' import statements."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "memora_pg"
# The faces, and the transactions they choose: above the data layer.
ABOVE = ("memora_pg.mem0", "memora_pg.autogen", "memora_pg.mcp", "memora_pg.agent_framework", "memora_pg.store",
         "memora_pg.vector", "memora_pg.db", "memora_pg.ops", "memora_pg.cli", "memora_pg.commands",
         "memora_pg.interaction_writes")  # fmt: skip


def from_above(names: set[str]) -> list[str]:
    return sorted(name for name in names if any(name == face or name.startswith(face + ".") for face in ABOVE))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (``from a import b`` counts a and a.b)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


@pytest.mark.parametrize("path", sorted((PACKAGE / "graph").glob("*.py")), ids=lambda path: path.name)
def test_the_data_layer_imports_nothing_above_it(path: Path) -> None:
    above = from_above(imported(path))
    assert above == [], f"memora_pg/graph/{path.name} imports {above}"


def test_the_check_sees_an_import_from_above(tmp_path: Path) -> None:
    """A module that imports a face is caught (the test above could not pass by reading nothing)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from memora_pg.db import Database\n    return Database\n")
    assert from_above(imported(module)) == ["memora_pg.db", "memora_pg.db.Database"]
    assert from_above({"memora_pg.vector_params"}) == []
