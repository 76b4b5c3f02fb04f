"""Placeholder rendering follows memora-semantics.md §9.4."""

from __future__ import annotations

import pytest

from memora_pg.graph.render import for_embedding, names_own_placeholders, render


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("user_Ab3 likes tea", "Jake likes tea"),
        ("user_Ab3's wife is Sarah", "Jake's wife is Sarah"),
        ("agent_Zz9 reminded USER_Ab3", "Jenny reminded Jake"),
        ("superuser_Ab3 note", "superuser_Ab3 note"),
        ("my_user_x stays", "my_user_x stays"),
        ("(user_Ab3) and [agent_Zz9]", "(Jake) and [Jenny]"),
        ("user_ alone", "user_ alone"),
        ("no placeholders here", "no placeholders here"),
    ],
)
def test_rendering_table(stored: str, expected: str) -> None:
    """Each row of the specification's table renders as specified."""
    assert render(stored, user_name="Jake", agent_label="Jenny") == expected


def test_missing_names_leave_the_token() -> None:
    """A deleted agent leaves its placeholder; the memory is still returned."""
    assert render("agent_Zz9 said hi to user_Ab3", user_name="Jake", agent_label=None) == "agent_Zz9 said hi to Jake"


def test_names_are_inserted_literally_and_not_rescanned() -> None:
    """Regex metacharacters and placeholder-like text inside names are inserted as they are."""
    assert render("user_A met agent_B", user_name=r"$1 \g<0> agent_X", agent_label="Bot") == r"$1 \g<0> agent_X met Bot"


def test_the_text_embedded_names_the_user_one_way() -> None:
    """The user's own placeholder and "the user" become the name (literally: a backslash is no escape);
    another user's placeholder, "the users" and a text without a name stay as written."""

    def embedded(text: str, name: str | None = "Jake") -> str:
        return for_embedding(text, user_id="abc", agent_id="a1", user_name=name, agent_label="Jenny")

    assert embedded("user_abc moved; THE USER's sister and agent_a1 too") == "Jake moved; Jake's sister and Jenny too"
    assert embedded("the users of user_other") == "the users of user_other"
    assert embedded("the user lives here", name=r"J\1") == r"J\1 lives here"
    assert embedded("the user lives here", name=None) == "the user lives here"
    assert names_own_placeholders(["so the user said"], user_id="abc", agent_id=None)
    assert not names_own_placeholders(["user_other and the users"], user_id="abc", agent_id=None)
