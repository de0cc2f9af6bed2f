"""Nothing a voice starts outlives the council: daemons, a killed council, adopted orphans.

Every test runs the fake CLI as a real process tree and counts what is left with psutil.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from rune_council.runtimes import lineage
from rune_council.runtimes.process import run_process

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

FAKE_CLI = Path(__file__).parent / "fakes" / "fake_cli.py"
FAKE_ARGV = [sys.executable, "-S", str(FAKE_CLI)]
ROOT = Path(__file__).resolve().parents[1]


def _pids(pid_file: Path) -> dict[str, int]:
    if not pid_file.exists():
        return {}
    return {
        role: int(pid)
        for role, pid in (line.split() for line in pid_file.read_text().splitlines() if line)
    }


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until(check: object, timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(check())  # type: ignore[operator]


def _env(pid_file: Path, **extra: object) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath), "FAKE_PID_FILE": str(pid_file)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def test_double_forked_setsid_daemon_with_closed_stdio_is_killed(tmp_path: Path) -> None:
    # The voice answers at once; its helper has already become an orphan in its own session
    # with no pipe open, before any descendant scan could see it.
    pid_file = tmp_path / "pids"
    env = _env(
        pid_file,
        FAKE_MODE="fork_grandchild",
        FAKE_GRANDCHILD_DOUBLE_FORK=1,
        FAKE_GRANDCHILD_SETSID=1,
        FAKE_GRANDCHILD_CLOSE_STDIO=1,
    )
    marker = lineage.new_run_marker()

    async def go() -> None:
        with lineage.run_marker(marker):
            result = await run_process(FAKE_ARGV, stdin=b"q", env=env, timeout_s=10)
        assert result.outcome == "ok"
        assert result.stdout == b"fake answer\n"

    asyncio.run(go())
    pids = _pids(pid_file)
    assert {"child", "grandchild", "daemon"} <= set(pids)
    assert not any(_running(pid) for pid in pids.values()), pids
    assert lineage.marked_processes(f"{marker}.", prefix=True) == []


def test_daemon_is_reparented_to_the_council_while_it_runs(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    env = _env(
        pid_file,
        FAKE_MODE="fork_grandchild",
        FAKE_GRANDCHILD_DOUBLE_FORK=1,
        FAKE_GRANDCHILD_SETSID=1,
        FAKE_GRANDCHILD_CLOSE_STDIO=1,
        FAKE_SLEEP_S=30,
    )
    seen_parent: list[int] = []

    async def go() -> None:
        task = asyncio.create_task(run_process(FAKE_ARGV, stdin=b"q", env=env, timeout_s=30))
        for _ in range(100):
            await asyncio.sleep(0.05)
            daemon = _pids(pid_file).get("daemon")
            if daemon and _running(daemon):
                seen_parent.append(psutil.Process(daemon).ppid())
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert lineage.ensure_subreaper()
    # As subreaper the council, not init, inherits the orphan, so it stays in reach.
    assert seen_parent == [os.getpid()]
    assert not any(_running(pid) for pid in _pids(pid_file).values())


DRIVER = textwrap.dedent(
    """
    import asyncio, os, sys
    from rune_council.runtimes import lineage
    from rune_council.runtimes.process import run_process

    async def main():
        with lineage.run_marker(sys.argv[1]):
            await run_process(
                [sys.executable, "-S", sys.argv[2]], stdin=b"q", env=eval(sys.argv[3]),
                timeout_s=600,
            )

    asyncio.run(main())
    """
)


def test_voices_die_with_a_sigkilled_council_and_a_later_sweep_finds_the_rest(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pids"
    env = _env(
        pid_file,
        FAKE_MODE="fork_grandchild",
        FAKE_GRANDCHILD_DOUBLE_FORK=1,
        FAKE_GRANDCHILD_SETSID=1,
        FAKE_GRANDCHILD_CLOSE_STDIO=1,
        FAKE_SLEEP_S=600,
    )
    marker = lineage.new_run_marker()
    council = subprocess.Popen(
        [sys.executable, "-c", DRIVER, marker, str(FAKE_CLI), repr(env)], cwd=ROOT
    )
    try:
        assert _wait_until(lambda: {"child", "daemon"} <= set(_pids(pid_file)), 15)
        pids = _pids(pid_file)
        assert _running(pids["child"]) and _running(pids["daemon"])
        os.kill(council.pid, signal.SIGKILL)
        council.wait(5)
        # The parent-death signal takes the voice itself down with the council.
        assert _wait_until(lambda: not _running(pids["child"]), 5)
        # A daemon has no parent-death signal; the marker it inherited still names the run.
        survivors = lineage.marked_processes(f"{marker}.", prefix=True)
        assert [p.pid for p in survivors] == [pids["daemon"]]
        assert lineage.kill_marked(marker) == 1
        assert _wait_until(lambda: not _running(pids["daemon"]), 5)
        assert lineage.marked_processes(f"{marker}.", prefix=True) == []
    finally:
        if council.poll() is None:
            council.kill()
        lineage.kill_marked(marker)


def _abandoned_run(tmp_path: Path, marker: str, voice: subprocess.Popen[bytes]) -> Path:
    """A run file whose council died without a word, with its voice still running."""
    import datetime as dt
    import json
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    example = next((ROOT / ".rune-example" / "council").glob("run-*.json"))
    doc = json.loads(example.read_text())
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).isoformat()
    doc.update(id="gone", status="running", started_at=started, finished_at=None)
    doc["orchestrator"] = {
        "pid": dead.pid,
        "host": socket.gethostname(),
        "started_at": started,
        "heartbeat_at": started,
        "voice_marker": marker,
        "voice_processes": [{"pid": voice.pid, "started": psutil.Process(voice.pid).create_time()}],
    }
    path = tmp_path / "council" / "run-gone.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return path


def test_the_next_command_kills_what_an_abandoned_run_left_running(tmp_path: Path) -> None:
    from rune_council.runs import summarise

    marker = lineage.new_run_marker()
    env = {**os.environ, lineage.MARKER_VAR: f"{marker}.1"}
    # The recorded voice, and a helper that detached from it but kept the marker.
    voice = subprocess.Popen(["sleep", "600"], env=env)
    helper = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "600"])  # same user, not the run's
    try:
        path = _abandoned_run(tmp_path, marker, voice)
        row = summarise(path)
        assert row.status == "abandoned"
        assert voice.wait(5) == -signal.SIGKILL
        assert helper.wait(5) == -signal.SIGKILL
        assert bystander.poll() is None
        assert lineage.marked_processes(f"{marker}.", prefix=True) == []
    finally:
        for proc in (voice, helper, bystander):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_reused_pid_is_not_killed(tmp_path: Path) -> None:
    from rune_council.runs import summarise

    stranger = subprocess.Popen(["sleep", "600"])  # no marker, start time will not match
    try:
        path = _abandoned_run(tmp_path, lineage.new_run_marker(), stranger)
        doc = __import__("json").loads(path.read_text())
        doc["orchestrator"]["voice_processes"][0]["started"] -= 3600
        path.write_text(__import__("json").dumps(doc))
        assert summarise(path).status == "abandoned"
        time.sleep(0.2)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
