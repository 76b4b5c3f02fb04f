"""The report's renderings (JSON, text, HTML with SVG), from reports built in Python: no database."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime, timezone
from html.parser import HTMLParser
from typing import Any, ClassVar

import pytest

from memora_pg.ops import report
from memora_pg.ops.report import AgentActivity, DailyGrowth, Report, UserActivity

EVE = "Eve <script>alert('x')</script>"
COACH = "Coach & <b>Co</b>"
ACME, OTHER = "org-acme", "org-other"
JAKE, JENNY = "user-jake", "agent-jenny"


def day(n: int) -> datetime:
    return datetime(2026, 1, n, 12, 0, tzinfo=timezone.utc)


def _user(
    org: tuple[str, str], user_id: str, name: str, counts: tuple[int, int, int], last: int | None
) -> UserActivity:
    interactions, memories, current = counts
    return UserActivity(org[0], org[1], user_id, name, interactions, memories, current, day(last) if last else None)


def _agent(
    agent_id: str, label: str | None, counts: tuple[int, float, int, int], last: int, org: tuple[str, str] = ("", "")
) -> AgentActivity:
    interactions, per_interaction, memories, superseded = counts
    org_id, org_name = org if org[0] else (ACME, "Acme")
    rate = superseded / memories if memories else 0.0
    return AgentActivity(
        org_id, org_name, agent_id, label, interactions, per_interaction, memories, superseded, rate, day(last)
    )


def sample() -> Report:
    """Two organizations over ten days: the numbers the integration tests' data makes."""
    acme, other = (ACME, "Acme"), (OTHER, "Other & Co")
    added = [3, 3, 1, 1, 0, 1, 0, 0, 0, 0]
    return Report(
        org_id=None,
        generated_at=day(10),
        organizations=2,
        users=4,
        agents=3,
        interactions=7,
        messages=8,
        memories=9,
        current_memories=7,
        superseded_memories=2,
        contradiction_rate=2 / 9,
        orphaned_memories=1,
        memories_per_user_p50=1.5,
        memories_per_user_p95=5.4,
        memories_per_user_max=6,
        busiest_users=[
            _user(acme, JAKE, "Jake", (5, 6, 4), 5),
            _user(acme, "user-eve", EVE, (1, 2, 2), 2),
            _user(other, "user-bob", "Bob", (1, 1, 1), 1),
            _user(acme, "user-zoe", "Zoe\x1b[31m", (0, 0, 0), None),
        ],
        busiest_agents=[
            _agent(JENNY, "Jenny", (3, 4 / 3, 6, 1), 3),
            _agent("agent-coach", COACH, (3, 1.0, 2, 1), 5),
            _agent("agent-helper", "Helper", (1, 1.0, 1, 0), 1, other),
        ],
        growth=[DailyGrowth(date(2026, 1, n), added[n - 1], sum(added[:n])) for n in range(1, 11)],
        registered_agents=3,
        standalone_memories=1,
    )


def empty(org_id: str = "no-such-org") -> Report:
    """What an organization without rows reports: zeros, empty lists, days without additions."""
    numbers = {"int": 0, "float": 0.0}  # the annotations are strings (from __future__ import annotations)
    zeros: dict[str, Any] = {
        field.name: numbers[field.type] for field in dataclasses.fields(Report) if field.type in numbers
    }
    return dataclasses.replace(
        sample(),
        org_id=org_id,
        **zeros,
        contradiction_rate=None,
        busiest_users=[],
        busiest_agents=[],
        growth=[DailyGrowth(date(2026, 1, 9), 0, 0), DailyGrowth(date(2026, 1, 10), 0, 0)],
    )


# -- text ------------------------------------------------------------------------------------


def test_render_text_shows_the_numbers() -> None:
    """The terminal report holds every headline number, the names, and never a raw control character."""
    out = report.render_text(sample())
    lines = {" ".join(line.split()) for line in out.splitlines()}
    for expected in [
        "organizations 2", "users 4", "agents 3", "interactions 7", "messages 8", "memories 9",
        "current memories 7", "superseded memories 2", "contradiction rate 22.2%", "orphaned memories 1",
        "of conversations (Memora) 8", "added directly (mem0-style) 1", "AutoGen entries 0",
        "p50 1.5 p95 5.4 max 6",
    ]:  # fmt: skip
        assert expected in lines, expected
    assert any(line.startswith(f"Jake {JAKE} Acme 5 6 4 2026-01-05 12:00") for line in lines)
    assert any(line.startswith(f"Jenny {JENNY} Acme 3 1.33 6 1 16.7% 2026-01-03 12:00") for line in lines)
    assert "Memory growth, 2026-01-01 to 2026-01-10 (UTC days): 9 added, 9 in all" in out
    assert "\x1b" not in out
    assert "Zoe\\x1b[31m" in out


def test_render_text_of_an_empty_report_names_its_organization() -> None:
    """A report without rows renders its scope and zeros, never an error."""
    out = report.render_text(empty())
    assert "memora_pg report: organization no-such-org" in out
    assert "0 added, 0 in all" in out
    assert "contradiction rate none yet" in {" ".join(line.split()) for line in out.splitlines()}
    assert "0 of 0" not in out
    assert "0.0%" not in out


def test_render_text_cuts_long_names() -> None:
    """A name longer than a column's 32 characters ends in an ellipsis, so the table keeps its shape."""
    long = "x" * 40
    r = sample()
    r = dataclasses.replace(r, busiest_users=[dataclasses.replace(r.busiest_users[0], user_name=long)])
    out = report.render_text(r)
    assert long not in out
    assert "x" * 31 + "…" in out


def test_render_text_weeks_start_on_monday() -> None:
    """The growth table has one row per calendar week: 2026-01-01 is a Thursday, so the first week has 4 days."""
    lines = [" ".join(line.split()) for line in report.render_text(sample()).splitlines()]
    assert "2026-01-01 2026-01-04 8 8" in lines
    assert "2026-01-05 2026-01-10 1 9" in lines


# -- HTML ------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Checks that every element is closed in order and records tags, attributes and text."""

    VOID: ClassVar[set[str]] = {"meta", "link", "br", "img", "hr", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.open[-1:] == [tag], (tag, self.open[-3:])
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _check_html(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert page.startswith("<!DOCTYPE html>")
    assert parser.open == []
    names = [tag for tag, _ in parser.tags]
    assert names[:2] == ["html", "head"]
    assert "script" not in names
    assert "link" not in names
    assert "img" not in names
    for _, attrs in parser.tags:
        assert not {"src", "href"} & set(attrs)
        assert not any(name.startswith("on") for name in attrs)
    assert "http://" not in page
    assert "https://" not in page
    assert "url(" not in page
    return parser


def test_render_html_is_a_self_contained_well_formed_page() -> None:
    """The HTML page closes every element, draws its SVG charts inline, loads nothing and escapes every name."""
    page = report.render_html(sample())
    parsed = _check_html(page)
    svgs = [attrs.get("class") for tag, attrs in parsed.tags if tag == "svg"]
    assert svgs == ["growth", "rates"]
    classes = [attrs.get("class") for tag, attrs in parsed.tags if tag in ("path", "rect")]
    assert classes.count("total") == 1
    assert classes.count("added") == 5  # the days with new memories
    assert classes.count("rate") == 3  # one bar per agent
    assert any(tag == "polyline" for tag, _ in parsed.tags)
    widths = [float(attrs["width"] or 0) for tag, attrs in parsed.tags if attrs.get("class") == "rate"]
    assert widths[2] == 0
    assert widths[1] == pytest.approx(3 * widths[0], abs=0.2)
    text_content = "".join(parsed.text)
    assert EVE in text_content
    assert COACH in text_content
    assert "Other & Co" in text_content
    assert "Eve &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "Coach &amp; &lt;b&gt;Co&lt;/b&gt;" in page
    assert "<b>Co</b>" not in page
    assert "<script>" not in page
    assert "22.2%" in text_content
    assert "5.4" in text_content


def test_render_html_of_an_empty_report_is_well_formed() -> None:
    """Without agents or users the page still closes every element and says there is nothing to chart."""
    page = report.render_html(empty())
    _check_html(page)
    assert "No agents with memories yet." in page
    assert "none yet" in page
    assert "0 of 0" not in page
    assert "no-such-org" in page


def test_deleted_agents_render_without_a_label() -> None:
    """An agent deleted since (no label) shows as "(deleted)" with its id, in text and in HTML."""
    r = sample()
    deleted = dataclasses.replace(r.busiest_agents[0], agent_label=None, registration=report.DELETED)
    r = dataclasses.replace(r, busiest_agents=[deleted])
    assert any(line.split()[:2] == ["(deleted)", JENNY] for line in report.render_text(r).splitlines())
    assert f"(deleted) {JENNY}" in report.render_html(r)


def test_agents_named_by_id_alone_are_not_called_deleted() -> None:
    """The mem0-style face, MCP and Agent Framework name agents without registering them: such an agent is
    shown by its id, and the mem0-style memories of no agent as "(no agent)"; neither as deleted."""
    r = sample()
    by_id = dataclasses.replace(
        r.busiest_agents[0], agent_id="support-bot", agent_label=None, registration=report.BY_ID
    )
    nobody = dataclasses.replace(r.busiest_agents[1], agent_id="", agent_label=None, registration=report.NO_AGENT)
    r = dataclasses.replace(r, busiest_agents=[by_id, nobody], agents=4, registered_agents=3)
    text = report.render_text(r)
    assert any(line.split()[:3] == ["(by", "id", "only)"] and "support-bot" in line for line in text.splitlines())
    assert any(line.split()[:2] == ["(no", "agent)"] for line in text.splitlines())
    assert "(deleted)" not in text
    assert "(deleted)" not in report.render_html(r)
    assert "agents 4 (3 registered)" in {" ".join(line.split()) for line in text.splitlines()}


def test_the_title_names_the_organization() -> None:
    """One organization's page is titled with its name; its id is under the heading."""
    page = report.render_html(dataclasses.replace(sample(), org_id=ACME, org_name="Acme"))
    assert "<title>memora_pg report: organization Acme</title>" in page
    assert f"id <code>{ACME}</code>" in page


def test_html_rate_labels_name_the_organization_only_across_organizations() -> None:
    """The whole-database chart labels each agent with its organization; one organization's does not."""
    assert "Jenny · Acme" in report.render_html(sample())
    assert "Jenny · Acme" not in report.render_html(dataclasses.replace(sample(), org_id=ACME))


# -- JSON ------------------------------------------------------------------------------------


def test_render_json_holds_the_report() -> None:
    """The JSON form carries the same numbers with ISO dates."""
    r = sample()
    data = report.as_dict(r)
    assert (data["memories"], data["current_memories"], data["superseded_memories"]) == (9, 7, 2)
    assert data["growth"][0] == {"day": "2026-01-01", "added": 3, "total": 3}
    assert data["busiest_users"][0]["last_activity"] == "2026-01-05T12:00:00+00:00"
    assert data["busiest_users"][3]["last_activity"] is None
    assert EVE in report.render_json(r)


def _polyline(page: str, kind: str) -> list[tuple[float, float]]:
    """The points of the level line of the chart of class ``kind``."""
    chart = page.split(f'<svg class="{kind}"')[1].split("</svg>")[0]
    points = chart.split('<polyline points="')[1].split('"')[0]
    return [(float(x), float(y)) for x, y in (point.split(",") for point in points.split())]


def test_a_count_at_period_ends_is_drawn_as_steps_from_near_the_first_data() -> None:
    """The level is flat across each period's band and changes only at a band's edge (a count at period ends
    never slopes into the period before); the chart starts the day before the first memory, not at the
    window's first empty day."""
    quiet = [DailyGrowth(date(2026, 1, n), 0, 0) for n in range(1, 21)]
    busy = [
        DailyGrowth(date(2026, 1, 21), 4, 4),
        DailyGrowth(date(2026, 1, 22), 0, 4),
        DailyGrowth(date(2026, 1, 23), 2, 6),
    ]
    page = report.render_html(dataclasses.replace(sample(), growth=quiet + busy))
    points = _polyline(page, "growth")
    assert len(points) == 2 * 4  # Jan 20 (the day before the first memory) to Jan 23, two points a day
    for (x0, y0), (x1, y1) in zip(points[::2], points[1::2], strict=True):
        assert y0 == y1  # flat across the band
        assert x1 > x0
    for (x_end, _), (x_start, _) in zip(points[1::2], points[2::2], strict=False):
        assert x_start == x_end  # the next band starts where this one ends: the change is a vertical step
    heights = [y for _, y in points[::2]]
    assert heights[0] > heights[1] == heights[2] > heights[3]  # 0, 4, 4, 6 (larger y is lower)
    assert "Memories stored, 2026-01-20 to 2026-01-23" in page
    assert "2026-01-20 to 2026-01-23" in report.render_text(dataclasses.replace(sample(), growth=quiet + busy))


def test_tables_fit_the_page_column() -> None:
    """A name and its id share one cell, and a table wider than the page scrolls inside its own box."""
    page = report.render_html(sample())
    assert page.count('<div class="table"><table>') == 2
    assert f'<td class="name">Jake<br><code>{JAKE}</code></td>' in page
    assert ".table { overflow-x: auto; }" in page
