"""A whole `rune council --json` process against five HTTP voices, next to its floor.

Run: .venv/bin/python bench/startup.py [--repeat N]

A loopback OpenAI-compatible server (tests/http_server.py) serves five models of five
families. Each figure is the wall time of a fresh process, median of N:

- floor: a bare Python process that makes the same five chat calls at once with the standard
  library alone (the least any tool doing this job in Python can spend)
- single pass: `rune council --yes --json --n 5 --endpoint URL "<q>"`
- rank: the same with `--deliberate rank` (a ballot round and a chairman call on top)

once with voices that answer at once and once with voices that take 1 s. The ratios are of
the same run, so a slow or busy machine moves both sides. Then the start-up breakdown: time
to import what `rune council` needs, and one in-process council split by its own events
(config + detect cache + seat, plan + skeleton write, dispatch, judge + final write).
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import QUESTION, ROLLBACK, answer  # noqa: E402
from tests.http_server import Behaviour, OpenAIServer  # noqa: E402

MODELS = (
    "meta/llama-3.3-70b-instruct",
    "mistralai/mistral-large-2-instruct",
    "qwen/qwen2.5-72b-instruct",
    "google/gemma-2-27b-it",
    "deepseek-ai/deepseek-v3",
)
VOICE_S = 1.0

FLOOR = """
import json, sys, threading, urllib.request
base = sys.argv[1]
def one(model):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "q"}]})
    req = urllib.request.Request(base + "/chat/completions", body.encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        json.load(r)
threads = [threading.Thread(target=one, args=(m,)) for m in sys.argv[3:]]
for t in threads: t.start()
for t in threads: t.join()
"""


def reply(prompt: str) -> str:
    """What a model says to each kind of prompt a council sends."""
    if "\nRANK " in prompt and "Answer " in prompt:
        letters = sorted({line[7] for line in prompt.splitlines() if line.startswith("Answer ")})
        return "RANK " + ">".join(letters) + " conf=0.8"
    if "VOTE -> " in prompt:
        return "VOTE -> 1 yes"
    if '"question_echo"' in prompt or "question_echo" in prompt:
        return answer(QUESTION, "NO, not before a rollback exists", [ROLLBACK])
    return "The council agrees the plan needs a rollback step before it runs."


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall time, processor time (user + system) and stdout of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])}... exited {out.returncode}: {out.stderr[-400:]}")
    return elapsed, cpu, out.stdout


def council_argv(base: str, run_id: str, rank: bool) -> list[str]:
    argv = [sys.executable, "-m", "rune_council.cli", "council", "--yes", "--json"]
    argv += ["--n", "5", "--endpoint", base, "--id", run_id]
    if rank:
        argv += ["--deliberate", "rank", "--orchestrator", f"lab:{MODELS[0]}"]
    return [*argv, QUESTION]


def measure(repeat: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rune-startup-") as tmp:
        home = Path(tmp)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "RUNE_COUNCIL_DIR": str(home / ".rune"),
            "NO_PROXY": "*",
        }
        for delay in (0.0, VOICE_S):
            server = OpenAIServer(
                models=list(MODELS),
                behaviours={m: Behaviour("slow", reply, delay_s=delay) for m in MODELS},
            ).start()
            try:
                base = server.base_url
                floor_argv = [sys.executable, "-c", FLOOR, base, str(delay), *MODELS]
                # One untimed run of each warms the model list cache and the page cache.
                timed(floor_argv, env, home)
                timed(council_argv(base, f"warm-{delay}", False), env, home)
                timed(council_argv(base, f"warmr-{delay}", True), env, home)
                rows: dict[str, list[float]] = {}
                for i in range(repeat):
                    for kind, argv in (
                        ("floor", floor_argv),
                        ("single", council_argv(base, f"s{delay}-{i}", False)),
                        ("rank", council_argv(base, f"r{delay}-{i}", True)),
                    ):
                        wall, cpu, out = timed(argv, env, home)
                        if kind == "single" and json.loads(out)["voices_valid"] != 5:
                            raise SystemExit("single pass: not every voice was valid")
                        rows.setdefault(kind, []).append(wall)
                        rows.setdefault(kind + "_cpu", []).append(cpu)
                figures[f"{delay:g}"] = {k: statistics.median(v) for k, v in rows.items()}
            finally:
                server.stop()
    figures["imports_ms"] = import_ms()
    return figures


def import_ms() -> float:
    """Median wall time of `python -c 'import rune_council.cli'` minus a bare `python -c pass`."""

    def once(code: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t

    bare = statistics.median(once("pass") for _ in range(5))
    cli = statistics.median(once("import rune_council.cli.app") for _ in range(5))
    return (cli - bare) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    figures = measure(args.repeat)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"whole `rune council --json` process, 5 HTTP voices, median of {args.repeat}")
    print(f"  {'voices':<12} {'floor':>7} {'single':>7} {'+ms':>5} {'rank':>7} {'+ms':>5}   (wall)")
    for delay in ("0", f"{VOICE_S:g}"):
        f = figures[delay]
        print(
            f"  {delay + ' s':<12} {f['floor']:>6.2f}s {f['single']:>6.2f}s "
            f"{(f['single'] - f['floor']) * 1000:>5.0f} {f['rank']:>6.2f}s "
            f"{(f['rank'] - f['floor']) * 1000:>5.0f}"
        )
    f = figures["0"]
    print(
        f"  processor time, 0 s voices: floor {f['floor_cpu'] * 1000:.0f} ms, single "
        f"{f['single_cpu'] * 1000:.0f} ms (+{(f['single_cpu'] - f['floor_cpu']) * 1000:.0f}), "
        f"rank {f['rank_cpu'] * 1000:.0f} ms (+{(f['rank_cpu'] - f['floor_cpu']) * 1000:.0f})"
    )
    slow = figures[f"{VOICE_S:g}"]
    ideal = VOICE_S + figures["0"]["floor"]
    print(
        f"  1 s voices, single pass: x{slow['single'] / ideal:.2f} of its ideal "
        f"({ideal:.2f}s = 1 s + the floor)"
    )
    print(f"  importing rune_council.cli.app: {figures['imports_ms']:.0f} ms over a bare python")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
