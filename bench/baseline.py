"""The package as it was at an earlier revision, for a bench to run beside this checkout's."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout(rev: str, into: Path) -> Path:
    """``rune_council`` at ``rev``, extracted with ``git archive`` into the new directory
    ``into``: put it first on PYTHONPATH to run that revision."""
    archive = subprocess.run(
        ["git", "archive", rev, "rune_council"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
