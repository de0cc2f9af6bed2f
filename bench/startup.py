"""A whole `rune council --json` process against five HTTP voices, next to its floor.

Run: .venv/bin/python bench/startup.py [--repeat N | --quick] [--baseline REV]

A loopback OpenAI-compatible server (tests/http_server.py) serves five models of five
families. Each figure is the wall time of a fresh process, median of N:

- floor: a bare Python process that makes the same five chat calls at once with the standard
  library alone (the least any tool doing this job in Python can spend)
- stack floor: a process that loads what rune council is built on (typer parsing one option,
  pydantic validating one model, httpx's async client, asyncio) and makes the same five calls
  through one client, with every start-up and exit saving rune itself makes: the least any
  tool on this stack can spend. The gap between it and rune is the product's own cost
- single pass: `rune council --yes --json --n 5 --endpoint URL "<q>"`
- rank: the same with `--deliberate rank` (a ballot round and a chairman call on top: 11
  calls), the chairman being the first model's endpoint voice under the name rune gives it
  (`127.0.0.1-PORT:<model>`, read from a warm-up run), checked to have written the synthesis

once with voices that answer at once and once with voices that take 1 s. The ratios are of
the same run, so a slow or busy machine moves both sides. Each is printed beside its
target: with instant voices, a single pass spends at most the stack floor's processor time
+ 75 ms; with 1 s voices, its wall time is at most x1.15 of the floor's. Then where a
single pass with instant voices spends its time, timed from inside the same `rune council`
process (medians of N): a bare interpreter's start (its own process), importing the command
line, importing the council's modules, argument parsing and options, reading the config (and
how many times), detect cache and seating, planning, dispatch (which includes loading httpx's
transport and a run-file write per voice status), judging (with the modules it needs that
were not loaded while the voices thought), the rest (the interpreter's start
and the exit: those same processes' wall time less their steps), and the run-file writes
counted in those steps.
With ``--baseline REV`` the package as it was at REV (``git archive``) runs the same single
pass interleaved with this checkout's, and its figures are printed beside them: a change's
before and after, measured in one sitting.
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

from bench.baseline import checkout  # noqa: E402
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
# The targets each figure is printed beside: a single pass with instant voices spends at
# most this much more processor time than the stack floor, and with 1 s voices at most this
# multiple of the floor's wall time, both measured in the same run.
CPU_TARGET_MS = 75
SLOW_TARGET = 1.15

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

STACK_FLOOR = """
import gc, os, ssl, sys
gc.set_threshold(50_000, 20, 20)  # as rune does; so is the quick exit below
sys.modules["httpx._main"] = None  # httpx's own command line, which rune skips too
import asyncio
import httpx, typer
from pydantic import BaseModel

class Ask(BaseModel):
    base: str
    models: list[str]

async def ask_all(ask: Ask) -> None:
    # An http:// URL needs no CA bundle: a bare context, as rune uses for one.
    plain = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    async with httpx.AsyncClient(timeout=30, verify=plain) as client:
        async def one(model: str) -> None:
            body = {"model": model, "messages": [{"role": "user", "content": "q"}]}
            r = await client.post(ask.base + "/chat/completions", json=body)
            r.raise_for_status()
            r.json()
        await asyncio.gather(*(one(m) for m in ask.models))

def main(base: str, delay: str, models: list[str], n: int = typer.Option(5)) -> None:
    asyncio.run(ask_all(Ask(base=base, models=models)))

try:
    typer.run(main)
except SystemExit as done:
    sys.stdout.flush()
    os._exit(done.code or 0)
"""

# The same `rune council` process, with the council's own steps timed from inside: the
# library's modules are imported first (timed), then the pipeline's steps are wrapped where
# `_convene` looks them up, and the figures are printed by an exit handler (rune ends with
# os._exit after running those). Nothing in the product is changed for this.
STEPS = r"""
import atexit, importlib, json, os, sys, time
start = time.perf_counter()
import rune_council.cli
imported = time.perf_counter()
loaded = {}
for key, names in GROUPS:
    t = time.perf_counter()
    for name in names:
        importlib.import_module(name)
    loaded["import " + key] = time.perf_counter() - t
ready = time.perf_counter()
import asyncio, functools
from rune_council.council import lifecycle, pipeline
from rune_council import recorder
from rune_council import config
spent = {}
calls = {}
def add(key, dt):
    spent[key] = spent.get(key, 0.0) + dt
    calls[key] = calls.get(key, 0) + 1
def wrap(owner, name, key):
    fn = getattr(owner, name)
    if asyncio.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def timed(*a, **k):
            t = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                add(key, time.perf_counter() - t)
    else:
        @functools.wraps(fn)
        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                add(key, time.perf_counter() - t)
    setattr(owner, name, timed)
first = {}
def mark(owner, name, key):
    fn = getattr(owner, name)
    @functools.wraps(fn)
    def marked(*a, **k):
        first.setdefault(key, time.perf_counter())
        return fn(*a, **k)
    setattr(owner, name, marked)
mark(pipeline, "aconvene", "aconvene")
wrap(config, "load_config", "config")
wrap(pipeline, "seat", "detect cache + seat")
wrap(pipeline, "_plan", "plan")
wrap(pipeline, "_execute", "dispatch")
wrap(pipeline, "_judge", "judge")
wrap(recorder.RunRecorder, "write", "run-file writes")
def report():
    end = time.perf_counter()
    out = {"import command line": imported - start, **loaded,
           "parse + options": first["aconvene"] - ready - spent.get("config", 0.0), **spent,
           "in-process total": end - start}
    out = {k: v * 1000 for k, v in out.items()}
    out["config reads"] = calls.get("config", 0)
    out["run-file writes (count)"] = calls.get("run-file writes", 0)
    os.write(2, b"\nSTEPS " + json.dumps(out).encode() + b"\n")
atexit.register(report)
sys.argv = ["rune", *sys.argv[1:]]
rune_council.cli.main()
"""

# What a single pass of HTTP voices loads before it asks them, in the order it needs them
# (httpx's transport, httpcore and anyio, load with the first call and count as dispatch).
# The judging step's modules (gate, normalize, arbitrate, rapidfuzz) are not among them:
# a thread loads them while the voices think, and what it has not loaded by the time the
# answers are in (voices that answer at once leave it no wait) counts as judging.
IMPORT_GROUPS = (
    ("pydantic + contract models", ("rune_council.core.contract",)),
    ("config models", ("rune_council.config",)),
    ("council + stages", ("rune_council.council",)),
    (
        "runtimes + httpx",
        (
            "rune_council.runtimes.http",
            "rune_council.endpoints.assembly",
            "rune_council.discovery.assembly",
        ),
    ),
)


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


def council_argv(base: str, run_id: str, chairman: str | None = None) -> list[str]:
    """A single pass, or with ``chairman`` a rank council that runtime chairs."""
    argv = [sys.executable, "-m", "rune_council.cli", "council", "--yes", "--json"]
    argv += ["--n", "5", "--endpoint", base, "--id", run_id]
    if chairman is not None:
        argv += ["--deliberate", "rank", "--orchestrator", chairman]
    return [*argv, QUESTION]


def chairman_of(single_pass: str) -> str:
    """The runtime name rune gave the first model's endpoint voice: the one to chair."""
    for voice in json.loads(single_pass)["voices"]:
        if voice["model"] == MODELS[0]:
            return str(voice["runtime"])
    raise SystemExit(f"single pass: no voice of {MODELS[0]} to chair the rank council")


def check_chaired(rank_out: str, chairman: str, calls: int) -> None:
    """A rank figure is one only if the chairman was seated and wrote the synthesis."""
    synthesis = (json.loads(rank_out).get("deliberation") or {}).get("synthesis") or {}
    if synthesis.get("by") != chairman or synthesis.get("fallback") is not None:
        raise SystemExit(f"rank: {chairman} did not chair the council: {synthesis!r:.300}")
    if calls != 11:
        raise SystemExit(f"rank: {calls} model calls, not 5 answers + 5 ballots + 1 chairman")


def private_parent() -> str | None:
    """This user's ~/.cache, for the temporary home: below it nobody else can write, as a
    real user's home, so rune keeps its private state there (the system's temporary
    directory is writable by every user, and rune keeps none under it)."""
    cache = Path.home() / ".cache"
    return str(cache) if cache.is_dir() and os.access(cache, os.W_OK) else None


def private_runtime_dir(home: Path) -> Path:
    where = home / "runtime"
    where.mkdir(mode=0o700)
    where.chmod(0o700)  # whatever the umask
    return where


def measure(repeat: int, baseline: str | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rune-startup-", dir=private_parent()) as tmp:
        home = Path(tmp)
        old_env: dict[str, str] | None = None
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "RUNE_COUNCIL_DIR": str(home / ".rune"),
            "NO_PROXY": "*",
            # The checkout this script is in is the one measured (a baseline's worktree
            # measures the baseline), not whatever copy is installed.
            "PYTHONPATH": str(ROOT),
            # A private directory of this user's, as a real one's home gives: the endpoints'
            # model list is kept there between runs (a home under the world-writable /tmp
            # keeps none, and every run would list the models again).
            "XDG_RUNTIME_DIR": str(private_runtime_dir(home)),
        }
        if baseline is not None:
            old_env = {**env, "PYTHONPATH": str(checkout(baseline, home / "baseline"))}
        for delay in (0.0, VOICE_S):
            server = OpenAIServer(
                models=list(MODELS),
                behaviours={m: Behaviour("slow", reply, delay_s=delay) for m in MODELS},
            ).start()
            try:
                base = server.base_url
                floor_argv = [sys.executable, "-c", FLOOR, base, str(delay), *MODELS]
                stack_argv = [sys.executable, "-c", STACK_FLOOR, base, str(delay), *MODELS]
                # One untimed run of each warms the model list cache and the page cache.
                timed(floor_argv, env, home)
                timed(stack_argv, env, home)
                chairman = chairman_of(timed(council_argv(base, f"warm-{delay}"), env, home)[2])
                before = len(server.chat_models())
                rank_out = timed(council_argv(base, f"warmr-{delay}", chairman), env, home)[2]
                check_chaired(rank_out, chairman, len(server.chat_models()) - before)
                if old_env is not None:  # its first run writes its bytecode
                    timed(council_argv(base, f"warmb-{delay}"), old_env, home)
                listed = server.models_calls
                rows: dict[str, list[float]] = {}
                for i in range(repeat):
                    runs = [
                        ("floor", floor_argv, env),
                        ("stack", stack_argv, env),
                        ("single", council_argv(base, f"s{delay}-{i}"), env),
                        ("rank", council_argv(base, f"r{delay}-{i}", chairman), env),
                    ]
                    if old_env is not None:
                        runs.append(("baseline", council_argv(base, f"b{delay}-{i}"), old_env))
                    for kind, argv, kind_env in runs:
                        wall, cpu, out = timed(argv, kind_env, home)
                        if kind in ("single", "baseline") and json.loads(out)["voices_valid"] != 5:
                            raise SystemExit(f"{kind}: not every voice was valid")
                        rows.setdefault(kind, []).append(wall)
                        rows.setdefault(kind + "_cpu", []).append(cpu)
                # Timed councils are a user's next councils, whose model list is kept 6 h.
                figures["relisted"] = figures.get("relisted", 0) + server.models_calls - listed
                figures[f"{delay:g}"] = {k: statistics.median(v) for k, v in rows.items()}
                for k, v in rows.items():
                    # min-max of the repeats, in the unit the figure is printed in
                    scale, unit = (1000, "ms") if k.endswith("_cpu") else (1, "s")
                    name = k if delay == 0.0 else f"{delay:g} {k}"
                    fmt = ".0f" if unit == "ms" else ".2f"
                    figures.setdefault("spread", {})[name] = (
                        f"{min(v) * scale:{fmt}}-{max(v) * scale:{fmt}}{unit}"
                    )
                if delay == 0.0:
                    figures["steps_ms"] = steps(base, env, home, repeat)
            finally:
                server.stop()
    figures["steps_ms"]["interpreter start"] = bare_python_ms()
    return figures


def steps(base: str, env: dict[str, str], home: Path, repeat: int) -> dict[str, float]:
    """The council's own steps inside a single-pass process, medians over ``repeat`` runs."""
    code = STEPS.replace("GROUPS", repr(IMPORT_GROUPS))
    rows: dict[str, list[float]] = {}
    for i in range(repeat):
        argv = [sys.executable, "-c", code, *council_argv(base, f"st-{i}")[3:]]
        started = time.perf_counter()
        proc = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True)
        # The same process's wall time: what its steps leave out is its start and its exit.
        rows.setdefault("process wall", []).append((time.perf_counter() - started) * 1000)
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("STEPS ")]
        figures = json.loads(lines[-1][6:]) if lines else {}
        if proc.returncode != 0 or not figures:
            raise SystemExit(f"steps: exit {proc.returncode}: {proc.stderr[-400:]!r}")
        for key, ms in figures.items():
            rows.setdefault(key, []).append(ms)
    return {k: statistics.median(v) for k, v in rows.items()}


def bare_python_ms() -> float:
    def once() -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        return time.perf_counter() - t

    return statistics.median(once() for _ in range(5)) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="three repeats (about a minute)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--baseline", metavar="REV", help="also run this revision's single pass, interleaved"
    )
    args = p.parse_args()
    if args.quick:
        args.repeat = 3
    figures = measure(args.repeat, args.baseline)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"whole `rune council --json` process, 5 HTTP voices, median of {args.repeat}")
    print(
        f"  {'voices':<8} {'floor':>6} {'stack':>6} {'+ms':>5} {'single':>7} {'+ms':>5} "
        f"{'rank':>7} {'+ms':>5}   (wall; +ms over the floor)"
    )
    for delay in ("0", f"{VOICE_S:g}"):
        f = figures[delay]
        print(
            f"  {delay + ' s':<8} {f['floor']:>5.2f}s {f['stack']:>5.2f}s "
            f"{(f['stack'] - f['floor']) * 1000:>5.0f} {f['single']:>6.2f}s "
            f"{(f['single'] - f['floor']) * 1000:>5.0f} {f['rank']:>6.2f}s "
            f"{(f['rank'] - f['floor']) * 1000:>5.0f}"
        )
    f = figures["0"]
    cpu = {k: f[k + "_cpu"] * 1000 for k in ("floor", "stack", "single", "rank")}
    print(
        f"  processor time, 0 s voices: floor {cpu['floor']:.0f} ms, stack "
        f"{cpu['stack']:.0f} ms (+{cpu['stack'] - cpu['floor']:.0f}), single "
        f"{cpu['single']:.0f} ms (+{cpu['single'] - cpu['floor']:.0f}), rank "
        f"{cpu['rank']:.0f} ms (+{cpu['rank'] - cpu['floor']:.0f})"
    )
    spread = figures["spread"]
    over = cpu["single"] - cpu["stack"]
    print(
        f"  single pass, 0 s voices: {cpu['single']:.0f} ms processor time "
        f"({spread['single_cpu']}) = stack floor {cpu['stack']:.0f} ms "
        f"({spread['stack_cpu']}) {over:+.0f} ms; target <= stack floor "
        f"+{CPU_TARGET_MS} ms: {'met' if over <= CPU_TARGET_MS else 'NOT met'}"
    )
    if args.baseline is not None:
        old = f["baseline_cpu"] * 1000
        print(
            f"  single pass, 0 s voices, beside {args.baseline} in the same run: "
            f"{cpu['single']:.0f} ms ({spread['single_cpu']}) against {old:.0f} ms "
            f"({spread['baseline_cpu']}) of processor time, {cpu['single'] - old:+.0f} ms; "
            f"over the stack floor {over:+.0f} ms against {old - cpu['stack']:+.0f} ms"
        )
    slow = figures[f"{VOICE_S:g}"]
    ratio = slow["single"] / slow["floor"]
    print(
        f"  single pass, {VOICE_S:g} s voices: {slow['single']:.2f}s wall "
        f"({spread[f'{VOICE_S:g} single']}) = x{ratio:.2f} of the floor {slow['floor']:.2f}s "
        f"({spread[f'{VOICE_S:g} floor']}) of the same run; target <= x{SLOW_TARGET}: "
        f"{'met' if ratio <= SLOW_TARGET else 'NOT met'}"
    )
    if args.baseline is not None:
        was = slow["baseline"]
        print(
            f"  single pass, {VOICE_S:g} s voices, beside {args.baseline}: {slow['single']:.2f}s "
            f"against {was:.2f}s ({spread[f'{VOICE_S:g} baseline']}) wall, "
            f"x{slow['single'] / slow['floor']:.2f} against x{was / slow['floor']:.2f} of the floor"
        )
    if figures.get("relisted"):
        print(
            f"  note: {figures['relisted']} timed councils listed the endpoint's models again "
            "(no private directory to keep the list in, see bench/startup.py private_parent)"
        )
    st = dict(figures["steps_ms"])
    # Of the same processes as the steps: their wall time less what the steps timed inside.
    exit_ms = st.pop("process wall") - st["in-process total"]
    reads, writes = st.pop("config reads"), st.pop("run-file writes (count)")
    order = [
        "interpreter start",
        "import command line",
        *("import " + key for key, _ in IMPORT_GROUPS),
        "parse + options",
        "config",
        "detect cache + seat",
        "plan",
        "dispatch",
        "judge",
    ]
    print("  where a single pass with instant voices spends its time (ms, medians, timed inside):")
    for k in order:
        print(f"    {k:<34} {st[k]:5.0f}")
    print(f"    {'start + exit (wall less the steps)':<34} {exit_ms:5.0f}")
    print(
        f"    config read {reads:.0f} time(s); {writes:.0f} run-file writes, "
        f"{st['run-file writes']:.0f} ms in all (inside the steps above); dispatch includes "
        "loading httpx's transport and every voice's status write"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
