"""Telling a live run from an abandoned one, with real processes behind the recorded pids."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from rune_council.core.contract import CouncilResult
from rune_council.runs import REMOTE_STALE_AFTER_S, liveness

ROOT = Path(__file__).resolve().parents[1]
SKELETON = ROOT / ".rune-example" / "council" / "run-orders-shard-critique.skeleton.json"
HERE = socket.gethostname()


def running_run(pid: int, host: str, started: dt.datetime, beat: dt.datetime) -> CouncilResult:
    doc = json.loads(SKELETON.read_text())
    doc["orchestrator"] = {
        "pid": pid,
        "host": host,
        "started_at": started.isoformat(),
        "heartbeat_at": beat.isoformat(),
    }
    return CouncilResult.model_validate(doc)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def test_a_running_orchestrator_on_this_host_is_alive() -> None:
    state = liveness(running_run(os.getpid(), HERE, now() - dt.timedelta(seconds=1), now()))
    assert state.state == "alive"


def test_an_exited_orchestrator_on_this_host_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = now()
    child.wait()
    state = liveness(running_run(child.pid, HERE, started, started))
    assert state.state == "gone" and str(child.pid) in state.detail


def test_an_exited_but_unreaped_orchestrator_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = now()
    try:
        # Let it exit without reaping it: it stays in the process table as a zombie.
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "child did not exit"
            time.sleep(0.01)
        state = liveness(running_run(child.pid, HERE, started, started))
        assert state.state == "gone" and "exited" in state.detail
    finally:
        child.wait()


def test_a_pid_now_held_by_a_younger_process_is_gone() -> None:
    # Our own process started long after this pretend run: the pid was reused.
    long_ago = now() - dt.timedelta(days=400)
    state = liveness(running_run(os.getpid(), HERE, long_ago, long_ago))
    assert state.state == "gone" and "another process" in state.detail


def test_another_host_counts_as_gone_only_after_many_missed_heartbeats() -> None:
    started = now() - dt.timedelta(minutes=10)
    fresh = liveness(running_run(1, "elsewhere.invalid", started, now()))
    assert fresh.state == "unknown"
    silent = now() - dt.timedelta(seconds=REMOTE_STALE_AFTER_S + 5)
    stale = liveness(running_run(1, "elsewhere.invalid", started, silent))
    assert stale.state == "gone" and "no heartbeat" in stale.detail


def test_a_finished_run_needs_no_writer() -> None:
    doc = json.loads(SKELETON.read_text())
    doc["status"] = "complete"
    assert liveness(CouncilResult.model_validate(doc)).state == "finished"
