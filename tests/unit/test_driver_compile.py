"""How memora_pg.driver compiles statements: once, in the schema, with SQLAlchemy's parameters."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Numeric, Text, TypeDecorator, bindparam, cast, literal, select, tuple_
from sqlalchemy.dialects.postgresql import asyncpg, psycopg

from memora_pg import driver
from memora_pg.errors import ConfigurationError
from memora_pg.schema import memories

DIALECT = asyncpg.dialect()


def test_a_raw_constant_is_compiled_once_per_schema() -> None:
    template = "SELECT memory FROM {schema}.memories WHERE org_id = :org_id AND user_id = :user_id"
    one, own = driver.prepared(template, "alpha", DIALECT)
    assert own == {}
    assert one.bind({"user_id": "u", "org_id": "o", "unused": 1}) == (
        'SELECT memory FROM "alpha".memories WHERE org_id = $1 AND user_id = $2',
        ["o", "u"],
    )
    assert driver.prepared(template, "alpha", DIALECT)[0] is one
    other, _ = driver.prepared(template, "beta", DIALECT)
    assert '"beta".memories' in other.sql


def test_a_core_statement_is_compiled_once_with_its_own_values() -> None:
    statement = select(memories.c.memory, literal(7).label("seven")).where(
        memories.c.org_id == bindparam("org_id"), memories.c.user_id == "fixed"
    )
    compiled, own = driver.prepared(statement, "alpha", DIALECT)
    assert own == {}
    assert driver.prepared(statement, "alpha", DIALECT)[0] is compiled
    assert "__[SCHEMA" not in compiled.sql
    assert "FROM alpha.memories" in compiled.sql
    sql, arguments = compiled.bind({"org_id": "o"})
    assert sql == compiled.sql
    assert sorted(map(str, arguments)) == ["7", "fixed", "o"]
    assert not compiled.checked  # typed columns: checked on the first run, from the types the server describes
    compiled.check_columns([25, 23])  # text, integer: SQLAlchemy returns both as asyncpg does
    assert compiled.checked


def test_statements_built_per_call_with_other_values_are_compiled_once() -> None:
    """A statement of a shape already compiled reuses it, binding the values it holds itself."""

    def by_user(user_id: str) -> Any:
        return select(memories.c.memory).where(memories.c.org_id == "o", memories.c.user_id == user_id)

    first, first_own = driver.prepared(by_user("u1"), "gamma", DIALECT)
    second, second_own = driver.prepared(by_user("u2"), "gamma", DIALECT)
    assert second is first
    assert first_own == {}
    assert first.bind(first_own)[1] == ["o", "u1"]
    assert first.bind(second_own)[1] == ["o", "u2"]


def test_a_column_sqlalchemy_would_convert_is_refused_on_its_first_run() -> None:
    statement = select(cast(memories.c.seq, Numeric(asdecimal=False)).label("n"))
    compiled, _ = driver.prepared(statement, "alpha", DIALECT)
    with pytest.raises(TypeError, match="SQLAlchemy would convert"):
        compiled.check_columns([1700])  # numeric, which SQLAlchemy makes a float
    assert not compiled.checked


def test_an_expanding_list_gets_one_parameter_per_item_in_each_call() -> None:
    statement = select(memories.c.memory).where(
        memories.c.org_id == bindparam("org_id"), memories.c.memory_id.in_(bindparam("ids", expanding=True))
    )
    compiled, _ = driver.prepared(statement, "alpha", DIALECT)
    three_sql, three = compiled.bind({"org_id": "o", "ids": ["a", "b", "c"]})
    assert "__[" not in three_sql
    assert "alpha.memories" in three_sql
    assert three_sql.count("$") == 4
    assert [str(value) for value in three] == ["o", "a", "b", "c"]
    one_sql, one = compiled.bind({"org_id": "o", "ids": ["z"]})
    assert one_sql.count("$") == 2
    assert [str(value) for value in one] == ["o", "z"]


def test_a_list_of_tuples_expands_into_one_parameter_per_element() -> None:
    statement = select(memories.c.memory).where(
        tuple_(memories.c.org_id, memories.c.user_id).in_([("o", "u"), ("p", "v")])
    )
    sql, arguments = driver.prepared(statement, "alpha", DIALECT)[0].bind({})
    assert "IN (($1, $2), ($3, $4))" in sql
    assert arguments == ["o", "u", "p", "v"]


def test_another_driver_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="asyncpg"):
        driver.prepared("SELECT 1", "memora", psycopg.dialect())


@pytest.mark.parametrize(
    ("status", "count"),
    [("INSERT 0 5", 5), ("DELETE 3", 3), ("UPDATE 0", 0), ("SELECT 12", 12), ("SET", 0), ("CREATE INDEX", 0)],
)
def test_the_rows_a_command_touched_come_from_its_tag(status: str, count: int) -> None:
    assert driver.row_count(status) == count


class _Shouted(TypeDecorator[str]):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return value.upper() if value is not None else None


def test_a_parameter_is_converted_as_its_type_says() -> None:
    """Each parameter goes through its type's bind processor, as SQLAlchemy's own execution would send it."""
    statement = select(memories.c.memory).where(memories.c.memory == bindparam("text", type_=_Shouted()))
    compiled, _ = driver.prepared(statement, "alpha", DIALECT)
    assert compiled.bind({"text": "quiet"})[1] == ["QUIET"]
    assert compiled.bind({"text": None})[1] == [None]
