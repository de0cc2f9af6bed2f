"""run_process against tests/fakes/fake_cli.py run as a real subprocess (nothing is mocked)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rune_council.runtimes.process import ProcessResult, run_process
from tests.fakes.bin import FAKE_ARGV
from tests.helpers import running

pytestmark = pytest.mark.timeout(60)


class StartSpy:
    """An ``on_start`` callback that looks at the child through /proc while it runs."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.cwd: str | None = None
        self.cwd_mode: int | None = None
        self.cmdline: bytes | None = None
        self.environ: bytes | None = None

    def __call__(self, pid: int) -> None:
        self.pid = pid
        self.cwd = os.readlink(f"/proc/{pid}/cwd")
        self.cwd_mode = stat.S_IMODE(os.stat(self.cwd).st_mode)
        self.cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        self.environ = Path(f"/proc/{pid}/environ").read_bytes()


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pid_file = tmp / "pids.txt"

    def env(self, **fake_vars: object) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", os.defpath), "FAKE_PID_FILE": str(self.pid_file)}
        env.update({key: str(value) for key, value in fake_vars.items()})
        return env

    def run(
        self,
        env: dict[str, str],
        *,
        stdin: bytes = b"",
        timeout_s: float = 10.0,
        argv: list[str] | None = None,
        **kwargs: Any,
    ) -> ProcessResult:
        coro = run_process(
            FAKE_ARGV if argv is None else argv,
            stdin=stdin,
            env=env,
            timeout_s=timeout_s,
            **kwargs,
        )
        return asyncio.run(coro)

    def pids(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        if self.pid_file.exists():
            for line in self.pid_file.read_text().splitlines():
                role, pid = line.split()
                found.setdefault(role, []).append(int(pid))
        return found

    def assert_all_gone(self) -> None:
        every = [pid for pids in self.pids().values() for pid in pids]
        assert every, "the fake recorded no pid"
        alive = [pid for pid in every if running(pid)]
        assert not alive, f"still running after run_process returned: {alive}"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    # Never leak processes into the rest of the session, even when a test failed.
    for pids in harness.pids().values():
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


# --- normal runs ---------------------------------------------------------------------------


def test_answer_reads_stdin_and_runs_in_private_temp_dir(cli: Harness) -> None:
    copy = cli.tmp / "stdin.bin"
    spy = StartSpy()
    result = cli.run(
        cli.env(FAKE_MODE="answer", FAKE_STDIN_COPY=copy, FAKE_SLEEP_S=0.2),
        stdin=b"the prompt",
        on_start=spy,
    )
    assert result.outcome == "ok"
    assert result.exit_code == 0
    assert result.stdout == b"fake answer\n"
    assert result.detail == "exited 0"
    assert result.pid == spy.pid == cli.pids()["child"][0]
    assert copy.read_bytes() == b"the prompt"
    assert spy.cwd is not None and spy.cwd != os.getcwd()
    assert spy.cwd_mode == 0o700
    assert not os.path.exists(spy.cwd)
    assert 0.2 <= result.elapsed_s < 5
    cli.assert_all_gone()


@pytest.mark.parametrize(
    ("fmt", "extract"),
    [
        ("text", lambda out: out.decode().rstrip("\n")),
        ("claude-json", lambda out: json.loads(out)["result"]),
        ("gemini-json", lambda out: json.loads(out)["response"]),
        ("codex-jsonl", lambda out: json.loads(out.splitlines()[-1])["item"]["text"]),
    ],
)
def test_fake_formats(cli: Harness, fmt: str, extract: Any) -> None:
    answer = 'Yes: "quoted", ünïcode\nsecond line'
    result = cli.run(cli.env(FAKE_FORMAT=fmt, FAKE_ANSWER=answer))
    assert result.outcome == "ok"
    assert extract(result.stdout) == answer
    cli.assert_all_gone()


def test_echo_stdin_and_answer_file(cli: Harness) -> None:
    prompt = "Is water wet? ünïcode".encode()
    echoed = cli.run(cli.env(FAKE_MODE="echo_stdin", FAKE_FORMAT="claude-json"), stdin=prompt)
    assert json.loads(echoed.stdout)["result"] == prompt.decode()

    answer_file = cli.tmp / "answer.txt"
    answer_file.write_text("from a file", encoding="utf-8")
    filed = cli.run(cli.env(FAKE_ANSWER_FILE=answer_file))
    assert filed.stdout == b"from a file\n"
    cli.assert_all_gone()


def test_nonzero_exit_code(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="exit_code", FAKE_EXIT_CODE=3))
    assert (result.outcome, result.exit_code, result.detail) == ("exit_nonzero", 3, "exited 3")
    cli.assert_all_gone()


def test_crash_keeps_traceback_in_stderr(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="crash"), stdin=b"prompt")
    assert result.outcome == "exit_nonzero"
    assert result.exit_code == 1
    assert b"RuntimeError: fake_cli crashed on purpose" in result.stderr
    cli.assert_all_gone()


def test_death_by_signal_mid_answer_keeps_partial_output(cli: Harness) -> None:
    answer = "a" * 200
    result = cli.run(cli.env(FAKE_MODE="die_mid_answer", FAKE_ANSWER=answer), stdin=b"prompt")
    assert result.outcome == "exit_nonzero"
    assert result.exit_code == -signal.SIGKILL
    assert result.detail == "killed by SIGKILL"
    assert result.stdout and (answer + "\n").encode().startswith(result.stdout)
    assert len(result.stdout) < len(answer)
    cli.assert_all_gone()


def test_garbage_bytes_pass_through_untouched(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="garbage"))
    assert result.outcome == "ok"
    assert b"\xff\xfe{{not json\x80" in result.stdout
    cli.assert_all_gone()


def test_silent_child(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="silent"), stdin=b"prompt")
    assert (result.outcome, result.stdout, result.stderr) == ("ok", b"", b"")
    cli.assert_all_gone()


# --- stdin -----------------------------------------------------------------------------------


def test_slow_stdin_reader_that_writes_a_lot_does_not_deadlock(cli: Harness) -> None:
    prompt = bytes(range(256)) * 2048  # 512 KiB, far more than a pipe buffer
    copy = cli.tmp / "stdin.bin"
    result = cli.run(
        cli.env(FAKE_MODE="slow_stdin", FAKE_STDIN_COPY=copy), stdin=prompt, timeout_s=20
    )
    assert result.outcome == "ok", result.detail
    assert copy.read_bytes() == prompt
    # At least 8 KiB of stdout per 4 KiB read: about 1 MB, so both directions overflow
    # their pipes many times over while the prompt is still being written.
    assert len(result.stdout) >= 8192 * (len(prompt) // 4096)
    assert result.stdout.endswith(b"fake answer\n")
    assert len(result.stderr) == 64_000  # the default tail limit
    cli.assert_all_gone()


@pytest.mark.parametrize(
    "fake_vars",
    [
        {"FAKE_MODE": "exit_code"},  # exits at once, never reads
        {"FAKE_MODE": "sleep", "FAKE_SLEEP_S": "0.3"},  # exits later, never reads
    ],
)
def test_child_that_never_reads_stdin_is_not_an_error(
    cli: Harness, fake_vars: dict[str, str]
) -> None:
    result = cli.run(cli.env(**fake_vars), stdin=b"p" * 4_000_000)
    assert result.outcome == "ok", result.detail
    assert result.elapsed_s < 5
    cli.assert_all_gone()


# --- timeouts and process trees ------------------------------------------------------------


def test_timeout_kills_child_and_grandchild(cli: Harness) -> None:
    spy = StartSpy()
    result = cli.run(
        cli.env(FAKE_MODE="fork_grandchild", FAKE_SLEEP_S=60),
        timeout_s=0.7,
        on_start=spy,
    )
    assert result.outcome == "timeout"
    assert result.exit_code is None
    assert result.detail == "timed out after 0.7 s; process tree killed"
    assert 0.7 <= result.elapsed_s < 4
    assert "grandchild" in cli.pids()
    cli.assert_all_gone()
    assert spy.cwd is not None and not os.path.exists(spy.cwd)


def test_child_ignoring_sigterm_still_dies(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="ignore_sigterm"), timeout_s=0.5, kill_grace_s=0.3)
    assert result.outcome == "timeout"
    assert result.elapsed_s >= 0.5 + 0.3
    cli.assert_all_gone()


def test_grandchild_ignoring_sigterm_still_dies(cli: Harness) -> None:
    result = cli.run(
        cli.env(FAKE_MODE="fork_grandchild", FAKE_SLEEP_S=60, FAKE_IGNORE_SIGTERM=1),
        timeout_s=0.5,
        kill_grace_s=0.3,
    )
    assert result.outcome == "timeout"
    assert "grandchild" in cli.pids()
    cli.assert_all_gone()


def test_timeout_also_kills_a_grandchild_that_left_the_process_group(cli: Harness) -> None:
    env = cli.env(
        FAKE_MODE="fork_grandchild",
        FAKE_SLEEP_S=60,
        FAKE_GRANDCHILD_SETSID=1,
        FAKE_GRANDCHILD_CLOSE_STDIO=1,
    )
    result = cli.run(env, timeout_s=0.5)
    assert result.outcome == "timeout"
    assert "grandchild" in cli.pids()
    cli.assert_all_gone()


def test_grandchild_holding_stdout_after_exit_does_not_hang(cli: Harness) -> None:
    result = cli.run(cli.env(FAKE_MODE="fork_grandchild"), stdin=b"prompt", timeout_s=10)
    assert result.outcome == "ok"
    assert result.exit_code == 0
    assert result.stdout == b"fake answer\n"
    assert result.detail.startswith("exited 0; leftover processes")
    assert result.elapsed_s < 3
    assert "grandchild" in cli.pids()
    cli.assert_all_gone()


def test_grandchild_that_left_the_session_but_holds_stdout_is_killed(cli: Harness) -> None:
    env = cli.env(FAKE_MODE="fork_grandchild", FAKE_GRANDCHILD_SETSID=1, FAKE_EXIT_CODE=2)
    result = cli.run(env, stdin=b"prompt", timeout_s=10)
    assert result.outcome == "exit_nonzero"
    assert result.exit_code == 2
    assert result.stdout == b"fake answer\n"
    assert result.elapsed_s < 4
    cli.assert_all_gone()


def test_detached_daemon_started_during_the_run_is_killed_after_normal_exit(
    cli: Harness,
) -> None:
    # It leaves the session and closes stdio, so only having been seen as a descendant
    # while the child was alive connects it to the run.
    env = cli.env(
        FAKE_MODE="fork_grandchild",
        FAKE_GRANDCHILD_SETSID=1,
        FAKE_GRANDCHILD_CLOSE_STDIO=1,
        FAKE_SLEEP_S=0.7,
    )
    result = cli.run(env, stdin=b"prompt", timeout_s=10)
    assert result.outcome == "ok"
    assert result.stdout == b"fake answer\n"
    cli.assert_all_gone()


# --- output limits ---------------------------------------------------------------------------


def test_stdout_flood_is_cut_off_with_bounded_memory(cli: Harness) -> None:
    cap = 1_000_000
    tracemalloc.start()
    try:
        result = cli.run(
            cli.env(FAKE_MODE="flood", FAKE_FLOOD_BYTES=100_000_000), max_stdout=cap, timeout_s=20
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.outcome == "too_large"
    assert result.exit_code is None
    assert result.detail == f"stdout exceeded {cap} bytes; process tree killed"
    assert len(result.stdout) == cap
    assert peak < 8 * cap, f"peak traced memory {peak} bytes for a {cap} byte cap"
    assert result.elapsed_s < 10
    cli.assert_all_gone()


def test_output_exactly_at_the_cap_is_fine_one_more_byte_is_not(cli: Harness) -> None:
    answer = "z" * 999  # 1000 bytes with the newline
    at_cap = cli.run(cli.env(FAKE_ANSWER=answer), max_stdout=1000)
    assert at_cap.outcome == "ok"
    assert len(at_cap.stdout) == 1000
    over = cli.run(cli.env(FAKE_ANSWER=answer), max_stdout=999)
    assert over.outcome == "too_large"
    assert len(over.stdout) == 999
    cli.assert_all_gone()


def test_stderr_keeps_only_the_tail(cli: Harness) -> None:
    env = cli.env(
        FAKE_MODE="flood",
        FAKE_FLOOD_STREAM="stderr",
        FAKE_FLOOD_BYTES=1_000_000,
        FAKE_ANSWER="THE END",
    )
    result = cli.run(env, max_stderr=10_000)
    assert result.outcome == "ok"
    assert result.stdout == b""
    assert len(result.stderr) == 10_000
    assert result.stderr.endswith(b"xxxTHE END\n")
    cli.assert_all_gone()


def test_parallel_runs_keep_their_streams_apart(cli: Harness) -> None:
    async def scenario() -> list[ProcessResult]:
        runs = [
            run_process(
                FAKE_ARGV,
                stdin=f"prompt {i}".encode() * 10_000,
                env=cli.env(FAKE_MODE="echo_stdin"),
                timeout_s=10,
            )
            for i in range(4)
        ]
        return await asyncio.gather(*runs)

    for i, result in enumerate(asyncio.run(scenario())):
        assert result.outcome == "ok"
        assert result.stdout == f"prompt {i}".encode() * 10_000 + b"\n"
    cli.assert_all_gone()


# --- cancellation ------------------------------------------------------------------------------


def test_cancellation_kills_tree_removes_cwd_and_reraises(cli: Harness) -> None:
    spy = StartSpy()

    async def scenario() -> None:
        task = asyncio.create_task(
            run_process(
                FAKE_ARGV,
                stdin=b"prompt",
                env=cli.env(FAKE_MODE="fork_grandchild", FAKE_SLEEP_S=60),
                timeout_s=30,
                on_start=spy,
            )
        )
        give_up = time.monotonic() + 10
        while "grandchild" not in cli.pids():
            assert time.monotonic() < give_up, "the fake never forked"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    cli.assert_all_gone()
    assert spy.cwd is not None and not os.path.exists(spy.cwd)


def test_exception_from_on_start_propagates_after_cleanup(cli: Harness) -> None:
    seen: list[int] = []

    def explode(pid: int) -> None:
        seen.append(pid)
        raise RuntimeError(f"refusing pid {pid}")

    with pytest.raises(RuntimeError, match="refusing pid"):
        cli.run(cli.env(FAKE_MODE="sleep"), on_start=explode)
    assert len(seen) == 1
    assert not running(seen[0])


# --- spawn failures -------------------------------------------------------------------------------


def _spawn_failure_cases(tmp: Path) -> list[tuple[list[str], str]]:
    not_executable = tmp / "not_executable"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    not_executable.chmod(0o600)
    bad_format = tmp / "bad_format"
    bad_format.write_bytes(b"\x00\x01\x02 not a program")
    bad_format.chmod(0o700)
    return [
        ([str(tmp / "missing-cli")], f"executable not found: {tmp / 'missing-cli'}"),
        (["rune-council-no-such-cli-on-path"], "executable not found: rune-council-no-such"),
        ([str(not_executable)], f"permission denied: {not_executable}"),
        ([str(tmp)], f"permission denied: {tmp}"),
        ([str(bad_format)], f"could not start {bad_format}: "),
        (["bad\0name"], "invalid command line or environment"),
        ([], "empty argv"),
    ]


def test_spawn_failures_are_results_not_exceptions(cli: Harness) -> None:
    for argv, expected in _spawn_failure_cases(cli.tmp):
        result = cli.run(cli.env(), argv=argv)
        assert result.outcome == "spawn_error", argv
        assert result.detail.startswith(expected), (argv, result.detail)
        assert (result.exit_code, result.pid, result.stdout) == (None, None, b"")


def test_missing_working_directory_is_a_spawn_error(cli: Harness) -> None:
    missing = cli.tmp / "no-such-dir"
    result = cli.run(cli.env(), cwd=missing)
    assert result.outcome == "spawn_error"
    assert result.detail.startswith(f"working directory unusable: {missing}")


# --- what the child gets ------------------------------------------------------------------------


def test_prompt_travels_on_stdin_only(cli: Harness) -> None:
    prompt = b"SECRET-PROMPT-MARKER-4711"
    spy = StartSpy()
    result = cli.run(cli.env(FAKE_MODE="echo_stdin", FAKE_SLEEP_S=0.2), stdin=prompt, on_start=spy)
    assert result.stdout == prompt + b"\n"
    assert spy.cmdline is not None and spy.environ is not None
    assert spy.cmdline.split(b"\0")[:-1] == [os.fsencode(a) for a in FAKE_ARGV]
    assert prompt not in spy.cmdline
    assert prompt not in spy.environ
    cli.assert_all_gone()


def test_environment_is_exactly_the_one_given_plus_the_lineage_marker(
    cli: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNE_COUNCIL_MUST_NOT_LEAK", "1")
    env = cli.env(FAKE_MODE="answer", FAKE_SLEEP_S=0.2, EXTRA="value with spaces")
    spy = StartSpy()
    cli.run(env, on_start=spy)
    assert spy.environ is not None
    received = dict(item.split(b"=", 1) for item in spy.environ.split(b"\0") if item)
    marker = received.pop(b"RUNE_COUNCIL_VOICE")
    # The marker is random, names nothing from the parent, and differs from voice to voice.
    assert re.fullmatch(rb"[0-9a-f]{16}\.[0-9]+", marker)
    assert received == {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    cli.assert_all_gone()


def test_explicit_cwd_is_used_and_left_in_place(cli: Harness) -> None:
    workdir = cli.tmp / "work"
    workdir.mkdir()
    spy = StartSpy()
    result = cli.run(cli.env(FAKE_SLEEP_S=0.2), cwd=workdir, on_start=spy)
    assert result.outcome == "ok"
    assert spy.cwd == str(workdir)
    assert workdir.is_dir()


def test_temp_dir_is_removed_even_when_the_child_locked_parts_of_it(cli: Harness) -> None:
    # Run as root, permissions do not bind and this only covers the plain removal.
    spy = StartSpy()

    def lock_a_subdir(pid: int) -> None:
        spy(pid)
        assert spy.cwd is not None
        inner = Path(spy.cwd, "locked", "inner")
        inner.mkdir(parents=True)
        (inner / "file").write_text("x")
        inner.chmod(0o000)
        inner.parent.chmod(0o500)

    result = cli.run(cli.env(FAKE_SLEEP_S=0.2), on_start=lock_a_subdir)
    assert result.outcome == "ok"
    assert spy.cwd is not None and not os.path.exists(spy.cwd)
