"""Every way ``rune council`` ends cleans up; one run id has one writer; odd files are refused.

Each test runs the real command with fake CLIs as real processes, then counts what is left
with psutil: processes the fakes recorded, processes carrying a voice marker, and the
voices' directories (every root they may be made in is pinned inside the test's TMPDIR).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rune_council.runtimes import lineage
from tests import voice_dirs
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

Q = "Should we shard the orders table?"
GOOD = answer(
    Q, "NO", [claim("No rollback", ref="plan.md:6", quote="No rollback step is defined.")]
)


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.pids = tmp / "pids"
        self.scratch = tmp / "scratch"
        self.scratch.mkdir()
        (tmp / "plan.md").write_text(PLAN)
        self.env = {
            "PATH": path_with(self.bin),
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            **voice_dirs.pinned_env(self.scratch),
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        }
        if "PYTHONPATH" in os.environ:  # a checkout run without installing it
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    def fake(self, name: str, **settings: object) -> None:
        settings.setdefault("answer", GOOD)
        install_fake(self.bin, name, pid_file=self.pids, **settings)  # type: ignore[arg-type]

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "rune_council.cli", "council", *args],
            cwd=self.tmp,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def recorded(self) -> list[int]:
        if not self.pids.exists():
            return []
        return [int(line.split()[1]) for line in self.pids.read_text().splitlines() if line]

    def wait_for_voices(self, count: int, timeout: float = 40) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self.recorded()) >= count:
                time.sleep(0.3)  # let every voice settle into its sleep
                return
            time.sleep(0.05)
        raise AssertionError(f"only {self.recorded()} started")

    def alive(self) -> list[int]:
        left = []
        for pid in self.recorded():
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.NoSuchProcess:
                continue
        return left

    def marked(self) -> list[psutil.Process]:
        run = self.run_file("x").parent
        found = []
        for path in run.glob("run-*.json"):
            marker = json.loads(path.read_text()).get("orchestrator", {}).get("voice_marker")
            if marker:
                found += lineage.marked_processes(f"{marker}.", prefix=True)
        return found

    def run_file(self, run_id: str) -> Path:
        return self.tmp / ".rune" / "council" / f"run-{run_id}.json"

    def status(self, run_id: str) -> str:
        return str(json.loads(self.run_file(run_id).read_text())["status"])

    def nothing_left(self) -> None:
        end = time.monotonic() + 5
        while (self.alive() or self.marked()) and time.monotonic() < end:
            time.sleep(0.1)
        assert self.alive() == [] and self.marked() == []
        # Every directory a voice was given (working, prompt files, status probe) removed.
        assert voice_dirs.leftovers(self.scratch) == []


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_cancel_like_ctrl_c(rig: Rig, sig: signal.Signals, code: int) -> None:
    rig.fake("claude", mode="sleep")
    rig.fake("codex", mode="ignore_sigterm")
    rig.fake(
        "gemini",
        mode="fork_grandchild",
        grandchild_double_fork=1,
        grandchild_setsid=1,
        grandchild_close_stdio=1,
        sleep_s=600,
    )
    council = rig.start(Q, "--artifact", "plan.md", "--id", "ended")
    rig.wait_for_voices(4)  # three voices and the daemon one of them started
    council.send_signal(sig)
    _, err = council.communicate(timeout=60)
    assert council.returncode == code, err
    assert f"cancelled by {sig.name}" in err and "Traceback" not in err
    assert rig.status("ended") == "cancelled"
    rig.nothing_left()


def test_sigkill_takes_the_voices_along_and_the_next_command_sweeps_the_rest(rig: Rig) -> None:
    rig.fake("claude", mode="sleep")
    rig.fake(
        "codex",
        mode="fork_grandchild",
        grandchild_double_fork=1,
        grandchild_setsid=1,
        grandchild_close_stdio=1,
        sleep_s=600,
    )
    council = rig.start(Q, "--artifact", "plan.md", "--id", "killed", "--n", "2")
    rig.wait_for_voices(3)  # two voices and the daemon
    time.sleep(5.5)  # one heartbeat, so the run file lists the running voices
    recorded = json.loads(rig.run_file("killed").read_text())["orchestrator"]
    assert recorded["voice_marker"]
    assert sorted(p["pid"] for p in recorded["voice_processes"]) == sorted(
        int(line.split()[1]) for line in rig.pids.read_text().splitlines() if line[:5] == "child"
    )
    council.kill()
    council.communicate(timeout=30)
    # The parent-death signal ends both voices; only the daemon, no longer anyone's child,
    # is left for the next command to find.
    time.sleep(1.0)
    assert len(rig.alive()) == 1
    listed = rig.start("list")
    out, err = listed.communicate(timeout=60)
    assert listed.returncode == 0, err
    assert "abandoned" in out
    rig.nothing_left()


def test_the_same_id_twice_at_once_has_one_writer(rig: Rig) -> None:
    for name in ("claude", "codex", "gemini"):
        rig.fake(name, sleep_s=2)
    both = [rig.start(Q, "--artifact", "plan.md", "--id", "once") for _ in range(2)]
    ended = [(c, *c.communicate(timeout=90)) for c in both]
    codes = sorted(c.returncode for c, _, _ in ended)
    assert codes == [0, 2], [e for _, _, e in ended]
    loser_err = next(err for c, _, err in ended if c.returncode == 2)
    assert "in use by another council" in loser_err or "already used" in loser_err
    assert rig.status("once") == "complete"
    assert len(rig.recorded()) == 3  # only the winner started voices


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_an_artifact_that_is_not_a_regular_file_is_one_line_exit_2(rig: Rig, kind: str) -> None:
    rig.fake("claude")
    target = kind
    if kind == "fifo":
        os.mkfifo(rig.tmp / "fifo")
    council = rig.start(Q, "--artifact", target)
    _, err = council.communicate(timeout=60)
    assert council.returncode == 2
    assert "not a regular file" in err and len(err.strip().splitlines()) == 1
    assert rig.recorded() == []
