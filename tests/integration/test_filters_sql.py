"""Compiled mem0 filters select exactly the intended rows on the real database, and never fail on stored data."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import event, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memora_pg.mem0.filters import compile_filters
from memora_pg.schema import memories, organizations, users
from tests.conftest import TEST_SCHEMA

ORG = "org-filters"

# label: (user_id, agent_id, metadata); '' is "no user" / "no agent", as the Memory API stores it.
ROWS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "m1": ("u1", "a1", {"priority": 5, "tag": "Work", "run_id": "r1", "score": 1.0}),
    "m2": ("u1", "a1", {"priority": 10, "tag": "work", "run_id": "r2", "score": 1}),
    "m3": ("u1", "", {"priority": "7", "tag": "Éclair École", "flag": True}),
    "m4": ("u2", "a2", {"priority": 2.5, "tag": "home", "flag": False, "run_id": "r1"}),
    "m5": ("u2", "a1", {"priority": None, "tag": None}),
    "m6": ("", "a2", {"priority": [20, 1], "tag": ["work", "home"]}),
    "m7": ("", "", {"priority": {"value": 20}, "nested": {"a": 1, "b": [1, 2]}}),
    "m8": ("u1", "a2", {}),
    "m9": ("u2", "a2", {"priority": True, "tag": "WORK-LIFE", "and": "lower"}),
    "m10": ("u1", "a1", {"priority": 100, "tag": "abc", "run_id": "r3", "nested": {"a": 1}}),
}
ALL = frozenset(ROWS)


def _but(*labels: str) -> set[str]:
    return set(ALL - set(labels))


@pytest.fixture
async def db(engine: AsyncEngine) -> AsyncEngine:
    """The migrated database holding one organization, its users and the ten ROWS."""
    placed = engine.execution_options(schema_translate_map={None: TEST_SCHEMA})
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    async with placed.begin() as conn:
        await conn.execute(insert(organizations).values(org_id=ORG, org_name="Filters"))
        await conn.execute(
            insert(users), [{"org_id": ORG, "user_id": u, "user_name": u or "(no user)"} for u in ("u1", "u2", "")]
        )
        await conn.execute(
            insert(memories),
            [
                {
                    "org_id": ORG,
                    "memory_id": uuid.uuid4(),
                    "user_id": user_id,
                    "agent_id": agent_id,
                    "memory": label,
                    "obtained_at": at,
                    "metadata": metadata,
                }
                for label, (user_id, agent_id, metadata) in ROWS.items()
            ],
        )
    return placed


async def matching(db: AsyncEngine, filters: Any) -> set[str]:
    async with db.connect() as conn:
        rows = await conn.execute(select(memories.c.memory).where(memories.c.org_id == ORG, compile_filters(filters)))
        return set(rows.scalars())


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    # exact match and eq: JSON equality, numbers numerically, strings case-sensitively
    ("string", {"tag": "work"}, {"m2"}),
    ("string eq", {"tag": {"eq": "Work"}}, {"m1"}),
    ("int equals float", {"score": 1}, {"m1", "m2"}),
    ("float equals int", {"score": 1.0}, {"m1", "m2"}),
    ("number equals its numeric string", {"priority": 7}, {"m3"}),
    ("numeric string", {"priority": "7"}, {"m3"}),
    ("true", {"flag": True}, {"m3"}),
    ("false", {"flag": {"eq": False}}, {"m4"}),
    ("true is not 1", {"priority": 1}, set()),
    ("bool value", {"priority": True}, {"m9"}),
    ("null value, not missing", {"priority": None}, {"m5"}),
    ("array element is not the value", {"tag": "home"}, {"m4"}),
    ("exact array", {"priority": {"eq": [20, 1]}}, {"m6"}),
    ("array order matters", {"priority": {"eq": [1, 20]}}, set()),
    ("sub-array is not equal", {"priority": {"eq": [20]}}, set()),
    ("exact object", {"nested": {"eq": {"a": 1}}}, {"m10"}),
    ("object numbers numerically", {"nested": {"eq": {"a": 1.0, "b": [1, 2.0]}}}, {"m7"}),
    ("unicode string", {"tag": "Éclair École"}, {"m3"}),
    # ne / nin: unknown (false) where the key is missing, true for a value of another type
    ("ne on a missing key", {"run_id": {"ne": "r1"}}, {"m2", "m10"}),
    ("ne null", {"tag": {"ne": None}}, {"m1", "m2", "m3", "m4", "m6", "m9", "m10"}),
    ("ne number", {"score": {"ne": 1.0}}, set()),
    ("in", {"run_id": {"in": ["r1", "r3"]}}, {"m1", "m4", "m10"}),
    ("in mixed types", {"priority": {"in": [5, "7", None, True]}}, {"m1", "m3", "m5", "m9"}),
    ("in with an array value", {"priority": {"in": [[20, 1], 2.5]}}, {"m4", "m6"}),
    ("in empty", {"priority": {"in": []}}, set()),
    ("nin", {"priority": {"nin": [5, 10]}}, {"m3", "m4", "m5", "m6", "m7", "m9", "m10"}),
    ("nin on missing keys", {"run_id": {"nin": ["r1", "r2", "r3"]}}, set()),
    ("nin empty", {"priority": {"nin": []}}, _but("m8")),
    # ranges: numbers and numeric strings numerically, other strings as strings; the rest never matches
    ("gt number", {"priority": {"gt": 4}}, {"m1", "m2", "m3", "m10"}),
    ("gte number", {"priority": {"gte": 5}}, {"m1", "m2", "m3", "m10"}),
    ("lt number", {"priority": {"lt": 5}}, {"m4"}),
    ("lte float", {"priority": {"lte": 2.5}}, {"m4"}),
    ("gte int against float", {"score": {"gte": 1}}, {"m1", "m2"}),
    ("lt int against float", {"score": {"lt": 1}}, set()),
    ("two bounds", {"priority": {"gte": 5, "lt": 100}}, {"m1", "m2", "m3"}),
    ("string range, code-point order", {"tag": {"gt": "a"}}, {"m2", "m3", "m4", "m10"}),
    ("numeric string operand compares numerically", {"priority": {"gt": "5"}}, {"m2", "m3", "m10"}),
    ("number operand never meets strings", {"tag": {"lt": 1000}}, set()),
    ("range on a missing key", {"missing": {"lt": 1000}}, set()),
    ("range on objects", {"nested": {"gt": 0}}, set()),
    # contains / icontains: the text of strings, numbers and bools; never arrays or objects
    ("contains", {"tag": {"contains": "ork"}}, {"m1", "m2"}),
    ("contains is case-sensitive", {"tag": {"contains": "WORK"}}, {"m9"}),
    ("icontains", {"tag": {"icontains": "WORK"}}, {"m1", "m2", "m9"}),
    ("icontains unicode", {"tag": {"icontains": "éCOLE"}}, {"m3"}),
    ("icontains unicode upper", {"tag": {"icontains": "ÉCLAIR"}}, {"m3"}),
    ("contains looks into numbers", {"priority": {"contains": "5"}}, {"m1", "m4"}),
    ("contains never matches arrays", {"tag": {"icontains": "home"}}, {"m4"}),
    ("contains empty", {"tag": {"contains": ""}}, {"m1", "m2", "m3", "m4", "m9", "m10"}),
    ("contains wildcard characters literally", {"tag": {"contains": "%"}}, set()),
    # wildcard: the key is present, whatever its value
    ("wildcard", {"run_id": "*"}, {"m1", "m2", "m4", "m10"}),
    ("wildcard includes null", {"tag": "*"}, _but("m7", "m8")),
    ("literal star", {"tag": {"eq": "*"}}, set()),
    # entity columns
    ("user_id", {"user_id": "u1"}, {"m1", "m2", "m3", "m8", "m10"}),
    ("user_id wildcard", {"user_id": "*"}, _but("m6", "m7")),
    ("agent_id wildcard", {"agent_id": "*"}, _but("m3", "m7")),
    ("no user", {"user_id": ""}, {"m6", "m7"}),
    ("user_id ne", {"user_id": {"ne": "u1"}}, {"m4", "m5", "m9"}),
    ("user_id in", {"user_id": {"in": ["u2", ""]}}, {"m4", "m5", "m6", "m7", "m9"}),
    ("user_id nin", {"user_id": {"nin": ["u1", "u2"]}}, set()),
    ("user_id gt", {"user_id": {"gt": "u1"}}, {"m4", "m5", "m9"}),
    ("agent_id icontains", {"agent_id": {"icontains": "A2"}}, {"m4", "m6", "m8", "m9"}),
    ("user_id and agent_id", {"user_id": "u1", "agent_id": "a1"}, {"m1", "m2", "m10"}),
    ("run_id is metadata", {"user_id": "u1", "run_id": "r1"}, {"m1"}),
    # logic
    ("lower-case and is a key", {"and": "lower"}, {"m9"}),
    ("AND", {"AND": [{"user_id": "u1"}, {"priority": {"gt": 5}}]}, {"m2", "m3", "m10"}),
    ("OR", {"OR": [{"tag": "home"}, {"priority": None}]}, {"m4", "m5"}),
    ("NOT: none of its list", {"NOT": [{"user_id": "u1"}, {"agent_id": "a1"}]}, {"m4", "m9"}),
    ("NOT of a missing key", {"NOT": [{"run_id": "*"}]}, _but("m1", "m2", "m4", "m10")),
    ("NOT of a type mismatch", {"NOT": [{"tag": {"gt": 0}}]}, _but("m7", "m8")),
    (
        "nested",
        {"OR": [{"priority": {"gt": 50}}, {"AND": [{"user_id": "u2"}, {"NOT": [{"flag": False}]}]}]},
        {"m10"},
    ),
    (
        "same key in two AND branches",
        {"AND": [{"priority": {"gt": 1}}, {"priority": {"lt": 50}}]},
        {"m1", "m2", "m3", "m4"},
    ),
    (
        "deep nesting",
        {"NOT": [{"NOT": [{"OR": [{"AND": [{"OR": [{"run_id": "r2"}, {"run_id": "r3"}]}, {"user_id": "u1"}]}]}]}]},
        {"m2", "m10"},
    ),
]


@pytest.mark.parametrize(("filters", "expected"), [(f, e) for _, f, e in CASES], ids=[c[0] for c in CASES])
async def test_each_filter_selects_exactly_the_expected_rows(
    db: AsyncEngine, filters: dict[str, Any], expected: set[str]
) -> None:
    """Each operator, on each kind of stored value, matches exactly the rows its documented semantics says."""
    assert await matching(db, filters) == expected


CONDITIONS: list[Any] = [
    "x",
    "*",
    7,
    1.5,
    True,
    None,
    {"eq": {"a": [1]}},
    {"ne": [1]},
    {"in": ["x", 2, None, {"a": 1}]},
    {"nin": [False, [20, 1]]},
    {"gt": 1},
    {"gte": "a"},
    {"lt": -1.5},
    {"lte": "Ü"},
    {"contains": "é"},
    {"icontains": "É"},
]


@pytest.mark.parametrize("condition", CONDITIONS, ids=repr)
async def test_no_stored_value_breaks_a_condition_and_not_is_its_complement_among_known_rows(
    db: AsyncEngine, condition: Any
) -> None:
    """On every kind of stored value a condition runs without error, and NOT selects exactly the other
    rows among those that have the key (a missing key is unknown, as in mem0's SQL); the wildcard asks
    about presence itself, so its NOT is the rows without the key."""
    for key in ("priority", "tag", "flag", "nested", "run_id", "missing", "score"):
        chosen = await matching(db, {key: condition})
        rest = await matching(db, {"NOT": [{key: condition}]})
        having = await matching(db, {key: "*"})
        assert chosen.isdisjoint(rest)
        assert chosen | rest == (ALL if condition == "*" else having)


@pytest.mark.parametrize(
    "attack",
    ["'; DROP TABLE memories; --", "tag') OR true --", "\\' OR '1'='1", "$1", "? OR true", "%s%%"],
)
async def test_injection_attempts_are_plain_data(db: AsyncEngine, attack: str) -> None:
    """Hostile keys and values are compared as data: nothing matches and the table is intact."""
    filters = {"OR": [{attack: "x"}, {"tag": attack}, {"tag": {"icontains": attack}}, {attack: {"gt": attack}}]}
    assert await matching(db, filters) == set()
    assert await matching(db, {"user_id": {"in": [attack]}, attack: "*"}) == set()
    async with db.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(memories)) == len(ROWS)


async def test_unicode_keys_match(db: AsyncEngine) -> None:
    """A key with non-ASCII characters and spaces is an ordinary key."""
    async with db.begin() as conn:
        await conn.execute(
            memories.update()
            .where(memories.c.memory == "m8")
            .values(metadata={"clé d'été ✓": "oui", "a.b": 1, "$.x": 2})
        )
    assert await matching(db, {"clé d'été ✓": "oui"}) == {"m8"}
    assert await matching(db, {"a.b": {"gte": 1}, "$.x": "*"}) == {"m8"}


def _explain(conn: AsyncConnection) -> None:
    """Turn every statement on ``conn`` into EXPLAIN (FORMAT JSON) of itself."""

    def prefix(*args: Any) -> tuple[str, Any]:
        statement, parameters = args[2], args[3]
        return "EXPLAIN (FORMAT JSON) " + statement, parameters

    event.listen(conn.sync_connection, "before_cursor_execute", prefix, retval=True)


@pytest.mark.parametrize(
    "filters",
    [
        {"tag": "work"},
        {"priority": {"eq": 5}},
        {"run_id": {"in": ["r1", "r2"]}},
        {"run_id": "*"},
        {"tag": "work", "priority": {"gt": 1}},
    ],
    ids=["exact", "eq", "in", "wildcard", "eq-plus-range"],
)
async def test_containment_and_existence_can_use_the_gin_index(db: AsyncEngine, filters: dict[str, Any]) -> None:
    """eq, in and the wildcard on metadata are answerable from ix_memories_metadata (seq scans disabled)."""
    async with db.connect() as conn:
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        _explain(conn)
        plan = await conn.scalar(select(memories.c.memory).where(compile_filters(filters)))
    if isinstance(plan, str):
        plan = json.loads(plan)
    assert "ix_memories_metadata" in json.dumps(plan)
