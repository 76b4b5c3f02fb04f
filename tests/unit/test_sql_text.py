"""SQL text is filled in one way: every part named, none left open but the schema."""

from __future__ import annotations

import pytest

from memora_pg.sql_text import literal, parts_of, qualified, quoted, render


def test_render_fills_each_part_once_and_leaves_the_schema_for_later() -> None:
    arm = "x AS (SELECT * FROM {schema}.t WHERE {condition})"
    assert (
        render("WITH {arm} SELECT {n}", arm=arm, n=3)
        == "WITH x AS (SELECT * FROM {schema}.t WHERE {condition}) SELECT 3"
    )
    assert render("SELECT * FROM {schema}.t", schema='"s"') == 'SELECT * FROM "s".t'


def test_a_text_without_the_schema_may_still_be_given_it() -> None:
    assert render("SELECT 1", schema='"s"') == "SELECT 1"


def test_json_and_array_literals_are_not_parts() -> None:
    template = "SELECT coalesce(x, '{}'), CAST('{1,2}' AS int[]) FROM {schema}.t"
    assert parts_of(template) == {"schema"}
    assert render(template) == template


def test_a_missing_part_is_refused() -> None:
    with pytest.raises(ValueError, match="missing \\['where'\\]"):
        render("SELECT * FROM t WHERE {where}")


def test_an_unknown_part_is_refused() -> None:
    """A template reworded so that a part's name is gone fails where it is built, not silently."""
    with pytest.raises(ValueError, match="unknown \\['own'\\]"):
        render("SELECT * FROM t", own="AND true")


def test_quoted_doubles_a_quote_and_refuses_what_no_name_can_be() -> None:
    assert quoted("memora") == '"memora"'
    assert quoted('a"b') == '"a""b"'
    assert qualified("memora", "my-collection") == '"memora"."my-collection"'
    for name in ("", "a\x00b"):
        with pytest.raises(ValueError, match="not a valid SQL identifier"):
            quoted(name)


def test_literal_is_plain_unless_it_holds_a_backslash() -> None:
    assert literal("org-1") == "'org-1'"
    assert literal("it's") == "'it''s'"
    assert literal("a\\b") == "E'a\\\\b'"
    with pytest.raises(ValueError, match="NUL"):
        literal("a\x00")
