"""Where the voices' directories go in a test, and what is left of them afterwards.

Voices' directories live under a scratch root (``rune_council.runtimes.scratch``) chosen
from XDG_RUNTIME_DIR, XDG_CACHE_HOME or HOME, else a 0700 directory in the temp root. A test
that wants to see them all pins every choice inside one directory it owns: the cache it
names is below that directory, and the last resort is in it too.
"""

from __future__ import annotations

import os
from pathlib import Path

from rune_council.runtimes.scratch import FALLBACK_PREFIX


def pinned_env(temp_root: Path) -> dict[str, str]:
    """Variables that keep every root a voice may get inside ``temp_root`` (its TMPDIR)."""
    return {"TMPDIR": str(temp_root), "XDG_CACHE_HOME": str(temp_root / "cache")}


def roots(temp_root: Path) -> list[Path]:
    """The roots a voice's directories may be made in under ``pinned_env(temp_root)``: the
    cache one when nothing above it is writable by others, the last resort otherwise."""
    return [
        temp_root / "cache" / "rune-council" / "scratch",
        temp_root / f"{FALLBACK_PREFIX}{os.getuid()}",
    ]


def leftovers(temp_root: Path) -> list[Path]:
    """Everything under ``temp_root`` other than the roots themselves (and the directories
    that hold them): what voices, their prompt files or their status commands left."""
    kept = set()
    for root in roots(temp_root):
        kept.add(root)
        kept.update(p for p in root.parents if temp_root in p.parents)
    return sorted(p for p in temp_root.rglob("*") if p not in kept)
