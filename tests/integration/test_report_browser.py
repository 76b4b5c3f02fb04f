"""The HTML report in a real browser: Debian's Chromium, headless, draws the page at 1200 and 800 pixels
wide, and the screenshots show nothing outside the page's column, no table cut at its edge (every column
fits, ids and long names wrap) and both charts drawn. ``MEMORA_PG_TEST_SCREENSHOTS=<dir>`` keeps the
screenshots there to look at."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from PIL import Image

from memora_pg import PostgresGraphDB
from memora_pg.embeddings import HashEmbedder
from memora_pg.mem0.memory import AsyncMemory
from memora_pg.ops import report
from tests.integration.helpers import chat, payload

pytestmark = pytest.mark.browser

# The page's body: at most 60rem wide with 1rem of padding on each side, centred (rendering.py's style).
BODY_MAX, PADDING = 960 + 2 * 16, 16
BACKGROUND = (255, 255, 255)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed: bash scripts/ci-system-deps.sh installs Debian's chromium")
    return found


def screenshot(browser: str, page: Path, width: int, out: Path) -> Image.Image:
    """The page drawn by headless Chromium in a window ``width`` pixels wide (flags as a closed network needs)."""
    subprocess.run(  # noqa: S603 - Chromium from PATH, a page this test wrote
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={out.parent / f'profile-{width}'}",
            f"--window-size={width},2400",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return Image.open(out).convert("RGB")


def drawn_columns(image: Image.Image, start: int, end: int) -> list[int]:
    """The x of each column from ``start`` to ``end`` (exclusive) holding a pixel other than the background."""
    pixels = image.load()
    assert pixels is not None
    return [x for x in range(start, end) if any(pixels[x, y] != BACKGROUND for y in range(image.height))]


def dark_columns(image: Image.Image, start: int, end: int) -> list[int]:
    """The x of each column from ``start`` to ``end`` (exclusive) holding a dark pixel: text, not a border."""
    gray = image.convert("L").load()
    assert gray is not None
    return [x for x in range(start, end) if any(int(gray[x, y]) < 128 for y in range(image.height))]  # type: ignore[arg-type]


async def test_the_report_fits_its_column_at_1200_and_800_pixels(graph: PostgresGraphDB, tmp_path: Path) -> None:
    browser = chromium()
    org = await graph.create_organization("Acme Health and Wellbeing Cooperative of the Northern Coast")
    user = await graph.create_user(org.org_id, "Jacqueline Montgomery-Fitzwilliam")
    agent = await graph.create_agent(org.org_id, "Nutrition and long-distance running coach for the spring")
    today = datetime.now(timezone.utc).replace(hour=9, minute=30)
    for days_ago in (20, 12, 12, 3):
        at = today - timedelta(days=days_ago)
        await graph.save_interaction_with_memories(
            org.org_id,
            agent.agent_id,
            user.user_id,
            payload(chat("hi", "hello"), [(f"fact of day -{days_ago}", [0]), ("another fact", [1])], at=at),
        )
    # An agent the mem0-style face names by a long id alone, with no label to show instead.
    mem0 = AsyncMemory(settings=graph.database.settings, embedder=HashEmbedder(384)).for_organization(org.org_id)
    try:
        await mem0.add(
            "Prefers the window seat", user_id="ann", agent_id="support-bot-for-the-north-coast-region", infer=False
        )
    finally:
        await mem0.close()
    # A history of three weeks in a window of 90 days: both charts start the day before the first memory.
    page = tmp_path / "report.html"
    html = report.render_html(await report.headline(graph.database, org_id=org.org_id))
    page.write_text(html)
    first = (today - timedelta(days=21)).date()
    assert f"Memories stored, {first}" in html
    assert f"Versions of memories by valid time, {first}" in html

    check_widths(browser, page, tmp_path)


def check_widths(browser: str, page: Path, tmp_path: Path) -> None:
    """At 1200 and 800 pixels: nothing drawn right of the page's column, and the charts span the column."""
    kept = os.environ.get("MEMORA_PG_TEST_SCREENSHOTS")
    for width in (1200, 800):
        image = screenshot(browser, page, width, tmp_path / f"report-{width}.png")
        if kept:
            Path(kept).mkdir(parents=True, exist_ok=True)
            image.save(Path(kept) / f"report-{width}.png")
        body = min(width, BODY_MAX)
        left = (width - body) // 2
        right = left + body - PADDING  # the right edge of the page's column
        assert drawn_columns(image, right + 2, width) == [], f"drawn beyond the column at {width} px"
        inside = drawn_columns(image, left + PADDING, right)
        assert inside[0] < left + PADDING + 0.1 * (right - left)
        assert inside[-1] > right - 0.1 * (right - left)
        # Nothing is cut at the column's edge: no text runs into it (a table too wide for the column would
        # scroll, its last column cut there), at 800 px as at 1200. Borders and chart fills are light; text dark.
        assert dark_columns(image, right - 4, right) == [], f"a table is cut at the column's edge at {width} px"
