"""The table printed when a batch ends: counts by outcome and the first items that need a look."""

from __future__ import annotations

from pathlib import Path

from ..core.safetext import plain
from .results import PROBLEMS_SHOWN, Tally

ORDER = ("complete", "no_verdict", "failed", "cancelled", "busy", "invalid")


def render_summary(tally: Tally, results: Path, *, stopped: bool = False) -> str:
    lines = ["", f"batch {'stopped' if stopped else 'finished'}: {tally.total} line(s)"]
    lines.append(f"  {'outcome':<10} {'items':>6}")
    for status in ORDER:
        if tally.by_status[status]:
            lines.append(f"  {status:<10} {tally.by_status[status]:>6}")
    if tally.resumed:
        lines.append(f"  ({tally.resumed} kept from an earlier run)")
    if tally.by_stamp:
        stamps = ", ".join(f"{k} {v}" for k, v in sorted(tally.by_stamp.items()))
        lines.append(f"  stamps: {stamps}; needs a decision: {tally.needs_decision}")
    if tally.problems:
        lines.append(f"  not complete (first {PROBLEMS_SHOWN} by finish):")
        for row in tally.problems:
            who = row.id if row.id is not None else "-"
            lines.append(
                plain(f"    line {row.line:<6} {who:<24} {row.status:<9} {row.error or ''}")
            )
    lines.append(f"results: {results}")
    return "\n".join(lines)
