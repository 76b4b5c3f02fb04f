"""SQL text: the one way a statement's text is filled in.

A named SQL constant writes ``{name}`` where a part goes: another constant (a CTE arm), a
condition, a number. :func:`render` fills every part in one pass and refuses a part the template
does not have, or a placeholder left without one, so a reworded template fails where it is built
instead of running with a piece missing. What a part brings in is not read again: a part's own
``{schema}`` stays for later.

``{schema}`` is the one part that may stay open: it is where memora_pg's tables are, known only
when the statement runs, and :mod:`memora_pg.driver` fills it then (quoted) with this
same function. ``{}`` and ``{1,2}`` (a JSON object, an array literal) are not parts.

Templates never quote: a part that is a name or a value is quoted here, by :func:`quoted` (an
identifier), :func:`qualified` (a name in a schema) or :func:`literal` (a string constant), and given
to :func:`render` as a part. These are memora_pg's only quoting functions; a value that can be bound
is bound instead (a SET, a DDL statement and a name inside a function body cannot bind one).
"""

from __future__ import annotations

import re

__all__ = ["SCHEMA", "literal", "parts_of", "qualified", "quoted", "render"]

_PART = re.compile(r"\{([a-z_]+)\}")

# The part that a statement's text keeps until it runs.
SCHEMA = "schema"


def parts_of(template: str) -> set[str]:
    """The names of the parts ``template`` has."""
    return set(_PART.findall(template))


def render(template: str, /, **parts: object) -> str:
    """``template`` with each ``{name}`` replaced by ``str(parts[name])``; ``{schema}`` may stay open,
    and may be given for a text that has none."""
    named = parts_of(template)
    unknown = sorted(set(parts) - named - {SCHEMA})
    missing = sorted(named - set(parts) - {SCHEMA})
    if unknown or missing:
        raise ValueError(f"SQL template parts: unknown {unknown}, missing {missing}, in {template[:80]!r}...")
    return _PART.sub(lambda found: str(parts[found[1]]) if found[1] in parts else found[0], template)


def quoted(identifier: str) -> str:
    """An identifier (a schema, table, column or index name) as SQL writes it: in double quotes, a
    double quote inside doubled."""
    if not identifier or "\x00" in identifier:
        raise ValueError(f"not a valid SQL identifier: {identifier!r}")
    return '"' + identifier.replace('"', '""') + '"'


def qualified(*names: str) -> str:
    """A name in a schema (``qualified("memora", "memories")``), each part quoted."""
    return ".".join(quoted(name) for name in names)


def literal(value: str) -> str:
    """``value`` as an SQL string constant, read the same whatever ``standard_conforming_strings``
    says: a plain one, or an escape string (``E'...'``) when it holds a backslash."""
    if "\x00" in value:
        raise ValueError("an SQL string constant cannot hold a NUL character")
    doubled = value.replace("'", "''")
    if "\\" not in value:
        return "'" + doubled + "'"
    return "E'" + doubled.replace("\\", "\\\\") + "'"
