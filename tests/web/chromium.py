"""The headless Chromium the web tests drive (Debian's, through Playwright, offline), and
the pages they open in it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.web.serving import Server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "test-output" / "web"
# Nothing a test does in the browser reaches past the servers it starts.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def launched(*extra_flags: str) -> Iterator[Any]:
    """A Chromium with ``FLAGS`` (and ``extra_flags``), installed first by install.sh if
    the machine has none, and closed afterwards."""
    if not CHROMIUM.exists():
        subprocess.run(["bash", str(Path(__file__).with_name("install.sh"))], check=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=[*FLAGS, *extra_flags]
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Opened:
    """A page that notes every request to anywhere but its server, and every error its
    scripts throw."""

    page: Any
    width: int
    outside: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Closes the page once it loaded nothing from outside, threw nothing and fit."""
        assert self.outside == [], "the page loads nothing from outside the server"
        assert self.errors == []
        assert self.page.evaluate("document.documentElement.scrollWidth") <= self.width
        self.page.close()


def open_page(browser: Any, server: Server, path: str, width: int) -> Opened:
    opened = Opened(browser.new_page(viewport={"width": width, "height": 900}), width)
    opened.page.on(
        "request",
        lambda r: None if r.url.startswith(server.base) else opened.outside.append(r.url),
    )
    opened.page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
    opened.page.goto(server.base + path)
    return opened
