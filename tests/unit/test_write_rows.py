"""The one definition of each table's insert (:mod:`memora_pg.graph.rows`) and its two forms."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

import pytest

from memora_pg.graph import audit, history, interactions, saves
from memora_pg.graph.memories import NEW_MEMORIES, SOURCES, NewMemory
from memora_pg.graph.rows import Given, Rows

BOUND = re.compile(r"(?<!:):([a-z_0-9]+)")
AT = datetime(2026, 3, 1, tzinfo=timezone.utc)
ITEMS = [
    NewMemory(uuid.uuid4(), "lives in Lisbon", positions=(0, 1), embedding=[0.5, 0.5], metadata={"role": "user"}),
    NewMemory(uuid.uuid4(), "has a cat", positions=(1,)),
]


def _save_params() -> dict[str, object]:
    messages = [interactions.Message("user", "hi"), interactions.Message("assistant", "hello")]
    audited = audit.Entry("save")
    return saves.save(
        org_id="o",
        user_id="u",
        agent_id="a",
        interaction_id="i",
        at=AT,
        messages=messages,
        items=ITEMS,
        audited=audited,
    ).params


def _add_params() -> dict[str, object]:
    audited = audit.Entry("add")
    return saves.add(org_id="o", collection="c", user_id="u", agent_id="a", at=AT, items=ITEMS, audited=audited).params


@pytest.mark.parametrize(
    ("rows", "params"),
    [
        (interactions.MESSAGES, _save_params),
        (NEW_MEMORIES, _save_params),
        (SOURCES, _save_params),
        (audit.ARM, _save_params),
        (history.ADDED, _add_params),
    ],
    ids=lambda value: getattr(value, "name", ""),
)
def test_a_statement_of_its_own_binds_exactly_the_parameters_it_is_given(rows: Rows, params: object) -> None:
    """Every parameter the multi-row form names is bound, and nothing else: row ``i``'s values as ``name_i``."""
    given = params()  # type: ignore[operator]
    count = rows.count(given)
    assert count >= 1
    text = rows.statement(count)
    assert set(BOUND.findall(text)) == set(rows.row_params(given, 0, count))
    # Its CTE form reads the same arrays.
    assert {spec.array for spec in rows.given.values()} <= set(BOUND.findall(rows.cte()))


def test_the_audit_row_is_left_out_when_the_call_is_not_audited() -> None:
    params = saves.save(
        org_id="o", user_id="u", agent_id="a", interaction_id="i", at=AT, messages=[], items=[], audited=None
    ).params
    assert audit.ARM.count(params) == 0
    assert "WHERE CAST(:audited AS boolean)" in audit.ARM.cte()


def test_a_given_value_cannot_take_a_scope_columns_name() -> None:
    """A given ``user_id`` would read as the scope's in one form and as the row's in the other."""
    with pytest.raises(ValueError, match="user_id"):
        Rows("bad", into="t (user_id)", values="{user_id}", given={"user_id": Given("user_ids", "text")})


def test_a_statement_of_rows_has_one_row_of_values_per_row() -> None:
    assert NEW_MEMORIES.statement(3).count("CAST(:memory_id_") == 3
    assert "CAST(:memory_id_2 AS uuid)" in NEW_MEMORIES.statement(3)
