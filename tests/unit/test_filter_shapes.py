"""A mem0-style filter's shape: its search statement is built once per shape, its values bound per call."""

from __future__ import annotations

from memora_pg.graph import search
from memora_pg.mem0.filters import compile_filters


def test_same_shape_other_values_share_the_statement() -> None:
    first = search.memories_where("org", also=compile_filters({"user_id": "u1", "category": "rare"}))
    second = search.memories_where("org", also=compile_filters({"user_id": "u2", "category": "common"}))
    assert first.shape is not None
    assert first.shape == second.shape
    assert hash(first.shape) == hash(second.shape)
    values = [[v for k, v in where.params.items() if k.startswith("filter_")] for where in (first, second)]
    assert values[0] != values[1]
    assert second.sql() is not None


def test_other_shapes_do_not() -> None:
    shapes = {
        search.memories_where("org", also=compile_filters(filters)).shape
        for filters in (
            {"user_id": "u1"},
            {"user_id": "u1", "category": "rare"},
            {"user_id": "u1", "category": {"ne": "rare"}},
            {"user_id": "u1", "n": {"gt": 3}},
            {"user_id": "u1", "tags": {"in": ["a", "b"]}},
            {"OR": [{"user_id": "u1"}, {"agent_id": "a"}]},
        )
    }
    assert len(shapes) == 6


def test_a_list_of_other_values_keeps_the_shape() -> None:
    """``in`` is one GIN containment per element: a list of the same length is the same shape."""
    one = search.memories_where("org", also=compile_filters({"user_id": "u", "tags": {"in": ["a", "b"]}}))
    other = search.memories_where("org", also=compile_filters({"user_id": "v", "tags": {"in": ["c", "d"]}}))
    assert one.shape == other.shape


def test_values_are_bound_by_name_in_order() -> None:
    where = search.memories_where("org", also=compile_filters({"user_id": "alice"}))
    assert "alice" in where.params.values()
    assert where.params["where_org_id"] == "org"
