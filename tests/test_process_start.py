"""How a voice process is started and waited for: its prompt is in its stdin from the start,
whatever the event loop is busy with, and its exit is seen without a thread of its own."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rune_council.runtimes import process
from rune_council.runtimes.process import ProcessResult, run_process
from tests.fakes.bin import FAKE_ARGV

pytestmark = pytest.mark.timeout(60)


# Waits 50 ms, then reads stdin without blocking: "eof N" when the whole input was there
# and closed behind, "waiting N" when stdin was still open with nothing more to read.
READER = """
import os, sys, time
time.sleep(0.05)
os.set_blocking(0, False)
got = 0
try:
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            print("eof", got)
            break
        got += len(chunk)
except BlockingIOError:
    print("waiting", got)
"""


def _env(**extra: object) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    env.update({key: str(value) for key, value in extra.items()})
    return env


def test_the_prompt_is_there_when_the_voice_looks_even_while_the_loop_is_busy() -> None:
    prompt = b"the prompt " * 100

    async def main() -> ProcessResult:
        async def hog() -> None:
            # Whatever else the council does on its loop right after a voice starts (the
            # next voices' starts, a run-file version) must not keep the prompt from it.
            time.sleep(0.5)

        voice = asyncio.ensure_future(
            run_process(
                [sys.executable, "-S", "-c", READER], stdin=prompt, env=_env(), timeout_s=10
            )
        )
        await asyncio.sleep(0)  # the voice starts, then the loop is held for 0.5 s
        await hog()
        return await voice

    result = asyncio.run(main())
    assert result.outcome == "ok", result.detail
    assert result.stdout.decode().split() == ["eof", str(len(prompt))]


@pytest.mark.parametrize("size", [0, 1, 65_535, 65_536, 65_537, 300_000])
def test_a_prompt_of_any_size_arrives_whole(tmp_path: Path, size: int) -> None:
    # Up to a pipe's worth goes in before the child starts, the rest as it reads: the
    # boundary between the two must lose or repeat nothing.
    prompt = bytes((i * 7 + size) % 251 for i in range(size))
    copy = tmp_path / "stdin.bin"
    result = asyncio.run(
        run_process(
            FAKE_ARGV,
            stdin=prompt,
            env=_env(FAKE_MODE="answer", FAKE_STDIN_COPY=copy),
            timeout_s=20,
        )
    )
    assert result.outcome == "ok", result.detail
    assert copy.read_bytes() == prompt


def test_a_running_voice_has_no_thread_of_its_own_and_is_reaped() -> None:
    before = set(threading.enumerate())
    started: list[int] = []

    async def main() -> tuple[ProcessResult, set[threading.Thread]]:
        voice = asyncio.ensure_future(
            run_process(
                FAKE_ARGV,
                stdin=b"p",
                env=_env(FAKE_MODE="answer", FAKE_SLEEP_S=0.4, FAKE_EXIT_CODE=3),
                timeout_s=10,
                on_start=started.append,
            )
        )
        await asyncio.sleep(0.2)
        during = set(threading.enumerate()) - before
        return await voice, during

    result, during = asyncio.run(main())
    assert result.outcome == "exit_nonzero" and result.exit_code == 3, result.detail
    if process._pidfd_works():
        # asyncio's watcher on Python 3.11 waited for each child on a thread of its own.
        assert not during, [t.name for t in during]
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0], os.WNOHANG)  # reaped already: no zombie left behind


def test_a_voice_killed_by_a_signal_reports_it() -> None:
    async def main() -> ProcessResult:
        return await run_process(
            FAKE_ARGV,
            stdin=b"p",
            env=_env(FAKE_MODE="die_mid_answer", FAKE_ANSWER="x" * 100),
            timeout_s=10,
        )

    result = asyncio.run(main())
    assert result.outcome == "exit_nonzero"
    assert result.exit_code == -9 and result.detail == "killed by SIGKILL"


def test_a_voice_that_exits_at_once_is_done_at_once() -> None:
    # Its exit can be seen before the run starts waiting for it; the run must not then
    # wait on to its timeout.
    async def main() -> list[ProcessResult]:
        return await asyncio.gather(
            *(
                run_process(["/bin/sh", "-c", "echo hi"], stdin=b"", env=_env(), timeout_s=30)
                for _ in range(4)
            )
        )

    for result in asyncio.run(main()):
        assert result.outcome == "ok" and result.stdout == b"hi\n", result.detail
        assert result.elapsed_s < 10, result.elapsed_s


def test_a_loop_that_cannot_watch_a_pidfd_has_asyncio_start_and_wait_for_the_voice() -> None:
    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:
            raise NotImplementedError

    started: list[int] = []
    loop = NoReaders()
    try:
        result = loop.run_until_complete(
            run_process(
                FAKE_ARGV,
                stdin=b"p",
                env=_env(FAKE_MODE="answer", FAKE_ANSWER="from asyncio", FAKE_EXIT_CODE=4),
                timeout_s=20,
                on_start=started.append,
            )
        )
    finally:
        loop.close()
    assert result.outcome == "exit_nonzero" and result.exit_code == 4, result.detail
    assert b"from asyncio" in result.stdout
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0], os.WNOHANG)  # reaped: no zombie left behind


# Linux without pidfds (before 5.3) never takes this path: asyncio waits for every voice.
@pytest.mark.skipif(not process._pidfd_works(), reason="platform: no pidfds on this kernel")
def test_a_voice_whose_exit_cannot_be_watched_is_killed_and_reported_not_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = os.pidfd_open
    me = os.getpid()
    spawned: list[int] = []
    marker = tmp_path / "ran-on"

    def no_descriptor_for_children(pid: int, flags: int = 0) -> int:
        if pid != me:
            spawned.append(pid)
            raise OSError(24, "Too many open files")
        return real(pid, flags)

    monkeypatch.setattr(os, "pidfd_open", no_descriptor_for_children)
    # Were it not killed, the voice would write the file after a moment.
    script = f"import time, pathlib; time.sleep(0.5); pathlib.Path({str(marker)!r}).write_text('x')"
    result = asyncio.run(
        run_process([sys.executable, "-S", "-c", script], stdin=b"", env=_env(), timeout_s=20)
    )
    assert result.outcome == "spawn_error", result.detail
    assert "Too many open files" in result.detail
    assert spawned, "the voice was started and its pidfd asked for"
    with pytest.raises(ChildProcessError):
        os.waitpid(spawned[0], os.WNOHANG)  # killed and reaped, not left behind
    time.sleep(0.8)
    assert not marker.exists()
