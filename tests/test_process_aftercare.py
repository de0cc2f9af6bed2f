"""Voices finished with after their reply (``process.aftercare``): the reply is used at once,
and when the block ends nothing a voice started is running and none of its directories is
left, however the block ends. Every voice is the fake CLI run as a real process tree."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from rune_council.runtimes import lineage
from rune_council.runtimes.process import (
    ProcessResult,
    aftercare,
    make_scratch_dir,
    run_process,
)
from tests.fakes.bin import FAKE_ARGV
from tests.helpers import running

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def _pids(pid_file: Path) -> list[int]:
    if not pid_file.exists():
        return []
    return [int(line.split()[1]) for line in pid_file.read_text().splitlines() if line]


class Voices:
    """Voices that each leave a helper behind, and where they recorded their pids."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.files: list[Path] = []
        self.dirs: list[str] = []
        self.cwds: list[str] = []

    def start(
        self, i: int, *, also: bool = True, ignore_sigterm: bool = False
    ) -> asyncio.Future[ProcessResult]:
        pid_file = self.tmp / f"pids-{i}.txt"
        self.files.append(pid_file)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "FAKE_PID_FILE": str(pid_file),
            "FAKE_MODE": "fork_grandchild",
            # A helper that left the session and closed its output: the reply is whole
            # while it still runs, and only the kill after the reply can find it.
            "FAKE_GRANDCHILD_SETSID": "1",
            "FAKE_GRANDCHILD_CLOSE_STDIO": "1",
            "FAKE_ANSWER": f"answer {i}",
            "FAKE_SLEEP_S": "0.3",
            "FAKE_IGNORE_SIGTERM": "1" if ignore_sigterm else "",
        }
        marker = lineage.next_voice_marker()
        extra = [make_scratch_dir(marker)] if also else []
        self.dirs += extra

        def seen(pid: int) -> None:
            self.cwds.append(os.readlink(f"/proc/{pid}/cwd"))

        return asyncio.ensure_future(
            run_process(
                FAKE_ARGV,
                stdin=b"prompt",
                env=env,
                timeout_s=20,
                marker=marker,
                also_remove=extra,
                on_start=seen,
            )
        )

    def every_pid(self) -> list[int]:
        return [pid for f in self.files for pid in _pids(f)]

    def assert_all_gone(self) -> None:
        pids = self.every_pid()
        assert len(pids) >= 2 * len(self.files), "each voice and its helper record a pid"
        alive = [pid for pid in pids if running(pid)]
        assert not alive, f"still running when the block ended: {alive}"
        left = [d for d in [*self.dirs, *self.cwds] if os.path.exists(d)]
        assert not left, f"directories left: {left}"


@pytest.fixture
def voices(tmp_path: Path) -> Iterator[Voices]:
    made = Voices(tmp_path)
    yield made
    for pid in made.every_pid():  # never leak into the rest of the session
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_every_voice_and_its_helpers_are_gone_when_the_block_ends(voices: Voices) -> None:
    async def council() -> list[ProcessResult]:
        async with aftercare():
            first = await asyncio.gather(*(voices.start(i) for i in range(3)))
            # The next stage starts on the first stage's replies.
            second = await asyncio.gather(*(voices.start(i, also=i % 2 == 0) for i in range(3, 5)))
        return [*first, *second]

    results = asyncio.run(council())
    assert [r.outcome for r in results] == ["ok"] * 5
    assert [r.stdout for r in results] == [f"answer {i}\n".encode() for i in range(5)]
    voices.assert_all_gone()


def test_a_block_cancelled_while_voices_are_finished_with_still_finishes_them(
    voices: Voices,
) -> None:
    replied = asyncio.Event()

    async def council() -> None:
        async with aftercare():
            await asyncio.gather(*(voices.start(i, ignore_sigterm=True) for i in range(3)))
            replied.set()
        # Helpers that ignore SIGTERM keep the block's end waiting out the grace period.

    async def main() -> None:
        task = asyncio.ensure_future(council())
        await replied.wait()
        await asyncio.sleep(0.2)
        assert not task.done(), "the helpers were to hold the block's end for the grace period"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        voices.assert_all_gone()  # by the time the cancellation is through, not later

    asyncio.run(main())


def test_a_block_left_by_an_error_still_finishes_its_voices(voices: Voices) -> None:
    async def council() -> None:
        async with aftercare():
            await asyncio.gather(*(voices.start(i) for i in range(2)))
            raise RuntimeError("the stage after failed")

    with pytest.raises(RuntimeError, match="the stage after failed"):
        asyncio.run(council())
    voices.assert_all_gone()


def test_a_voice_that_times_out_in_the_block_is_killed_before_its_reply(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids.txt"
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "FAKE_PID_FILE": str(pid_file),
        "FAKE_MODE": "fork_grandchild",
        "FAKE_SLEEP_S": "60",
    }

    async def council() -> tuple[ProcessResult, list[int]]:
        async with aftercare():
            result = await run_process(FAKE_ARGV, stdin=b"p", env=env, timeout_s=0.5)
            return result, [pid for pid in _pids(pid_file) if running(pid)]

    result, alive_at_reply = asyncio.run(council())
    assert result.outcome == "timeout"
    assert _pids(pid_file) and not alive_at_reply


def test_one_read_of_the_table_finds_each_tree_as_psutil_sees_it(tmp_path: Path) -> None:
    script = "import os, time\nif os.fork() == 0:\n    time.sleep(30)\ntime.sleep(30)\n"
    roots = [
        psutil.Popen([sys.executable, "-S", "-c", script], start_new_session=True) for _ in range(3)
    ]
    try:
        give_up = time.monotonic() + 10
        while not all(r.children() for r in roots):
            assert time.monotonic() < give_up, "the children never forked"
            time.sleep(0.02)
        queries = [(r.pid, r.pid, None, 0) for r in roots]
        found = lineage.find_lineages(queries)
        for root, pids in zip(roots, found, strict=True):
            expected = {root.pid, *(c.pid for c in root.children(recursive=True))}
            assert set(pids) == expected
        assert found == [lineage.find_lineage(q[0], q[1], None) for q in queries]
    finally:
        for r in roots:
            os.killpg(r.pid, signal.SIGKILL)
            r.wait()
