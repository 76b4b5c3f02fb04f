"""The report's data: the dataclasses of the headline numbers, and the statements that read them.

The numbers come from the reporting views of migration 0004, and the versions over time from
the ``memory_timeline`` view of migration 0008 (docs/reporting.md). All of them are read in one
read-only REPEATABLE READ transaction, so every section describes the same moment, with one
statement per section (five in all, four on a database from before 0008) whatever the size of
the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any, TypeVar

from memora_pg.db import Database, unit_of_work
from memora_pg.driver import Row
from memora_pg.errors import ConfigurationError, DatabaseError, InvalidInputError, sqlstate_of
from memora_pg.graph import validate as check
from memora_pg.schema import TENANT_TABLES
from memora_pg.sql_text import render

BUSIEST_USERS = 10
BUSIEST_AGENTS = 20
GROWTH_DAYS = 90
# A timeline of up to this many days (from just before its first version) is charted per day, a longer one
# per month.
TIMELINE_DAILY_DAYS = 62
_UNDEFINED_TABLE = "42P01"


@dataclass(frozen=True)
class UserActivity:
    org_id: str
    org_name: str
    user_id: str
    user_name: str
    interactions: int
    memories: int
    current_memories: int
    # The latest save or update of one of the user's interactions; None without interactions.
    last_activity: datetime | None


# What the agents table says of an agent id the report lists.
REGISTERED = "registered"  # a row of agents: the Memora face's create_agent
DELETED = "deleted"  # once a row, deleted (an audited delete_agent): its interactions and memories stay
BY_ID = "by id"  # never a row: the mem0-style face, MCP and Agent Framework name agents by id alone
NO_AGENT = "none"  # the mem0-style face's memories of no agent


@dataclass(frozen=True)
class AgentActivity:
    org_id: str
    org_name: str
    agent_id: str
    # None unless the agent is registered (REGISTERED, DELETED, BY_ID or NO_AGENT says why).
    agent_label: str | None
    interactions: int
    messages_per_interaction: float
    memories: int
    superseded_memories: int
    # None for an agent without memories.
    contradiction_rate: float | None
    last_activity: datetime | None
    registration: str = REGISTERED


@dataclass(frozen=True)
class DailyGrowth:
    day: date
    added: int
    total: int


@dataclass(frozen=True)
class TimelinePeriod:
    """One period (a UTC day, or the part of a calendar month inside the window) of valid time."""

    first_day: date
    last_day: date
    # Versions whose valid time began in the period, and whose valid time ended in it (a newer
    # version began, or the memory expired); a version with an empty span counts in both.
    began: int
    ended: int
    # Versions current at the period's last instant: what memories_as_of() returns then.
    current_at_end: int


@dataclass(frozen=True)
class Timeline:
    """The versions of memories over the report's window, by valid time, per ``period``."""

    period: str  # "day" or "month"
    periods: list[TimelinePeriod]


_Record = TypeVar("_Record", UserActivity, AgentActivity, DailyGrowth, TimelinePeriod)
_Day = TypeVar("_Day", DailyGrowth, TimelinePeriod)
# The counts of a day that say something exists by then.
_HELD: dict[type, tuple[str, ...]] = {
    DailyGrowth: ("added", "total"),
    TimelinePeriod: ("began", "ended", "current_at_end"),
}


@dataclass(frozen=True)
class Report:
    """The headline numbers of one organization (``org_id``) or of the whole database (None)."""

    org_id: str | None
    generated_at: datetime
    organizations: int
    users: int
    # Every agent id the report can list: registered, deleted, or named by id alone (not the empty one).
    agents: int
    interactions: int
    messages: int
    memories: int
    current_memories: int
    superseded_memories: int
    # None while there are no memories: a rate of nothing.
    contradiction_rate: float | None
    # Memories of an interaction without a source message: the Memora face's memories that lost theirs.
    orphaned_memories: int
    memories_per_user_p50: float
    memories_per_user_p95: float
    memories_per_user_max: int
    busiest_users: list[UserActivity]
    busiest_agents: list[AgentActivity]
    growth: list[DailyGrowth]
    # None on a database from before migration 0008, which has no memory_timeline view.
    timeline: Timeline | None = None
    # The organization's name (None for the whole database, or an organization that does not exist).
    org_name: str | None = None
    # Agents with a row of the agents table (the Memora face's create_agent).
    registered_agents: int = 0
    # Memories of no interaction: written by the mem0-style face (and so MCP and Agent Framework's context
    # provider) or the vector store's add_memories, which have no source messages by design.
    standalone_memories: int = 0
    # AutoGen's entries (autogen_contents), apart from the memories.
    autogen_entries: int = 0
    # LangGraph's store items (store_items): the current versions, and every version kept.
    store_items: int = 0
    store_item_versions: int = 0


# -- the statements ---------------------------------------------------------------------------------

# The tenant tables counted (TENANT_TABLES' order), then the kinds of memory and the other faces' rows.
COUNTS = (
    *TENANT_TABLES[: TENANT_TABLES.index("memories") + 1],
    "current_memories",
    "orphaned_memories",
    "org_name",
    "registered_agents",
    "standalone_memories",
    "autogen_entries",
)

# An agent counts wherever its id appears: the mem0-style face, MCP and Agent Framework name agents without
# registering them. Orphans are the memories of an interaction that have no source message (the view's
# 'no_sources'); a memory of no interaction never had one.
TOTALS = """
SELECT (SELECT count(*) FROM {schema}.organizations {where_org}) AS organizations,
       (SELECT org_name FROM {schema}.organizations WHERE org_id = CAST(:org_id AS text)) AS org_name,
       (SELECT count(*) FROM {schema}.users {where_org}) AS users,
       (SELECT count(*) FROM (
            SELECT org_id, agent_id FROM {schema}.agents {where_org}
            UNION SELECT org_id, agent_id FROM {schema}.memories {where_org}
            UNION SELECT org_id, agent_id FROM {schema}.interactions {where_org}
        ) AS named WHERE agent_id <> '') AS agents,
       (SELECT count(*) FROM {schema}.agents {where_org}) AS registered_agents,
       (SELECT count(*) FROM {schema}.interactions {where_org}) AS interactions,
       (SELECT count(*) FROM {schema}.messages {where_org}) AS messages,
       stored.memories, stored.standalone_memories,
       (SELECT count(*) FROM {schema}.current_memories {where_org}) AS current_memories,
       (SELECT count(*) FILTER (WHERE reason = 'no_sources') FROM {schema}.orphaned_memories {where_org})
           AS orphaned_memories,
       (SELECT count(*) FROM {schema}.autogen_contents {where_org}) AS autogen_entries,
       to_regclass('{schema}.memory_timeline') IS NOT NULL AS has_timeline,
       to_regclass('{schema}.store_items') IS NOT NULL AS has_store_items
FROM (
    SELECT count(*) AS memories, count(*) FILTER (WHERE interaction_id IS NULL) AS standalone_memories
    FROM {schema}.memories {where_org}
) AS stored
"""

# LangGraph's store items (migration 0019): the current versions, and every version kept.
STORE_ITEMS = """
SELECT count(*) FILTER (WHERE superseded_at IS NULL) AS store_items, count(*) AS store_item_versions
FROM {schema}.store_items {where_org}
"""

# Every user, those without memories too, counts in the spread; the busiest have the most memories.
USERS = """
WITH per_user AS (
    SELECT person.org_id, person.org_name, person.user_id, person.user_name,
           coalesce(stored.memories, 0) AS memories,
           coalesce(latest.memories, 0) AS current_memories,
           coalesce(talked.interactions, 0) AS interactions,
           talked.last_activity
    FROM (
        SELECT org_id, org.org_name, person.user_id, person.user_name
        FROM {schema}.users AS person JOIN {schema}.organizations AS org USING (org_id) {where_org}
    ) AS person
    LEFT JOIN (
        SELECT org_id, user_id, CAST(sum(memories) AS bigint) AS memories
        FROM {schema}.memory_growth_daily {where_org} GROUP BY org_id, user_id
    ) AS stored USING (org_id, user_id)
    LEFT JOIN (
        SELECT org_id, user_id, count(*) AS memories
        FROM {schema}.current_memories {where_org} GROUP BY org_id, user_id
    ) AS latest USING (org_id, user_id)
    LEFT JOIN (
        SELECT org_id, user_id, count(*) AS interactions, max(updated_at) AS last_activity
        FROM {schema}.interactions {where_org} GROUP BY org_id, user_id
    ) AS talked USING (org_id, user_id)
), spread AS (
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY memories) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY memories) AS p95,
           coalesce(max(memories), 0) AS most
    FROM per_user
)
SELECT spread.p50, spread.p95, spread.most, busiest.*
FROM spread
LEFT JOIN LATERAL (
    SELECT * FROM per_user
    ORDER BY memories DESC, interactions DESC, user_name, org_id, user_id
    LIMIT :busiest_users
) AS busiest ON true
"""

# Agents by the memories they stored; interactions count for the agent of their latest save.
AGENTS = """
WITH stored AS (
    SELECT org_id, agent_id, CAST(sum(memories) AS bigint) AS memories
    FROM {schema}.memory_growth_daily {where_org} GROUP BY org_id, agent_id
), latest AS (
    SELECT org_id, agent_id, count(*) AS memories
    FROM {schema}.current_memories {where_org} GROUP BY org_id, agent_id
), talked AS (
    SELECT org_id, agent_id, interactions, messages_per_interaction, last_activity
    FROM {schema}.interactions_per_agent {where_org}
), deleted AS (
    SELECT DISTINCT org_id, agent_id, true AS was_deleted
    FROM (SELECT org_id, agent_id, method FROM {schema}.audit_log {where_org}) AS event
    WHERE event.method = 'delete_agent'
)
SELECT org_id, org.org_name, agent_id, agent.agent_label, coalesce(deleted.was_deleted, false) AS was_deleted,
       coalesce(talked.interactions, 0) AS interactions,
       CAST(coalesce(talked.messages_per_interaction, 0) AS float8) AS messages_per_interaction,
       coalesce(stored.memories, 0) AS memories,
       coalesce(stored.memories - latest.memories, stored.memories, 0) AS superseded_memories,
       CAST(stored.memories - coalesce(latest.memories, 0) AS float8) / nullif(stored.memories, 0)
           AS contradiction_rate,
       talked.last_activity
FROM stored
LEFT JOIN latest USING (org_id, agent_id)
FULL JOIN talked USING (org_id, agent_id)
LEFT JOIN {schema}.agents AS agent USING (org_id, agent_id)
LEFT JOIN deleted USING (org_id, agent_id)
JOIN {schema}.organizations AS org USING (org_id)
ORDER BY memories DESC, interactions DESC, agent.agent_label, org_id, agent_id
LIMIT :busiest_agents
"""

# One row per day of the window, days without memories too; the total counts earlier days.
GROWTH = """
WITH daily AS (
    SELECT day, CAST(sum(memories) AS bigint) AS added FROM {schema}.memory_growth_daily {where_org} GROUP BY day
), window_days AS (
    SELECT CAST(:first_day AS date) + offset_days AS day FROM generate_series(0, :days - 1) AS offset_days
)
SELECT window_days.day,
       coalesce(daily.added, 0) AS added,
       CAST((SELECT coalesce(sum(earlier.added), 0) FROM daily AS earlier WHERE earlier.day < :first_day)
            + sum(coalesce(daily.added, 0)) OVER (ORDER BY window_days.day) AS bigint) AS total
FROM window_days
LEFT JOIN daily ON daily.day = window_days.day
ORDER BY window_days.day
"""

# One row per UTC day of the window, days without versions too. A version begins on the UTC day of
# valid_from and ends on that of valid_to; the versions current at a day's last instant are those begun
# by its end less those ended by then, earlier days included (valid_to is never before valid_from).
TIMELINE = """
WITH daily AS (
    SELECT CAST(event.at AT TIME ZONE 'UTC' AS date) AS day,
           CAST(sum(event.began) AS bigint) AS began, CAST(sum(event.ended) AS bigint) AS ended
    FROM (SELECT valid_from, valid_to FROM {schema}.memory_timeline {where_org}) AS span
    CROSS JOIN LATERAL (VALUES (span.valid_from, 1, 0), (span.valid_to, 0, 1)) AS event(at, began, ended)
    WHERE event.at IS NOT NULL
    GROUP BY 1
), window_days AS (
    SELECT CAST(:first_day AS date) + offset_days AS day FROM generate_series(0, :days - 1) AS offset_days
)
SELECT window_days.day AS first_day, window_days.day AS last_day,
       coalesce(daily.began, 0) AS began,
       coalesce(daily.ended, 0) AS ended,
       CAST((SELECT coalesce(sum(earlier.began - earlier.ended), 0)
             FROM daily AS earlier WHERE earlier.day < :first_day)
            + sum(coalesce(daily.began, 0) - coalesce(daily.ended, 0)) OVER (ORDER BY window_days.day) AS bigint)
           AS current_at_end
FROM window_days
LEFT JOIN daily ON daily.day = window_days.day
ORDER BY window_days.day
"""


def from_first_data(days: Sequence[_Day]) -> list[_Day]:
    """The days from the one before the first that holds anything (all of them when none does): a chart of a
    window longer than the data spends its width on the data, and still shows the rise from nothing."""
    held = [i for i, day in enumerate(days) if any(getattr(day, name) for name in _HELD[type(day)])]
    return list(days[max(held[0] - 1, 0) :] if held else days)


def timeline_of(days: Sequence[TimelinePeriod]) -> Timeline:
    """The timeline of these days (one period each), from just before its first version: per day while
    that span is at most :data:`TIMELINE_DAILY_DAYS` days, else per calendar month (the first and last cut
    to the span), with the versions begun and ended in each month and those current at its end."""
    shown = from_first_data(days)
    if len(shown) <= TIMELINE_DAILY_DAYS:
        return Timeline("day", shown)
    months: dict[tuple[int, int], list[TimelinePeriod]] = {}
    for day in shown:
        months.setdefault((day.first_day.year, day.first_day.month), []).append(day)
    return Timeline(
        "month",
        [
            TimelinePeriod(
                first_day=month[0].first_day,
                last_day=month[-1].last_day,
                began=sum(day.began for day in month),
                ended=sum(day.ended for day in month),
                current_at_end=month[-1].current_at_end,
            )
            for month in months.values()
        ],
    )


def _in_org(template: str, org_id: str | None) -> str:
    return render(template, where_org="WHERE org_id = :org_id" if org_id is not None else "")


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


async def headline(
    database: Database, *, org_id: str | None = None, days: int = GROWTH_DAYS, until: date | None = None
) -> Report:
    """The report of one organization, or of the whole database when ``org_id`` is None.

    ``growth`` holds one entry per day for the ``days`` days ending on ``until`` (default:
    today in UTC); ``timeline`` the versions begun, ended and current over the same days from the
    day before its first version (:func:`timeline_of`), per day for up to :data:`TIMELINE_DAILY_DAYS`
    days and per month beyond, or None when the
    schema predates migration 0008. An organization that does not exist reports zeros. A
    database whose schema has no reporting views yet is a ``ConfigurationError``.
    """
    if org_id is not None:
        check.require(check.ORG_ID, org_id)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3660:
        raise InvalidInputError("`days` must be an integer from 1 to 3660.")
    generated_at = datetime.now(timezone.utc)
    last_day = until or generated_at.date()
    first_day = last_day - timedelta(days=days - 1)
    # Statements without :org_id ignore it, as they ignore the limits of the other sections.
    params: dict[str, Any] = {"org_id": org_id, "busiest_users": BUSIEST_USERS, "busiest_agents": BUSIEST_AGENTS}
    params |= {"first_day": first_day, "days": days}
    # One snapshot for every section: the numbers add up even while agents write.
    engine = await database.engine()
    try:
        async with unit_of_work(engine, database.schema, read_only=True, snapshot=True) as conn:
            totals = await conn.one(_in_org(TOTALS, org_id), params)
            users = await conn.fetch(_in_org(USERS, org_id), params)
            agents = await conn.fetch(_in_org(AGENTS, org_id), params)
            growth = await conn.fetch(_in_org(GROWTH, org_id), params)
            # Whether the view exists is read with the totals: a failing statement would end the snapshot.
            timeline: Timeline | None = None
            if totals.has_timeline:
                daily = await conn.fetch(_in_org(TIMELINE, org_id), params)
                timeline = timeline_of([_from_row(TimelinePeriod, row) for row in daily])
            items = await conn.one(_in_org(STORE_ITEMS, org_id), params) if totals.has_store_items else None
    except DatabaseError as error:
        if sqlstate_of(error) == _UNDEFINED_TABLE:
            raise ConfigurationError(
                f"The schema {database.schema!r} has no reporting views: call setup() or run 'alembic upgrade head'."
            ) from error
        raise
    superseded = totals.memories - totals.current_memories
    spread = users[0]
    return Report(
        org_id=org_id,
        generated_at=generated_at,
        **{name: getattr(totals, name) for name in COUNTS},
        store_items=items.store_items if items is not None else 0,
        store_item_versions=items.store_item_versions if items is not None else 0,
        superseded_memories=superseded,
        contradiction_rate=_rate(superseded, totals.memories),
        memories_per_user_p50=float(spread.p50 or 0),
        memories_per_user_p95=float(spread.p95 or 0),
        memories_per_user_max=spread.most,
        busiest_users=[_from_row(UserActivity, row) for row in users if row.user_id is not None],
        busiest_agents=[_agent(row) for row in agents],
        growth=[_from_row(DailyGrowth, row) for row in growth],
        timeline=timeline,
    )


def _agent(row: Row) -> AgentActivity:
    if row.agent_label is not None:
        registration = REGISTERED
    elif row.agent_id == "":
        registration = NO_AGENT
    else:
        registration = DELETED if row.was_deleted else BY_ID
    return replace(_from_row(AgentActivity, row), registration=registration)


def _from_row(kind: type[_Record], row: Row) -> _Record:
    """A dataclass from the row's columns of the same names (the statements name them so)."""
    columns = row._mapping
    # A field with a default may come from elsewhere (AgentActivity.registration); any other must be a column.
    return kind(**{f.name: columns[f.name] for f in fields(kind) if f.name in columns or f.default is MISSING})
