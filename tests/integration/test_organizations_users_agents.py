"""Organizations, users and agents on the real server (memora-semantics.md §6.2–6.4)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from memora_pg import InvalidInputError, NotFoundError, PostgresGraphDB

SHORT_ID = re.compile(r"^[23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz]{22}$")


async def test_create_organization_returns_the_stored_record(graph: PostgresGraphDB) -> None:
    """A new organization gets a 22-character shortuuid and an aware creation time."""
    org = await graph.create_organization("Acme")
    assert SHORT_ID.match(org.org_id)
    assert org.org_name == "Acme"
    assert org.created_at.tzinfo is not None
    assert abs((datetime.now(timezone.utc) - org.created_at).total_seconds()) < 60
    assert await graph.get_organization(org.org_id) == org


async def test_organization_names_need_not_be_unique(graph: PostgresGraphDB) -> None:
    """Two organizations may share a name; they get different ids."""
    first = await graph.create_organization("Same")
    second = await graph.create_organization("Same")
    assert first.org_id != second.org_id


async def test_update_organization_keeps_created_at(graph: PostgresGraphDB) -> None:
    """Renaming changes only the name."""
    org = await graph.create_organization("Old")
    renamed = await graph.update_organization(org.org_id, "New")
    assert renamed.org_name == "New"
    assert renamed.created_at == org.created_at
    assert (await graph.get_organization(org.org_id)).org_name == "New"


async def test_missing_organization_errors_carry_upstream_messages(graph: PostgresGraphDB) -> None:
    """get/update of a missing organization raise NotFoundError with upstream's text; delete is silent."""
    with pytest.raises(NotFoundError, match=r"^Organization \(`org_id`\) does not exist\.$"):
        await graph.get_organization("nope")
    with pytest.raises(NotFoundError, match="does not exist"):
        await graph.update_organization("nope", "x")
    await graph.delete_organization("nope")


async def test_get_all_organizations_oldest_first_with_paging(graph: PostgresGraphDB) -> None:
    """Organizations are listed by creation time; skip/limit page through them."""
    created = [await graph.create_organization(f"org {i}") for i in range(4)]
    listed = await graph.get_all_organizations()
    assert [o.org_id for o in listed] == [o.org_id for o in created]
    page = await graph.get_all_organizations(skip=1, limit=2)
    assert [o.org_id for o in page] == [o.org_id for o in created[1:3]]


@pytest.mark.parametrize(
    ("call", "args", "error", "message"),
    [
        ("create_organization", ("",), TypeError, "`org_name` must be a string and have a value."),
        ("create_organization", (None,), TypeError, "`org_name` must be a string and have a value."),
        ("get_organization", ("",), TypeError, "`org_id` must be a string and have a value."),
        ("delete_organization", (3,), TypeError, "`org_id` must be a string and have a value."),
        (
            "update_organization",
            ("a", ""),
            ValueError,
            "Both `org_id` and `new_org_name` must be a string and have a value.",
        ),
        ("create_user", ("", "x"), ValueError, "Both `org_id` and `user_name` must be a string and have a value."),
        (
            "update_user",
            ("a", "b", ""),
            ValueError,
            "`org_id`, `user_id` and `new_user_name` must be strings and have a value.",
        ),
        ("get_user", ("a", None), ValueError, "`org_id` and `user_id` must be strings and have a value."),
        ("delete_user", ("", "b"), ValueError, "`org_id` and `user_id` must be strings and have a value."),
        ("get_all_org_users", ("",), ValueError, "`org_id` must be a string and have a value."),
        ("create_agent", ("a", ""), ValueError, "Both `org_id` and `agent_label` must be a string and have a value."),
        ("create_agent", ("a", "label", 5), ValueError, "`user_id` must be a string."),
        (
            "update_agent",
            ("a", "b", ""),
            ValueError,
            "`org_id`, `agent_id` and `new_agent_name` must be strings and have a value.",
        ),
        ("delete_agent", ("a", ""), ValueError, "`org_id` and `agent_id` must be strings and have a value."),
        ("get_agent", ("", "b"), ValueError, "`org_id` and `agent_id` must be strings and have a value."),
        ("get_all_org_agents", (None,), ValueError, "`org_id` must be a string and have a value."),
        ("get_all_user_agents", ("a", ""), ValueError, "`org_id` and `user_id` must be strings and have a value."),
    ],
)
async def test_validation_messages_match_upstream(
    graph: PostgresGraphDB, call: str, args: tuple[object, ...], error: type[Exception], message: str
) -> None:
    """Bad arguments raise InvalidInputError (a ValueError and a TypeError) with upstream's exact text."""
    with pytest.raises(InvalidInputError) as caught:
        await getattr(graph, call)(*args)
    assert isinstance(caught.value, error)
    assert str(caught.value) == message


async def test_nul_bytes_in_names_are_refused_and_nothing_is_written(graph: PostgresGraphDB) -> None:
    """A NUL character cannot be stored in PostgreSQL text: a typed error, no row."""
    with pytest.raises(InvalidInputError, match="NUL"):
        await graph.create_organization("bad\x00name")
    assert await graph.get_all_organizations() == []


async def test_unicode_and_injection_names_are_stored_exactly(graph: PostgresGraphDB) -> None:
    """Names are values, never SQL: quotes, unicode and emoji round-trip unchanged."""
    name = "Robert'); DROP TABLE users;-- 🚀 Ærøskøbing"
    org = await graph.create_organization(name)
    user = await graph.create_user(org.org_id, name)
    assert (await graph.get_organization(org.org_id)).org_name == name
    assert (await graph.get_user(org.org_id, user.user_id)).user_name == name


async def test_user_lifecycle(graph: PostgresGraphDB) -> None:
    """Users are created in an organization, renamed, listed oldest first and deleted."""
    org = await graph.create_organization("Acme")
    jake = await graph.create_user(org.org_id, "Jake")
    amy = await graph.create_user(org.org_id, "Amy")
    assert SHORT_ID.match(jake.user_id)
    assert [u.user_id for u in await graph.get_all_org_users(org.org_id)] == [jake.user_id, amy.user_id]
    renamed = await graph.update_user(org.org_id, jake.user_id, "Jacob")
    assert (renamed.user_name, renamed.created_at) == ("Jacob", jake.created_at)
    await graph.delete_user(org.org_id, jake.user_id)
    with pytest.raises(NotFoundError, match=r"^User \(`org_id`, `user_id`\) does not exist\.$"):
        await graph.get_user(org.org_id, jake.user_id)
    assert [u.user_id for u in await graph.get_all_org_users(org.org_id)] == [amy.user_id]


async def test_user_errors(graph: PostgresGraphDB) -> None:
    """A user in a missing organization fails as upstream does; missing users are not found; lists are empty."""
    with pytest.raises(NotFoundError, match=r"^Failed to create user\.$"):
        await graph.create_user("missing-org", "Jake")
    org = await graph.create_organization("Acme")
    with pytest.raises(NotFoundError, match="does not exist"):
        await graph.update_user(org.org_id, "nobody", "x")
    await graph.delete_user(org.org_id, "nobody")
    assert await graph.get_all_org_users("missing-org") == []


async def test_users_are_scoped_by_organization(graph: PostgresGraphDB) -> None:
    """A user id is never found through another organization."""
    a = await graph.create_organization("A")
    b = await graph.create_organization("B")
    user = await graph.create_user(a.org_id, "Jake")
    with pytest.raises(NotFoundError):
        await graph.get_user(b.org_id, user.user_id)
    with pytest.raises(NotFoundError):
        await graph.update_user(b.org_id, user.user_id, "Mallory")
    await graph.delete_user(b.org_id, user.user_id)
    assert (await graph.get_user(a.org_id, user.user_id)).user_name == "Jake"


async def test_org_wide_and_user_specific_agents_are_listed_as_upstream(graph: PostgresGraphDB) -> None:
    """A user-specific agent is listed for the org and the user; an org-wide one only for the org."""
    org = await graph.create_organization("Acme")
    user = await graph.create_user(org.org_id, "Jake")
    wide = await graph.create_agent(org.org_id, "Helper")
    own = await graph.create_agent(org.org_id, "Coach", user_id=user.user_id)
    empty_user = await graph.create_agent(org.org_id, "Other", user_id="")
    assert wide.user_id is None
    assert empty_user.user_id is None
    assert own.user_id == user.user_id
    assert [a.agent_id for a in await graph.get_all_org_agents(org.org_id)] == [
        wide.agent_id,
        own.agent_id,
        empty_user.agent_id,
    ]
    assert [a.agent_id for a in await graph.get_all_user_agents(org.org_id, user.user_id)] == [own.agent_id]
    assert await graph.get_agent(org.org_id, own.agent_id) == own


async def test_agent_errors(graph: PostgresGraphDB) -> None:
    """Agents in a missing org, or for a missing user, fail as upstream; missing agents are not found."""
    with pytest.raises(NotFoundError, match=r"^Failed to create agent\.$"):
        await graph.create_agent("missing", "Helper")
    org = await graph.create_organization("Acme")
    with pytest.raises(NotFoundError, match=r"^Failed to create agent\.$"):
        await graph.create_agent(org.org_id, "Helper", user_id="missing-user")
    with pytest.raises(NotFoundError, match=r"^Agent \(`org_id`, `agent_id`\) does not exist\.$"):
        await graph.get_agent(org.org_id, "missing")
    with pytest.raises(NotFoundError, match="does not exist"):
        await graph.update_agent(org.org_id, "missing", "x")
    await graph.delete_agent(org.org_id, "missing")
    assert await graph.get_all_org_agents("missing") == []
    assert await graph.get_all_user_agents(org.org_id, "missing") == []


async def test_update_and_delete_agent(graph: PostgresGraphDB) -> None:
    """Relabelling keeps user_id and created_at; delete removes only the agent."""
    org = await graph.create_organization("Acme")
    user = await graph.create_user(org.org_id, "Jake")
    agent = await graph.create_agent(org.org_id, "Coach", user_id=user.user_id)
    relabelled = await graph.update_agent(org.org_id, agent.agent_id, "Mentor")
    assert (relabelled.agent_label, relabelled.user_id, relabelled.created_at) == (
        "Mentor",
        user.user_id,
        agent.created_at,
    )
    await graph.delete_agent(org.org_id, agent.agent_id)
    assert await graph.get_all_org_agents(org.org_id) == []
    assert (await graph.get_user(org.org_id, user.user_id)).user_name == "Jake"


async def test_deleting_a_user_deletes_its_own_agents_only(graph: PostgresGraphDB) -> None:
    """User-specific agents go with their user (memora-semantics §15.3); org-wide agents stay."""
    org = await graph.create_organization("Acme")
    user = await graph.create_user(org.org_id, "Jake")
    wide = await graph.create_agent(org.org_id, "Helper")
    await graph.create_agent(org.org_id, "Coach", user_id=user.user_id)
    await graph.delete_user(org.org_id, user.user_id)
    assert [a.agent_id for a in await graph.get_all_org_agents(org.org_id)] == [wide.agent_id]


async def test_deleting_an_organization_removes_everything_it_owns(graph: PostgresGraphDB) -> None:
    """Users and agents of a deleted organization are gone; another organization is untouched."""
    org = await graph.create_organization("Doomed")
    keep = await graph.create_organization("Kept")
    user = await graph.create_user(org.org_id, "Jake")
    await graph.create_agent(org.org_id, "Helper", user_id=user.user_id)
    kept_user = await graph.create_user(keep.org_id, "Amy")
    await graph.delete_organization(org.org_id)
    with pytest.raises(NotFoundError):
        await graph.get_organization(org.org_id)
    assert await graph.get_all_org_users(org.org_id) == []
    assert await graph.get_all_org_agents(org.org_id) == []
    assert (await graph.get_user(keep.org_id, kept_user.user_id)).user_name == "Amy"


async def test_negative_paging_is_refused(graph: PostgresGraphDB) -> None:
    """skip/limit must be non-negative integers."""
    with pytest.raises(InvalidInputError):
        await graph.get_all_organizations(skip=-1)
    with pytest.raises(InvalidInputError):
        await graph.get_all_org_users("x", limit=-5)
