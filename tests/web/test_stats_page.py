"""The web view's stats page in a real headless Chromium: tables, pictures, names as text."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.stats_history import build_history
from tests.web.chromium import SHOTS, open_page
from tests.web.serving import serving

HOSTILE = '<img src=x onerror="window.__xss=1">famly'


def test_the_stats_page_shows_tables_and_pictures_and_runs_no_markup(
    tmp_path: Path, browser: Any
) -> None:
    pytest.importorskip("matplotlib")
    rune = build_history(tmp_path / ".rune")
    # A run file naming a family with markup in it: the page must show it as text.
    path = rune / "council" / "run-a.json"
    doc = json.loads(path.read_text())
    doc["distinct_families"] = [*doc["distinct_families"], HOSTILE]
    path.write_text(json.dumps(doc))
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serving(tmp_path) as server:
        opened = open_page(browser, server, "/stats", 1100)
        page, outside, errors = opened.page, opened.outside, opened.errors
        page.wait_for_selector("section.stats-table table")
        # Polled from here: the page's policy forbids the eval a waiting function needs.
        loaded = (
            "[...document.querySelectorAll('img.stats-picture')]"
            ".filter((i) => i.complete && i.naturalWidth > 0).length"
        )
        deadline = time.monotonic() + 30
        while page.evaluate(loaded) < 5 and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert page.evaluate(loaded) == 5
        text = page.inner_text("main")
        assert "75% (3/4)" in text and "anthropic + google" in text
        assert HOSTILE in text
        assert page.evaluate("window.__xss") is None
        assert page.locator("main td img").count() == 0
        widths = page.evaluate(
            "[...document.querySelectorAll('img.stats-picture')].map((i) => i.naturalWidth)"
        )
        assert min(widths) >= 600
        page.screenshot(path=str(SHOTS / "stats.png"), full_page=True)
        assert outside == [] and errors == []
        page.close()
