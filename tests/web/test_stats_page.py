"""The web view's stats page in a real headless Chromium: tables, pictures, names as text."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stats_history import build_history
from tests.web.serving import serving
from tests.web.test_browser import CHROMIUM, FLAGS, SHOTS

HOSTILE = '<img src=x onerror="window.__xss=1">famly'


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        subprocess.run(["bash", str(Path(__file__).with_name("install.sh"))], check=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def test_the_stats_page_shows_tables_and_pictures_and_runs_no_markup(
    tmp_path: Path, chromium: Any
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
        page = chromium.new_page(viewport={"width": 1100, "height": 900})
        outside: list[str] = []
        page.on(
            "request",
            lambda req: None if req.url.startswith(server.base) else outside.append(req.url),
        )
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server.base + "/stats")
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
