"""The mem0 filter language compiles to bound-parameter SQL over ``memories`` and rejects bad filters."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql import asyncpg, psycopg

from memora_pg.errors import InvalidInputError
from memora_pg.mem0.errors import DuragValidationError
from memora_pg.mem0.filters import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    compile_filters,
    entity_ids,
    numeric_string,
    uses_user_scope,
)

# Named parameters (%(name)s) keep the expected SQL readable; production runs asyncpg.
DIALECT = psycopg.dialect()
CONTAINS = "memories.metadata @> %(metadata_1)s::JSONB"


def sql(filters: Any) -> tuple[str, dict[str, Any]]:
    compiled = compile_filters(filters).compile(dialect=DIALECT)
    return str(compiled), dict(compiled.params)


def range_sql(op: str, n: int = 1) -> str:
    return (
        f"coalesce(jsonb_path_match(memories.metadata -> %(key_{n})s::VARCHAR, 'strict $ {op} $v'::jsonpath, "
        f"%(vars_{n})s::JSONB, true), false)"
    )


def contains_sql(haystack: str, needle: str) -> str:
    return (
        "CASE WHEN (jsonb_typeof(memories.metadata -> %(key_1)s::VARCHAR) IN (__[POSTCOMPILE_jsonb_typeof_1])) "
        f"THEN strpos({haystack}, {needle}) > 0 ELSE false END"
    )


# -- each operator's shape ---------------------------------------------------------------------


def test_empty_filters_compile_to_true() -> None:
    """An empty filter dict matches every row."""
    assert sql({}) == ("true", {})


def test_exact_match_is_one_containment() -> None:
    """A plain value compiles to metadata @> {key: value}, served by the GIN index."""
    assert sql({"tag": "work"}) == (CONTAINS, {"metadata_1": {"tag": "work"}})


@pytest.mark.parametrize("value", ["work", True, False, None])
def test_eq_operator_is_the_same_containment_as_a_plain_value(value: Any) -> None:
    """{"eq": v} and a plain v compile identically, for strings, numbers, bools and null."""
    assert sql({"k": {"eq": value}}) == sql({"k": value}) == (CONTAINS, {"metadata_1": {"k": value}})


def test_in_a_tuple_is_accepted_like_a_list() -> None:
    """A tuple of values is a list of values."""
    assert sql({"k": {"in": ("a", "b")}}) == sql({"k": {"in": ["a", "b"]}})


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, [], {}])
def test_eq_on_a_list_or_dict_adds_exact_equality_to_containment(value: Any) -> None:
    """For arrays and objects @> finds candidates and jsonb equality keeps the exact matches."""
    assert sql({"k": {"eq": value}}) == (
        f"({CONTAINS}) AND (memories.metadata -> %(key_1)s::VARCHAR) = %(value_1)s::JSONB",
        {"metadata_1": {"k": value}, "key_1": "k", "value_1": value},
    )


@pytest.mark.parametrize(("op", "symbol"), [("gt", ">"), ("gte", ">="), ("lt", "<"), ("lte", "<=")])
@pytest.mark.parametrize("operand", ["m", "2024-01-01", "abc"])
def test_ranges_are_strict_jsonpath_with_a_bound_jsonb_variable(op: str, symbol: str, operand: Any) -> None:
    """A range with a non-numeric string: coalesce(jsonb_path_match(metadata -> key, 'strict $ op $v', ...), false)."""
    assert sql({"k": {op: operand}}) == (range_sql(symbol), {"key_1": "k", "vars_1": {"v": operand}})


def test_contains_is_strpos_guarded_by_the_string_type() -> None:
    """contains applies strpos to the text of scalars (strings, numbers, bools); anything else is false."""
    assert sql({"k": {"contains": "ork"}}) == (
        contains_sql("memories.metadata ->> %(key_2)s::VARCHAR", "%(needle_1)s::VARCHAR"),
        {"key_1": "k", "jsonb_typeof_1": ["string", "number", "boolean"], "key_2": "k", "needle_1": "ork"},
    )


def test_icontains_lowers_both_sides() -> None:
    """icontains compares lower(value) with lower(needle), both folded by the database."""
    assert sql({"k": {"icontains": "ÉCOLE"}}) == (
        contains_sql("lower(memories.metadata ->> %(key_2)s::VARCHAR)", "lower(%(needle_1)s::VARCHAR)"),
        {"key_1": "k", "jsonb_typeof_1": ["string", "number", "boolean"], "key_2": "k", "needle_1": "ÉCOLE"},
    )


def test_wildcard_is_key_existence() -> None:
    """{"key": "*"} compiles to metadata ? key, served by the GIN index."""
    assert sql({"k": "*"}) == ("memories.metadata ? %(metadata_1)s::VARCHAR", {"metadata_1": "k"})


def test_a_quoted_star_under_eq_is_a_literal_string() -> None:
    """Only the bare "*" is the wildcard; {"eq": "*"} matches the string "*"."""
    assert sql({"k": {"eq": "*"}}) == (CONTAINS, {"metadata_1": {"k": "*"}})


def test_run_id_is_a_metadata_key() -> None:
    """run_id lives in the metadata column, like mem0's payload."""
    assert sql({"run_id": "r1"}) == (CONTAINS, {"metadata_1": {"run_id": "r1"}})
    assert sql({"run_id": "*"}) == ("memories.metadata ? %(metadata_1)s::VARCHAR", {"metadata_1": "run_id"})


# -- entity columns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("u1", ("memories.user_id = %(user_id_1)s::VARCHAR", {"user_id_1": "u1"})),
        ({"eq": "u1"}, ("memories.user_id = %(user_id_1)s::VARCHAR", {"user_id_1": "u1"})),
        (
            {"ne": "u1"},
            (
                "memories.user_id != %(user_id_1)s::VARCHAR AND memories.user_id != %(user_id_2)s::VARCHAR",
                {"user_id_1": "", "user_id_2": "u1"},
            ),
        ),
        ({"in": ["u1", "u2"]}, ("memories.user_id IN (__[POSTCOMPILE_user_id_1])", {"user_id_1": ["u1", "u2"]})),
        (
            {"nin": ["u1"]},
            (
                "memories.user_id != %(user_id_1)s::VARCHAR AND (memories.user_id NOT IN (__[POSTCOMPILE_user_id_2]))",
                {"user_id_1": "", "user_id_2": ["u1"]},
            ),
        ),
        ("*", ("memories.user_id != %(user_id_1)s::VARCHAR", {"user_id_1": ""})),
        ("", ("memories.user_id = %(user_id_1)s::VARCHAR", {"user_id_1": ""})),
        (
            {"gt": "u1"},
            ('(memories.user_id COLLATE "C") > %(param_1)s::VARCHAR COLLATE "C"', {"param_1": "u1"}),
        ),
        ({"contains": "u"}, ("strpos(memories.user_id, %(needle_1)s::VARCHAR) > 0", {"needle_1": "u"})),
        (
            {"icontains": "U"},
            ("strpos(lower(memories.user_id), lower(%(needle_1)s::VARCHAR)) > 0", {"needle_1": "U"}),
        ),
    ],
)
def test_user_id_uses_plain_column_comparisons(condition: Any, expected: tuple[str, dict[str, Any]]) -> None:
    """user_id compiles to btree-friendly comparisons on its column; its wildcard is <> ''."""
    assert sql({"user_id": condition}) == expected


def test_agent_id_is_a_column_too() -> None:
    """agent_id compiles to comparisons on the agent_id column."""
    assert sql({"agent_id": "a1"}) == ("memories.agent_id = %(agent_id_1)s::VARCHAR", {"agent_id_1": "a1"})
    assert sql({"agent_id": "*"}) == ("memories.agent_id != %(agent_id_1)s::VARCHAR", {"agent_id_1": ""})


@pytest.mark.parametrize(
    "condition",
    [5, None, True, {"eq": 5}, {"in": ["u1", 2]}, {"gt": 5}, {"contains": 1}, {"eq": ["u1"]}],
)
def test_entity_columns_take_strings_only(condition: Any) -> None:
    """A non-string operand for user_id or agent_id is a caller's mistake, not a non-match."""
    with pytest.raises(DuragValidationError, match=r"user_id takes strings|takes a string|range operators"):
        compile_filters({"user_id": condition})


# -- combining ---------------------------------------------------------------------------------


def test_several_keys_are_anded() -> None:
    """Each key of one dict is a condition, all of which must hold."""
    text, params = sql({"user_id": "u1", "tag": "work"})
    assert text == f"memories.user_id = %(user_id_1)s::VARCHAR AND ({CONTAINS})"
    assert params == {"user_id_1": "u1", "metadata_1": {"tag": "work"}}


@pytest.mark.parametrize("name", ["and", "or", "not", "$and", "And"])
def test_only_upper_case_names_are_logical_operators(name: str) -> None:
    """Lower-case (or $-prefixed) and/or/not are ordinary metadata keys."""
    assert sql({name: "x"}) == (CONTAINS, {"metadata_1": {name: "x"}})


def test_deep_nesting_up_to_the_limit_compiles() -> None:
    """Filters nested exactly MAX_DEPTH dicts deep are accepted."""
    filters: dict[str, Any] = {"k": "x"}
    for _ in range(MAX_DEPTH - 1):
        filters = {"AND": [filters]}
    assert sql(filters) == (CONTAINS, {"metadata_1": {"k": "x"}})


def test_production_dialect_uses_positional_binds_only() -> None:
    """Under asyncpg every value is a $n parameter."""
    compiled = compile_filters({"k": {"gt": 1}, "t": {"icontains": "x"}, "w": "*"}).compile(dialect=asyncpg.dialect())
    assert "$1::VARCHAR" in str(compiled)
    assert "%(" not in str(compiled)


def test_a_number_also_matches_its_numeric_string() -> None:
    """{"k": 5} is one GIN containment per spelling: the number and its canonical string."""
    assert sql({"k": 5}) == (
        "(memories.metadata @> %(metadata_1)s::JSONB) OR (memories.metadata @> %(metadata_2)s::JSONB)",
        {"metadata_1": {"k": 5}, "metadata_2": {"k": "5"}},
    )
    assert sql({"k": "7"})[1] == {"metadata_1": {"k": "7"}, "metadata_2": {"k": 7}}


def test_ne_and_nin_need_the_key() -> None:
    """ne and nin are false where the key is missing (mem0's SQL NULL): key existence AND NOT the match."""
    assert sql({"k": {"ne": "a"}}) == (
        "(memories.metadata ? %(metadata_1)s::VARCHAR) AND NOT ((memories.metadata @> %(metadata_2)s::JSONB))",
        {"metadata_1": "k", "metadata_2": {"k": "a"}},
    )
    assert sql({"k": {"nin": []}}) == ("memories.metadata ? %(metadata_1)s::VARCHAR", {"metadata_1": "k"})
    assert sql({"k": {"in": []}}) == ("false", {})


def test_not_is_none_of_its_list() -> None:
    """{"NOT": [f1, f2]}: each is surely false (the key present and no match)."""
    text, params = sql({"NOT": [{"a": "x"}, {"b": "y"}]})
    assert text == (
        "(memories.metadata ? %(metadata_1)s::VARCHAR) AND NOT ((memories.metadata @> %(metadata_2)s::JSONB)) "
        "AND (memories.metadata ? %(metadata_3)s::VARCHAR) AND NOT ((memories.metadata @> %(metadata_4)s::JSONB))"
    )
    assert params == {"metadata_1": "a", "metadata_2": {"a": "x"}, "metadata_3": "b", "metadata_4": {"b": "y"}}


def test_a_bare_list_is_in() -> None:
    """{"k": [v, ...]} is {"k": {"in": [v, ...]}}, as in mem0."""
    assert sql({"k": ["a", "b"]}) == sql({"k": {"in": ["a", "b"]}})


@pytest.mark.parametrize("operand", [10, 2.5, -3, "6"])
def test_numeric_ranges_cast_only_numbers_and_numeric_strings(operand: Any) -> None:
    """A range with a number (or numeric string) compares numerically, casting only what can be cast."""
    text, params = sql({"k": {"gt": operand}})
    assert "CAST(memories.metadata ->> %(key_2)s::VARCHAR AS NUMERIC) > %(number_1)s" in text
    assert text.endswith("ELSE false END")
    assert str(params["number_1"]) == str(operand)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (["user_id", "u1"], r"filters must be a dict, not list"),
        ("user_id=u1", r"filters must be a dict, not str"),
        (None, r"filters must be a dict, not NoneType"),
        ({"": "x"}, r"filters\[''\]: filter keys must not be empty"),
        ({1: "x"}, r"filters\[1\]: filter keys must be strings"),
        ({"k": {"regex": "x"}}, r"filters\['k'\]\['regex'\]: unknown operator 'regex'"),
        ({"k": {"EQ": "x"}}, r"unknown operator 'EQ'"),
        ({"k": {"eq": 1, "like": "x"}}, r"unknown operator 'like'"),
        ({"k": {"nested": 1}}, r"unknown operator 'nested'.*\{'eq': \{\.\.\.\}\}"),
        ({"k": {}}, r"filters\['k'\]: an operator dict needs at least one operator"),
        ({"k": {"in": "abc"}}, r"filters\['k'\]\['in'\]: in takes a list of values, not str"),
        ({"k": {"in": {"a": 1}}}, r"in takes a list of values, not dict"),
        ({"k": {"nin": 5}}, r"nin takes a list of values, not int"),
        ({"AND": {"k": 1}}, r"filters\['AND'\]: AND takes a non-empty list of filter dicts"),
        ({"AND": []}, r"AND takes a non-empty list"),
        ({"OR": []}, r"OR takes a non-empty list"),
        ({"NOT": []}, r"NOT takes a non-empty list"),
        ({"NOT": {"k": 1}}, r"NOT takes a non-empty list"),
        ({"OR": "k"}, r"OR takes a non-empty list"),
        ({"OR": [{"k": 1}, "k"]}, r"filters\['OR'\]\[1\]: each OR entry must be a non-empty filter dict"),
        ({"AND": [{}]}, r"filters\['AND'\]\[0\]: each AND entry must be a non-empty filter dict"),
        ({"k\x00": 1}, r"must not contain NUL"),
        ({"k": "a\x00b"}, r"filters\['k'\]: strings in filters must not contain NUL"),
        ({"k": {"in": ["ok", "a\x00"]}}, r"filters\['k'\]\['in'\]\[1\]: strings in filters must not contain NUL"),
        ({"k": {"eq": {"a\x00": 1}}}, r"must not contain NUL"),
        ({"k": {"eq": {"a": ["\x00"]}}}, r"filters\['k'\]\['eq'\]\['a'\]\[0\]: strings in filters must not contain"),
        ({"k": {"contains": "\x00"}}, r"must not contain NUL"),
        ({"k": {"gt": "\x00"}}, r"must not contain NUL"),
        ({"user_id": "u\x00"}, r"must not contain NUL"),
        ({"k": "\ud800"}, r"valid Unicode"),
        ({"\udfff": 1}, r"valid Unicode"),
        ({"k": {"gt": True}}, r"range operators take a number or a string, not bool"),
        ({"k": {"gte": None}}, r"range operators take a number or a string, not NoneType"),
        ({"k": {"lt": {"a": 1}}}, r"range operators take a number or a string, not dict"),
        ({"k": {"lte": [1]}}, r"range operators take a number or a string, not list"),
        ({"k": {"gt": math.nan}}, r"numbers in filters must be finite"),
        ({"k": math.inf}, r"numbers in filters must be finite"),
        ({"k": {"in": [-math.inf]}}, r"numbers in filters must be finite"),
        ({"k": {"contains": 5}}, r"contains takes a string, not int"),
        ({"k": {"icontains": None}}, r"icontains takes a string, not NoneType"),
        ({"k": datetime(2026, 1, 1, tzinfo=timezone.utc)}, r"unsupported value of type datetime"),
        ({"k": {"eq": {1, 2}}}, r"unsupported value of type set"),
        ({"k": {"eq": {1: "a"}}}, r"keys of a dict value must be strings"),
    ],
)
def test_invalid_filters_raise_a_validation_error_naming_the_problem(filters: Any, message: str) -> None:
    """Every malformed filter raises DuragValidationError with a message that names the place and the rule."""
    with pytest.raises(DuragValidationError, match=message):
        compile_filters(filters)


def test_validation_errors_are_value_errors_of_the_package_family() -> None:
    """DuragValidationError is an InvalidInputError, hence a ValueError, as mem0 callers expect."""
    with pytest.raises(ValueError, match="unknown operator") as caught:
        compile_filters({"k": {"regex": "x"}})
    assert isinstance(caught.value, InvalidInputError)


def test_nesting_deeper_than_the_limit_is_rejected() -> None:
    """One dict more than MAX_DEPTH levels is a validation error, not a RecursionError."""
    filters: dict[str, Any] = {"k": 1}
    for _ in range(MAX_DEPTH):
        filters = {"OR": [filters]}
    with pytest.raises(DuragValidationError, match=f"at most {MAX_DEPTH} levels"):
        compile_filters(filters)


def test_a_self_referencing_filter_is_rejected_by_the_depth_limit() -> None:
    """A filter that contains itself stops at the depth limit."""
    filters: dict[str, Any] = {}
    filters["NOT"] = [filters]
    with pytest.raises(DuragValidationError, match="levels"):
        compile_filters(filters)


def test_deeply_nested_json_operands_are_rejected() -> None:
    """A dict or list operand nested deeper than MAX_DEPTH is a validation error."""
    value: Any = 1
    for _ in range(MAX_DEPTH):
        value = [value]
    with pytest.raises(DuragValidationError, match="values may nest"):
        compile_filters({"k": {"eq": value}})
    looping: list[Any] = []
    looping.append(looping)
    with pytest.raises(DuragValidationError, match="values may nest"):
        compile_filters({"k": {"in": [looping]}})


def test_up_to_the_condition_limit_compiles() -> None:
    """Exactly MAX_CONDITIONS conditions are accepted."""
    compile_filters({f"k{i}": i for i in range(MAX_CONDITIONS)})
    compile_filters({"k": {"in": list(range(MAX_CONDITIONS))}})


@pytest.mark.parametrize(
    "filters",
    [
        {f"k{i}": i for i in range(MAX_CONDITIONS + 1)},
        {"k": {"in": list(range(MAX_CONDITIONS + 1))}},
        {"user_id": {"nin": [str(i) for i in range(MAX_CONDITIONS + 1)]}},
        {"OR": [{"k": {"gte": i, "lt": i + 1}} for i in range(MAX_CONDITIONS // 2 + 1)]},
        {"AND": [{"k": "*"}], "OR": [{"k": {"in": list(range(MAX_CONDITIONS))}}]},
    ],
)
def test_more_conditions_than_the_limit_are_rejected(filters: Any) -> None:
    """Counting each operator and each in/nin value, more than MAX_CONDITIONS is a validation error."""
    with pytest.raises(DuragValidationError, match=f"at most {MAX_CONDITIONS} conditions"):
        compile_filters(filters)


# -- injection ---------------------------------------------------------------------------------

INJECTIONS = [
    "'; DROP TABLE memories; --",
    "k') OR 1=1 --",
    '"k" = "k"',
    "$1",
    "%(payload)s %% :name",
    "k' || pg_sleep(10) || '",
    "\\'; select 1; --",
]


def _operators(value: str) -> list[Any]:
    return [
        value,
        {"eq": value},
        {"ne": value},
        {"in": [value, value]},
        {"nin": [value]},
        {"gt": value},
        {"lte": value},
        {"contains": value},
        {"icontains": value},
        {"eq": {value: [value]}},
    ]


@pytest.mark.parametrize("attack", INJECTIONS)
@pytest.mark.parametrize("key", ["meta", "user_id", "ATTACK"])
def test_injected_values_end_up_only_in_parameters(attack: str, key: str) -> None:
    """Hostile values never reach the SQL text; the text equals that of a harmless value."""
    name, harmless_name = (attack, "harmless") if key == "ATTACK" else (key, key)
    for condition, harmless in zip(_operators(attack), _operators("x"), strict=True):
        if key == "user_id" and condition == {"eq": {attack: [attack]}}:
            continue  # user_id takes strings only
        text, params = sql({name: condition})
        assert attack not in text
        assert attack in repr(params)
        assert text == sql({harmless_name: harmless})[0]


@pytest.mark.parametrize("attack", INJECTIONS)
def test_injected_keys_end_up_only_in_parameters(attack: str) -> None:
    """Hostile keys never reach the SQL text, whatever the operator and however deep."""
    filters = {"OR": [{attack: {"gt": 1}}, {"NOT": [{attack: "*"}]}, {attack: {"contains": "x"}}]}
    text, params = sql(filters)
    assert attack not in text
    assert attack in repr(params)


_keys = st.text(min_size=1).filter(lambda s: s not in {"AND", "OR", "NOT", "user_id", "agent_id"})
# Numeric strings are left out: they add the containment of the number they spell.
_values = st.text().filter(lambda s: s != "*" and numeric_string(s) is None)


@given(key=_keys, value=_values)
def test_sql_text_never_depends_on_keys_or_values(key: str, value: str) -> None:
    """For any key and string value, the SQL text is that of a fixed key and value (or the filter is rejected)."""
    for condition, harmless in zip(_operators(value), _operators("v"), strict=True):
        try:
            text, _ = sql({key: condition})
        except DuragValidationError:
            assert "\x00" in key + value or any(0xD800 <= ord(c) <= 0xDFFF for c in key + value)
            continue
        assert text == sql({"k": harmless})[0]


# -- entity ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (None, {}),
        ({}, {}),
        ({"user_id": "u1"}, {"user_id": "u1"}),
        ({"user_id": "u1", "agent_id": "a1", "run_id": "r1"}, {"user_id": "u1", "agent_id": "a1", "run_id": "r1"}),
        ({"agent_id": {"eq": "a1"}}, {"agent_id": "a1"}),
        ({"run_id": {"eq": "r1", "ne": "r2"}}, {"run_id": "r1"}),
        ({"user_id": {"eq": "*"}}, {"user_id": "*"}),
        ({"user_id": "*"}, {}),
        ({"user_id": ""}, {}),
        ({"user_id": {"in": ["u1"]}}, {}),
        ({"user_id": {"ne": "u1"}}, {}),
        ({"run_id": 5}, {}),
        ({"run_id": {"eq": 5}}, {}),
        ({"AND": [{"user_id": "u1"}]}, {}),
        ({"OR": [{"user_id": "u1"}], "agent_id": "a1"}, {"agent_id": "a1"}),
        ({"tag": "work", "User_Id": "u1"}, {}),
    ],
)
def test_entity_ids_are_the_top_level_exact_matches(filters: Any, expected: dict[str, str]) -> None:
    """Only a top-level string or {"eq": string} for user_id, agent_id or run_id pins an entity id."""
    assert entity_ids(filters) == expected


def test_entity_ids_validate_the_whole_filter_first() -> None:
    """A malformed filter raises before any id is reported, so it can never scope a write."""
    with pytest.raises(DuragValidationError, match="unknown operator"):
        entity_ids({"user_id": "u1", "tag": {"regex": "x"}})
    with pytest.raises(DuragValidationError, match="must be a dict"):
        entity_ids(["user_id"])  # type: ignore[arg-type]  # not a dict, on purpose


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"user_id": "u1"}, True),
        ({"user_id": {"eq": "u1"}, "tag": {"gt": 1}}, True),
        ({"agent_id": "a1", "run_id": "r1"}, False),
        ({"user_id": "*"}, False),
        ({"user_id": {"in": ["u1", "u2"]}}, False),
        ({"OR": [{"user_id": "u1"}, {"user_id": "u2"}]}, False),
        (None, False),
    ],
)
def test_user_scope_is_a_pinned_top_level_user_id(filters: Any, expected: bool) -> None:
    """uses_user_scope is true exactly when the top level pins user_id to one value."""
    assert uses_user_scope(filters) is expected
