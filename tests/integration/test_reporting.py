"""Reporting views (migration 0004) and the headline report built on them, on data made through the public API.

The renderings of a report are tested without a database, in tests/unit/test_report_rendering.py.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memora_pg import ConfigurationError, InvalidInputError, PgVectorDB, PostgresGraphDB, Settings, driver, migrations
from memora_pg.db import Database
from memora_pg.migrations import MigrationOptions
from memora_pg.ops import report
from memora_pg.testing import count_statements
from tests.integration.helpers import World, chat, day, payload, world

VIEWS = {
    "current_memories",
    "contradiction_chains",
    "memory_growth_daily",
    "interactions_per_agent",
    "orphaned_memories",
    "memory_timeline",
}
EVE = "Eve <script>alert('x')</script>"


@dataclass
class Built:
    """Two organizations; in Acme, Jake's chain M1 -> M2 -> M3 with a branch M1 -> M4."""

    acme: str
    other: str
    jake: str
    eve: str
    zoe: str
    bob: str
    jenny: str
    coach: str
    helper: str
    interactions: dict[str, str]
    memories: dict[str, uuid.UUID]


async def _memory_of(graph: PostgresGraphDB, org_id: str, user_id: str, interaction_id: str) -> uuid.UUID:
    interaction = await graph.get_interaction(org_id, user_id, interaction_id, with_messages=False)
    return uuid.UUID((interaction.memories or [])[0].memory_id)


async def build(graph: PostgresGraphDB) -> Built:
    """Several days, agents and users; a depth-2 chain with a branch; a truncation; a standalone memory."""
    acme = (await graph.create_organization("Acme")).org_id
    other = (await graph.create_organization("Other & Co")).org_id
    jake = (await graph.create_user(acme, "Jake")).user_id
    eve = (await graph.create_user(acme, EVE)).user_id
    zoe = (await graph.create_user(acme, "Zoe")).user_id
    bob = (await graph.create_user(other, "Bob")).user_id
    jenny = (await graph.create_agent(acme, "Jenny")).agent_id
    coach = (await graph.create_agent(acme, "Coach & <b>Co</b>")).agent_id
    helper = (await graph.create_agent(other, "Helper")).agent_id
    save = graph.save_interaction_with_memories
    i: dict[str, str] = {}
    m: dict[str, uuid.UUID] = {}

    i["1"], _ = await save(
        acme,
        jenny,
        jake,
        payload(
            chat("I live in Paris", "noted", "I like tea"),
            [(f"user_{jake} lives in Paris", [0]), (f"user_{jake} likes tea", [2])],
            at=day(1),
        ),
    )
    listed = await graph.get_interaction(acme, jake, i["1"], with_messages=False)
    m["M1"], m["M5"] = (uuid.UUID(x.memory_id) for x in listed.memories or [])
    i["2"], _ = await save(
        acme,
        coach,
        jake,
        payload(chat("I moved to Berlin"), contrary=[(f"user_{jake} moved to Berlin", [0], str(m["M1"]))], at=day(2)),
    )
    m["M2"] = await _memory_of(graph, acme, jake, i["2"])
    i["7"], _ = await save(
        acme, jenny, jake, payload(chat("I have a cat"), [(f"user_{jake} has a cat", [0])], at=day(2))
    )
    m["M8"] = await _memory_of(graph, acme, jake, i["7"])
    i["5"], _ = await save(
        acme, jenny, eve, payload(chat("hi", "hello"), [(f"agent_{jenny} greeted user_{eve}", [0, 1])], at=day(2))
    )
    m["M6"] = await _memory_of(graph, acme, eve, i["5"])
    i["3"], _ = await save(
        acme,
        jenny,
        jake,
        payload(chat("Now Rome"), contrary=[(f"user_{jake} moved to Rome", [0], str(m["M2"]))], at=day(3)),
    )
    m["M3"] = await _memory_of(graph, acme, jake, i["3"])
    i["4"], _ = await save(
        acme,
        coach,
        jake,
        payload(chat("Lisbon now"), contrary=[(f"user_{jake} lives in Lisbon", [0], str(m["M1"]))], at=day(4)),
    )
    m["M4"] = await _memory_of(graph, acme, jake, i["4"])
    # The update keeps message 0 only: M5's source (message 2) goes, M5 stays; I1 now belongs to the coach.
    await graph.update_interaction_and_memories(acme, coach, jake, i["1"], payload(chat("I live in Paris"), at=day(5)))
    m["S"] = uuid.uuid4()
    vectors = graph.get_associated_vector_db()
    assert isinstance(vectors, PgVectorDB)
    await vectors.add_memories(acme, eve, jenny, [m["S"]], [f"user_{eve} noted a tip"], day(6).isoformat())
    i["6"], _ = await save(other, helper, bob, payload(chat("cats!"), [(f"user_{bob} likes cats", [0])], at=day(1)))
    m["M7"] = await _memory_of(graph, other, bob, i["6"])
    return Built(acme, other, jake, eve, zoe, bob, jenny, coach, helper, i, m)


@pytest.fixture
async def built(graph: PostgresGraphDB) -> Built:
    return await build(graph)


async def _rows(engine: AsyncEngine, query: str, **params: Any) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(text(query), params)]


# -- the views -------------------------------------------------------------------------------


async def test_current_memories_lists_each_newest_version_rendered(engine: AsyncEngine, built: Built) -> None:
    """current_memories holds every memory without a newer version, with names, rendered text and source counts."""
    b, m = built, built.memories
    rows = await _rows(engine, "SELECT * FROM memora.current_memories ORDER BY obtained_at, rendered")
    names = {
        b.jake: "Jake",
        b.eve: EVE,
        b.bob: "Bob",
        b.jenny: "Jenny",
        b.coach: "Coach & <b>Co</b>",
        b.helper: "Helper",
    }

    def row(
        org: str,
        user: str,
        agent: str,
        interaction: str | None,
        key: str,
        stored: str,
        rendered: str,
        n: int,
        sources: int,
    ) -> dict[str, Any]:
        return {
            "org_id": org,
            "user_id": user,
            "user_name": names[user],
            "agent_id": agent,
            "agent_label": names[agent],
            "interaction_id": interaction and b.interactions[interaction],
            "memory_id": m[key],
            "memory": stored,
            "rendered": rendered,
            "obtained_at": day(n),
            "source_count": sources,
        }

    assert rows == [
        row(b.other, b.bob, b.helper, "6", "M7", f"user_{b.bob} likes cats", "Bob likes cats", 1, 1),
        row(b.acme, b.jake, b.jenny, "1", "M5", f"user_{b.jake} likes tea", "Jake likes tea", 1, 0),
        row(b.acme, b.jake, b.jenny, "7", "M8", f"user_{b.jake} has a cat", "Jake has a cat", 2, 1),
        row(b.acme, b.eve, b.jenny, "5", "M6", f"agent_{b.jenny} greeted user_{b.eve}", f"Jenny greeted {EVE}", 2, 2),
        row(b.acme, b.jake, b.jenny, "3", "M3", f"user_{b.jake} moved to Rome", "Jake moved to Rome", 3, 1),
        row(b.acme, b.jake, b.coach, "4", "M4", f"user_{b.jake} lives in Lisbon", "Jake lives in Lisbon", 4, 1),
        row(b.acme, b.eve, b.jenny, None, "S", f"user_{b.eve} noted a tip", f"{EVE} noted a tip", 6, 0),
    ]  # fmt: skip


async def test_contradiction_chains_walk_from_the_root(engine: AsyncEngine, built: Built) -> None:
    """Each chain member has its root, depth, predecessor and current versions (newest first, §8.2)."""
    b, m = built, built.memories
    rows = await _rows(
        engine,
        "SELECT org_id, user_id, root_memory_id, memory_id, previous_memory_id, depth, is_current, current_memory_ids"
        " FROM memora.contradiction_chains ORDER BY depth, obtained_at",
    )
    chain = {"org_id": b.acme, "user_id": b.jake, "root_memory_id": m["M1"]}
    assert rows == [
        {**chain, "memory_id": m["M1"], "previous_memory_id": None, "depth": 0, "is_current": False,
         "current_memory_ids": [m["M4"], m["M3"]]},
        {**chain, "memory_id": m["M2"], "previous_memory_id": m["M1"], "depth": 1, "is_current": False,
         "current_memory_ids": [m["M3"]]},
        {**chain, "memory_id": m["M4"], "previous_memory_id": m["M1"], "depth": 1, "is_current": True,
         "current_memory_ids": [m["M4"]]},
        {**chain, "memory_id": m["M3"], "previous_memory_id": m["M2"], "depth": 2, "is_current": True,
         "current_memory_ids": [m["M3"]]},
    ]  # fmt: skip
    texts = await _rows(engine, "SELECT memory, obtained_at FROM memora.contradiction_chains WHERE depth = 2")
    assert texts == [{"memory": f"user_{b.jake} moved to Rome", "obtained_at": day(3)}]


async def test_chains_agree_with_resolved_fetch(graph: PostgresGraphDB, engine: AsyncEngine, built: Built) -> None:
    """The view's current versions of each chain member are what fetch_user_memories_resolved returns."""
    b = built
    for row in await _rows(engine, "SELECT memory_id, current_memory_ids FROM memora.contradiction_chains"):
        resolved = await graph.fetch_user_memories_resolved(
            [{"org_id": b.acme, "user_id": b.jake, "memory_id": str(row["memory_id"])}]
        )
        assert [uuid.UUID(r.memory_id) for r in resolved] == row["current_memory_ids"]


async def test_memory_growth_counts_per_day_and_accumulates_per_user(engine: AsyncEngine, built: Built) -> None:
    """memory_growth_daily counts per org, user, agent and UTC day; the user's running total spans all agents."""
    b = built
    rows = await _rows(
        engine,
        "SELECT org_id, user_id, agent_id, day, memories, user_cumulative FROM memora.memory_growth_daily"
        " WHERE org_id = :org ORDER BY user_id = :jake DESC, day, agent_id = :coach DESC",
        org=b.acme,
        jake=b.jake,
        coach=b.coach,
    )
    jake, eve = (b.acme, b.jake), (b.acme, b.eve)
    assert [
        (r["org_id"], r["user_id"], r["agent_id"], r["day"], r["memories"], r["user_cumulative"]) for r in rows
    ] == [
        (*jake, b.jenny, date(2026, 1, 1), 2, 2),
        (*jake, b.coach, date(2026, 1, 2), 1, 4),
        (*jake, b.jenny, date(2026, 1, 2), 1, 4),
        (*jake, b.jenny, date(2026, 1, 3), 1, 5),
        (*jake, b.coach, date(2026, 1, 4), 1, 6),
        (*eve, b.jenny, date(2026, 1, 2), 1, 1),
        (*eve, b.jenny, date(2026, 1, 6), 1, 2),
    ]
    other = await _rows(engine, "SELECT user_id, memories FROM memora.memory_growth_daily WHERE org_id = :o", o=b.other)
    assert other == [{"user_id": b.bob, "memories": 1}]


async def test_interactions_per_agent_counts_by_latest_agent(engine: AsyncEngine, built: Built) -> None:
    """An interaction counts for the agent of its latest save or update, with its messages and last activity."""
    b = built
    rows = await _rows(
        engine, "SELECT * FROM memora.interactions_per_agent ORDER BY org_id = :o, agent_label", o=b.other
    )
    assert [{**r, "messages_per_interaction": str(r["messages_per_interaction"])} for r in rows] == [
        {"org_id": b.acme, "agent_id": b.coach, "agent_label": "Coach & <b>Co</b>", "interactions": 3, "users": 1,
         "messages": 3, "messages_per_interaction": "1.00", "last_activity": day(5)},
        {"org_id": b.acme, "agent_id": b.jenny, "agent_label": "Jenny", "interactions": 3, "users": 2,
         "messages": 4, "messages_per_interaction": "1.33", "last_activity": day(3)},
        {"org_id": b.other, "agent_id": b.helper, "agent_label": "Helper", "interactions": 1, "users": 1,
         "messages": 1, "messages_per_interaction": "1.00", "last_activity": day(1)},
    ]  # fmt: skip


async def test_orphaned_memories_are_truncated_or_standalone(engine: AsyncEngine, built: Built) -> None:
    """A memory whose source messages were truncated away and a memory without interaction are orphans."""
    b, m = built, built.memories
    rows = await _rows(engine, "SELECT * FROM memora.orphaned_memories ORDER BY obtained_at")
    assert rows == [
        {"org_id": b.acme, "user_id": b.jake, "agent_id": b.jenny, "interaction_id": b.interactions["1"],
         "memory_id": m["M5"], "memory": f"user_{b.jake} likes tea", "obtained_at": day(1), "reason": "no_sources"},
        {"org_id": b.acme, "user_id": b.eve, "agent_id": b.jenny, "interaction_id": None, "memory_id": m["S"],
         "memory": f"user_{b.eve} noted a tip", "obtained_at": day(6), "reason": "standalone"},
    ]  # fmt: skip


TRICKY = [
    "user_{u} likes tea",
    "user_{u}'s wife is Sarah",
    "agent_{a} reminded USER_{u}",
    "superuser_{u} note, x_user_{u}, 9agent_{a}",
    "user_ alone, user_- dash, Agent_{a}-x",
    "multi\nline user_{u}\tend user_{u}ß",
    "user_{u}user_{u}",
    "agent_{gone} said hi to user_{u}",
    "ümlaut user_{u}. ä agent_{a}!",
]


async def test_rendered_column_matches_the_python_rendering(graph: PostgresGraphDB, engine: AsyncEngine) -> None:
    """The view renders placeholders exactly as the graph's reads do (§9.4), with names that look like syntax."""
    org = (await graph.create_organization("Render")).org_id
    user = (await graph.create_user(org, r"Jo \1 \& $1 agent_x")).user_id
    agent = (await graph.create_agent(org, r"A\&B user_y")).agent_id
    gone = (await graph.create_agent(org, "Gone")).agent_id
    for agent_id in (agent, gone):
        texts = [t.format(u=user, a=agent, gone=gone) for t in TRICKY]
        await graph.save_interaction_with_memories(
            org, agent_id, user, payload(chat("x"), [(t, [0]) for t in texts], at=day(1))
        )
    await graph.delete_agent(org, gone)
    expected = {(m.agent_id, m.memory) for m in await graph.get_all_user_memories(org, user)}
    rows = await _rows(engine, "SELECT agent_id, rendered FROM memora.current_memories WHERE org_id = :o", o=org)
    assert {(r["agent_id"], r["rendered"]) for r in rows} == expected
    assert len(expected) == 2 * len(TRICKY)
    assert (agent, r"Jo \1 \& $1 agent_x's wife is Sarah") in expected
    assert (gone, f"agent_{gone} said hi to " + r"Jo \1 \& $1 agent_x") in expected


async def test_views_filter_by_organization(engine: AsyncEngine, built: Built) -> None:
    """Every view leads with org_id, and a filter on it keeps only that organization's rows."""
    for view in sorted(VIEWS):
        columns = await _rows(
            engine,
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'memora' AND table_name = :v AND ordinal_position = 1",
            v=view,
        )
        assert columns == [{"column_name": "org_id"}], view
    counts = {
        view: (await _rows(engine, f"SELECT count(*) AS n FROM memora.{view} WHERE org_id = :o", o=built.other))[0]["n"]
        for view in sorted(VIEWS)
    }
    assert counts == {
        "contradiction_chains": 0,
        "current_memories": 1,
        "interactions_per_agent": 1,
        "memory_growth_daily": 1,
        "memory_timeline": 1,
        "orphaned_memories": 0,
    }


# -- the report ------------------------------------------------------------------------------


async def test_headline_numbers_for_the_whole_database(graph: PostgresGraphDB, built: Built) -> None:
    """The headline counts, rates, spread per user, busiest users and agents, and daily growth are exact."""
    b = built
    r = await report.headline(graph.database, until=date(2026, 1, 10), days=10)
    assert r.org_id is None
    assert (r.organizations, r.users, r.agents, r.interactions, r.messages) == (2, 4, 3, 7, 8)
    # of the two memories without a source, the vector store's is standalone by design: one orphan
    assert (r.memories, r.current_memories, r.superseded_memories, r.orphaned_memories) == (9, 7, 2, 1)
    assert (r.standalone_memories, r.registered_agents, r.autogen_entries, r.org_name) == (1, 3, 0, None)
    assert r.contradiction_rate == pytest.approx(2 / 9)
    # memories per user: Zoe 0, Bob 1, Eve 2, Jake 6
    assert r.memories_per_user_p50 == pytest.approx(1.5)
    assert r.memories_per_user_p95 == pytest.approx(2 + 0.85 * 4)
    assert r.memories_per_user_max == 6
    assert [(u.user_name, u.org_name, u.interactions, u.memories, u.current_memories, u.last_activity)
            for u in r.busiest_users] == [
        ("Jake", "Acme", 5, 6, 4, day(5)),
        (EVE, "Acme", 1, 2, 2, day(2)),
        ("Bob", "Other & Co", 1, 1, 1, day(1)),
        ("Zoe", "Acme", 0, 0, 0, None),
    ]  # fmt: skip
    assert [(a.agent_id, a.agent_label, a.interactions, a.messages_per_interaction, a.memories,
             a.superseded_memories, a.last_activity) for a in r.busiest_agents] == [
        (b.jenny, "Jenny", 3, pytest.approx(1.33), 6, 1, day(3)),
        (b.coach, "Coach & <b>Co</b>", 3, 1.0, 2, 1, day(5)),
        (b.helper, "Helper", 1, 1.0, 1, 0, day(1)),
    ]  # fmt: skip
    assert [a.contradiction_rate for a in r.busiest_agents] == pytest.approx([1 / 6, 1 / 2, 0])
    assert [(g.day.day, g.added, g.total) for g in r.growth] == [
        (1, 3, 3), (2, 3, 6), (3, 1, 7), (4, 1, 8), (5, 0, 8), (6, 1, 9), (7, 0, 9), (8, 0, 9), (9, 0, 9), (10, 0, 9)
    ]  # fmt: skip


async def test_headline_of_one_organization(graph: PostgresGraphDB, built: Built) -> None:
    """With org_id every number is the organization's; growth before the window counts in the total."""
    r = await report.headline(graph.database, org_id=built.acme, until=date(2026, 1, 4), days=3)
    assert (r.organizations, r.users, r.agents, r.interactions, r.messages) == (1, 3, 2, 6, 7)
    assert (r.memories, r.current_memories, r.superseded_memories, r.orphaned_memories) == (8, 6, 2, 1)
    assert (r.standalone_memories, r.org_name) == (1, "Acme")
    assert r.contradiction_rate == pytest.approx(0.25)
    assert (r.memories_per_user_p50, r.memories_per_user_max) == (2.0, 6)
    assert r.memories_per_user_p95 == pytest.approx(2 + 0.9 * 4)
    assert [u.user_name for u in r.busiest_users] == ["Jake", EVE, "Zoe"]
    assert [a.agent_label for a in r.busiest_agents] == ["Jenny", "Coach & <b>Co</b>"]
    assert [(g.day, g.added, g.total) for g in r.growth] == [
        (date(2026, 1, 2), 3, 5), (date(2026, 1, 3), 1, 6), (date(2026, 1, 4), 1, 7)
    ]  # fmt: skip


async def test_headline_of_an_empty_or_unknown_organization(graph: PostgresGraphDB, built: Built) -> None:
    """An organization without rows reports zeros and empty lists, never an error."""
    r = await report.headline(graph.database, org_id="no-such-org", until=date(2026, 1, 10), days=2)
    # no memories, so no rate: "none yet", never "0.0% (0 of 0)"
    assert (r.organizations, r.users, r.memories, r.contradiction_rate, r.memories_per_user_max) == (0, 0, 0, None, 0)
    assert (r.busiest_users, r.busiest_agents) == ([], [])
    assert [(g.added, g.total) for g in r.growth] == [(0, 0), (0, 0)]
    assert "no-such-org" in report.render_text(r)
    assert "no-such-org" in report.render_html(r)


@pytest.mark.parametrize("bad", [{"org_id": ""}, {"days": 0}, {"days": 10_000}, {"days": True}])
async def test_headline_rejects_bad_arguments(graph: PostgresGraphDB, bad: dict[str, Any]) -> None:
    """An empty org_id or a window outside 1..3660 days is InvalidInputError, before any query."""
    with pytest.raises(InvalidInputError):
        await report.headline(graph.database, **bad)


async def test_deleted_agents_stay_in_the_report(graph: PostgresGraphDB, engine: AsyncEngine, built: Built) -> None:
    """A deleted agent's interactions and memories still count, shown without a label and with tokens left as stored."""
    await graph.delete_agent(built.acme, built.jenny)
    r = await report.headline(graph.database, org_id=built.acme, until=date(2026, 1, 10), days=10)
    assert [(a.agent_id, a.agent_label, a.memories) for a in r.busiest_agents] == [
        (built.jenny, None, 6),
        (built.coach, "Coach & <b>Co</b>", 2),
    ]
    assert any(line.split()[:2] == ["(deleted)", built.jenny] for line in report.render_text(r).splitlines())
    assert f"(deleted) {built.jenny}" in report.render_html(r)
    rows = await _rows(engine, "SELECT agent_label, rendered FROM memora.current_memories WHERE memory_id = :m",
                       m=built.memories["M6"])  # fmt: skip
    assert rows == [{"agent_label": None, "rendered": f"agent_{built.jenny} greeted {EVE}"}]


async def test_headline_sends_one_statement_per_section(graph: PostgresGraphDB, built: Built) -> None:
    """The report is six statements (totals, users, agents, growth, timeline, store items), however many rows
    there are: the last two read objects of later revisions, so each waits for the totals to say it exists."""
    statements = count_statements(await graph.database.engine())
    await report.headline(graph.database, until=date(2026, 1, 10), days=10)
    assert len(statements) == 6
    assert all("memora" in statement for statement in statements)


# -- memory through time ---------------------------------------------------------------------

# The organization and user of the examples in docs/reporting.md: the test's own get these ids.
DOC_ORG, DOC_USER = "JwusjfrzcoeAzsphRpwxnM", "ncKnJ5Qi49FDR7Apvua4NX"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reporting.md"


def at(month: int, n: int) -> datetime:
    return datetime(2026, month, n, 12, 0, tzinfo=timezone.utc)


@dataclass
class Versions:
    """In one organization and user, by valid time:

    * A (Jan 1) <- B (Jan 10) <- C (Jan 5): C, saved last, corrects B back-dated; A ends on
      Jan 5 and B's span is empty (Jan 10 to Jan 10);
    * D (Jan 1) with two successors E (Jan 2) and F (Jan 3); I (Mar 2) supersedes E;
    * G (Jan 3) expires on Jan 8; H (Feb 14) stands alone; J (Aug 1) supersedes C.

    Another organization has one memory, K (Jan 4).
    """

    world: World
    other: World
    memories: dict[str, str]


async def _remember(graph: PostgresGraphDB, w: World, fact: str, when: datetime, supersedes: str | None = None) -> str:
    """The id of one memory saved in its own interaction dated ``when``."""
    if supersedes is None:
        body = payload(chat(fact), [(fact, [0])], at=when)
    else:
        body = payload(chat(fact), contrary=[(fact, [0], supersedes)], at=when)
    interaction_id, _ = await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, body)
    return str(await _memory_of(graph, w.org_id, w.user_id, interaction_id))


@pytest.fixture
async def versions(graph: PostgresGraphDB, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> Versions:
    with monkeypatch.context() as patched:
        patched.setattr("memora_pg.store.new_short_id", lambda: DOC_ORG)
        patched.setattr("memora_pg.graph.users.new_short_id", lambda: DOC_USER)
        w = await world(graph)
    assert (w.org_id, w.user_id) == (DOC_ORG, DOC_USER)
    m: dict[str, str] = {}
    m["A"] = await _remember(graph, w, "user_X lives in Paris", at(1, 1))
    m["B"] = await _remember(graph, w, "user_X lives in Berlin", at(1, 10), m["A"])
    m["C"] = await _remember(graph, w, "user_X lives in Rome", at(1, 5), m["B"])
    m["D"] = await _remember(graph, w, "user_X plays chess", at(1, 1))
    m["E"] = await _remember(graph, w, "user_X plays go", at(1, 2), m["D"])
    m["F"] = await _remember(graph, w, "user_X plays bridge", at(1, 3), m["D"])
    m["G"] = await _remember(graph, w, "user_X has a cold", at(1, 3))
    m["H"] = await _remember(graph, w, "user_X likes tea", at(2, 14))
    m["I"] = await _remember(graph, w, "user_X plays poker", at(3, 2), m["E"])
    m["J"] = await _remember(graph, w, "user_X lives in Oslo", at(8, 1), m["C"])
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE memora.memories SET expires_at = :at WHERE memory_id = :id"),
            {"at": at(1, 8), "id": uuid.UUID(m["G"])},
        )
    other = await world(graph, "Kim", "Kai")
    m["K"] = await _remember(graph, other, "user_Y likes jazz", at(1, 4))
    return Versions(w, other, m)


def _periods(timeline: report.Timeline | None) -> list[tuple[date, date, int, int, int]]:
    assert timeline is not None
    return [(p.first_day, p.last_day, p.began, p.ended, p.current_at_end) for p in timeline.periods]


def _counts(timeline: report.Timeline | None) -> list[tuple[int, int, int]]:
    """(began, ended, current at the end) of each period."""
    return [(began, ended, current) for _, _, began, ended, current in _periods(timeline)]


async def _current_as_of(engine: AsyncEngine, org_id: str, last_day: date) -> int:
    """The versions memories_as_of() returns at the last instant of ``last_day``."""
    last_instant = datetime.combine(last_day + timedelta(days=1), time(), timezone.utc) - timedelta(microseconds=1)
    rows = await _rows(
        engine, "SELECT count(*) AS n FROM memora.memories_as_of(:at) WHERE org_id = :org", at=last_instant, org=org_id
    )
    return int(rows[0]["n"])


async def test_timeline_per_day_counts_versions_begun_ended_and_current(
    graph: PostgresGraphDB, engine: AsyncEngine, versions: Versions
) -> None:
    """Per UTC day of a short window: the versions begun and ended, and those current at the day's end,
    which is what memories_as_of() returns then; the back-dated correction's empty span counts in both."""
    r = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 1, 10), days=10)
    assert r.timeline is not None
    assert r.timeline.period == "day"
    jan = [date(2026, 1, n) for n in range(1, 11)]
    assert _periods(r.timeline) == [
        (jan[0], jan[0], 2, 0, 2),  # A, D
        (jan[1], jan[1], 1, 1, 2),  # E begins, D ends
        (jan[2], jan[2], 2, 0, 4),  # F, G
        (jan[3], jan[3], 0, 0, 4),
        (jan[4], jan[4], 1, 1, 4),  # C begins, A ends
        (jan[5], jan[5], 0, 0, 4),
        (jan[6], jan[6], 0, 0, 4),
        (jan[7], jan[7], 0, 1, 3),  # G expires
        (jan[8], jan[8], 0, 0, 3),
        (jan[9], jan[9], 1, 1, 3),  # B: begins and ends at once
    ]
    for period in r.timeline.periods:
        assert period.current_at_end == await _current_as_of(engine, DOC_ORG, period.last_day), period
    # A window that starts later counts the earlier days in the versions current.
    later = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 1, 10), days=3)
    assert _periods(later.timeline) == [(jan[7], jan[7], 0, 1, 3), (jan[8], jan[8], 0, 0, 3), (jan[9], jan[9], 1, 1, 3)]


async def test_timeline_per_month_cuts_the_months_to_the_window(
    graph: PostgresGraphDB, engine: AsyncEngine, versions: Versions
) -> None:
    """A timeline longer than TIMELINE_DAILY_DAYS (from the day before its first version) is charted per
    calendar month, its first and last cut to it."""
    r = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 3, 15), days=90)
    assert r.timeline is not None
    assert r.timeline.period == "month"
    assert _periods(r.timeline) == [
        (date(2025, 12, 31), date(2025, 12, 31), 0, 0, 0),
        (date(2026, 1, 1), date(2026, 1, 31), 7, 4, 3),  # C, E, F current
        (date(2026, 2, 1), date(2026, 2, 28), 1, 0, 4),  # H
        (date(2026, 3, 1), date(2026, 3, 15), 1, 1, 4),  # I supersedes E
    ]
    for period in r.timeline.periods:
        assert period.current_at_end == await _current_as_of(engine, DOC_ORG, period.last_day), period
    # The whole database adds the other organization's K (Jan 4).
    everyone = await report.headline(graph.database, until=date(2026, 3, 15), days=90)
    assert _counts(everyone.timeline) == [(0, 0, 0), (8, 4, 4), (1, 0, 5), (1, 1, 5)]
    other = await report.headline(graph.database, org_id=versions.other.org_id, until=date(2026, 3, 15), days=90)
    # Its only version began on Jan 4: the timeline starts on Jan 3.
    assert _counts(other.timeline) == [(1, 0, 1), (0, 0, 1), (0, 0, 1)]
    assert other.timeline is not None
    assert other.timeline.periods[0].first_day == date(2026, 1, 3)


async def test_timeline_starts_near_its_first_version(graph: PostgresGraphDB, versions: Versions) -> None:
    """A window of 90 days over a history of 20 is charted per day from the day before the first version,
    not per month over empty months; a window with no version at all keeps its days."""
    r = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 1, 20), days=90)
    assert r.timeline is not None
    assert r.timeline.period == "day"
    assert _periods(r.timeline)[:2] == [
        (date(2025, 12, 31), date(2025, 12, 31), 0, 0, 0),
        (date(2026, 1, 1), date(2026, 1, 1), 2, 0, 2),  # A and D
    ]
    assert r.timeline.periods[-1].last_day == date(2026, 1, 20)
    # The growth chart starts near its first memory too; the report's data keeps every day of the window.
    assert len(r.growth) == 90
    page = report.render_html(r)
    assert "Memories stored, 2025-12-31 to 2026-01-20" in page
    empty = await report.headline(graph.database, org_id=DOC_ORG, until=date(2025, 11, 30), days=20)
    assert empty.timeline is not None
    assert len(empty.timeline.periods) == 20


async def test_timeline_is_charted_in_the_html_and_text_reports(graph: PostgresGraphDB, versions: Versions) -> None:
    """The HTML page draws the timeline chart (a bar per period with versions begun or ended); the text lists them."""
    r = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 1, 10), days=10)
    page = report.render_html(r)
    assert "<h2>Versions over time</h2>" in page
    assert '<svg class="timeline"' in page
    assert page.count('<rect class="began"') == 5
    assert page.count('<rect class="ended"') == 4
    assert "<title>2026-01-10: 1 began, 1 ended, 3 current at its end</title>" in page
    assert "<title>2026-01-08: 0 began, 1 ended, 3 current at its end</title>" in page
    lines = [" ".join(line.split()) for line in report.render_text(r).splitlines()]
    assert "2026-01-05 2026-01-05 1 1 4" in lines
    assert "2026-01-04 2026-01-04 0 0 4" not in lines  # only the days with changes
    assert any(line.startswith("Versions over time, 2026-01-01 to 2026-01-10") for line in lines)
    assert report.as_dict(r)["timeline"]["periods"][0] == {
        "first_day": "2026-01-01", "last_day": "2026-01-01", "began": 2, "ended": 0, "current_at_end": 2
    }  # fmt: skip


async def test_an_erased_user_leaves_no_version_in_the_timeline(
    graph: PostgresGraphDB, engine: AsyncEngine, versions: Versions
) -> None:
    """Erasure removes every version: the timeline of the past changes too, and memory_timeline has no row left."""
    await graph.erase_user(DOC_ORG, DOC_USER)
    r = await report.headline(graph.database, org_id=DOC_ORG, until=date(2026, 3, 15), days=90)
    assert _counts(r.timeline) == [(0, 0, 0)] * 4
    assert await _rows(engine, "SELECT memory_id FROM memora.memory_timeline WHERE org_id = :o", o=DOC_ORG) == []


def _doc_reports() -> dict[str, str]:
    """The runnable example reports of docs/reporting.md: each ```sql block whose first line is ``-- report: …``."""
    blocks = re.findall(r"```sql\n(-- report: (.+?)\n.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    return {title: block for block, title in blocks}


async def test_the_documented_reports_run_and_answer(engine: AsyncEngine, versions: Versions) -> None:
    """The exact SQL of the example reports in docs/reporting.md, run on the chain above."""
    reports = _doc_reports()
    assert set(reports) == {"facts that changed per month", "what the agent believed at the end of each quarter"}
    async with engine.connect() as conn:
        changed = (await conn.exec_driver_sql(reports["facts that changed per month"])).all()
        believed = (await conn.exec_driver_sql(reports["what the agent believed at the end of each quarter"])).all()
    assert [tuple(row) for row in changed] == [
        (date(2026, 1, 1), 4, 1, 1),  # B, C, E, F; B corrected before it was ever true
        (date(2026, 3, 1), 1, 0, 1),  # I
        (date(2026, 8, 1), 1, 0, 1),  # J
    ]
    q1 = ["user_X plays bridge", "user_X lives in Rome", "user_X likes tea", "user_X plays poker"]
    q3 = ["user_X plays bridge", "user_X likes tea", "user_X plays poker", "user_X lives in Oslo"]
    assert [(row.quarter_end, row.memory) for row in believed] == [
        *((date(2026, 3, 31), fact) for fact in q1),
        *((date(2026, 6, 30), fact) for fact in q1),
        *((date(2026, 9, 30), fact) for fact in q3),
        *((date(2026, 12, 31), fact) for fact in q3),
    ]


# -- the migration ---------------------------------------------------------------------------


async def _views(url: str, schema: str) -> dict[str, list[str] | None]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = :s AND c.relkind = 'v'"
                ),
                {"s": schema},
            )
            return {row.relname: row.reloptions for row in rows}
    finally:
        await engine.dispose()


async def test_views_migrate_up_down_and_up(fresh_database: str) -> None:
    """0004 and 0008 create the six views (with the invoker's rights), drops them on downgrade, and creates them
    again."""
    engine = create_async_engine(fresh_database)
    options = MigrationOptions(schema="reports")
    try:
        await migrations.upgrade(engine, options)
        views = await _views(fresh_database, "reports")
        assert set(views) == VIEWS
        assert all(reloptions == ["security_invoker=true"] for reloptions in views.values())
        await migrations.downgrade(engine, options, "0003")
        assert await _views(fresh_database, "reports") == {}
        async with driver.checkout(engine, "reports") as conn:
            assert await migrations.current_revision(conn, "reports") == "0003"
        await migrations.upgrade(engine, options)
        assert set(await _views(fresh_database, "reports")) == VIEWS
    finally:
        await engine.dispose()


async def test_report_before_the_timeline_skips_its_chart(fresh_database: str) -> None:
    """A database still at 0007 has the reporting views but no memory_timeline: the report works without it."""
    engine = create_async_engine(fresh_database)
    try:
        await migrations.upgrade(engine, MigrationOptions(schema="before_time"), "0007")
    finally:
        await engine.dispose()
    database = Database(fresh_database, settings=Settings(db_schema="before_time"))
    try:
        statements = count_statements(await database.engine())
        r = await report.headline(database, until=date(2026, 1, 10), days=10)
    finally:
        await database.close()
    assert len(statements) == 4
    assert r.timeline is None
    assert (r.memories, len(r.growth)) == (0, 10)
    page = report.render_html(r)
    assert "<h2>Versions over time</h2>" in page
    assert "no <code>memory_timeline</code> view yet (migration 0008)" in page
    assert '<svg class="timeline"' not in page
    assert "no memory_timeline view yet (migration 0008)" in report.render_text(r)
    assert report.as_dict(r)["timeline"] is None


async def test_report_without_views_is_a_configuration_error(fresh_database: str) -> None:
    """A database still at 0003 has no reporting views: the report says what to run."""
    engine = create_async_engine(fresh_database)
    try:
        await migrations.upgrade(engine, MigrationOptions(schema="older"), "0003")
    finally:
        await engine.dispose()
    database = Database(fresh_database, settings=Settings(db_schema="older"))
    try:
        with pytest.raises(ConfigurationError, match="no reporting views"):
            await report.headline(database)
    finally:
        await database.close()


async def test_the_report_of_a_database_written_through_every_face(graph: PostgresGraphDB, database_url: str) -> None:
    """Memora, the mem0-style face, MCP, Agent Framework and AutoGen write one organization: the report counts
    every agent that wrote, calls none of them deleted but the one that was, counts no mem0-style memory as an
    orphan, says which faces wrote what, and is titled with the organization's name."""
    from agent_framework import Message
    from autogen_core.memory import MemoryContent, MemoryMimeType
    from mcp import Client

    from memora_pg.agent_framework import MemoraHistoryProvider
    from memora_pg.autogen import PostgresMemory
    from memora_pg.embeddings import HashEmbedder
    from memora_pg.langgraph import AsyncMemoraStore
    from memora_pg.mcp import Caller, build_server
    from memora_pg.mem0.memory import AsyncMemory

    w = await world(graph)  # the Memora face: an organization, a user, a registered agent, a saved memory
    await graph.save_interaction_with_memories(
        w.org_id, w.agent_id, w.user_id, payload(chat("hi"), [("Likes tea", [0])])
    )
    old = await graph.create_agent(w.org_id, "Retired helper")
    await graph.save_interaction_with_memories(w.org_id, old.agent_id, w.user_id, payload(chat("yo"), [("Runs", [0])]))
    await graph.delete_agent(w.org_id, old.agent_id)

    settings = Settings(database_url=database_url, db_schema="memora")
    mem0 = AsyncMemory(settings=settings, embedder=HashEmbedder(384)).for_organization(w.org_id)
    notes = PostgresMemory("notes", settings=settings, embedder=HashEmbedder(384), org_id=w.org_id)
    try:
        await mem0.add("Prefers the window seat", user_id="ann", agent_id="support-bot", infer=False)
        await mem0.add("Has a cat", user_id="ann", infer=False)  # of no agent
        server = build_server(mem0, caller=lambda: Caller(org_id=w.org_id, default_user="ann"), can_infer=False)
        async with Client(server) as client:
            await client.call_tool("add_memory", {"text": "Bikes to work", "agent_id": "mcp-assistant"})
        history = MemoraHistoryProvider(mem0, user_id="ann")
        await history.save_messages("session-1", [Message("user", ["Hello"])])
        await notes.add(MemoryContent(content="Use tabs", mime_type=MemoryMimeType.TEXT))
        async with AsyncMemoraStore(settings=settings, embedder=HashEmbedder(384), org_id=w.org_id) as items:
            await items.aput(("ann",), "editor", {"text": "uses vim"})
            await items.aput(("ann",), "editor", {"text": "uses helix"})

        r = await report.headline(graph.database, org_id=w.org_id)
    finally:
        await mem0.close()
        await notes.close()

    assert r.org_name == "Acme"
    assert {a.agent_id: a.registration for a in r.busiest_agents} == {
        w.agent_id: report.REGISTERED,
        old.agent_id: report.DELETED,
        "support-bot": report.BY_ID,
        "mcp-assistant": report.BY_ID,
        "agent-framework": report.BY_ID,  # the history provider's interaction
        "": report.NO_AGENT,
    }
    assert (r.agents, r.registered_agents) == (5, 1)  # "" is no agent
    assert (r.memories, r.standalone_memories, r.orphaned_memories, r.autogen_entries) == (5, 3, 0, 1)
    assert (r.store_items, r.store_item_versions) == (1, 2)
    text = report.render_text(r)
    lines = {" ".join(line.split()) for line in text.splitlines()}
    assert {"agents 5 (1 registered)", "orphaned memories 0", "added directly (mem0-style) 3"} <= lines
    assert "LangGraph store items 1 (2 versions)" in lines
    assert text.count("(deleted)") == 1
    page = report.render_html(r)
    assert "<title>memora_pg report: organization Acme</title>" in page
