"""The package stays typed (mypy strict) and lint-clean (ruff)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_mypy_strict_on_the_package() -> None:
    out = _run("mypy")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_check_and_format() -> None:
    out = _run("ruff", "check", ".")
    assert out.returncode == 0, out.stdout + out.stderr
    out = _run("ruff", "format", "--check", "rune_council")
    assert out.returncode == 0, out.stdout + out.stderr
