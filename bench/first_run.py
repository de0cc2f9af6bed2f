"""Seconds to a clear answer on a first run: the logged-out newcomer with every real CLI.

Run: .venv/bin/python bench/first_run.py [--repeat N]

The scenario of tests/e2e/newcomer.py: every pinned CLI installed (claude, codex, gemini,
qwen, and the wrappers opencode, aider and cline; tests/e2e/install.sh), an empty HOME, no
credentials, nothing pointed at any server, and ``rune council "<q>" --artifact plan.md
--yes``. Each CLI must be found logged out before it is asked, so the council reaches its
exit (1, no verdict) with one fix per CLI. Before the wrappers were checked, they were
seated and the same run took minutes (cline gave up after 78 s, opencode after 87 s, aider
at its 180 s timeout).

Figures: the whole process, from start to exit, for a first run (no detection cache: a fresh
HOME and project each time) and for the next run in the same project (today's cache), and
``rune council doctor`` on a fresh HOME. Target: the first run under 10 s with every fix
printed; the exit status is 1 when a run misses it, so the bench can gate a change.
Nothing leaves 127.0.0.1: nothing is configured to go anywhere.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the scenario lives in the test tree

from tests.e2e import newcomer  # noqa: E402

TARGET_S = 10.0


def first_and_next(repeat: int) -> tuple[list[float], list[float], list[str]]:
    """Seconds to exit of each first run and of the run after it; what any run missed."""
    first: list[float] = []
    again: list[float] = []
    misses: list[str] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-first-run-") as scratch:
            tmp = Path(scratch)
            env = newcomer.environment(tmp, newcomer.every_cli(tmp / "bin"))
            cwd = newcomer.workdir(tmp)
            for samples in (first, again):
                ran, elapsed = newcomer.convene(cwd, env, "--timeout", "180")
                samples.append(elapsed)
                if ran.returncode != 1:
                    misses.append(f"exit {ran.returncode}, not 1: {ran.stderr[-400:]}")
                misses += [f"no fix printed for {n}" for n in newcomer.missing_fixes(ran.stderr)]
    return first, again, misses


def doctor(repeat: int) -> list[float]:
    samples: list[float] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-first-run-doctor-") as scratch:
            tmp = Path(scratch)
            env = newcomer.environment(tmp, newcomer.every_cli(tmp / "bin"))
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "rune_council.cli", "council", "doctor"],
                cwd=newcomer.workdir(tmp),
                env=env,
                capture_output=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            samples.append(time.monotonic() - started)
    return samples


def row(label: str, samples: list[float]) -> str:
    return (
        f"  {label:<40} median {statistics.median(samples):5.1f} s   "
        f"min {min(samples):5.1f} s   max {max(samples):5.1f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not newcomer.installed():
        print(f"bench/first_run.py: pinned CLIs not all installed: {newcomer.INSTALL_HINT}")
        return 2
    names = " ".join(newcomer.FIXES)
    print(f"bench/first_run.py  ({os.cpu_count()} cores, {args.repeat} repeats; {names})")
    first, again, misses = first_and_next(args.repeat)
    print(row("first run (no cache), start to exit", first))
    print(row("next run (today's cache), start to exit", again))
    print(row("doctor on a fresh HOME", doctor(args.repeat)))
    slowest = max(first)
    met = slowest < TARGET_S and not misses
    print(
        f"  target: every first run under {TARGET_S:g} s with a fix per CLI: "
        f"{'met' if met else 'MISSED'} (slowest {slowest:.1f} s)"
    )
    for miss in dict.fromkeys(misses):
        print(f"  missed: {miss}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
