"""rune-council beside its peers, in one sitting, against the same loopback models.

Run: .venv/bin/python bench/peers.py [--repeat N] [--quick] [--keep DIR] [--json]

Each peer is installed from the package index into its own venv (`python -m venv`, then
pip with the versions pinned in PEERS below). A peer that cannot be installed or run gets a
row that says so, with pip's or the process's own reason, and the bench goes on without it.
`--keep DIR` keeps the venvs in DIR, so a second run skips the install.

Every contender is a whole process, started fresh, talking to one OpenAI-compatible stub on
127.0.0.1 (tests/http_server.py, the server bench/startup.py uses, with the same five models
and the same replies; a usage block is added to whole replies, as real servers send, because
the `llm` CLI fails without one). The contenders, interleaved within each repeat (the order
rotates from one repeat to the next, so no one always runs on a cold or busy machine):

- floor: a standard-library process making the five calls at once (bench/startup.py's floor)
- rune-council single pass: `rune council --yes --json --n 5 --endpoint URL "<q>"`
- rune-council rank: the same with `--deliberate rank` (answers, a ballot round, a chairman)
- llm-council-core: it has no one-shot command (`llm-council` starts an MCP or HTTP server),
  so `python -c` calls its documented `run_full_council()`: answers, every member reviews and
  ranks all answers, a chairman writes the synthesis. Its openrouter gateway's base_url points
  at the stub (llm_council.yaml via LLM_COUNCIL_CONFIG), offline mode, cache and telemetry off
- llm-consortium: the `llm` CLI with the five models as extra OpenAI-compatible models
  (api_base = the stub), a consortium saved with the five as members and the first as arbiter
  at one iteration, run as `llm -m bench-council "<q>"`: answers, then the arbiter

The figures, each a median with min-max over the repeats: wall time with voices that answer
at once; wall time with voices that take 1 s, against the ideal (the council's stages x 1 s,
so a three-stage council's ideal is 3 s); `--help` cold start; peak memory (the peak RSS of
the process from wait4, so this script's own memory is not counted) of the instant council.

Every run is checked: exit 0, the stub's answer in the output, and at least the chat calls
its design makes, to every one of the five models, counted by the stub for that run. A
contender that did not call the stub gets a FAILED row, never a fast figure. API keys are
dummies and base URLs point at the stub; where `unshare` works (root), the measurements run
in a private network namespace that has only loopback, so nothing can leave 127.0.0.1.
Otherwise proxies point at a closed loopback port, which is said in the output.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.startup import FLOOR, MODELS, council_argv, reply  # noqa: E402
from tests.helpers import QUESTION  # noqa: E402
from tests.http_server import Behaviour, OpenAIServer, _Handler, _Server  # noqa: E402

CHAT = "/v1/chat/completions"
# In every answer the stub gives: an output without it did not come from the stub.
MARKER = "rollback"
VOICE_S = 1.0
CHILD_TIMEOUT_S = 180.0
INSTALL_TIMEOUT_S = 1200.0
BENCH_COUNCIL = "bench-council"


@dataclass(frozen=True)
class Peer:
    key: str
    label: str
    pins: tuple[str, ...]
    stages: int
    calls: int
    does: str
    note: str = ""


PEERS = (
    Peer(
        "llm-council-core",
        "llm-council-core 0.53.0",
        ("llm-council-core==0.53.0",),
        stages=3,
        calls=11,
        does="5 answers; each member reviews and ranks all 5; a chairman synthesis",
    ),
    Peer(
        "llm-consortium",
        "llm-consortium 0.8.0 (llm 0.36 CLI)",
        # 0.8.0 imports scikit-learn when the plugin loads but declares it only in its
        # `embeddings` extra (which also pulls sentence-transformers and torch): without it
        # `llm` itself fails to start, so the smallest install that runs adds it alone.
        ("llm==0.36", "llm-consortium==0.8.0", "scikit-learn==1.9.1"),
        stages=2,
        calls=6,
        does="5 member answers; an arbiter synthesis (one iteration)",
        note="scikit-learn added: imported at load, declared only in an extra",
    ),
)


# ----------------------------------------------------------------------------- the stub


class _UsageHandler(_Handler):
    """The test server's handler, with the usage block a real server puts in whole replies."""

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        if status == 200 and b'"chat.completion"' in payload:
            body = json.loads(payload)
            text = str(body["choices"][0]["message"].get("content") or "")
            body["usage"] = {
                "prompt_tokens": 50,
                "completion_tokens": len(text) // 4 + 1,
                "total_tokens": 50 + len(text) // 4 + 1,
            }
            payload = json.dumps(body).encode()
        super()._send(status, payload, content_type)


@dataclass
class Stub(OpenAIServer):
    def start(self) -> Stub:
        httpd = _Server(("127.0.0.1", 0), _UsageHandler)
        httpd.app = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def set_delay(self, seconds: float) -> None:
        for behaviour in self.behaviours.values():
            behaviour.delay_s = seconds


def peer_reply(prompt: str) -> str:
    """bench/startup.py's replies, plus the shapes the peers' own judges ask for."""
    labels = re.findall(r'<candidate_response id="([^"]+)">', prompt)
    if labels:  # llm-council-core's stage 2: a critique ending in a JSON ranking
        ranking = {"ranking": labels, "scores": {label: 8 for label in labels}}
        return "Each answer is sound.\n```json\n" + json.dumps(ranking) + "\n```"
    if "<arbiter_prompt>" in prompt:  # llm-consortium's arbiter: tagged synthesis
        return (
            "<synthesis_output><synthesis>" + reply("") + "</synthesis>"
            "<confidence>0.9</confidence><refinement_areas></refinement_areas>"
            "<needs_iteration>false</needs_iteration></synthesis_output>"
        )
    return reply(prompt)


# ---------------------------------------------------------------------- child processes


@dataclass
class Proc:
    rc: int
    wall: float
    cpu: float
    rss_mb: float
    out: str
    err: str
    calls: int = 0
    models: frozenset[str] = frozenset()


def run_child(argv: list[str], env: dict[str, str], cwd: Path) -> Proc:
    """One fresh process: wall, processor time and peak RSS of that process alone (wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)

        timer = threading.Timer(CHILD_TIMEOUT_S, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        kill()  # anything the child left behind in its own session
        out.seek(0)
        err.seek(0)
        return Proc(
            rc=p.returncode,
            wall=wall,
            cpu=usage.ru_utime + usage.ru_stime,
            rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
            out=out.read().decode(errors="replace"),
            err=err.read().decode(errors="replace"),
        )


def counted(stub: Stub, argv: list[str], env: dict[str, str], cwd: Path) -> Proc:
    """run_child, with the chat calls the stub received while it ran."""
    before = len(stub.requests(CHAT))
    proc = run_child(argv, env, cwd)
    seen = stub.requests(CHAT)[before:]
    proc.calls = len(seen)
    proc.models = frozenset(s.model for s in seen if s.model)
    return proc


def last_words(text: str, limit: int = 240) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR", "Error", "error"))]
    picked = errors[-2:] if errors else lines[-2:]
    return " | ".join(picked)[:limit] or "(no output)"


# -------------------------------------------------------------------------- contenders

Check = Callable[[Proc], str | None]


@dataclass
class Contender:
    label: str
    stages: int
    calls: int
    does: str
    council: list[str]
    help: list[str] | None
    env: dict[str, str]
    cwd: Path
    check: Check
    broken: str | None = None  # why it cannot run at all (install or setup)
    help_shown: str = ""  # the --help command, as the report names it
    fresh_ids: bool = False  # rune: a new run id per run


def base_env(home: Path, bin_dir: str | None) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    path = "/usr/bin:/bin" if bin_dir is None else f"{bin_dir}:/usr/bin:/bin"
    dead = "http://127.0.0.1:9"  # nothing listens: a call that escaped the base URL fails here
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "DO_NOT_TRACK": "1"}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = dead
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def stub_checks(proc: Proc, calls: int) -> str | None:
    if proc.rc != 0:
        return f"exit {proc.rc}: {last_words(proc.err or proc.out)}"
    if proc.calls < calls:
        return f"the stub saw {proc.calls} chat calls, its council makes {calls}"
    if proc.models != frozenset(MODELS):
        return f"called {len(proc.models)} of the 5 models"
    return None


def rune_check(proc: Proc) -> str | None:
    try:
        result = json.loads(proc.out)
    except ValueError:
        return f"no JSON on stdout: {last_words(proc.out + proc.err)}"
    if result.get("voices_valid") != 5:
        return f"{result.get('voices_valid')} of 5 voices valid"
    return None


def _user_cache() -> Path:
    where = Path.home() / ".cache"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    return where


def rune_contenders(base: str, work: Path) -> list[Contender]:
    rune = str(Path(sys.executable).with_name("rune"))
    home = work / "rune"
    env = base_env(home, None)
    env["RUNE_COUNCIL_DIR"] = str(home / ".rune")
    # rune keeps an endpoint's model list only in a cache no other user can write to, which
    # nothing under /tmp is; a user's own ~/.cache is, so the councils run as a user's next
    # ones do instead of listing the models again each time.
    cache = Path(tempfile.mkdtemp(prefix="rune-peers-", dir=_user_cache()))
    atexit.register(shutil.rmtree, cache, True)
    env["XDG_CACHE_HOME"] = str(cache)
    single = [rune, *council_argv(base, "RUN_ID", None)[3:]]
    # The chairman is named as rune names an endpoint's runtime (host-port:model); a name
    # that matches no runtime leaves the rank council without its chairman call.
    url = urlsplit(base)
    chair = f"{url.hostname}-{url.port}:{MODELS[0]}"
    rank = [*single[:-1], "--deliberate", "rank", "--orchestrator", chair, single[-1]]
    return [
        Contender(
            "rune-council single pass", 1, 5, "5 answers, judged locally", single,
            [rune, "--help"], env, home, rune_check, fresh_ids=True, help_shown="rune --help",
        ),
        Contender(
            "rune-council rank", 3, 11, "5 answers; a ballot round of 5; a chairman", rank,
            None, env, home, rune_check, fresh_ids=True,
        ),
    ]  # fmt: skip


CORE_RUN = """
import asyncio, json, sys
from llm_council.council import run_full_council
answers, reviews, synthesis, meta = asyncio.run(run_full_council(sys.argv[1], bypass_cache=True))
print(json.dumps({"answers": len(answers), "reviews": len(reviews),
                  "synthesis": (synthesis or {}).get("response", "")}))
"""


def core_contender(peer: Peer, bin_dir: Path, base: str, work: Path) -> Contender:
    home = work / peer.key
    env = base_env(home, str(bin_dir))
    config = home / "llm_council.yaml"
    settings = {
        "council": {"models": list(MODELS), "chairman": MODELS[0]},
        "gateways": {
            "default": "openrouter",
            "providers": {"openrouter": {"enabled": True, "base_url": base + "/chat/completions"}},
        },
    }
    config.write_text(json.dumps(settings))  # JSON is YAML
    env |= {
        "LLM_COUNCIL_CONFIG": str(config),
        "OPENROUTER_API_KEY": "dummy-not-a-key",
        "LLM_COUNCIL_OFFLINE": "true",
        "LLM_COUNCIL_TELEMETRY": "off",
        "LLM_COUNCIL_CACHE": "false",
    }

    def check(proc: Proc) -> str | None:
        try:
            result = json.loads(proc.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return f"no result on stdout: {last_words(proc.out + proc.err)}"
        if result["answers"] != 5 or result["reviews"] != 5 or MARKER not in result["synthesis"]:
            return f"answers {result['answers']}, reviews {result['reviews']}, no synthesis"
        return None

    return Contender(
        peer.label, peer.stages, peer.calls, peer.does,
        [str(bin_dir / "python"), "-c", CORE_RUN, QUESTION],
        [str(bin_dir / "llm-council"), "--help"], env, home, check,
        help_shown="llm-council --help",
    )  # fmt: skip


def consortium_contender(peer: Peer, bin_dir: Path, base: str, work: Path) -> Contender:
    home = work / peer.key
    env = base_env(home, str(bin_dir))
    env["OPENAI_API_KEY"] = "dummy-not-a-key"
    # The plugin keeps its logs and saved consortiums in click's app dir for llm, not in
    # LLM_USER_PATH, so both live in the default place under this private HOME.
    user_dir = home / ".config" / "io.datasette.llm"
    user_dir.mkdir(parents=True, exist_ok=True)
    models = [{"model_id": m, "model_name": m, "api_base": base} for m in MODELS]
    (user_dir / "extra-openai-models.yaml").write_text(json.dumps(models))
    llm = str(bin_dir / "llm")

    def check(proc: Proc) -> str | None:
        return None if MARKER in proc.out else f"no synthesis: {last_words(proc.out + proc.err)}"

    contender = Contender(
        peer.label, peer.stages, peer.calls, peer.does,
        [llm, "-m", BENCH_COUNCIL, QUESTION], [llm, "--help"], env, home, check,
        help_shown="llm --help, plugins loaded",
    )  # fmt: skip
    save = [llm, "consortium", "save", BENCH_COUNCIL]
    save += [arg for m in MODELS for arg in ("-m", m)]
    save += ["--arbiter", MODELS[0], "--max-iterations", "1"]
    done = run_child(save, env, home)
    if done.rc != 0:
        contender.broken = f"`llm consortium save` exit {done.rc}: {last_words(done.err)}"
    return contender


SETUPS: dict[str, Callable[[Peer, Path, str, Path], Contender]] = {
    "llm-council-core": core_contender,
    "llm-consortium": consortium_contender,
}


# ----------------------------------------------------------------------------- install


def install(peer: Peer, venvs: Path) -> tuple[Path | None, str]:
    """The peer's bin dir (or None) and what happened: seconds taken, cached, or pip's reason."""
    venv = venvs / peer.key
    marker = venv / ".bench-pins"
    wanted = "\n".join(peer.pins)
    if marker.is_file() and marker.read_text() == wanted:
        return venv / "bin", "cached"
    shutil.rmtree(venv, ignore_errors=True)
    t = time.perf_counter()
    steps = (
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *peer.pins],
    )
    for argv in steps:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            return None, f"{argv[2]} took over {INSTALL_TIMEOUT_S:.0f} s"
        if done.returncode != 0:
            return None, f"{' '.join(argv[1:4])}: {last_words(done.stderr or done.stdout)}"
    marker.write_text(wanted)
    return venv / "bin", f"installed in {time.perf_counter() - t:.0f} s"


# ------------------------------------------------------------------------------ measure


@dataclass
class Figure:
    walls: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    failed: str | None = None


def once(c: Contender, stub: Stub, argv: list[str], tag: str) -> Proc:
    if c.fresh_ids:
        argv = [tag if a == "RUN_ID" else a for a in argv]
    return counted(stub, argv, c.env, c.cwd)


def measure(state: dict[str, Any]) -> dict[str, Any]:
    repeat: int = state["repeat"]
    work = Path(state["work"])
    stub = Stub(
        models=list(MODELS),
        behaviours={m: Behaviour("slow", peer_reply, delay_s=0.0) for m in MODELS},
    ).start()
    try:
        base = stub.base_url
        floor_home = work / "floor"
        floor = Contender(
            "floor: stdlib, 5 calls at once", 1, 5, "the five calls, nothing else",
            [sys.executable, "-c", FLOOR, base, "0", *MODELS],
            [sys.executable, "-c", "pass"], base_env(floor_home, None), floor_home,
            lambda proc: None, help_shown="python -c pass",
        )  # fmt: skip
        contenders = [floor, *rune_contenders(base, work)]
        installs: dict[str, str] = {}
        for peer in PEERS:
            bin_dir, how = state["installs"][peer.key]
            installs[peer.label] = how if bin_dir else f"FAILED: {how}"
            if bin_dir is None:
                contenders.append(
                    Contender(
                        peer.label, peer.stages, peer.calls, peer.does, [], None, {}, work,
                        lambda proc: None, broken="not installed (pip's reason above)",
                    )
                )  # fmt: skip
                continue
            contenders.append(SETUPS[peer.key](peer, Path(bin_dir), base, work))
        live = [c for c in contenders if c.broken is None]
        results: dict[str, dict[str, Figure]] = {
            name: {c.label: Figure(failed=c.broken) for c in contenders}
            for name in ("instant", "slow", "help")
        }

        def record(name: str, c: Contender, argv: list[str], tag: str, calls: int) -> None:
            figure = results[name][c.label]
            if figure.failed is not None:
                return
            proc = once(c, stub, argv, tag)
            if calls:
                problem = stub_checks(proc, calls) or c.check(proc)
            elif proc.rc != 0:
                problem = f"exit {proc.rc}: {last_words(proc.err or proc.out)}"
            elif c is not floor and "usage" not in proc.out.lower():
                problem = f"no usage text: {last_words(proc.out + proc.err)}"
            else:
                problem = None
            if problem is not None:
                figure.failed = problem
                return
            figure.walls.append(proc.wall)
            figure.rss.append(proc.rss_mb)
            figure.calls.append(proc.calls)

        # One untimed run of each warms the page cache and creates whatever a first run
        # creates (rune's detect cache, llm's databases), so every timed run is a second run.
        for c in live:
            proc = once(c, stub, c.council, f"warm-{len(c.label)}")
            problem = stub_checks(proc, c.calls) or c.check(proc)
            if problem is not None:
                for name in ("instant", "slow"):
                    results[name][c.label].failed = problem
        for name, delay in (("instant", 0.0), ("slow", VOICE_S)):
            stub.set_delay(delay)
            for i in range(repeat):
                turn = live[i % len(live) :] + live[: i % len(live)]
                for c in turn:
                    record(name, c, c.council, f"{name}-{i}-{len(c.label)}", c.calls)
        for i in range(repeat):
            turn = live[i % len(live) :] + live[: i % len(live)]
            for c in turn:
                if c.help is not None:
                    record("help", c, c.help, "", 0)
        return {
            "repeat": repeat,
            "isolated": state["isolated"],
            "installs": installs,
            "contenders": [
                {"label": c.label, "stages": c.stages, "calls": c.calls, "does": c.does,
                 "help": c.help_shown if c.help is not None else None}
                for c in contenders
            ],
            "figures": {
                name: {label: vars(f) for label, f in rows.items()}
                for name, rows in results.items()
            },
        }  # fmt: skip
    finally:
        stub.stop()


# ------------------------------------------------------------------------------- report


def spread(values: list[float], unit: str, digits: int) -> str:
    med = statistics.median(values)
    return f"{med:.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def suffixed(text: str) -> Callable[[dict[str, Any]], str]:
    return lambda f: spread(f["walls"], "s", 2) + text


def against(ideal: float) -> Callable[[dict[str, Any]], str]:
    def body(f: dict[str, Any]) -> str:
        ratio = statistics.median(f["walls"]) / ideal
        return spread(f["walls"], "s", 2) + f"  ideal {ideal:.0f} s  x{ratio:.2f}"

    return body


def report(data: dict[str, Any]) -> None:
    figs = data["figures"]
    print(
        f"rune-council beside its peers: whole processes, one loopback stub with 5 models, "
        f"median (min-max) of {data['repeat']}"
    )
    print(
        "  network: "
        + (
            "measured in a private network namespace with loopback only"
            if data["isolated"]
            else "NOT isolated (--no-isolate, or unshare does not work here); keys are "
            "dummies, proxies point at a "
            "closed loopback port"
        )
    )
    for label, how in data["installs"].items():
        print(f"  install {label}: {how}")
    width = 40
    print("  what each council does (stages of model calls, so the ideal with 1 s voices):")
    for c in data["contenders"]:
        shape = f"{c['stages']} stage(s), {c['calls']:>2} calls"
        print(f"    {c['label']:<{width}} {shape}: {c['does']}")

    def row(name: str, label: str, body: Callable[[dict[str, Any]], str]) -> None:
        f = figs[name][label]
        if f["failed"] is not None:
            print(f"    {label:<{width}} FAILED: {f['failed']}")
        elif f["walls"]:
            print(f"    {label:<{width}} {body(f)}")

    print("  N=5, voices answer at once (wall)")
    for c in data["contenders"]:
        row(
            "instant", c["label"], lambda f: spread(f["walls"], "s", 2) + f"  calls {f['calls'][0]}"
        )
    print("  N=5, voices take 1 s (wall; ideal = stages x 1 s; ratio = wall / ideal)")
    for c in data["contenders"]:
        row("slow", c["label"], against(c["stages"] * VOICE_S))
    print("  --help cold start (wall)")
    for c in data["contenders"]:
        if c["help"] is not None or figs["help"][c["label"]]["failed"]:
            shown = f" ({c['help']})" if c["help"] else ""
            row("help", c["label"], suffixed(shown))
    print("  peak memory of the council process, voices answer at once (RSS from wait4)")
    for c in data["contenders"]:
        row("instant", c["label"], lambda f: spread(f["rss"], "MB", 0))
    ours = {"single": "rune-council single pass", "rank": "rune-council rank"}
    print("  rune's median over the peer's (under 1: rune is faster)")
    for peer in PEERS:
        lines = []
        for name in ("instant", "slow"):
            theirs = figs[name][peer.label]
            if theirs["failed"] or not theirs["walls"]:
                continue
            for short, label in ours.items():
                mine = figs[name][label]
                if mine["failed"] or not mine["walls"]:
                    continue
                ratio = statistics.median(mine["walls"]) / statistics.median(theirs["walls"])
                voices = "instant" if name == "instant" else "1 s"
                lines.append(f"{short} x{ratio:.2f} ({voices} voices)")
        if lines:
            print(f"    {'over ' + peer.label:<{width}} " + ", ".join(lines))


# --------------------------------------------------------------------------------- main


def can_isolate() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "--net", "--", "ip", "link", "set", "lo", "up"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="one repeat (about a minute once cached)")
    p.add_argument("--keep", type=Path, help="keep the peers' venvs in DIR and reuse them")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-isolate", action="store_true", help="skip the network namespace")
    p.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inside is not None:  # the measuring half, in the private network namespace
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        state = json.loads(args.inside.read_text())
        data = measure(state)
        (Path(state["work"]) / "result.json").write_text(json.dumps(data))
        return 0
    repeat = 1 if args.quick else max(1, args.repeat)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rune-peers-")))
        venvs = args.keep.resolve() if args.keep else tmp / "venvs"
        venvs.mkdir(parents=True, exist_ok=True)
        installs = {}
        for peer in PEERS:
            print(f"installing {peer.label} ...", file=sys.stderr, flush=True)
            bin_dir, how = install(peer, venvs)
            installs[peer.key] = (None if bin_dir is None else str(bin_dir), how)
        work = tmp / "work"
        work.mkdir()
        isolated = not args.no_isolate and can_isolate()
        state = {"repeat": repeat, "work": str(work), "installs": installs, "isolated": isolated}
        print("measuring ...", file=sys.stderr, flush=True)
        if isolated:
            (tmp / "state.json").write_text(json.dumps(state))
            argv = ["unshare", "--net", "--", sys.executable, __file__, "--inside"]
            subprocess.run([*argv, str(tmp / "state.json")], check=True)
            data = json.loads((work / "result.json").read_text())
        else:
            data = measure(state)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        report(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
