"""``rune council list`` (20 rows) over a large history, as whole processes, beside ``stats``.

    .venv/bin/python bench/list.py                    # 1,000 and 10,000 run files, 5 repeats
    .venv/bin/python bench/list.py --runs 2000 --repeats 3
    .venv/bin/python bench/list.py --quick            # 10,000 run files, 3 repeats, no cold list

Standard library plus the project only. The run files are copies of a real example run
(``.rune-example/council``) with distinct ids and start times, dated an hour back like the
files of earlier runs (no index trusts a file changed in the last 2 s). Everything lives in
one temp dir that is removed at the end.

Figures (median with min-max of the repeats, whole process):
cold — ``list`` with no index, every file read and the index written;
warm — ``list`` on the index: a directory scan, the index read, 20 rows printed;
stats warm — ``rune council stats --json`` on its warm index;
floor — ``list`` of a rune dir holding one run, what start-up alone costs in this sitting.

Each is printed beside its target, measured in the same run: a warm ``list`` of 20 rows
from 10,000 run files in at most 0.3 s, a warm ``stats`` in at most 1 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / ".rune-example" / "council" / "run-orders-shard-critique.json"
RUNE = [sys.executable, "-m", "rune_council.cli"]
INDEXES = ("list-index.json", "stats-index.json")
# Whole-process targets (s): a warm list at 10,000 runs, a warm stats at any size.
LIST_TARGET_S = 0.3
LIST_TARGET_RUNS = 10_000
STATS_TARGET_S = 1.0


def make_history(rune_dir: Path, runs: int) -> None:
    council = rune_dir / "council"
    council.mkdir(parents=True)
    template = json.loads(TEMPLATE.read_text())
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    then = time.time() - 3600
    for i in range(runs):
        doc = dict(template)
        began = start + dt.timedelta(minutes=i)
        doc["id"] = f"bench{i:06d}"
        doc["started_at"] = began.isoformat()
        doc["finished_at"] = (began + dt.timedelta(seconds=9)).isoformat()
        path = council / f"run-bench{i:06d}.json"
        path.write_text(json.dumps(doc))
        os.utime(path, (then, then))


def run(args: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run([*RUNE, *args], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - began


def drop_indexes(rune_dir: Path) -> None:
    for name in INDEXES:
        (rune_dir / name).unlink(missing_ok=True)


def figure(samples: list[float]) -> str:
    return (
        f"{statistics.median(samples):7.3f} s  ({min(samples):.3f}-{max(samples):.3f}, "
        f"n={len(samples)})"
    )


def measure(rune_dir: Path, repeats: int, *, cold: bool = True) -> dict[str, list[float]]:
    where = ["--rune-dir", str(rune_dir)]
    out: dict[str, list[float]] = {}
    if cold:
        out["list cold"] = []
        for _ in range(repeats):
            drop_indexes(rune_dir)
            out["list cold"].append(run(["council", "list", "--limit", "20", *where]))
    run(["council", "list", *where])
    out["list warm"] = [run(["council", "list", "--limit", "20", *where]) for _ in range(repeats)]
    run(["council", "stats", "--json", *where])
    out["stats warm"] = [run(["council", "stats", "--json", *where]) for _ in range(repeats)]
    return out


def target(what: str, runs: int, samples: list[float]) -> str:
    """The figure's target and whether its median meets it, if it has one."""
    limit = {"list warm": LIST_TARGET_S if runs >= LIST_TARGET_RUNS else None}.get(
        what, STATS_TARGET_S if what == "stats warm" else None
    )
    if limit is None:
        return ""
    met = "met" if statistics.median(samples) <= limit else "NOT met"
    return f"  target <= {limit:g} s: {met}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="run files (repeatable)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--quick", action="store_true", help="10,000 runs, 3 repeats, no cold list (~1 min)"
    )
    opts = parser.parse_args()
    if opts.quick:
        opts.repeats = 3
    sizes = opts.runs or ([LIST_TARGET_RUNS] if opts.quick else [1000, LIST_TARGET_RUNS])
    with tempfile.TemporaryDirectory(prefix="rune-bench-list-") as tmp:
        floor_dir = Path(tmp) / "floor"
        make_history(floor_dir, 1)
        for runs in sizes:
            rune_dir = Path(tmp) / f"r{runs}"
            make_history(rune_dir, runs)
            # The floor is measured again beside each size, so a busy moment moves both.
            floor = measure(floor_dir, opts.repeats, cold=False)["list warm"]
            print(f"{'floor: list warm, 1 run':<28}{figure(floor)}")
            for what, samples in measure(rune_dir, opts.repeats, cold=not opts.quick).items():
                label = f"{what}, {runs:,} runs"
                print(f"{label:<28}{figure(samples)}{target(what, runs, samples)}")


if __name__ == "__main__":
    main()
