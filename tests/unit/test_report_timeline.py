"""The report's timeline of versions (migration 0008), rendered from reports built in Python: no database."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from memora_pg.ops import report
from memora_pg.ops.report import Report, Timeline, TimelinePeriod
from tests.unit.test_report_rendering import _check_html, sample


def _day(n: int, began: int, ended: int, current: int) -> TimelinePeriod:
    return TimelinePeriod(date(2026, 1, n), date(2026, 1, n), began, ended, current)


# The days of the integration tests' chain: A, D; E (D ends); F, G; -; C (A ends); -; -; G expires; -; B.
DAYS = [
    _day(1, 2, 0, 2),
    _day(2, 1, 1, 2),
    _day(3, 2, 0, 4),
    _day(4, 0, 0, 4),
    _day(5, 1, 1, 4),
    _day(6, 0, 0, 4),
    _day(7, 0, 0, 4),
    _day(8, 0, 1, 3),
    _day(9, 0, 0, 3),
    _day(10, 1, 1, 3),
]
MONTHS = [
    TimelinePeriod(date(2025, 12, 16), date(2025, 12, 31), 0, 0, 0),
    TimelinePeriod(date(2026, 1, 1), date(2026, 1, 31), 7, 4, 3),
    TimelinePeriod(date(2026, 2, 1), date(2026, 2, 28), 1, 0, 4),
    TimelinePeriod(date(2026, 3, 1), date(2026, 3, 15), 1, 1, 4),
]


def with_timeline(timeline: Timeline | None) -> Report:
    return dataclasses.replace(sample(), timeline=timeline)


def _rects(page: str, kind: str) -> list[dict[str, str | None]]:
    return [attrs for tag, attrs in _check_html(page).tags if tag == "rect" and attrs.get("class") == kind]


def test_timeline_chart_sits_between_the_growth_and_rate_charts() -> None:
    """With a timeline the page draws three charts: growth, versions over time, contradiction rates."""
    parsed = _check_html(report.render_html(with_timeline(Timeline("day", DAYS))))
    assert [attrs.get("class") for tag, attrs in parsed.tags if tag == "svg"] == ["growth", "timeline", "rates"]
    assert [attrs.get("class") for tag, attrs in parsed.tags if tag == "path"] == ["total", "current"]


def test_timeline_bars_are_the_periods_with_versions_begun_or_ended() -> None:
    """One bar per period and series with a count, side by side on one scale, each titled with its numbers."""
    page = report.render_html(with_timeline(Timeline("day", DAYS)))
    began, ended = _rects(page, "began"), _rects(page, "ended")
    assert len(began) == 5
    assert len(ended) == 4
    heights = [float(attrs["height"] or 0) for attrs in began]
    assert heights[0] == pytest.approx(2 * heights[1], abs=0.2)  # Jan 1 (2) against Jan 2 (1)
    # Jan 2 has both: the began bar, then the ended bar right beside it.
    first_began, first_ended = began[1], ended[0]
    assert float(first_began["x"] or 0) + float(first_began["width"] or 0) == pytest.approx(
        float(first_ended["x"] or 0), abs=0.2
    )
    assert "<title>2026-01-02: 1 began, 1 ended, 2 current at its end</title>" in page
    assert "2 a day" in page  # the bars' scale
    assert "2026-01-01" in page
    assert "2026-01-10" in page


def test_timeline_per_month_names_each_period_by_its_days() -> None:
    """Months (cut to the window) are titled by their first and last day; the legend speaks of months."""
    page = report.render_html(with_timeline(Timeline("month", MONTHS)))
    _check_html(page)
    assert "<title>2026-01-01 to 2026-01-31: 7 began, 4 ended, 3 current at its end</title>" in page
    assert "2025-12-16" in page
    assert "2026-03-15" in page
    assert "UTC months" in page
    assert "7 a month" in page
    assert len(_rects(page, "began")) == 3


@pytest.mark.parametrize(
    "periods",
    [[_day(1, 0, 0, 0)], [_day(1, 0, 0, 0), _day(2, 0, 0, 0)], [_day(1, 3, 0, 3)]],
    ids=["one quiet day", "quiet days", "one day"],
)
def test_timeline_chart_of_few_or_quiet_periods_is_well_formed(periods: list[TimelinePeriod]) -> None:
    """One period, or periods without any version, still make a closed, finite chart."""
    page = report.render_html(with_timeline(Timeline("day", periods)))
    parsed = _check_html(page)
    assert "timeline" in [attrs.get("class") for tag, attrs in parsed.tags if tag == "svg"]
    assert "nan" not in page.lower()


def test_without_a_timeline_the_page_and_the_text_say_why() -> None:
    """A database before migration 0008 has no timeline: no chart, a note saying which migration adds it."""
    r = with_timeline(None)
    page = report.render_html(r)
    _check_html(page)
    assert '<svg class="timeline"' not in page
    assert "(migration 0008)" in page
    assert "no memory_timeline view yet (migration 0008)" in report.render_text(r)


def test_timeline_in_text_and_json() -> None:
    """The text lists the periods with changes and the totals; the JSON carries every period."""
    r = with_timeline(Timeline("day", DAYS))
    lines = [" ".join(line.split()) for line in report.render_text(r).splitlines()]
    assert (
        "Versions over time, 2026-01-01 to 2026-01-10 (valid time, per UTC day): 7 began, 4 ended, 3 current at the end"
    ) in lines
    assert "2026-01-08 2026-01-08 0 1 3" in lines
    assert not any(line.startswith("2026-01-04 2026-01-04") for line in lines)
    data = report.as_dict(r)["timeline"]
    assert data["period"] == "day"
    assert len(data["periods"]) == 10
    assert data["periods"][-1] == {
        "first_day": "2026-01-10",
        "last_day": "2026-01-10",
        "began": 1,
        "ended": 1,
        "current_at_end": 3,
    }
