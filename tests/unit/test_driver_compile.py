"""How memora_pg.driver compiles statements: once, in the schema, with SQLAlchemy's parameters."""

from __future__ import annotations

from sqlalchemy import bindparam, literal, select
from sqlalchemy.dialects.postgresql import asyncpg

from memora_pg import driver
from memora_pg.schema import memories
from memora_pg.statements import Statement

DIALECT = asyncpg.dialect()


def test_a_raw_constant_is_compiled_once_per_schema() -> None:
    template = "SELECT memory FROM {schema}.memories WHERE org_id = :org_id AND user_id = :user_id"
    one = driver.prepared(Statement(template), "alpha", DIALECT)
    assert one is not None
    assert one.sql == 'SELECT memory FROM "alpha".memories WHERE org_id = $1 AND user_id = $2'
    assert one.arguments({"user_id": "u", "org_id": "o", "unused": 1}) == ["o", "u"]
    assert driver.prepared(Statement(template), "alpha", DIALECT) is one
    other = driver.prepared(Statement(template), "beta", DIALECT)
    assert other is not None
    assert '"beta".memories' in other.sql


def test_a_core_statement_is_compiled_on_its_second_call_with_its_own_values() -> None:
    statement = select(memories.c.memory, literal(7).label("seven")).where(
        memories.c.org_id == bindparam("org_id"), memories.c.user_id == "fixed"
    )
    assert (
        driver.prepared(Statement(statement), "alpha", DIALECT) is None
    )  # a statement built per call stays SQLAlchemy's
    compiled = driver.prepared(Statement(statement), "alpha", DIALECT)
    assert compiled is not None
    assert "__[SCHEMA" not in compiled.sql
    assert "FROM alpha.memories" in compiled.sql
    assert sorted(map(str, compiled.arguments({"org_id": "o"}))) == ["7", "fixed", "o"]
    assert compiled.usable is None  # typed columns: usable once a first run has shown their types
    compiled.check_columns([("memory", 25), ("seven", 23)])
    assert compiled.usable is True


def test_columns_sqlalchemy_converts_keep_the_statement_in_sqlalchemy() -> None:
    from sqlalchemy import Numeric, cast

    statement = select(cast(memories.c.seq, Numeric(asdecimal=False)).label("n"))
    driver.prepared(Statement(statement), "alpha", DIALECT)
    compiled = driver.prepared(Statement(statement), "alpha", DIALECT)
    assert compiled is not None
    compiled.check_columns([("n", 1700)])  # numeric, which SQLAlchemy makes a float
    assert compiled.usable is False
    assert driver.prepared(Statement(statement), "alpha", DIALECT) is None


def test_an_expanding_list_keeps_the_statement_in_sqlalchemy() -> None:
    statement = select(memories.c.memory).where(memories.c.memory_id.in_(bindparam("ids", expanding=True)))
    driver.prepared(Statement(statement), "alpha", DIALECT)
    assert driver.prepared(Statement(statement), "alpha", DIALECT) is None
