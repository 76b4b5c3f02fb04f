"""The §7 reconciliation rule: where an interaction's new complete message list departs from the stored one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memora_pg.graph.interactions import Message, divergence

# §7's worked example: E = [user "hi", assistant "hello", user "I like tea", assistant "noted"].
E = [
    Message("user", "hi"),
    Message("assistant", "hello"),
    Message("user", "I like tea"),
    Message("assistant", "noted"),
]


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        pytest.param([*E, Message("user", "also coffee")], 4, id="more messages appended"),
        pytest.param([*E[:2], Message("user", "I like coffee")], 2, id="third message changed"),
        pytest.param(E[:2], 2, id="strict prefix"),
        pytest.param([], 0, id="emptied"),
        pytest.param(list(E), 4, id="unchanged"),
    ],
)
def test_the_worked_example(new: list[Message], expected: int) -> None:
    """Each row of §7's worked example gives its divergence point t."""
    assert divergence(E, new) == expected


def test_each_row_of_the_situation_table() -> None:
    """The table of §7: m = 0, n = 0, identical, appended, strict prefix, first difference at 0 and at k > 0."""
    changed = Message("user", "bye")
    assert divergence(E, []) == 0
    assert divergence([], E) == 0
    assert divergence([], []) == 0
    assert divergence(E, list(E)) == len(E)
    assert divergence(E, [*E, changed]) == len(E)
    assert divergence(E, E[:1]) == 1
    assert divergence(E, [changed, *E[1:]]) == 0
    assert divergence(E, [*E[:3], changed]) == 3


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(Message("assistant", "I like tea"), id="role differs"),
        pytest.param(Message("user", "I like Tea"), id="case differs"),
        pytest.param(Message("user", "I like tea "), id="trailing whitespace"),
        pytest.param(Message(None, "I like tea"), id="role missing"),
        pytest.param(Message("user", None), id="content missing"),
    ],
)
def test_the_same_message_is_an_exact_match_of_role_and_content(other: Message) -> None:
    """Role and content are compared exactly (case- and whitespace-sensitive); a null matches only a null."""
    assert divergence(E, [*E[:2], other, E[3]]) == 2


def test_null_role_and_content_match_a_stored_null() -> None:
    """A message without role or content (a stored null) is the same as another one without them."""
    stored = [Message(None, None), Message("user", None)]
    assert divergence(stored, [Message(None, None), Message("user", None)]) == 2


def test_a_later_match_does_not_move_the_point_back() -> None:
    """Positions after the first difference are not compared: equal messages there are replaced too."""
    assert divergence(E, [E[0], Message("assistant", "hey"), *E[2:]]) == 1


messages = st.lists(
    st.builds(Message, st.sampled_from(["user", "assistant", None]), st.sampled_from(["a", "b", "", None])),
    max_size=6,
)


@given(stored=messages, new=messages)
def test_truncating_at_the_point_and_appending_gives_the_new_list(stored: list[Message], new: list[Message]) -> None:
    """Keeping stored[:t] and appending new[t:] always yields the new list, and t is the longest common prefix."""
    t = divergence(stored, new)
    assert 0 <= t <= min(len(stored), len(new))
    assert stored[:t] == new[:t]
    assert stored[:t] + new[t:] == new
    if t < min(len(stored), len(new)):
        assert stored[t] != new[t]
