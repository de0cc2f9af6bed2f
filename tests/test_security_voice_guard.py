"""A council killed outright takes its voices' whole process groups along, through the guard.

Voices are started without a ``preexec_fn`` once the council's voice guard is running, so the
guard, a separate process, is what ends them when the council dies: every test here kills a
real council process with SIGKILL and counts what is left of real process trees.
"""

from __future__ import annotations

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

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

FAKE_CLI = Path(__file__).parent / "fakes" / "fake_cli.py"
ROOT = Path(__file__).resolve().parents[1]

# A first, instant voice lets the guard come up; the second is started under its watch.
DRIVER = textwrap.dedent(
    """
    import asyncio, sys
    from rune_council.runtimes import lineage
    from rune_council.runtimes.process import run_process

    async def main():
        argv = [sys.executable, "-S", sys.argv[2]]
        env = eval(sys.argv[3])
        with lineage.run_marker(sys.argv[1]):
            first = {**env, "FAKE_MODE": "answer", "FAKE_SLEEP_S": "0"}
            await run_process(argv, stdin=b"q", env=first, timeout_s=60)
            for _ in range(200):
                if lineage.child_setup() is None:
                    break
                await asyncio.sleep(0.02)
            print("guarded" if lineage.child_setup() is None else "unguarded", flush=True)
            await run_process(argv, stdin=b"q", env=env, timeout_s=600)

    asyncio.run(main())
    """
)


def _pids(pid_file: Path) -> dict[str, int]:
    if not pid_file.exists():
        return {}
    rows = (line.split() for line in pid_file.read_text().splitlines() if line)
    return {role: int(pid) for role, pid in rows}


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until(check: object, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(check())  # type: ignore[operator]


def _council(tmp_path: Path, marker: str, **fake: object) -> tuple[subprocess.Popen[str], Path]:
    pid_file = tmp_path / "pids"
    env = {"PATH": os.environ.get("PATH", os.defpath), "FAKE_PID_FILE": str(pid_file)}
    env.update({k: str(v) for k, v in fake.items()})
    council = subprocess.Popen(
        [sys.executable, "-c", DRIVER, marker, str(FAKE_CLI), repr(env)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    return council, pid_file


def test_a_sigkilled_council_leaves_no_process_of_its_voice_group_running(
    tmp_path: Path,
) -> None:
    # The grandchild stays in the voice's group but is no child of the council: the
    # parent-death signal alone never reached it.
    marker = lineage.new_run_marker()
    council, pid_file = _council(tmp_path, marker, FAKE_MODE="fork_grandchild", FAKE_SLEEP_S=600)
    try:
        assert council.stdout is not None
        assert council.stdout.readline().strip() == "guarded"
        assert _wait_until(lambda: {"child", "grandchild"} <= set(_pids(pid_file)), 15)
        pids = _pids(pid_file)
        assert all(_running(pid) for pid in pids.values()), pids
        os.kill(council.pid, signal.SIGKILL)
        council.wait(5)
        killed = time.monotonic()
        assert _wait_until(lambda: not any(_running(p) for p in pids.values()), 5), pids
        # Within a second on a quiet machine; the margin is for a busy one.
        assert time.monotonic() - killed < 5
        assert lineage.marked_processes(f"{marker}.", prefix=True) == []
    finally:
        if council.poll() is None:
            council.kill()
        lineage.kill_marked(marker)
