# ruff: noqa: E501  (the xfail reasons state each difference in full)
"""Every filter operator of mem0ai 2.2.x's pgvector store against memora_pg's filter language.

The same five memories on both sides, then get_all and search with each filter; the results
are compared as sets of texts. Differences are marked ``xfail(strict=True)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.conftest import outcome

pytest.importorskip("mem0", reason="runs in the differential environment (make test builds .venv-diff)")

ROWS = {
    "one": {"n": 1, "s": "apple", "flag": True, "tag": "a"},
    "five": {"n": 5, "s": "Banana split", "tag": "b"},
    "ten-as-text": {"n": "10", "s": "cherry", "tag": "c"},
    "seven-and-half": {"n": 7.5, "s": "date"},
    "bare": {},
}

# (filter, mem0's exact answer, memora_pg's answer when it differs)
CASES: dict[str, tuple[dict[str, Any], set[str] | str, set[str] | str | None]] = {
    "eq-string": ({"s": "apple"}, {"one"}, None),
    "eq-op": ({"s": {"eq": "cherry"}}, {"cherry"} and {"ten-as-text"}, None),
    "eq-number-matches-numeric-string": ({"n": 10}, {"ten-as-text"}, None),
    # Deliberate: mem0 compares the text '1' with '1.0'; memora_pg compares the numbers (docs/migrating.md).
    "eq-float-vs-int-text": ({"n": 1.0}, set(), {"one"}),
    "eq-bool": ({"flag": True}, {"one"}, None),
    "ne-missing-key-excluded": ({"tag": {"ne": "a"}}, {"five", "ten-as-text"}, None),
    "in": ({"tag": {"in": ["a", "c"]}}, {"one", "ten-as-text"}, None),
    "in-numbers-as-text": ({"n": {"in": [1, 10]}}, {"one", "ten-as-text"}, None),
    "nin-missing-key-excluded": ({"tag": {"nin": ["a"]}}, {"five", "ten-as-text"}, None),
    "bare-list-is-in": ({"tag": ["a", "b"]}, {"one", "five"}, None),
    "gt-number": ({"n": {"gt": 5}}, {"ten-as-text", "seven-and-half"}, None),
    "gte": ({"n": {"gte": 5}}, {"five", "ten-as-text", "seven-and-half"}, None),
    "lt": ({"n": {"lt": 5}}, {"one"}, None),
    "lte": ({"n": {"lte": 5}}, {"one", "five"}, None),
    "gt-numeric-string-operand": ({"n": {"gt": "6"}}, {"ten-as-text", "seven-and-half"}, None),
    "range-two-ops": ({"n": {"gt": 1, "lt": 8}}, {"five", "seven-and-half"}, None),
    "contains-case-sensitive": ({"s": {"contains": "an"}}, {"five"}, None),
    "contains-no-case-fold": ({"s": {"contains": "banana"}}, set(), None),
    "icontains": ({"s": {"icontains": "BANANA"}}, {"five"}, None),
    "contains-on-number": ({"n": {"contains": "1"}}, {"one", "ten-as-text"}, None),
    "contains-like-metachars-escaped": ({"s": {"contains": "%"}}, set(), None),
    "wildcard": ({"tag": "*"}, {"one", "five", "ten-as-text"}, None),
    "AND": ({"AND": [{"tag": {"in": ["a", "b"]}}, {"n": {"gte": 5}}]}, {"five"}, None),
    "OR": ({"OR": [{"tag": "a"}, {"s": "date"}]}, {"one", "seven-and-half"}, None),
    "NOT-missing-key-excluded": ({"NOT": [{"tag": "a"}]}, {"five", "ten-as-text"}, None),
    "NOT-of-OR-list": ({"NOT": [{"tag": "a"}, {"tag": "b"}]}, {"ten-as-text"}, None),
    "unknown-operator": ({"s": {"startswith": "a"}}, "raises", None),
}

# In get_all, mem0 2.2 hands the filters to the store without translating AND/OR/NOT (only
# search() does): the store then reads "AND" as a payload key whose value must be one of the
# str() of the branch dicts, which matches nothing. A mem0 bug not to copy.
GET_ALL_LOGICAL_BUG = {"AND", "OR", "NOT-missing-key-excluded", "NOT-of-OR-list"}


def _load(m: Any) -> None:
    for text, metadata in ROWS.items():
        # The shared word keeps every cosine similarity positive (see test_search_negative_cosine_floor).
        m.add(f"{text} fruit", user_id="alice", infer=False, metadata=metadata or None)


def _texts(result: Any) -> Any:
    if isinstance(result, tuple):
        return "raises"
    return {r["memory"].removesuffix(" fruit") for r in result["results"]}


def _cases(method: str) -> list[Any]:
    params = []
    for name, (filters, expected, ours_now) in CASES.items():
        marks = []
        if method == "get_all" and name in GET_ALL_LOGICAL_BUG:
            expected = set()  # mem0's bug, see GET_ALL_LOGICAL_BUG
            ours_now = ours_now or CASES[name][1]
        if ours_now is not None and ours_now != expected:
            marks.append(
                pytest.mark.xfail(
                    strict=True,
                    reason=f"memora_pg gives {sorted(ours_now) if isinstance(ours_now, set) else ours_now}, mem0 {sorted(expected) if isinstance(expected, set) else expected}",
                )
            )
        params.append(pytest.param(filters, expected, id=name, marks=marks))
    return params


@pytest.mark.parametrize(("filters", "expected"), _cases("search"))
def test_search_filter(both: tuple[Any, Any], filters: dict[str, Any], expected: Any) -> None:
    """search() with the filter finds exactly mem0's memories."""
    theirs, ours = (
        _texts(
            outcome(
                lambda m=m: (
                    _load(m),
                    m.search("fruit", filters={"user_id": "alice", **filters}, threshold=0, top_k=50),
                )[1]
            )
        )
        for m in both
    )
    assert theirs == expected
    assert ours == theirs


@pytest.mark.parametrize(("filters", "expected"), _cases("get_all"))
def test_get_all_filter(both: tuple[Any, Any], filters: dict[str, Any], expected: Any) -> None:
    """get_all() with the filter finds exactly mem0's memories (mem0's get_all drops AND/OR/NOT: see GET_ALL_LOGICAL_BUG)."""
    theirs, ours = (
        _texts(outcome(lambda m=m: (_load(m), m.get_all(filters={"user_id": "alice", **filters}, top_k=50))[1]))
        for m in both
    )
    assert theirs == expected
    assert ours == theirs
