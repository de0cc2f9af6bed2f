"""The fault suite, driven through the whole council.

Every misbehaving voice is a fake CLI run as a real subprocess under a real CLI's name.
After each run the test checks what a user would notice: the council still finished, the
bad voice is recorded with the reason (and fell back to the subagent when there is one),
no process the run started is alive (psutil), and every voice's temporary directory is
gone. ``tests/test_process.py`` covers the same faults one level down, at ``run_process``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from rune_council import CouncilOptions, RequestError, RunFileError, convene
from rune_council.core.contract import CouncilResult, RunEvent
from tests import voice_dirs
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim, running

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "contracts" / "council-result.schema.json").read_text())
Q = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step", ref="plan.md:6", quote="No rollback step is defined."
)
GOOD = answer(Q, "NO, not yet", [ROLLBACK])


class Rig:
    """A scratch world: fake CLIs, a private temp root, and the pids every fake recorded."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.pid_file = tmp / "pids"
        self.scratch = tmp / "scratch"
        self.scratch.mkdir()
        self.rune = tmp / ".rune"
        self.env = {
            "PATH": path_with(self.bin),
            "HOME": str(tmp),
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
        }

    def fake(self, name: str, **settings: Any) -> Path:
        settings.setdefault("answer", GOOD)
        return install_fake(self.bin, name, pid_file=self.pid_file, **settings)

    def convene(self, run_id: str, *, timeout_s: float = 20, **kwargs: Any) -> CouncilResult:
        req = {
            "id": run_id,
            "question": Q,
            "artifact": {"name": "plan.md", "text": kwargs.pop("artifact", PLAN)},
            "n": kwargs.pop("n", 2),
            "budget": {"per_voice_timeout_s": timeout_s},
        }
        options = CouncilOptions(rune_dir=self.rune, env=self.env, allow_external=True, **kwargs)
        return convene(req, options)

    def pids(self) -> list[int]:
        if not self.pid_file.exists():
            return []
        return [int(line.split()[1]) for line in self.pid_file.read_text().splitlines()]

    def assert_clean(self) -> None:
        """Nothing the run started still runs; no voice left its temporary directory."""
        pids = self.pids()
        assert pids, "no fake recorded its pid"
        alive = [p for p in pids if running(p)]
        assert not alive, f"still running after the council returned: {alive}"
        assert voice_dirs.leftovers(self.scratch) == [], "a voice's directory survived"

    def run_file(self, run_id: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            (self.rune / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
        )
        jsonschema.validate(doc, SCHEMA)
        return doc


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    rig = Rig(tmp_path)
    # Voices' directories go here, so the test can see that none is left behind.
    monkeypatch.setattr(tempfile, "tempdir", str(rig.scratch))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", voice_dirs.pinned_env(rig.scratch)["XDG_CACHE_HOME"])
    yield rig
    for pid in rig.pids():  # never leak into the rest of the session, even on failure
        with contextlib.suppress(psutil.Error):
            if running(pid):
                psutil.Process(pid).kill()


def subagent(prompt: str) -> str:
    return answer(Q, "NO", [{**ROLLBACK, "text": "There is no way back from the cutover"}])


def by_runtime(result: CouncilResult, name: str) -> Any:
    return next(v for v in result.voices if v.attempts and v.attempts[0].runtime == name)


# --------------------------------------------------------------------------- hangs


def test_a_voice_hanging_past_the_timeout_is_killed_and_its_slot_falls_back(rig: Rig) -> None:
    rig.fake("claude")
    rig.fake("codex", mode="sleep", sleep_s=3600)
    started = time.monotonic()
    result = rig.convene("hang", timeout_s=1.5, subagent=subagent)
    elapsed = time.monotonic() - started
    codex = by_runtime(result, "codex")
    assert [a.outcome for a in codex.attempts] == ["timeout", "ok"]
    assert "timed out after 1.5 s" in codex.attempts[0].detail
    assert codex.is_fallback and codex.status == "complete" and codex.runtime == "internal"
    assert result.runtime_report.degraded_to_subagent == [codex.id]
    # The slot is back in business right after the timeout, not after a long wait.
    assert elapsed < 1.5 + 8, elapsed
    rig.assert_clean()


def test_a_voice_that_ignores_sigterm_is_killed_anyway(rig: Rig) -> None:
    rig.fake("claude")
    rig.fake("codex", mode="ignore_sigterm")
    result = rig.convene("term", timeout_s=1.0)
    codex = by_runtime(result, "codex")
    assert codex.status == "dropped" and codex.attempts[0].outcome == "timeout"
    assert "process tree killed" in (codex.drop_reason or "")
    rig.assert_clean()


@pytest.mark.parametrize("leave_session", [False, True], ids=["same-group", "setsid"])
def test_a_grandchild_holding_stdout_does_not_stall_the_run(rig: Rig, leave_session: bool) -> None:
    rig.fake("claude")
    extra = {"grandchild_setsid": 1} if leave_session else {}
    rig.fake("codex", mode="fork_grandchild", **extra)
    started = time.monotonic()
    result = rig.convene("gc", timeout_s=30)
    assert time.monotonic() - started < 15  # not the 30 s timeout, not the grandchild's hour
    codex = by_runtime(result, "codex")
    assert codex.status == "complete", codex.attempts
    assert "leftover processes" in codex.attempts[0].detail or codex.attempts[0].outcome == "ok"
    assert "grandchild" in rig.pid_file.read_text()  # there was one, and it is gone now
    rig.assert_clean()


def test_a_slow_stdin_reader_gets_the_whole_prompt(rig: Rig) -> None:
    # A large artifact makes the prompt (the artifact is capped at 60 000 characters in it)
    # far bigger than a pipe buffer; the fake reads it 4 KiB at a time while writing output,
    # which deadlocks a writer that does not interleave writing with reading.
    big = PLAN + "".join(f"filler line {i} for a large artifact {'x' * 60}\n" for i in range(900))
    copy = rig.tmp / "stdin"
    rig.fake("claude")
    rig.fake("codex", mode="slow_stdin", stdin_copy=copy)
    result = rig.convene("slow", artifact=big, timeout_s=60)
    codex = by_runtime(result, "codex")
    assert codex.attempts[0].outcome == "ok", codex.attempts
    received = copy.read_text()
    assert len(received) > 60_000 and Q in received
    assert "filler line 450 " in received  # deep into the artifact
    assert received.rstrip().endswith("}")  # and the end of the prompt's answer template
    rig.assert_clean()


# --------------------------------------------------------------------------- bad output


def test_a_100_mb_flood_is_dropped_as_too_large_with_bounded_memory(rig: Rig) -> None:
    rig.fake("claude")
    rig.fake("codex", mode="flood")
    tracemalloc.start()
    try:
        result = rig.convene("flood", timeout_s=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    codex = by_runtime(result, "codex")
    assert codex.status == "dropped" and codex.attempts[0].outcome == "too_large"
    assert "exceeded 1000000 bytes" in codex.attempts[0].detail
    assert peak < 40_000_000, f"peak {peak / 1e6:.1f} MB while a voice wrote 100 MB"
    assert codex.raw is None
    rig.assert_clean()


def test_non_utf8_output_is_recorded_and_the_run_file_stays_valid(rig: Rig) -> None:
    rig.fake("claude", mode="garbage")
    rig.fake("codex")
    result = rig.convene("bytes")
    claude = by_runtime(result, "claude")
    assert claude.status == "dropped" and claude.attempts[0].outcome == "error_reported"
    assert "no result object in claude output" in claude.attempts[0].detail
    doc = rig.run_file("bytes")  # parses and validates against the schema
    assert doc["status"] == "complete"
    rig.assert_clean()


def test_an_empty_answer_with_exit_0_is_a_failed_voice(rig: Rig) -> None:
    rig.fake("claude")
    rig.fake("codex", mode="silent")
    result = rig.convene("empty", subagent=subagent)
    codex = by_runtime(result, "codex")
    first = codex.attempts[0]
    assert (first.outcome, first.exit_code) == ("error_reported", 0)
    assert "no agent message" in codex.attempts[0].detail
    assert codex.is_fallback and codex.status == "complete"
    rig.assert_clean()


def test_a_voice_that_dies_mid_answer_is_recorded_as_killed(rig: Rig) -> None:
    rig.fake("claude")
    rig.fake("codex", mode="die_mid_answer")
    result = rig.convene("died")
    codex = by_runtime(result, "codex")
    assert codex.status == "dropped" and codex.attempts[0].outcome == "exit_nonzero"
    assert codex.attempts[0].exit_code == -9
    assert "killed by SIGKILL" in (codex.drop_reason or "")
    rig.assert_clean()


def test_an_off_topic_answer_is_dropped_by_the_gate_and_not_retried(rig: Rig) -> None:
    log = rig.tmp / "calls"
    rig.fake("claude")
    rig.fake("codex", answer=answer("Is Python faster than Go?", "NO", []), argv_log=log)
    result = rig.convene("off", subagent=subagent)
    codex = by_runtime(result, "codex")
    assert codex.status == "dropped" and codex.dropped_by == "council.gate"
    assert (codex.drop_reason or "").startswith("off-topic")
    assert len(log.read_text().splitlines()) == 1  # dropped, never asked again
    assert [a.runtime for a in codex.attempts] == ["codex"]  # no fallback for a gate drop
    rig.assert_clean()


# --------------------------------------------------------------------------- the binary


def test_a_binary_deleted_between_detect_and_dispatch(rig: Rig) -> None:
    rig.fake("claude")
    codex = rig.fake("codex")

    def delete_on_dispatch(result: CouncilResult, event: RunEvent) -> None:
        if event.kind == "council.dispatched":
            codex.unlink()

    result = rig.convene("gone", subagent=subagent, on_event=delete_on_dispatch)
    voice = by_runtime(result, "codex")
    first = voice.attempts[0]
    assert first.outcome == "spawn_error" and "executable not found" in first.detail
    assert voice.is_fallback and voice.status == "complete"
    rig.assert_clean()


# --------------------------------------------------------------------------- argv and paths

WRAPPERS = ("qwen", "opencode", "aider", "cline", "amp")


def test_the_prompt_never_shows_in_any_childs_argv(rig: Rig) -> None:
    marker = "walrus-umber-9931"
    question = f"{Q} ({marker})"
    for name in ("claude", *WRAPPERS):
        rig.fake(name, answer=answer(question, "NO", []), sleep_s=1.5)
    seen: list[bytes] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in rig.pids():
                with contextlib.suppress(OSError):
                    seen.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = convene(
            {"id": "argv", "question": question, "n": 5},
            CouncilOptions(rune_dir=rig.rune, env=rig.env, allow_external=True),
        )
    finally:
        stop.set()
        watcher.join()
    assert result.voices_valid == 5
    assert len(seen) > 10, "never saw a child's command line"
    assert not [c for c in seen if marker.encode() in c]
    runtimes = {a.runtime for v in result.voices for a in v.attempts}
    assert len(runtimes) == 5 and runtimes <= {"claude", *WRAPPERS}
    rig.assert_clean()


@pytest.mark.parametrize(
    "run_id", ["../escape", "a/b", "..", "/etc/passwd", "x/../../y", ".hidden"]
)
def test_a_run_id_that_tries_to_leave_the_run_directory_is_refused(rig: Rig, run_id: str) -> None:
    rig.fake("claude")
    with pytest.raises(RequestError, match="not a safe file name"):
        rig.convene(run_id)
    assert not rig.pids()  # refused before anything ran
    outside = [p for p in rig.tmp.rglob("*.json") if ".rune" not in p.parts]
    assert outside == []


def test_symlinked_run_and_cache_files_are_not_followed(rig: Rig) -> None:
    rig.fake("claude")
    target = rig.tmp / "precious.json"
    target.write_text("keep me")
    rig.rune.mkdir()
    (rig.rune / "runtimes.json").symlink_to(target)
    with pytest.raises(RunFileError, match="symlink"):
        rig.convene("link")
    assert target.read_text() == "keep me"
    assert not rig.pids()
