"""`rune council watch` as a second process following a council that another process runs."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / ".rune-example" / "council"


def _env(tmp: Path) -> dict[str, str]:
    # No AI CLI on PATH: the writers here are the demo's simulated voices or nothing at all.
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}


def start(tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=tmp,
        env=_env(tmp),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"still running after {timeout} s\nstdout:{out}\nstderr:{err}"
        ) from None
    return proc.returncode, out, err


def wait_for(predicate: Any, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def run_file(tmp: Path, run_id: str) -> Path:
    return tmp / ".rune" / "council" / f"run-{run_id}.json"


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_follows_a_live_council_printing_each_transition_once(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    writer = start(tmp_path, "demo", "--id", "live", "--pace", "1.5")
    procs.append(writer)
    wait_for(lambda: run_file(tmp_path, "live").exists(), what="the skeleton")
    watcher = start(tmp_path, "watch", "live", "--json")
    procs.append(watcher)

    w_code, w_out, w_err = finish(watcher)
    d_code, _, _ = finish(writer)
    assert (w_code, d_code) == (0, 0), w_err

    lines = records(w_out)
    assert lines[0]["type"] == "started" and lines[0]["run"] == "live"
    assert lines[-1] == {
        "type": "finished",
        "run": "live",
        "status": "complete",
        "decorrelation": "MULTI_FAMILY",
        "voices_valid": 3,
        "exit_code": 0,
    }
    printed = [r["seq"] for r in lines if r["type"] == "event"]
    recorded = json.loads(run_file(tmp_path, "live").read_text())["events"]
    # Every transition the run went through, in order, and none twice.
    assert printed == [e["seq"] for e in recorded]
    assert [r["status"] for r in lines if r["type"] == "event" and r["voice_id"] == "v4"] == [
        "running",
        "dropped",
    ]


def test_human_lines_name_the_voice_its_family_and_status(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    writer = start(tmp_path, "demo", "--id", "human", "--pace", "1")
    procs.append(writer)
    watcher = start(tmp_path, "watch", "human", "--result")
    procs.append(watcher)
    code, out, err = finish(watcher)
    assert finish(writer)[0] == 0
    assert code == 0, err
    assert "v2 sim-openai" in out and "openai" in out
    assert any("v4 sim-xai" in line and "dropped" in line for line in out.splitlines())
    assert "run human complete: MULTI_FAMILY, 3/4 valid, 1 dropped (exit 0)" in out
    assert "## Council Result: human" in out  # --result renders the Output Format at the end


def test_waits_for_a_run_that_has_not_started_writing(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    # Not even the .rune directory exists yet.
    watcher = start(tmp_path, "watch", "later", "--json")
    procs.append(watcher)
    time.sleep(1.5)
    assert watcher.poll() is None, "watch gave up on a run that has not started"
    writer = start(tmp_path, "demo", "--id", "later", "--pace", "0.5")
    procs.append(writer)
    code, out, err = finish(watcher)
    assert finish(writer)[0] == 0
    assert code == 0, err
    lines = records(out)
    assert lines[0]["type"] == "waiting"
    assert lines[1]["type"] == "started"
    recorded = json.loads(run_file(tmp_path, "later").read_text())["events"]
    assert [r["seq"] for r in lines if r["type"] == "event"] == [e["seq"] for e in recorded]


def test_gives_up_waiting_when_asked_to(tmp_path: Path) -> None:
    proc = start(tmp_path, "watch", "never", "--wait", "0.5")
    code, _, err = finish(proc)
    assert code == 2
    assert err.strip().splitlines() == [
        f"rune council: no run file appeared at {run_file(tmp_path, 'never')} within 0.5 s"
    ]


def test_a_killed_orchestrator_is_reported_as_abandoned(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    writer = start(tmp_path, "demo", "--id", "dead", "--pace", "30")
    procs.append(writer)
    path = run_file(tmp_path, "dead")
    wait_for(lambda: path.exists() and '"running"' in path.read_text(), what="voices to be running")
    watcher = start(tmp_path, "watch", "dead")
    procs.append(watcher)
    time.sleep(1.0)
    assert watcher.poll() is None, "watch ended while the run was still alive"

    killed_at = time.monotonic()
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    code, out, err = finish(watcher, timeout=30)
    assert code == 75, (out, err)
    assert time.monotonic() - killed_at < 10
    last = out.strip().splitlines()[-1]
    assert last.startswith("run dead abandoned:") and f"process {writer.pid}" in last
    # The file still says running: only its dead writer could have said otherwise.
    assert json.loads(path.read_text())["status"] == "running"


def test_a_killed_but_unreaped_orchestrator_is_abandoned_too(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    writer = start(tmp_path, "demo", "--id", "zombie", "--pace", "30")
    procs.append(writer)
    path = run_file(tmp_path, "zombie")
    wait_for(lambda: path.exists() and '"running"' in path.read_text(), what="running voices")
    writer.send_signal(signal.SIGKILL)
    # Not reaped: the pid still exists, as a zombie, until this test waits for it.
    watcher = start(tmp_path, "watch", "zombie", "--json")
    procs.append(watcher)
    code, out, _ = finish(watcher, timeout=30)
    writer.wait()
    assert code == 75
    assert records(out)[-1]["type"] == "abandoned"


def test_ctrl_c_of_the_council_ends_the_watch_with_130(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    writer = start(tmp_path, "demo", "--id", "stop", "--pace", "30")
    procs.append(writer)
    path = run_file(tmp_path, "stop")
    wait_for(lambda: path.exists() and '"running"' in path.read_text(), what="running voices")
    watcher = start(tmp_path, "watch", "stop", "--json")
    procs.append(watcher)
    time.sleep(1.0)
    writer.send_signal(signal.SIGINT)
    assert finish(writer)[0] == 130
    code, out, _ = finish(watcher)
    assert code == 130
    assert records(out)[-1] == {
        "type": "finished",
        "run": "stop",
        "status": "cancelled",
        "decorrelation": None,
        "voices_valid": 0,
        "exit_code": 130,
    }


def test_a_run_that_gathered_nothing_exits_1(tmp_path: Path) -> None:
    # A real council with no AI CLI and no subagent: every slot drops.
    council = start(tmp_path, "Should we shard?", "--id", "empty", "--n", "2")
    assert finish(council)[0] == 1
    code, out, _ = finish(start(tmp_path, "watch", "empty"))
    assert code == 1
    assert "run empty no_verdict: NO_DECORRELATION, 0/2 valid, 2 dropped (exit 1)" in out


def test_a_finished_run_prints_its_history_and_exits_at_once(tmp_path: Path) -> None:
    example = EXAMPLES / "run-orders-shard-critique.json"
    code, out, _ = finish(start(tmp_path, "watch", str(example), "--json"))
    assert code == 0
    lines = records(out)
    recorded = json.loads(example.read_text())["events"]
    assert [r["seq"] for r in lines if r["type"] == "event"] == [e["seq"] for e in recorded]
    assert lines[-1]["type"] == "finished"


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_skeleton_left_by_a_dead_process_is_abandoned_at_once(tmp_path: Path) -> None:
    skeleton = json.loads((EXAMPLES / "run-orders-shard-critique.skeleton.json").read_text())
    skeleton["orchestrator"].update(pid=_dead_pid(), host=socket.gethostname())
    path = tmp_path / "left.json"
    path.write_text(json.dumps(skeleton))
    started = time.monotonic()
    code, out, _ = finish(start(tmp_path, "watch", str(path)))
    assert code == 75
    assert "abandoned" in out.splitlines()[-1]
    assert time.monotonic() - started < 15


def test_ctrl_c_stops_watching_with_130(tmp_path: Path) -> None:
    watcher = start(tmp_path, "watch", "nothing-yet")
    time.sleep(1.0)
    watcher.send_signal(signal.SIGINT)
    code, _, err = finish(watcher)
    assert code == 130
    assert "stopped watching" in err and "Traceback" not in err


def test_a_file_that_is_not_a_run_is_one_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"hello": "world"}')
    code, _, err = finish(start(tmp_path, "watch", str(bogus)))
    assert code == 2
    [line] = err.strip().splitlines()
    assert "is not a council run file" in line


def test_unsafe_run_ids_never_touch_the_file_system(tmp_path: Path) -> None:
    code, _, err = finish(start(tmp_path, "watch", "..", "--wait", "1"))
    assert code == 2
    assert "not a safe file name" in err


def _replay_writer(path: Path, *, heartbeat_age_s: float = 0.0) -> tuple[Any, Any]:
    """This test process as the orchestrator: the real recorder, our own live pid."""
    import datetime as dt

    from rune_council.core.contract import CouncilResult
    from rune_council.recorder import RunRecorder

    doc = json.loads((EXAMPLES / "run-orders-shard-critique.skeleton.json").read_text())
    beat = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=heartbeat_age_s)
    doc["orchestrator"] = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "heartbeat_at": beat.isoformat(),
    }
    doc["events"] = []
    result = CouncilResult.model_validate(doc)
    recorder = RunRecorder(path)
    recorder.write(result)
    return result, recorder


def test_a_burst_of_writes_is_reported_whole_and_once(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    from rune_council.core.contract import RunEvent

    path = tmp_path / "burst.json"
    result, recorder = _replay_writer(path)
    watcher = start(tmp_path, "watch", str(path), "--json")
    procs.append(watcher)
    time.sleep(1.0)
    for seq in range(1, 121):  # as fast as the recorder can go: many writes per notification
        voice = result.voices[seq % 3]
        voice.status = "running" if seq % 2 else "queued"
        result.events.append(
            RunEvent(
                seq=seq,
                at=result.started_at,
                kind="voice.status",
                voice_id=voice.id,
                status=voice.status,
                detail=f"step {seq}",
            )
        )
        recorder.write(result)
    result.status = "complete"
    result.voices_valid = 1
    recorder.write(result)
    code, out, err = finish(watcher)
    assert code == 0, err
    assert [r["seq"] for r in records(out) if r["type"] == "event"] == list(range(1, 121))


def test_a_late_heartbeat_from_a_live_writer_is_a_warning_not_the_end(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "slow.json"
    result, recorder = _replay_writer(path, heartbeat_age_s=60)
    watcher = start(tmp_path, "watch", str(path), "--json")
    procs.append(watcher)
    time.sleep(2.0)
    assert watcher.poll() is None, "a live writer's run was given up on"
    result.status = "complete"
    result.voices_valid = 2
    recorder.write(result)
    code, out, _ = finish(watcher)
    assert code == 0
    kinds = [r["type"] for r in records(out)]
    assert kinds.count("stalled") == 1
    stalled = next(r for r in records(out) if r["type"] == "stalled")
    assert re.search(r"no heartbeat for 6\d s", stalled["detail"]), stalled
    assert f"process {os.getpid()} is running" in stalled["detail"]
    assert kinds[-1] == "finished"
