"""Export and import: one organization, or all of them, as JSON Lines.

The file format is specified in docs/transfer-format.md. :mod:`.records` holds the format
itself (the tables' order, each record's layout, how every column is written and read),
:mod:`.exporting` writes a file from one snapshot of the database, and :mod:`.importing`
replays a file into a database in one transaction.
"""

from __future__ import annotations

from memora_pg.ops.transfer.exporting import export
from memora_pg.ops.transfer.importing import import_
from memora_pg.ops.transfer.records import (
    EXCLUDED_TABLES,
    EXPORTED_TABLES,
    FORMAT,
    FORMAT_END,
    VERSION,
    record_fields,
)

__all__ = [
    "EXCLUDED_TABLES",
    "EXPORTED_TABLES",
    "FORMAT",
    "FORMAT_END",
    "VERSION",
    "export",
    "import_",
    "record_fields",
]
