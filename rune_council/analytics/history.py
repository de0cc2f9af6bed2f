"""The one library call behind ``rune council stats`` and the web view's stats page: the
run history, and the evals kept beside it."""

from __future__ import annotations

import datetime as dt

from ..core.paths import RuneDir
from .aggregate import Files, SkippedFile, Stats, aggregate
from .evals import collect_evals
from .index import collect

# Skipped files listed by name; the count covers all of them.
LISTED_SKIPS = 20


def stats(
    rune_dirs: list[RuneDir], *, since: dt.datetime | None = None, use_index: bool = True
) -> Stats:
    """The statistics of the run history in ``rune_dirs``."""
    found = collect(rune_dirs, use_index=use_index)
    result = aggregate(found.runs, since=since)
    result.evals = collect_evals(rune_dirs, since=since)
    result.files = Files(
        rune_dirs=[str(d.root) for d in rune_dirs],
        runs=len(found.runs),
        skipped=len(found.skipped),
        skipped_files=[SkippedFile(file=s.file, reason=s.reason) for s in found.skipped][
            :LISTED_SKIPS
        ],
        read=found.read,
        reused=found.reused,
        forgotten=found.forgotten,
        notes=found.notes,
    )
    return result
