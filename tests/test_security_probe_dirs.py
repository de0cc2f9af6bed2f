"""A council killed while DETECT probes its CLIs leaves nothing the next council keeps.

DETECT runs before the run file records the council's marker, so a council killed then
(SIGKILL: nothing of its own runs) leaves the empty 0700 directory each probe was given,
and no run file leads a later reader to it. The next council removes such a directory by
the rule an abandoned run's directories are removed with: the exact name shape this
program writes, a real directory of this user's on a handle opened without following a
link, directly in a scratch root; and, since no run file says the council is dead, only
when the directory is older than ``scratch.ABANDONED_AFTER_S`` and no live process carries
its run's marker. Anything else that looks like one stays.

Councils are real ``rune council`` processes with the test suite's fake CLIs; the probe
that is killed is a real process too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from rune_council.core import shapes
from rune_council.runtimes import lineage
from rune_council.runtimes.scratch import ABANDONED_AFTER_S, FALLBACK_PREFIX
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX permissions"),
]

Q = "Should we shard the orders table?"
GOOD = answer(
    Q, "NO", [claim("No rollback", ref="plan.md:6", quote="No rollback step is defined.")]
)
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534
LONG_AGO = 2 * ABANDONED_AFTER_S


def _env(tmp: Path, bin_dir: Path, temp_root: Path) -> dict[str, str]:
    # Every root a probe's directory may get is inside temp_root: the cache named here is
    # below the shared /tmp, so the last resort in temp_root is where they go.
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp / "home"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(temp_root),
        "XDG_CACHE_HOME": str(temp_root / "cache"),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _council_argv(run_id: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rune_council.cli",
        "council",
        Q,
        "--artifact",
        "plan.md",
        "--id",
        run_id,
        "--json",
    ]


def _wait_for(check: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _probe_sleeps(bin_dir: Path, started: Path) -> None:
    """A fake claude whose ``--version`` writes its pid, then becomes a long sleep."""
    script = install_fake(bin_dir, "claude", answer=GOOD)
    lines = script.read_text().splitlines(keepends=True)
    [i] = [n for n, line in enumerate(lines) if '"$1" = "--version"' in line]
    lines[i] = f'if [ "$1" = "--version" ]; then echo $$ > "{started}"; exec sleep 300; fi\n'
    script.write_text("".join(lines))


def _shaped(root: Path) -> list[Path]:
    """Entries of ``root`` named as a probe's or voice's directory is."""
    found = []
    for entry in root.iterdir():
        rest = entry.name.removeprefix(shapes.SCRATCH_PREFIX)
        if shapes.is_scratch_dir_name(entry.name, rest.split(".", 1)[0]):
            found.append(entry)
    return sorted(found)


def _age(path: Path) -> None:
    then = time.time() - LONG_AGO
    os.utime(path, (then, then), follow_symlinks=False)


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)


def _killed_mid_detect(tmp: Path, env: dict[str, str]) -> list[Path]:
    """Start a council, SIGKILL it while its claude probe runs; what it left in the root."""
    started = tmp / "probe-started"
    _probe_sleeps(Path(env["PATH"].split(":")[0]), started)
    council = subprocess.Popen(
        _council_argv("killed"),
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: started.exists() and started.read_text().strip(), "the probe")
        probe = psutil.Process(int(started.read_text()))
        assert lineage.MARKER_VAR in probe.environ()  # it is the council's probe
    finally:
        os.kill(council.pid, signal.SIGKILL)
        council.wait(timeout=30)
    # The kernel ends the probe with its council (parent-death signal).
    _wait_for(lambda: not probe.is_running() or probe.status() == "zombie", "the probe to die")
    root = Path(env["TMPDIR"]) / f"{FALLBACK_PREFIX}{os.getuid()}"
    left = _shaped(root)
    assert left, f"the killed council left no probe directory in {root}"
    assert all(p.is_dir() and not p.is_symlink() and not any(p.iterdir()) for p in left)
    assert not (tmp / ".rune" / "council" / "run-killed.json").exists()  # no marker recorded
    return left


def test_a_probe_directory_left_by_a_council_killed_in_detect_is_removed_by_the_next(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "plan.md").write_text(PLAN)
    temp_root = tmp_path / "tmp"
    temp_root.mkdir(mode=0o700)
    left = _killed_mid_detect(tmp_path, _env(tmp_path, tmp_path / "bin-slow", temp_root))
    root = left[0].parent

    # Look-alikes, all as old as the leftover, none of which is this program's to remove.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's own file\n")
    link_run, file_run, shape_run = (lineage.new_run_marker() for _ in range(3))
    fresh_run, live_run = lineage.new_run_marker(), lineage.new_run_marker()
    link = root / f"rune-council-{link_run}.1-abcdefgh"
    link.symlink_to(outside)
    in_temp = temp_root / f"rune-council-{link_run}.2-abcdefgh"
    in_temp.symlink_to(outside)
    plain_file = root / f"rune-council-{file_run}.1-abcdefgh"
    plain_file.write_text("not a directory\n")
    other_shape = root / f"rune-council-{shape_run}.1-toolongtail"
    other_shape.mkdir()
    fresh = root / f"rune-council-{fresh_run}.1-abcdefgh"
    fresh.mkdir()
    in_use = root / f"rune-council-{live_run}.1-abcdefgh"
    in_use.mkdir()
    # A live process still carries in_use's marker: its council may be alive.
    sleepers.append(
        subprocess.Popen(
            ["sleep", "300"], env={"PATH": "/usr/bin:/bin", lineage.MARKER_VAR: f"{live_run}.1"}
        )
    )
    theirs = root / f"rune-council-{lineage.new_run_marker()}.1-abcdefgh"
    if AS_ROOT:
        theirs.mkdir()
        os.chown(theirs, NOBODY, NOBODY)
    for path in [*left, link, in_temp, plain_file, other_shape, in_use, theirs]:
        if path.exists() or path.is_symlink():
            _age(path)
    _wait_for(lambda: lineage.marked_processes(f"{live_run}.1"), "the marked sleep")

    install_fake(tmp_path / "bin", "claude", answer=GOOD)
    install_fake(tmp_path / "bin", "codex", answer=GOOD)
    done = subprocess.run(
        _council_argv("next"),
        cwd=tmp_path,
        env=_env(tmp_path, tmp_path / "bin", temp_root),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr

    assert [p for p in left if p.exists()] == [], "the killed council's probe dir is still there"
    assert link.is_symlink() and in_temp.is_symlink()
    assert (outside / "keep.txt").read_text() == "the user's own file\n"
    assert plain_file.read_text() == "not a directory\n"
    assert other_shape.is_dir() and fresh.is_dir() and in_use.is_dir()
    if AS_ROOT:
        assert theirs.is_dir()
    # And the next council cleaned up after itself: only the look-alikes are left.
    kept = {link, plain_file, fresh, in_use, *([theirs] if AS_ROOT else [])}
    assert set(_shaped(root)) == kept
