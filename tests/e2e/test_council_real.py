"""``rune council`` end to end: the product's own command line over the real CLIs.

Each test runs ``python -m rune_council.cli council ...`` as a subprocess in a scratch
directory, with the environment from clis.py, so DETECT finds the pinned claude, codex and
gemini in tests/e2e/node_modules and every voice talks to the loopback ModelServer. The
server's answers are voice-answer JSON built with tests.helpers; what is checked is what a
user would see: the printed result, the run file, and what reached the "model".
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from rune_council.runs import load
from tests.e2e.clis import INSTALL_HINT, cli_environment, node_bin_dir, real_clis_installed
from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_RESPONSES, ModelServer
from tests.helpers import PLAN, answer, claim

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "contracts" / "council-result.schema.json"
SUBAGENT_SCRIPT = Path(__file__).resolve().parent / "subagent_answer.py"

VOICE_TIMEOUT_S = 60
# The whole council (detection plus three parallel voices) normally takes a few seconds;
# this only bounds a hung run so the test fails instead of stalling the suite.
COUNCIL_WAIT_S = 120
PROTOCOL_CLI = {ANTHROPIC: "claude", OPENAI_RESPONSES: "codex", GEMINI: "gemini"}
CLI_FAMILY = {"claude": "anthropic", "codex": "openai", "gemini": "google"}

ROLLBACK_REF = "plan.md:6"
ROLLBACK_QUOTE = "No rollback step is defined."
REPORTING_REF = "plan.md:5"
REPORTING_QUOTE = "Keep the reporting jobs on the old single table."

# The same finding from two families, worded differently enough not to be near-verbatim.
CLAUDE_ROLLBACK = (
    "No rollback step: the plan never says how to undo the shard migration, "
    "so a failed weekend leaves no way back."
)
CODEX_ROLLBACK = (
    "Without a way to revert, a cutover that breaks mid-weekend cannot return "
    "to the single orders table."
)
GEMINI_REPORTING = (
    "The reporting jobs keep reading the old single table, which goes stale as soon as "
    "writes move to the shards."
)


def make_question(marker: str) -> str:
    return f"Is the orders sharding plan in plan.md safe to execute as written? Ticket {marker}."


def claude_answer(prompt: str) -> str:
    return answer(
        "Whether the plan to shard the orders table is safe to run as written.",
        "NO, a one-weekend migration with no way back is not safe.",
        [claim(CLAUDE_ROLLBACK, severity="MUST", ref=ROLLBACK_REF, quote=ROLLBACK_QUOTE)],
    )


def codex_answer(prompt: str) -> str:
    return answer(
        "Is the plan for sharding orders safe to carry out as written?",
        "NO, even argued from the other side the cutover cannot be reversed.",
        [claim(CODEX_ROLLBACK, severity="MUST", ref=ROLLBACK_REF, quote=ROLLBACK_QUOTE)],
        fenced=False,
    )


def gemini_answer(prompt: str) -> str:
    return answer(
        "Is the orders sharding plan in plan.md safe to execute as written?",
        "MIXED, the sharding itself is sound but reporting is left behind.",
        [claim(GEMINI_REPORTING, severity="SHOULD", ref=REPORTING_REF, quote=REPORTING_QUOTE)],
    )


# --------------------------------------------------------------------------- harness


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture
def marker() -> str:
    return f"QX{uuid.uuid4().hex[:16]}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not real_clis_installed():
        pytest.fail(f"real CLIs not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.md").write_text(PLAN, encoding="utf-8")
    return work


@pytest.fixture
def env(tmp_path: Path, server: ModelServer) -> dict[str, str]:
    env = cli_environment(tmp_path, server)
    # The product under test is this checkout, whichever interpreter runs the tests.
    # (The runtimes' env policy does not pass PYTHONPATH on to the voices.)
    env["PYTHONPATH"] = str(REPO)
    env["RUNE_COUNCIL_ALLOW_EXTERNAL"] = "1"  # consent for external dispatch
    return env


@dataclass
class Council:
    """One ``rune council`` subprocess; ``pid`` is set as soon as it has started."""

    pid: int | None = None
    started: threading.Event = field(default_factory=threading.Event)

    def wait_pid(self) -> int:
        assert self.started.wait(30), "rune council never started"
        assert self.pid is not None
        return self.pid


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    def describe(self) -> str:
        return (
            f"exit {self.returncode} after {self.elapsed_s:.1f}s\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def run_council(
    workdir: Path,
    env: dict[str, str],
    question: str,
    run_id: str,
    *extra: str,
    as_json: bool = True,
    council: Council | None = None,
) -> Ran:
    argv = [
        sys.executable, "-m", "rune_council.cli", "council", question,
        "--artifact", "plan.md",
        "--rune-dir", str(rune_dir_of(workdir)),
        "--timeout", str(VOICE_TIMEOUT_S),
        "--id", run_id,
        *extra,
    ]  # fmt: skip
    if as_json:
        argv.append("--json")
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if council is not None:
        council.pid = proc.pid
        council.started.set()
    try:
        stdout, stderr = proc.communicate(timeout=COUNCIL_WAIT_S)
    except subprocess.TimeoutExpired:
        # SIGINT lets the council cancel its voices and kill their process trees.
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(f"rune council hung for {COUNCIL_WAIT_S}s:\n{stdout}\n{stderr}")
    elapsed = time.monotonic() - started
    print(f"rune council {run_id}: exit {proc.returncode} in {elapsed:.2f}s")
    return Ran(proc.returncode, stdout, stderr, elapsed)


def rune_dir_of(workdir: Path) -> Path:
    return workdir.parent / "rune"


def run_file(workdir: Path, run_id: str) -> Path:
    return rune_dir_of(workdir) / "council" / f"run-{run_id}.json"


def load_result(ran: Ran, workdir: Path, run_id: str) -> dict[str, Any]:
    assert ran.returncode == 0, ran.describe()
    printed: dict[str, Any] = json.loads(ran.stdout)
    path = run_file(workdir, run_id)
    assert path.is_file(), f"no run file at {path}\n{ran.describe()}"
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert printed["run_file"] == str(path)
    assert_valid_run_file(stored)
    # The artifact is on disk once, beside the run file, sealed by the digest the file keeps.
    kept = stored.pop("artifact_file")
    if printed["artifact_text"] is None:
        assert kept is None
    else:
        raw = printed["artifact_text"].encode("utf-8")
        assert kept["sha256"] == hashlib.sha256(raw).hexdigest()
        assert path.with_suffix(".artifact").read_bytes() == raw
    # The run file, read as every reader reads it, is the final result, not an earlier state.
    shown = load(path).model_dump(mode="json")
    shown.pop("artifact_file")
    assert shown == {k: v for k, v in printed.items() if k != "artifact_file"}
    return printed


def assert_valid_run_file(document: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator_cls = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    validator_cls.check_schema(schema)
    errors = sorted(validator_cls(schema).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:10]
    )


def _assert_idle_clis_tried(
    result: dict[str, Any], slot: dict[str, Any], tried: list[dict[str, Any]]
) -> None:
    """A failed slot went to one idle detected CLI before the subagent, a new family first.

    In this sandbox no idle CLI has a login, so the takeover fails too and is kept. A CLI
    detection found logged out (qwen here, with no auth type) is no candidate at all.
    """
    seated = {v["attempts"][0]["runtime"] for v in result["voices"] if v["attempts"]}
    idle = {
        d["runtime"]: d
        for d in result["runtime_report"]["detected"]
        if d["status"] == "available"
        and d.get("auth") != "logged-out"
        and d["runtime"] not in seated
    }
    if not idle:
        assert tried == [], tried
        return
    [takeover] = tried
    assert takeover["runtime"] in idle and takeover["outcome"] != "ok", takeover
    held = {v["model_family"] for v in result["voices"] if v is not slot}
    new_family = [
        d
        for d in idle.values()
        if d["family_confidence"] == "confirmed" and d["model_family"] not in held
    ]
    if new_family:
        assert idle[takeover["runtime"]] in new_family, (takeover, new_family)


def voices_by_runtime(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Voices keyed by the runtime of their first attempt (the CLI the slot was given)."""
    return {v["attempts"][0]["runtime"]: v for v in result["voices"] if v["attempts"]}


# --------------------------------------------------------------------------- argv watch


@dataclass(frozen=True)
class Sighting:
    """What the process table looked like while one CLI waited for its answer."""

    protocol: str
    hits: list[str]
    """Processes (other than the council itself) whose argv or env held the marker."""
    descendants: list[str]
    """Command lines of the council's live descendants at that moment."""
    remotes: list[str]
    """Remote ends of the descendants' open inet sockets at that moment."""


def _scan_proc(marker: bytes, exclude: set[int], descendants: set[int]) -> list[str]:
    hits = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        pid = int(entry.name)
        # Every process's argv is world-readable; a voice's environment is ours to read too.
        sources = ["cmdline", "environ"] if pid in descendants else ["cmdline"]
        for source in sources:
            try:
                data = Path(entry.path, source).read_bytes()
            except OSError:
                continue
            if marker in data:
                shown = data.replace(b"\0", b" ")[:300].decode("utf-8", "replace")
                hits.append(f"pid {pid} {source}: {shown}")
    return hits


def _descendants(pid: int) -> dict[int, psutil.Process]:
    try:
        return {child.pid: child for child in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _cmdline(process: psutil.Process) -> str | None:
    try:
        return " ".join(process.cmdline())[:200]
    except psutil.Error:
        return None


def _remotes(process: psutil.Process) -> list[str]:
    try:
        connections = process.net_connections(kind="inet")
    except psutil.Error:
        return []
    return [f"{c.raddr.ip}:{c.raddr.port}" for c in connections if c.raddr]


def watching_answer(
    protocol: str,
    marker: str,
    council: Council,
    sightings: list[Sighting],
    reply: Callable[[str], str],
) -> Callable[[str], str]:
    """An answer callable that first checks no process carries the prompt in its argv.

    It runs while the CLI that asked is alive and blocked on this very response, so the
    CLI (and anything it spawned) is in the process table during the scan.
    """

    def respond(prompt: str) -> str:
        rune_pid = council.wait_pid()
        below = _descendants(rune_pid)
        # The council's own argv holds the question: the user typed it there.
        hits = _scan_proc(marker.encode(), {rune_pid}, set(below))
        commands = sorted(c for c in map(_cmdline, below.values()) if c)
        remotes = sorted({r for process in below.values() for r in _remotes(process)})
        sightings.append(Sighting(protocol, hits, commands, remotes))
        return reply(prompt)

    return respond


# --------------------------------------------------------------------------- case 1


def test_council_of_three_real_clis_reaches_cross_family_consensus(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    assert Path("/proc/self/cmdline").is_file(), "the argv check reads /proc (Linux)"
    question = make_question(marker)
    council = Council()
    sightings: list[Sighting] = []
    for protocol, reply in (
        (ANTHROPIC, claude_answer),
        (OPENAI_RESPONSES, codex_answer),
        (GEMINI, gemini_answer),
    ):
        server.answers[protocol] = watching_answer(protocol, marker, council, sightings, reply)
    run_id = f"e2e-honest-{marker[-6:]}"

    ran = run_council(workdir, env, question, run_id, council=council)
    result = load_result(ran, workdir, run_id)

    # Every slot went to a different real CLI, and every one answered validly.
    by_runtime = voices_by_runtime(result)
    assert sorted(by_runtime) == ["claude", "codex", "gemini"], result["voices"]
    for name, voice in by_runtime.items():
        assert voice["status"] == "complete", voice
        assert voice["runtime"] == name
        assert voice["source"] == "external-cli"
        assert voice["model_family"] == CLI_FAMILY[name]
        assert voice["family_confidence"] == "confirmed"
        assert voice["is_fallback"] is False
        assert [(a["runtime"], a["outcome"]) for a in voice["attempts"]] == [(name, "ok")]
        assert voice["validity"] == {"well_formed": "pass", "on_topic": "pass"}
    assert result["status"] == "complete"
    assert result["voices_valid"] == 3
    assert result["voices_dropped"] == []
    assert sorted(result["runtime_report"]["used"]) == ["claude", "codex", "gemini"]
    assert result["runtime_report"]["degraded_to_subagent"] == []

    assert result["decorrelation"] == "MULTI_FAMILY"
    assert result["distinct_families"] == ["anthropic", "google", "openai"]

    claude, codex, gemini = by_runtime["claude"], by_runtime["codex"], by_runtime["gemini"]
    consensus = result["agreement"]["consensus_claims"]
    rollback = [c for c in consensus if {"anthropic", "openai"} <= set(c["families"])]
    assert len(rollback) == 1, consensus
    assert sorted(rollback[0]["voice_ids"]) == sorted([claude["id"], codex["id"]])
    assert len(set(rollback[0]["families"])) == 2
    assert "rollback" in rollback[0]["claim"].lower()
    assert rollback[0]["matched_by"]["key"] == "@artifact:6"
    assert rollback[0]["severity"] == "MUST"
    for claim_id in rollback[0]["claim_ids"]:
        voice = next(v for v in result["voices"] if v["id"] == claim_id.split(".")[0])
        evidence = next(c for c in voice["claims"] if c["id"] == claim_id)["evidence"]
        assert [e["verified"] for e in evidence] == ["true"], evidence

    dissent = result["agreement"]["dissent"]
    assert dissent, "the gemini claim should be kept as dissent"
    solo = [d for d in dissent if d["voice_ids"] == [gemini["id"]]]
    assert [(d["label"], d["families"]) for d in solo] == [("single-voice", ["google"])], dissent
    assert "reporting" in solo[0]["claim"].lower()
    assert not any(d["label"] == "correlated-penalty" for d in dissent), dissent
    # The MUST-level finding is settled by consensus; gemini's lone SHOULD-level finding
    # (HIGH) is not, so a person must decide it, and the decision names only that one.
    assert result["needs_decision"] is True
    assert "[SHOULD]" in result["decision"] and "reporting" in result["decision"].lower()
    assert "[MUST]" not in result["decision"], result["decision"]

    # What reached the "model": one call per CLI, each carrying the question, so the
    # prompt travelled on stdin ...
    for protocol in PROTOCOL_CLI:
        calls = server.requests.for_protocol(protocol)
        assert len(calls) == 1, (protocol, calls)
        assert question in calls[0].prompt, (protocol, calls[0].prompt)
    assert not [r for r in server.requests if r.status >= 400], list(server.requests)

    # ... and never on a command line, while each CLI was alive and waiting.
    assert sorted(s.protocol for s in sightings) == sorted(PROTOCOL_CLI), sightings
    for sighting in sightings:
        cli = PROTOCOL_CLI[sighting.protocol]
        assert any(cli in line for line in sighting.descendants), sighting
        assert sighting.hits == [], f"the prompt is visible in a process table: {sighting}"
        # A snapshot, not a firewall: every socket the voices held then was loopback.
        assert all(r.startswith("127.0.0.1:") for r in sighting.remotes), sighting
        assert sighting.remotes, f"no connection to the model server seen: {sighting}"


def test_council_human_output_leads_with_decorrelation_and_consensus(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    server.answers[ANTHROPIC] = claude_answer
    server.answers[OPENAI_RESPONSES] = codex_answer
    server.answers[GEMINI] = gemini_answer
    run_id = f"e2e-human-{marker[-6:]}"

    ran = run_council(workdir, env, make_question(marker), run_id, as_json=False)

    assert ran.returncode == 0, ran.describe()
    lines = ran.stdout.splitlines()
    assert lines[0] == f"## Council Result: {run_id}", ran.stdout
    assert any("Decorrelation**: MULTI_FAMILY" in line for line in lines[:3]), ran.stdout
    start = lines.index("### Consensus (verified, cross-family)")
    section = lines[start + 1 : lines.index("", start)]
    # One consensus entry, then each member's own wording under it.
    assert len(section) == 3 and section[1].startswith("  - v"), ran.stdout
    assert CLAUDE_ROLLBACK in section[0] and "anthropic, openai" in section[0], section
    assert "### Dissent" in lines and GEMINI_REPORTING in ran.stdout
    assert f"Run file: {run_file(workdir, run_id)}" in lines
    # Progress goes to stderr, one line per slot transition.
    assert "dispatching 3 voice(s)" in ran.stderr, ran.stderr
    assert run_file(workdir, run_id).is_file()


# --------------------------------------------------------------------------- case 2


def test_failed_cli_slot_falls_back_to_subagent_command(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    question = make_question(marker)
    server.answers[ANTHROPIC] = claude_answer
    server.answers[GEMINI] = gemini_answer
    server.fail[OPENAI_RESPONSES] = 400
    subagent = f"{shlex.quote(sys.executable)} {shlex.quote(str(SUBAGENT_SCRIPT))}"
    run_id = f"e2e-fallback-{marker[-6:]}"

    ran = run_council(workdir, env, question, run_id, "--subagent-cmd", subagent)
    result = load_result(ran, workdir, run_id)

    by_runtime = voices_by_runtime(result)
    assert sorted(by_runtime) == ["claude", "codex", "gemini"], result["voices"]
    slot = by_runtime["codex"]
    assert slot["is_fallback"] is True
    assert slot["status"] == "complete", slot
    assert slot["runtime"] == "subagent-cmd"
    assert slot["source"] == "subagent"
    assert slot["model_family"] == "unknown"
    first, last = slot["attempts"][0], slot["attempts"][-1]
    assert (first["runtime"], first["source"], first["outcome"]) == (
        "codex", "external-cli", "exit_nonzero",
    ), first  # fmt: skip
    # Between them, every idle CLI the council had not seated was tried first (here each
    # one fails: none has a login in this sandbox), and none was seated twice.
    middle = slot["attempts"][1:-1]
    _assert_idle_clis_tried(result, slot, middle)
    assert first["exit_code"] not in (0, None), first
    assert (last["runtime"], last["source"], last["outcome"]) == (
        "subagent-cmd", "subagent", "ok",
    ), last  # fmt: skip
    assert slot["question_echo"] == question  # the script really read the prompt on stdin
    for name in ("claude", "gemini"):
        assert by_runtime[name]["status"] == "complete", by_runtime[name]
        assert by_runtime[name]["is_fallback"] is False

    assert result["runtime_report"]["degraded_to_subagent"] == [slot["id"]]
    assert result["voices_valid"] == 3
    assert result["voices_dropped"] == []
    # Only the real, confirmed families count: the fallback voice is not "openai".
    assert result["decorrelation"] == "MULTI_FAMILY"
    assert result["distinct_families"] == ["anthropic", "google"]
    # The subagent agrees with claude about the rollback, but a fallback voice cannot
    # make a second family: no consensus, the agreement is kept as unverified dissent.
    assert result["agreement"]["consensus_claims"] == []
    claude = by_runtime["claude"]
    pair = [
        d
        for d in result["agreement"]["dissent"]
        if sorted(d["voice_ids"]) == sorted([claude["id"], slot["id"]])
    ]
    assert [d["label"] for d in pair] == ["unverified"], result["agreement"]["dissent"]
    assert "only 1 confirmed, non-fallback family" in pair[0]["detail"], pair

    assert [r.status for r in server.requests.for_protocol(OPENAI_RESPONSES)] == [400]
    assert len(server.requests.for_protocol(ANTHROPIC)) == 1
    assert len(server.requests.for_protocol(GEMINI)) == 1


def test_failed_cli_slot_is_dropped_without_subagent(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    server.answers[ANTHROPIC] = claude_answer
    server.answers[GEMINI] = gemini_answer
    server.fail[OPENAI_RESPONSES] = 400
    run_id = f"e2e-dropped-{marker[-6:]}"

    ran = run_council(workdir, env, make_question(marker), run_id)
    result = load_result(ran, workdir, run_id)

    by_runtime = voices_by_runtime(result)
    slot = by_runtime["codex"]
    assert slot["status"] == "dropped", slot
    assert slot["is_fallback"] is False
    assert slot["dropped_by"] == "council.dispatch"
    reason = slot["drop_reason"]
    assert "codex" in reason and "no subagent configured" in reason, reason
    assert (slot["attempts"][0]["runtime"], slot["attempts"][0]["outcome"]) == (
        "codex",
        "exit_nonzero",
    )
    _assert_idle_clis_tried(result, slot, slot["attempts"][1:])
    assert slot["runtime"] == slot["attempts"][-1]["runtime"]
    assert result["voices_dropped"] == [
        {
            "voice_id": slot["id"],
            "runtime": slot["runtime"],
            "reason": reason,
            "dropped_by": "council.dispatch",
        }
    ]
    assert result["voices_valid"] == 2
    assert result["runtime_report"]["degraded_to_subagent"] == []
    assert result["decorrelation"] == "MULTI_FAMILY"
    assert result["distinct_families"] == ["anthropic", "google"]
    assert [r.status for r in server.requests.for_protocol(OPENAI_RESPONSES)] == [400]
