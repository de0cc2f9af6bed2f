"""``rune council stats`` over a large history: the first pass, warm passes, a few changes.

    .venv/bin/python bench/stats.py              # 10,000 run files, 3 warm repeats
    .venv/bin/python bench/stats.py --runs 2000  # quicker
    .venv/bin/python bench/stats.py --runs 600 --pictures /tmp/pics  # and its pictures

Standard library plus the project only. The run files are the example runs in
``.rune-example/council`` with their ids, start times (spread over 26 weeks), families,
runtimes, positions, consensus and latencies varied by a seeded random generator, so every
file is a valid run and the statistics have something to count. Everything lives in one temp
dir that is removed at the end. Files are dated an hour back, like the files of earlier
runs (the index never trusts a file changed in the last 2 s).

Figures: the first pass (every file parsed and validated, the index written); the warm pass
(median and minimum of the repeats: a directory scan, the index read, the aggregates); the
pass after 1% of the files changed and 10 were deleted; and ``rune council stats --json`` as
a whole process on the warm index.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rune_council.analytics.history import stats  # noqa: E402
from rune_council.core.paths import RuneDir  # noqa: E402

EXAMPLES = ROOT / ".rune-example" / "council"
TEMPLATES = ["run-orders-shard-critique.json", "run-orders-shard-codex-fallback.json"]
RUNTIMES = {
    "anthropic": "claude",
    "openai": "codex",
    "google": "gemini",
    "alibaba": "qwen",
    "xai": "grok",
}


def _swap_families(doc: Any, mapping: dict[str, str]) -> Any:
    """Every family and runtime name in the document, renamed through ``mapping``."""
    names = {**mapping, **{RUNTIMES[a]: RUNTIMES[b] for a, b in mapping.items()}}
    if isinstance(doc, dict):
        return {
            k: (
                names.get(v, v)
                if isinstance(v, str) and k in ("model_family", "runtime")
                else [names.get(x, x) for x in v]
                if k in ("families", "distinct_families", "used") and isinstance(v, list)
                else _swap_families(v, mapping)
            )
            for k, v in doc.items()
        }
    if isinstance(doc, list):
        return [_swap_families(x, mapping) for x in doc]
    return doc


def make_run(template: dict[str, Any], i: int, rng: random.Random, runs: int) -> dict[str, Any]:
    families = list(RUNTIMES)
    picked = rng.sample(families, 3)
    doc: dict[str, Any] = _swap_families(
        copy.deepcopy(template), dict(zip(["anthropic", "openai", "google"], picked, strict=True))
    )
    run_id = f"bench-{i:05d}"
    doc["id"] = doc["request"]["id"] = run_id
    start = dt.datetime(2026, 6, 1, tzinfo=dt.UTC) + dt.timedelta(weeks=26) * (i / runs)
    doc["started_at"] = start.isoformat()
    for voice in doc["voices"]:
        for attempt in voice["attempts"]:
            attempt["latency_ms"] = int(rng.lognormvariate(8.5, 0.6))
        voice["position"] = rng.choice(["yes", "no", "no", "mixed"])
    if rng.random() < 0.35:
        doc["agreement"]["consensus_claims"] = []
    doc["needs_decision"] = rng.random() < 0.4
    if rng.random() < 0.3:
        _add_rounds(doc, rng)
    return doc


def _add_rounds(doc: dict[str, Any], rng: random.Random) -> None:
    """Ranked rounds, as a run deliberated with ``--rank --rounds 3`` records them."""
    rounds = []
    score = rng.uniform(0.2, 0.9)
    for number in range(1, rng.randint(1, 3) + 1):
        winner = rng.choice(["v1", "v2", "v3"])
        rounds.append(
            {
                "round": number,
                "consensus_score": round(score, 3),
                "closed": True,
                "rank": {
                    "proposals": [{"label": "p1", "voice_id": winner, "summary": "-"}],
                    "transcript": "",
                    "tally": {
                        "valid": True,
                        "proposals": ["p1"],
                        "winner": "p1",
                        "consensus": {
                            "w": round(score, 3),
                            "method": "complete",
                            "rankers": 3,
                            "proposals": 3,
                        },
                    },
                },
            }
        )
        if score >= 0.85:
            break
        score = min(1.0, score + rng.uniform(-0.1, 0.3))
    doc["request"]["deliberation"] = {"method": "rank", "rounds": {"max_rounds": 3}}
    doc["deliberation"] = {"method": "rank", "rounds": rounds}
    doc["verdict"]["consensus_score"] = rounds[-1]["consensus_score"]
    doc["verdict"]["revision_count"] = len(rounds)


def timed(fn: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def age(paths: list[Path], seconds: float = 3600) -> None:
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--pictures", type=Path, help="Also render the history's pictures into this directory."
    )
    args = parser.parse_args()
    rng = random.Random(15)
    templates = [json.loads((EXAMPLES / name).read_text()) for name in TEMPLATES]
    with tempfile.TemporaryDirectory(prefix="rune-stats-bench-") as tmp:
        rune = Path(tmp) / ".rune"
        council = rune / "council"
        council.mkdir(parents=True)
        began = time.perf_counter()
        for i in range(args.runs):
            doc = make_run(templates[i % len(templates)], i, rng, args.runs)
            (council / f"run-{doc['id']}.json").write_text(json.dumps(doc))
        (council / "notes.json").write_text('{"not": "a run"}')
        age(list(council.iterdir()))
        size = sum(p.stat().st_size for p in council.iterdir())
        print(
            f"{args.runs} run files ({size / 1e6:.0f} MB) written in "
            f"{time.perf_counter() - began:.1f} s"
        )
        dirs = [RuneDir(rune)]

        first, s = timed(lambda: stats(dirs))
        assert s.files.runs == args.runs and s.files.skipped == 1, s.files
        index_mb = (rune / "stats-index.json").stat().st_size / 1e6
        print(f"first pass (parse + validate every file, write the index): {first:.2f} s")
        print(f"  index: {index_mb:.1f} MB; consensus rate {s.totals.consensus_rate}")

        warm = []
        for _ in range(args.repeat):
            seconds, w = timed(lambda: stats(dirs))
            assert w.files.read == 0 and w.totals == s.totals
            warm.append(seconds)
        print(
            f"warm pass (index reused, nothing changed): median {statistics.median(warm):.2f} s, "
            f"min {min(warm):.2f} s over {args.repeat}"
        )

        changed = sorted(council.glob("run-*.json"))[::100]
        for path in changed:
            doc = json.loads(path.read_text())
            doc["needs_decision"] = not doc["needs_decision"]
            path.write_text(json.dumps(doc))
        deleted = sorted(council.glob("run-*.json"))[1:11]
        for path in deleted:
            path.unlink()
        age(changed, 1800)
        seconds, c = timed(lambda: stats(dirs))
        assert (c.files.read, c.files.forgotten) == (len(changed), len(deleted)), c.files
        print(
            f"after {len(changed)} files changed and {len(deleted)} deleted: {seconds:.2f} s "
            f"({c.files.read} re-read)"
        )

        if args.pictures is not None:
            from rune_council.analytics import charts

            args.pictures.mkdir(parents=True, exist_ok=True)
            for name, data in charts.render(c).items():
                (args.pictures / name).write_bytes(data)
            print(f"pictures written to {args.pictures}")

        rune_bin = Path(sys.executable).with_name("rune")
        command = [str(rune_bin), "council", "stats", "--json", "--rune-dir", str(rune)]
        walls = []
        for _ in range(args.repeat):
            seconds, _out = timed(
                lambda: subprocess.run(command, capture_output=True, text=True, check=True)
            )
            walls.append(seconds)
        print(
            f"`rune council stats --json` process, warm: median {statistics.median(walls):.2f} s, "
            f"min {min(walls):.2f} s"
        )


if __name__ == "__main__":
    main()
