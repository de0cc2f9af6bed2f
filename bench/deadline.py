"""Time to a verdict when one voice lags: with and without a deadline.

Run: .venv/bin/python bench/deadline.py [--slow 30] [--deadline 3]

Three fake CLIs run as real processes under the names claude, codex and gemini, answering
after 1 s, 2 s and ``--slow`` seconds. Without a deadline the council waits for the slowest;
with one it stops waiting once the deadline has passed and two confirmed families are in,
kills the straggler's process tree and says the verdict is partial. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rune_council import CouncilOptions, convene  # noqa: E402
from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import PLAN, QUESTION, ROLLBACK, answer  # noqa: E402


def run(home: Path, run_id: str, deadline: float | None) -> tuple[float, str, str]:
    budget: dict[str, float] = {"per_voice_timeout_s": 120}
    if deadline is not None:
        budget["deadline_s"] = deadline
    request = {
        "id": run_id,
        "question": QUESTION,
        "n": 3,
        "artifact": {"name": "plan.md", "text": PLAN},
        "budget": budget,
    }
    env = {"PATH": path_with(home / "bin"), "HOME": str(home), "RUNE_COUNCIL_ALLOW_EXTERNAL": "1"}
    t = time.perf_counter()
    result = convene(request, CouncilOptions(rune_dir=home / ".rune", env=env))
    took = time.perf_counter() - t
    late = ", ".join(result.partial.late_voice_ids) if result.partial else "none"
    return took, result.stamp_label() or "-", late


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--slow", type=float, default=30.0, help="seconds the slowest voice takes")
    p.add_argument("--deadline", type=float, default=3.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="rune-deadline-") as tmp:
        home = Path(tmp)
        body = answer(QUESTION, "NO, not before a rollback exists", [ROLLBACK])
        for name, sleep_s in (("claude", 1.0), ("codex", 2.0), ("gemini", args.slow)):
            install_fake(home / "bin", name, answer=body, sleep_s=sleep_s)
        print(f"voices answer after 1 s, 2 s and {args.slow:g} s (fake CLIs, real processes)")
        print(f"  {'':<22} {'verdict after':>13}  stamp / late voices")
        for label, deadline in (
            ("no deadline", None),
            (f"--deadline {args.deadline:g}", args.deadline),
        ):
            took, stamp, late = run(home, label.replace(" ", "").replace("-", ""), deadline)
            print(f"  {label:<22} {took:>12.2f}s  {stamp} / late: {late}")


if __name__ == "__main__":
    main()
