"""Descendants seen while a voice runs are killed with it, even once nothing else connects
them to it: voices running together are watched by one tracker, and each is still seen."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rune_council.runtimes.process import ProcessResult, run_process
from tests.helpers import running

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

# The voice forks a helper and answers after 0.9 s. The helper waits 0.5 s (the tracker's
# first look, at 0.25 s, sees it as the voice's child), then leaves the voice's session and
# replaces itself with a program whose environment is empty and whose output goes nowhere:
# no marker, no group, no pipe of the voice's, and once the voice exits no parent chain lead
# back to it. Only having been seen does.
VOICE = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(0.5)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(60)"], {})
with open(sys.argv[1], "a") as fh:
    fh.write(f"{pid}\\n")
time.sleep(0.9)
print("answer")
"""


def test_helpers_that_shed_every_tie_to_their_voice_are_still_killed(tmp_path: Path) -> None:
    files = [tmp_path / f"helper-{i}.txt" for i in range(3)]

    async def stage() -> list[ProcessResult]:
        async def voice(i: int) -> ProcessResult:
            await asyncio.sleep(0.1 * i)  # started apart, watched by the same tracker
            return await run_process(
                [sys.executable, "-S", "-c", VOICE, str(files[i])],
                stdin=b"",
                env={"PATH": os.environ.get("PATH", os.defpath)},
                timeout_s=20,
            )

        return await asyncio.gather(*(voice(i) for i in range(3)))

    try:
        results = asyncio.run(stage())
        helpers = [int(f.read_text().split()[0]) for f in files]
        assert [r.stdout for r in results] == [b"answer\n"] * 3, [r.detail for r in results]
        time.sleep(0.2)
        alive = [pid for pid in helpers if running(pid)]
        assert not alive, f"helpers outlived their voices: {alive}"
    finally:
        for f in files:
            if f.exists():
                for pid in map(int, f.read_text().split()):
                    if running(pid):
                        os.kill(pid, signal.SIGKILL)
