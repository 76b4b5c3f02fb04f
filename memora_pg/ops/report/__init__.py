"""``memora-pg report``: the headline numbers of a memora_pg database, for a terminal or a browser.

:mod:`.data` holds the numbers (the dataclasses, and the statements that read them in one
snapshot); :mod:`.rendering` turns a :class:`Report` into JSON, text tables or an HTML page.
docs/reporting.md describes the views they come from.
"""

from __future__ import annotations

from memora_pg.ops.report.data import (
    BUSIEST_AGENTS,
    BUSIEST_USERS,
    BY_ID,
    DELETED,
    GROWTH_DAYS,
    NO_AGENT,
    REGISTERED,
    TIMELINE_DAILY_DAYS,
    AgentActivity,
    DailyGrowth,
    Report,
    Timeline,
    TimelinePeriod,
    UserActivity,
    headline,
)
from memora_pg.ops.report.rendering import as_dict, render_html, render_json, render_text

__all__ = [
    "BUSIEST_AGENTS",
    "BUSIEST_USERS",
    "BY_ID",
    "DELETED",
    "GROWTH_DAYS",
    "NO_AGENT",
    "REGISTERED",
    "TIMELINE_DAILY_DAYS",
    "AgentActivity",
    "DailyGrowth",
    "Report",
    "Timeline",
    "TimelinePeriod",
    "UserActivity",
    "as_dict",
    "headline",
    "render_html",
    "render_json",
    "render_text",
]
