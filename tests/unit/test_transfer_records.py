"""The export format's record codecs (memora_pg.ops.transfer.records), checked without a database."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import Null

from memora_pg.errors import InvalidInputError
from memora_pg.ops.transfer import records, values
from memora_pg.schema import autogen_contents, memories, memory_history, organizations

DIMENSIONS = 3
MEMORY_ID = "0b9f7c52-6f1e-4d59-9a53-2f3b0c1e8d77"


def parsed(*lines: str | bytes) -> list[tuple[int, dict[str, Any]]]:
    return list(records.read_records(lines))


def memory_record(**changes: Any) -> dict[str, Any]:
    """A memories record as an export line holds it, after read_records (numbers with a fraction kept as text)."""
    line = json.dumps(
        {
            "type": "memories",
            "org_id": "o",
            "memory_id": MEMORY_ID,
            "user_id": "u",
            "agent_id": "a",
            "interaction_id": None,
            "memory": "Jake likes tea",
            "obtained_at": "2026-01-01T12:00:00.000000+00:00",
            "seq": 7,
            "metadata": {"score": 0.5, "tags": ["x"]},
            "embedding": [0.1, 1, -2.5e-05],
            "searchable": True,
        }
        | changes
    )
    [(_, record)] = parsed(line)
    return record


def content_record(**changes: Any) -> dict[str, Any]:
    """An autogen_contents record holding bytes, without text or JSON."""
    return {
        "type": "autogen_contents",
        "org_id": "o",
        "content_id": MEMORY_ID,
        "namespace": "default",
        "mime_type": "application/octet-stream",
        "metadata": {},
        "seq": 1,
        "created_at": "2026-01-01T12:00:00.000000+00:00",
    } | changes


def decode_memory(**changes: Any) -> dict[str, Any]:
    return records.decode(memories, memory_record(**changes), 2, DIMENSIONS)


# -- the layout ------------------------------------------------------------------------------


def test_every_exported_table_has_a_record_layout() -> None:
    """Each column of each exported table has a kind, and no key but the table's own collides with 'type'."""
    for table in records.EXPORTED_TABLES:
        fields = records.record_fields(table)
        assert [field.column for field in fields] == list(table.columns)
        assert "type" not in {field.key for field in fields}


def test_a_memorys_full_text_column_travels_as_searchable() -> None:
    """The tsvector is not exported: a boolean 'searchable' stands for it (absent: whether there is an embedding),
    computed from 'memory'."""
    by_key = {field.key: field for field in records.record_fields(memories)}
    assert "search_text" not in by_key
    searchable = by_key["searchable"]
    assert (searchable.kind, searchable.source, searchable.required) == ("searchable", ("memory",), False)
    assert (by_key["embedding"].kind, by_key["embedding"].required) == ("vector", False)
    assert (by_key["memory_id"].kind, by_key["metadata"].kind, by_key["seq"].kind) == ("uuid", "json", "integer")


def test_the_tables_are_in_foreign_key_order() -> None:
    """Every table comes after each table its foreign keys point to, so a replay never breaks a key."""
    for table in records.EXPORTED_TABLES:
        for key in table.foreign_keys:
            assert records.POSITION[key.column.table.name] <= records.POSITION[table.name], (table.name, key)


# -- writing: the statement the server runs --------------------------------------------------


def test_select_records_builds_one_json_object_per_row() -> None:
    """The export statement renders each row as a json_build_object, timestamps and bytes formatted by the server."""
    statement = records.select_records(autogen_contents, "o")
    compiled = str(statement.compile(dialect=postgresql.dialect()))
    assert compiled.count("json_build_object(") == 1
    assert "to_char(timezone(" in compiled
    assert "translate(encode(" in compiled
    assert "WHERE autogen_contents.org_id = " in compiled
    assert compiled.endswith("ORDER BY autogen_contents.org_id, autogen_contents.content_id")


def test_select_records_of_every_organization_has_no_filter() -> None:
    """Without org_id the statement reads the whole table."""
    compiled = str(records.select_records(organizations, None).compile(dialect=postgresql.dialect()))
    assert "WHERE" not in compiled


def test_staged_import_computes_the_full_text_vector() -> None:
    """The import's move from its COPY table casts vectors from text and recomputes the tsvector with the
    schema's full-text rule; JSON goes in as its text."""
    route = records.staged(memories, "tenant_memory")
    assert route.staging is not None
    assert '"tenant_memory".to_search_text("search_text")' in route.staging.move
    assert 'CAST("embedding" AS VECTOR)' in route.staging.move
    create, store = route.staging.create
    assert '"embedding" text' in create
    assert "ON COMMIT DROP" in create
    # A vector's text is never compressed: pglz made its COPY several times slower.
    assert 'ALTER COLUMN "embedding" SET STORAGE EXTERNAL' in store
    row = dict.fromkeys(route.columns)
    row["metadata"] = {"a": 1}
    (values,) = route.records([row])
    assert values[route.columns.index("metadata")] == '{"a": 1}'


# -- reading: lines and the header -----------------------------------------------------------


def test_read_records_numbers_lines_and_keeps_fractions_as_text() -> None:
    """Lines are numbered from 1, str and bytes alike, and a number with a fraction stays its exact text."""
    found = parsed('{"type": "a", "x": 0.1}\n', b'{"type": "b", "x": 2}\n')
    assert [(number, record["type"]) for number, record in found] == [(1, "a"), (2, "b")]
    assert found[0][1]["x"] == "0.1"
    assert type(found[0][1]["x"]) is values.Number
    assert found[1][1]["x"] == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "Line 2 of the export is not JSON"),
        ('{"type": "a", "x": NaN}', "Line 2 of the export is not JSON"),
        ("[1, 2]", "Line 2 of the export is not an object with a 'type'"),
        ('{"kind": "a"}', "Line 2 of the export is not an object with a 'type'"),
        ('{"type": 3}', "Line 2 of the export is not an object with a 'type'"),
    ],
)
def test_read_records_refuses_a_line_that_is_not_a_record(line: str, message: str) -> None:
    """A line that is not a JSON object with a string 'type' (or holds NaN) is InvalidInputError naming it."""
    with pytest.raises(InvalidInputError, match=message):
        parsed('{"type": "a"}', line)


EXPORTED_MEMORY = (
    '{"type" : "memories", "org_id" : "o", "memory_id" : "%s", "user_id" : "u", "agent_id" : "a", '
    '"interaction_id" : null, "memory" : "Jake likes \\"embedding\\" : [1] tea", '
    '"obtained_at" : "2026-01-01T12:00:00.000000+00:00", "seq" : 7, '
    '"metadata" : {"score": 0.5, "tags": ["x"]}, "embedding" : %s, "searchable" : true}'
)


@pytest.mark.parametrize("line_type", [str, bytes])
def test_read_records_takes_an_exported_embedding_as_its_text(line_type: type) -> None:
    """An embedding as the export writes it (pgvector's text form) is kept as that text, unparsed,
    and decodes to the same row as the same record written any other way."""
    line = EXPORTED_MEMORY % (MEMORY_ID, "[0.1,1,-2.5e-05]")
    [(_, record)] = parsed(line.encode() if line_type is bytes else line)
    assert type(record["embedding"]) is values.VectorText
    assert record["embedding"] == "[0.1,1,-2.5e-05]"
    assert record["memory"] == 'Jake likes "embedding" : [1] tea'
    assert records.decode(memories, record, 2, DIMENSIONS) == decode_memory(memory=record["memory"])


def test_read_records_parses_an_embedding_inside_a_json_value_as_json() -> None:
    """An "embedding" array inside a JSON column is the column's value, never taken for the record's vector."""
    line = EXPORTED_MEMORY % (MEMORY_ID, "null")
    line = line.replace('"metadata" : {"score": 0.5, "tags": ["x"]}', '"metadata" : {"embedding" : [0.5,2]}')
    [(_, record)] = parsed(line)
    assert record["embedding"] is None
    assert record["metadata"] == {"embedding": ["0.5", 2]}


@pytest.mark.parametrize("vector", ["[0.1,0.2]", "[]", "[0.1,0.2,0.3,0.4]"])
def test_decode_refuses_an_exported_embedding_of_another_length(vector: str) -> None:
    """The length of an embedding kept as its text is checked like a parsed one's."""
    [(_, record)] = parsed(EXPORTED_MEMORY % (MEMORY_ID, vector))
    assert type(record["embedding"]) is values.VectorText
    with pytest.raises(InvalidInputError, match=r"^Line 2: memories\.embedding: expected a list of 3 numbers"):
        records.decode(memories, record, 2, DIMENSIONS)


def test_read_records_turns_a_broken_stream_into_invalid_input() -> None:
    """A read that fails mid-file (a damaged gzip stream, another encoding) names the last line read."""

    def lines() -> Any:
        yield '{"type": "a"}'
        raise EOFError("compressed file ended")

    with pytest.raises(InvalidInputError, match="cannot be read after line 1"):
        list(records.read_records(lines()))


def header(**changes: Any) -> tuple[int, dict[str, Any]]:
    return 1, {"type": records.FORMAT, "version": records.VERSION, "embedding_dimensions": DIMENSIONS} | changes


def test_check_header_returns_a_good_header() -> None:
    """A header of this format and version with a positive dimension is returned as it is."""
    assert records.check_header(header())["embedding_dimensions"] == DIMENSIONS


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (None, "The export is empty"),
        (header(type="memora_pg_export_end"), "not a memora_pg export header"),
        (header(version=2), "export format version 2 is not supported"),
        (header(embedding_dimensions=0), "embedding_dimensions must be a positive integer"),
        (header(embedding_dimensions=True), "embedding_dimensions must be a positive integer"),
        (header(embedding_dimensions="3"), "embedding_dimensions must be a positive integer"),
    ],
)
def test_check_header_refuses_what_this_version_cannot_read(
    first: tuple[int, dict[str, Any]] | None, message: str
) -> None:
    """No header, another format or version, or a dimension that is not a positive integer is InvalidInputError."""
    with pytest.raises(InvalidInputError, match=message):
        records.check_header(first)


# -- reading: one record into insert parameters ----------------------------------------------


def test_decode_a_memory() -> None:
    """Every value comes back typed for its column; the vector as pgvector text with its decimals untouched."""
    row = decode_memory()
    assert row["memory_id"] == uuid.UUID(MEMORY_ID)
    assert row["obtained_at"] == datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    assert row["seq"] == 7
    assert row["metadata"] == {"score": 0.5, "tags": ["x"]}
    assert row["embedding"] == "[0.1,1,-2.5e-05]"
    assert row["interaction_id"] is None
    # The full-text column's parameter is the text it is computed from.
    assert row["search_text"] == "Jake likes tea"


def test_decode_keeps_a_timestamps_offset() -> None:
    """A timestamp with another offset than UTC is the same instant."""
    row = decode_memory(obtained_at="2026-01-01T14:00:00.000000+02:00")
    assert row["obtained_at"] == datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    assert row["obtained_at"].utcoffset() == timedelta(hours=2)


def test_decode_an_unsearchable_memory() -> None:
    """A memory exported with searchable false, and without a vector, gets neither."""
    row = decode_memory(searchable=False, embedding=None)
    assert row["search_text"] is None
    assert row["embedding"] is None


def test_decode_stores_sql_null_for_an_absent_json_value() -> None:
    """A null JSON column becomes SQL NULL, not JSON's null."""
    record = content_record(content_bytes=base64.b64encode(b"\x00\xffbytes").decode("ascii"))
    row = records.decode(autogen_contents, record, 5, DIMENSIONS)
    assert isinstance(row["content_json"], Null)
    assert row["content_bytes"] == b"\x00\xffbytes"
    assert row["content_text"] is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory": None}, r"memories\.memory is missing or null"),
        ({"extra": 1}, "memories has no field 'extra'"),
        ({"memory_id": "not-a-uuid"}, r"memories\.memory_id"),
        ({"memory": 5}, r"memories\.memory: expected a string"),
        ({"memory": "nul\x00byte"}, "text may not contain NUL characters"),
        ({"seq": True}, r"memories\.seq: expected an integer"),
        ({"seq": "7"}, r"memories\.seq: expected an integer"),
        ({"searchable": 1}, "expected true or false"),
        ({"obtained_at": "2026-01-01T12:00:00"}, "has no UTC offset"),
        ({"obtained_at": "yesterday"}, r"memories\.obtained_at"),
        ({"embedding": [0.1, 0.2]}, "expected a list of 3 numbers"),
        ({"embedding": "[0.1,0.2,0.3]"}, "expected a list of 3 numbers"),
        ({"embedding": [0.1, "0.2", 0.3]}, "expected a list of numbers"),
    ],
)
def test_decode_refuses_a_value_its_column_cannot_take(changes: dict[str, Any], message: str) -> None:
    """A missing required value, an unknown key or a value of the wrong kind is InvalidInputError naming the line."""
    with pytest.raises(InvalidInputError, match=rf"^Line 2: .*{message}"):
        decode_memory(**changes)


def test_decode_refuses_bytes_that_are_not_base64() -> None:
    """A bytes column must hold strict base64."""
    record = content_record(content_bytes="not base64!")
    with pytest.raises(InvalidInputError, match="not base64"):
        records.decode(autogen_contents, record, 9, DIMENSIONS)


def test_decode_a_history_event_keeps_booleans() -> None:
    """A boolean column takes only true or false."""
    record = {
        "type": "memory_history",
        "org_id": "o",
        "event_id": MEMORY_ID,
        "memory_id": MEMORY_ID,
        "user_id": "u",
        "event": "ADD",
        "is_deleted": False,
        "seq": 3,
        "created_at": "2026-01-01T12:00:00.000000+00:00",
    }
    row = records.decode(memory_history, record, 4, DIMENSIONS)
    assert row["is_deleted"] is False
    assert (row["old_memory"], row["actor_id"]) == (None, None)


def test_tables_without_derived_columns_are_copied_straight_in() -> None:
    """Only a table with an embedding or a full-text vector goes through a temporary table."""
    staged = {table.name for table in records.EXPORTED_TABLES if records.staged(table, "memora").staging is not None}
    assert staged == {"memories", "autogen_contents", "store_items"}
