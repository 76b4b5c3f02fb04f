"""The report rendered: as JSON-ready values, text tables for a terminal, and an HTML page with SVG charts.

Pure functions of a :class:`~memora_pg.ops.report.data.Report`: nothing here reads the database.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import date, datetime, timedelta, timezone
from typing import Any

from memora_pg.ops.report.data import (
    BUSIEST_AGENTS,
    BUSIEST_USERS,
    BY_ID,
    DELETED,
    NO_AGENT,
    AgentActivity,
    DailyGrowth,
    Report,
    Timeline,
    TimelinePeriod,
    from_first_data,
)

__all__ = ["as_dict", "render_html", "render_json", "render_text"]


# -- JSON ------------------------------------------------------------------------------------


def as_dict(report: Report) -> dict[str, Any]:
    """The report as JSON-ready values (dates and datetimes in ISO 8601)."""

    def plain(value: Any) -> Any:
        if isinstance(value, date | datetime):
            return value.isoformat()
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    result: dict[str, Any] = plain(asdict(report))
    return result


def render_json(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False)


# -- the tables, for both renderings -------------------------------------------------------

USER_COLUMNS = ("user", "user id", "organization", "interactions", "memories", "current", "last activity (UTC)")
AGENT_COLUMNS = (
    "agent",
    "agent id",
    "organization",
    "interactions",
    "messages per interaction",
    "memories",
    "superseded",
    "contradiction rate",
    "last activity (UTC)",
)
_USER_NUMERIC = (False, False, False, True, True, True, False)
_AGENT_NUMERIC = (False, False, False, True, True, True, True, True, False)


def _when(moment: datetime | None) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M") if moment else "-"


NONE_YET = "none yet"


def _scope(report: Report) -> str:
    """What the report covers, by name: the organization's (its id when it has none), or all of them."""
    if report.org_id is None:
        return "all organizations"
    return f"organization {report.org_name}" if report.org_name else f"organization {report.org_id}"


def _rate(rate: float | None, empty: str = NONE_YET) -> str:
    return empty if rate is None else f"{rate:.1%}"


def _totals(report: Report) -> list[tuple[str, str]]:
    """The headline counts. Memories are told apart by the face that wrote them: those of a conversation (the
    Memora face, with their source messages) and those written directly (the mem0-style face, MCP, Agent
    Framework's context provider, the vector store), which have no source messages and cannot be orphaned."""
    agents = f"{report.agents:,}"
    if report.registered_agents != report.agents:
        agents += f" ({report.registered_agents:,} registered)"
    return [
        ("organizations", f"{report.organizations:,}"),
        ("users", f"{report.users:,}"),
        ("agents", agents),
        ("interactions", f"{report.interactions:,}"),
        ("messages", f"{report.messages:,}"),
        ("memories", f"{report.memories:,}"),
        ("of conversations (Memora)", f"{report.memories - report.standalone_memories:,}"),
        ("added directly (mem0-style)", f"{report.standalone_memories:,}"),
        ("current memories", f"{report.current_memories:,}"),
        ("superseded memories", f"{report.superseded_memories:,}"),
        ("contradiction rate", _rate(report.contradiction_rate)),
        ("orphaned memories", f"{report.orphaned_memories:,}"),
        ("AutoGen entries", f"{report.autogen_entries:,}"),
        ("LangGraph store items", f"{report.store_items:,} ({report.store_item_versions:,} versions)"),
    ]


# How an agent the agents table does not name is shown.
_UNNAMED = {DELETED: "(deleted)", BY_ID: "(by id only)", NO_AGENT: "(no agent)"}


def _agent_name(agent: AgentActivity) -> str:
    if agent.agent_label is not None:
        return agent.agent_label
    return _UNNAMED.get(agent.registration, "(deleted)")


def _user_rows(report: Report) -> list[list[str]]:
    return [
        [
            u.user_name,
            u.user_id,
            u.org_name,
            f"{u.interactions:,}",
            f"{u.memories:,}",
            f"{u.current_memories:,}",
            _when(u.last_activity),
        ]
        for u in report.busiest_users
    ]


def _agent_rows(report: Report) -> list[list[str]]:
    return [
        [
            _agent_name(a),
            a.agent_id,
            a.org_name,
            f"{a.interactions:,}",
            f"{a.messages_per_interaction:,.2f}",
            f"{a.memories:,}",
            f"{a.superseded_memories:,}",
            _rate(a.contradiction_rate, "-"),
            _when(a.last_activity),
        ]
        for a in report.busiest_agents
    ]


# -- text ------------------------------------------------------------------------------------

_SPARKS = "▁▂▃▄▅▆▇█"


def _printable(value: str, width: int = 32) -> str:
    """User data for a terminal: control characters shown escaped (never sent raw), long names cut."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> list[str]:
    cells = [[_printable(cell) for cell in row] for row in rows]
    widths = [max([len(header)] + [len(row[i]) for row in cells]) for i, header in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        padded = (c.rjust(w) if right else c.ljust(w) for c, w, right in zip(row, widths, numeric, strict=True))
        return "  " + "  ".join(padded).rstrip()

    return [line(headers), "  " + "  ".join("-" * w for w in widths), *(line(row) for row in cells)]


def render_text(report: Report) -> str:
    """The report as plain-text tables for a terminal."""
    return (
        "\n".join(
            [
                f"memora_pg report: {_printable(_scope(report), 80)}",
                f"generated {_when(report.generated_at)} UTC",
                "",
                "Totals",
                *(f"  {name:<22}{value:>12}" for name, value in _totals(report)),
                "",
                "Memories per user",
                f"  p50 {report.memories_per_user_p50:,.1f}   p95 {report.memories_per_user_p95:,.1f}"
                f"   max {report.memories_per_user_max:,}",
                "",
                f"Busiest users (top {BUSIEST_USERS} by memories)",
                *_table(USER_COLUMNS, _user_rows(report), _USER_NUMERIC),
                "",
                f"Agents (top {BUSIEST_AGENTS} by memories)",
                *_table(AGENT_COLUMNS, _agent_rows(report), _AGENT_NUMERIC),
                "",
                *_growth_text(report.growth),
                "",
                *_timeline_text(report.timeline),
            ]
        )
        + "\n"
    )


def _growth_text(growth: Sequence[DailyGrowth]) -> list[str]:
    """A sparkline of the days, then one row per calendar week (Monday first): added, and the total at its end."""
    if not growth:
        return []
    growth = from_first_data(growth)
    added = sum(g.added for g in growth)
    peak = max(g.added for g in growth)
    sparks = "".join(_SPARKS[(len(_SPARKS) - 1) * g.added // peak] if peak else _SPARKS[0] for g in growth)
    weeks: dict[date, list[DailyGrowth]] = {}
    for g in growth:
        weeks.setdefault(g.day - timedelta(days=g.day.weekday()), []).append(g)
    rows = [
        [str(days[0].day), str(days[-1].day), f"{sum(g.added for g in days):,}", f"{days[-1].total:,}"]
        for days in weeks.values()
    ]
    return [
        f"Memory growth, {growth[0].day} to {growth[-1].day} (UTC days): {added:,} added, {growth[-1].total:,} in all",
        f"  {sparks}",
        *_table(["from", "to", "added", "total"], rows, [False, False, True, True]),
    ]


def _timeline_text(timeline: Timeline | None) -> list[str]:
    """One row per period in which a version began or ended, with the versions current at its end."""
    if timeline is None:
        return ["Versions over time: none, this database has no memory_timeline view yet (migration 0008)"]
    periods = timeline.periods
    if not periods:
        return []
    began, ended = sum(p.began for p in periods), sum(p.ended for p in periods)
    rows = [
        [str(p.first_day), str(p.last_day), f"{p.began:,}", f"{p.ended:,}", f"{p.current_at_end:,}"]
        for p in periods
        if p.began or p.ended
    ]
    return [
        f"Versions over time, {periods[0].first_day} to {periods[-1].last_day} (valid time, per UTC {timeline.period}):"
        f" {began:,} began, {ended:,} ended, {periods[-1].current_at_end:,} current at the end",
        *_table(["from", "to", "began", "ended", "current at end"], rows, [False, False, True, True, True]),
    ]


# -- HTML ------------------------------------------------------------------------------------

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2933; margin: 2rem auto;
       max-width: 60rem; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
.muted { color: #627d98; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: .6rem; }
.card { border: 1px solid #d9e2ec; border-radius: 6px; padding: .5rem .7rem; }
.card b { display: block; font-size: 1.3rem; }
.table { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: .25rem .35rem; border-bottom: 1px solid #e4e7eb; text-align: left; }
th { vertical-align: bottom; font-weight: 600; font-size: 12px; }
td { overflow-wrap: anywhere; } td.n { white-space: nowrap; overflow-wrap: normal; }
td:last-child { overflow-wrap: normal; min-width: 5.5rem; }
td.name { min-width: 7.5rem; max-width: 14rem; } td.name code { overflow-wrap: anywhere; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 11px; color: #52606d; }
svg { width: 100%; height: auto; } svg text { font: 11px system-ui, sans-serif; fill: #52606d; }
"""

_AXIS = "#9aa5b1"
_FILL = "#9fb3c8"
_LINE = "#2f6690"
_BAR = "#d64545"
_GRID = "#e4e7eb"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched."""
    cards = [
        *_totals(report),
        ("memories per user, p50", f"{report.memories_per_user_p50:,.1f}"),
        ("memories per user, p95", f"{report.memories_per_user_p95:,.1f}"),
        ("memories per user, max", f"{report.memories_per_user_max:,}"),
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>memora_pg report: {_e(_scope(report))}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>memora_pg report: {_e(_scope(report))}</h1>",
        f'<p class="muted">{_identity(report)}generated {_e(_when(report.generated_at))} UTC</p>',
        '<section class="cards">',
        *(f'<div class="card">{_e(name)}<b>{_e(value)}</b></div>' for name, value in cards),
        "</section>",
        "<h2>Memory growth</h2>",
        _growth_svg(report.growth),
        "<h2>Versions over time</h2>",
        _timeline_svg(report.timeline),
        "<h2>Contradiction rate per agent</h2>",
        _rates_svg(report.busiest_agents, with_org=report.org_id is None),
        f"<h2>Busiest users (top {BUSIEST_USERS} by memories)</h2>",
        _html_table(USER_COLUMNS, _user_rows(report), _USER_NUMERIC),
        f"<h2>Agents (top {BUSIEST_AGENTS} by memories)</h2>",
        _html_table(AGENT_COLUMNS, _agent_rows(report), _AGENT_NUMERIC),
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def _identity(report: Report) -> str:
    return f"id <code>{_e(report.org_id)}</code> · " if report.org_id is not None else ""


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """A table whose first two columns (a name and its id) share one cell, the id in small type below
    the name: the page's column holds every other column without wrapping a number or a date. A
    table wider than the page scrolls inside its own box."""

    def cell(tag: str, index: int, value: str) -> str:
        kind = ' class="n"' if numeric[index] else ""
        return f"<{tag}{kind}>{_e(value)}</{tag}>"

    def named(tag: str, name: str, identity: str) -> str:
        return f'<{tag} class="name">{_e(name)}<br><code>{_e(identity)}</code></{tag}>'

    head = named("th", headers[0], headers[1]) + "".join(cell("th", i, h) for i, h in enumerate(headers) if i > 1)
    body = "".join(
        "<tr>" + named("td", row[0], row[1]) + "".join(cell("td", i, v) for i, v in enumerate(row) if i > 1) + "</tr>"
        for row in rows
    )
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _growth_svg(growth: Sequence[DailyGrowth]) -> str:
    """An area chart of all memories stored at each day's end, with the day's additions as bars below it."""
    if not growth:
        return '<p class="muted">No days to show.</p>'
    growth = from_first_data(growth)
    first, last = growth[0], growth[-1]
    return _period_chart(
        "growth",
        f"Memories stored, {first.day} to {last.day} (UTC days)",
        (str(first.day), str(last.day)),
        ("total", [g.total for g in growth]),
        [("added", _LINE, [g.added for g in growth])],
        [f"{g.day}: {g.added:,} added, {g.total:,} in all" for g in growth],
        "a day",
        "area: memories stored at the day's end; bars: memories added that day",
    )


def _timeline_svg(timeline: Timeline | None) -> str:
    """An area chart of the versions current at each period's end, with the versions that began and
    ended in the period as pairs of bars below it."""
    if timeline is None:
        return (
            '<p class="muted">No timeline: this database has no <code>memory_timeline</code> view yet'
            " (migration 0008). Run 'alembic upgrade head' to chart the versions of memories over time.</p>"
        )
    periods = timeline.periods
    if not periods:
        return '<p class="muted">No periods to show.</p>'
    unit = "UTC days" if timeline.period == "day" else "UTC months"
    return _period_chart(
        "timeline",
        f"Versions of memories by valid time, {periods[0].first_day} to {periods[-1].last_day} ({unit})",
        (str(periods[0].first_day), str(periods[-1].last_day)),
        ("current", [p.current_at_end for p in periods]),
        [("began", _LINE, [p.began for p in periods]), ("ended", _BAR, [p.ended for p in periods])],
        [
            f"{_period_name(p)}: {p.began:,} began, {p.ended:,} ended, {p.current_at_end:,} current at its end"
            for p in periods
        ],
        f"a {timeline.period}",
        f"area: versions current at the {timeline.period}'s end; bars: versions that began (blue) and ended (red)"
        f" that {timeline.period}",
    )


def _period_name(period: TimelinePeriod) -> str:
    if period.first_day == period.last_day:
        return str(period.first_day)
    return f"{period.first_day} to {period.last_day}"


def _period_chart(
    kind: str,
    title: str,
    ends: tuple[str, str],
    level: tuple[str, Sequence[int]],
    bars: Sequence[tuple[str, str, Sequence[int]]],
    tips: Sequence[str],
    per: str,
    legend: str,
) -> str:
    """One band of the width per period, from its first day at the left to its last at the right:
    ``level`` (its class and values) as a step, flat across each band at the period's value (a count
    at each period's end: it changes within a period, never across one, so no slope suggests a change
    before the period it happened in), and below it a strip of ``bars`` (class, colour and values of
    each series, side by side on one scale, centred in the band), each bar titled with its period's tip."""
    level_class, levels = level
    count = len(levels)
    width, height, left, right, top, bottom = 720, 270, 84, 16, 14, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    area_h = plot_h * 0.7  # the level's area above, the bars in the strip below
    peak_level = max(levels) or 1
    peak_bar = max(max(values) for _, _, values in bars) or 1
    band = plot_w / count
    edges = [left + i * band for i in range(count + 1)]
    baseline = top + area_h
    steps = [
        point
        for i, value in enumerate(levels)
        for point in (
            (edges[i], baseline - area_h * value / peak_level),
            (edges[i + 1], baseline - area_h * value / peak_level),
        )
    ]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in steps)
    area = f"M{edges[0]:.1f},{baseline:.1f} L{line} L{edges[-1]:.1f},{baseline:.1f} Z"
    xs = [left + (i + 0.5) * band for i in range(count)]
    strip_top, strip_h = baseline + 10, plot_h - area_h - 10
    bar_w = max(min(band * 0.7 / len(bars), 12), 1.0)
    drawn: list[str] = []
    for series, (name, colour, values) in enumerate(bars):
        shift = (series - len(bars) / 2) * bar_w  # the series side by side, centred in the band
        drawn.extend(
            f'<rect class="{name}" x="{x + shift:.1f}" y="{strip_top + strip_h * (1 - value / peak_bar):.1f}" '
            f'width="{bar_w:.1f}" height="{strip_h * value / peak_bar:.1f}" fill="{colour}">'
            f"<title>{_e(tip)}</title></rect>"
            for x, value, tip in zip(xs, values, tips, strict=True)
            if value
        )
    return (
        f'<svg class="{kind}" viewBox="0 0 {width} {height}" role="img" font-size="11">'
        f"<title>{_e(title)}</title>"
        f'<path class="{level_class}" d="{area}" fill="{_FILL}" fill-opacity="0.6" stroke="none"></path>'
        f'<polyline points="{line}" fill="none" stroke="{_LINE}" stroke-width="2"></polyline>'
        f"{''.join(drawn)}"
        f'<line x1="{left}" y1="{baseline:.1f}" x2="{width - right}" y2="{baseline:.1f}" stroke="{_AXIS}"></line>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="{_AXIS}"></line>'
        f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">{peak_level:,}</text>'
        f'<text x="{left - 6}" y="{baseline:.1f}" text-anchor="end">0</text>'
        f'<text x="{left - 6}" y="{strip_top + 8:.1f}" text-anchor="end">{peak_bar:,} {_e(per)}</text>'
        f'<text x="{left}" y="{height - 22}">{_e(ends[0])}</text>'
        f'<text x="{width - right}" y="{height - 22}" text-anchor="end">{_e(ends[1])}</text>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 5}" text-anchor="middle">{_e(legend)}</text>'
        "</svg>"
    )


def _rates_svg(agents: Sequence[AgentActivity], *, with_org: bool) -> str:
    """A horizontal bar per agent with memories: the share of them that a newer version has superseded (an
    agent without memories has no rate, so no bar)."""
    agents = [agent for agent in agents if agent.contradiction_rate is not None]
    if not agents:
        return '<p class="muted">No agents with memories yet.</p>'
    width, row_h, label_w, value_w, top, axis_h = 720, 24, 230, 150, 6, 20
    bar_room = width - label_w - value_w
    height = top + row_h * len(agents) + axis_h
    bottom = top + row_h * len(agents)
    scale = "".join(
        f'<line x1="{label_w + bar_room * tick:.1f}" y1="{top}" x2="{label_w + bar_room * tick:.1f}" y2="{bottom}" '
        f'stroke="{_GRID}"></line>'
        f'<text x="{label_w + bar_room * tick:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:.0%}</text>'
        for tick in (0, 0.25, 0.5, 0.75, 1)
    )
    rows = []
    for i, agent in enumerate(agents):
        y, rate = top + i * row_h, agent.contradiction_rate or 0.0
        name = agent.agent_label if agent.agent_label is not None else f"{_agent_name(agent)} {agent.agent_id}".strip()
        if with_org:
            name = f"{name} · {agent.org_name}"
        shown = name if len(name) <= 34 else name[:33] + "…"
        rows.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{_e(shown)}</text>'
            f'<rect class="rate" x="{label_w}" y="{y + 5}" width="{bar_room * rate:.1f}" height="{row_h - 10}" '
            f'fill="{_BAR}"><title>{_e(name)}: {rate:.1%}</title></rect>'
            f'<text x="{label_w + bar_room * rate + 6:.1f}" y="{y + 16}">'
            f"{rate:.1%} ({agent.superseded_memories:,} of {agent.memories:,})</text>"
        )
    return (
        f'<svg class="rates" viewBox="0 0 {width} {height}" role="img" font-size="11">'
        "<title>Contradiction rate per agent: superseded memories over all its memories</title>"
        f"{scale}{''.join(rows)}"
        "</svg>"
    )
