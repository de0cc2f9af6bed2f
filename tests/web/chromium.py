"""The headless Chromium the web tests drive: Debian's, through Playwright, offline."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
