"""`rune council eval` on a small labelled set, beside a plain council on each same artifact.

Run: .venv/bin/python bench/eval.py [--flawed 6] [--clean 4] [--repeat 3]

The voices are the test suite's fake CLIs (claude, codex, gemini as processes on a private
PATH), each scripted per item to anchor a claim at the seeded line or away from it, so the
councils cost what the pipeline costs and nothing a model adds. Three things are timed:

- eval: ``rune council eval items.jsonl --json``, a fresh rune directory each repeat, the
  whole process (items laid out as reviews, the councils run as a batch, the run files
  read back, every arm scored with 2,000 bootstrap resamples);
- rerun: the same command again on the same rune directory, every item already decided, so
  what is left is the harness alone (reading, resume checks, scoring);
- plain: ``rune council "<the item's question>" --mode review --artifact <its artifact>``,
  one process per item, the same artifact the eval built.

Per item: eval wall / items against the plain council's median, the difference being the
harness's overhead per item (a batch's councils share one process, so it can be negative),
and the rerun's wall / items. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rune_council.council.eval_items import batch_line, load_dataset  # noqa: E402
from tests import test_eval_cli as kit  # noqa: E402


def make_set(tmp: Path, flawed: int, clean: int) -> Path:
    kit.FLAWED = tuple(f"f{i}" for i in range(1, flawed + 1))
    kit.CLEAN = tuple(f"c{i}" for i in range(1, clean + 1))
    kit.SCRIPT = {
        "claude": {k: [kit.SEEDED] for k in kit.FLAWED},
        "codex": {k: [kit.SEEDED if j % 2 else kit.AWAY] for j, k in enumerate(kit.FLAWED)},
        "gemini": {k: [4] for k in kit.CLEAN[:1]},
    }
    kit.fakes(tmp)
    return kit.dataset(tmp)


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[4:6]} exited {done.returncode}: {done.stderr[-500:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flawed", type=int, default=6)
    parser.add_argument("--clean", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        dataset = make_set(tmp, args.flawed, args.clean)
        env = kit.env(tmp)
        items, _ = load_dataset(dataset)
        artifacts = []
        for item in items:
            line = batch_line(item)
            path = tmp / f"{item.id}.artifact"
            path.write_text(line["artifact_text"])
            artifacts.append((line["question"], path))
        evals, reruns, plains = [], [], []
        for k in range(args.repeat):
            where = tmp / f"rune-{k}"
            run = [*kit.argv(str(dataset), "--json", "--rune-dir", str(where))]
            evals.append(timed(run, tmp, env))
            reruns.append(timed(run, tmp, env))
            for question, path in artifacts:
                plain = [
                    sys.executable,
                    "-m",
                    "rune_council.cli",
                    "council",
                    question,
                    "--mode",
                    "review",
                    "--artifact",
                    str(path),
                    "--rune-dir",
                    str(tmp / f"plain-{k}"),
                    "--json",
                ]
                plains.append(timed(plain, tmp, env))
        n = len(items)
        per_eval = [t / n for t in evals]
        per_rerun = [t / n for t in reruns]
        print(f"items: {n} ({args.flawed} flawed, {args.clean} clean), repeats: {args.repeat}")
        print(f"cores: {os.cpu_count()}")
        rows = [
            ("eval, per item", per_eval),
            ("rerun (all decided), per item", per_rerun),
            ("plain council, per item", plains),
        ]
        for label, values in rows:
            print(
                f"  {label:<32} median {statistics.median(values):6.3f} s  min {min(values):6.3f} s"
            )
        overhead = statistics.median(per_eval) - statistics.median(plains)
        print(f"  harness overhead per item (eval - plain, medians): {overhead:+.3f} s")
        print(
            json.dumps(
                {
                    "items": n,
                    "eval_per_item_s": statistics.median(per_eval),
                    "rerun_per_item_s": statistics.median(per_rerun),
                    "plain_per_item_s": statistics.median(plains),
                }
            )
        )


if __name__ == "__main__":
    main()
