"""A stand-in for an AI CLI (claude, codex, gemini), run as a real subprocess in tests.

Run it as ``[sys.executable, "-S", path/to/fake_cli.py]``. It imports only the standard
library so ``-S`` (no site-packages) works and start-up stays fast. All behaviour comes from
environment variables, because the code under test passes an exact environment and keeps the
prompt on stdin; arguments are accepted and ignored.

FAKE_MODE (default ``answer``):
    answer           read all of stdin, sleep FAKE_SLEEP_S (default 0), print the answer, exit
                     with FAKE_EXIT_CODE (default 0)
    echo_stdin       like ``answer``, but the answer is the text received on stdin
    answer_question  like ``answer``, with __QUESTION__ in the answer replaced by the
                     question the prompt on stdin asks (one fake answers a whole batch)
    silent           read all of stdin, print nothing, exit with FAKE_EXIT_CODE (default 0)
    sleep            do not read stdin; sleep FAKE_SLEEP_S (default 3600), then exit with
                     FAKE_EXIT_CODE (default 0)
    exit_code        do not read stdin; exit at once with FAKE_EXIT_CODE (default 0)
    crash            read all of stdin, then die of an uncaught exception (traceback on
                     stderr, exit code 1)
    die_mid_answer   read all of stdin, write the first half of the formatted answer, then
                     kill itself with SIGKILL
    garbage          read all of stdin, write bytes that are neither UTF-8 nor JSON, exit 0
    flood            do not read stdin; write FAKE_FLOOD_BYTES (default 100 MB) to the stream
                     named by FAKE_FLOOD_STREAM (``stdout`` default, or ``stderr``), then print
                     FAKE_ANSWER to that same stream and exit 0
    slow_stdin       read stdin 4 KiB at a time, sleeping 1 ms and writing 8 KiB to stdout and
                     1 KiB to stderr after each read, then print the answer; a caller that
                     writes the whole prompt before reading anything deadlocks on this one
    ignore_sigterm   ignore SIGTERM, do not read stdin, sleep FAKE_SLEEP_S (default 3600)
    upgrade_demand   read stdin; the first call (every call with FAKE_UPGRADE_ALWAYS=1) prints
                     an opencode-style upgrade demand and exits 1, later calls answer;
                     FAKE_STATE_FILE counts the calls
    fork_grandchild  fork a grandchild that sleeps FAKE_GRANDCHILD_SLEEP_S (default 3600)
                     while holding stdout/stderr open, then behave like ``answer``
                     (FAKE_SLEEP_S delays the answer, so a long one makes the child hang too)

Other variables:
    FAKE_ANSWER             answer text (default ``fake answer``)
    FAKE_ANSWER_FILE        read the answer text from this file instead (UTF-8)
    FAKE_FORMAT             ``text`` (default): the answer and a newline
                            ``claude-json``: {"type": "result", "result": ANSWER, "is_error": false}
                            ``codex-jsonl``: a few JSONL events ending with
                              {"type": "item.completed",
                               "item": {"type": "agent_message", "text": ANSWER}}
                            ``gemini-json``: {"response": ANSWER}
                            qwen-json, opencode-jsonl, opencode-error, aider-text,
                            aider-error, cline-jsonl, cline-error, amp-jsonl: the shapes
                            those CLIs print (see _more_formats)
    FAKE_ENV_COPY           write the environment the fake was given to this file (JSON)
    FAKE_ARGV_LOG           append {"argv", "cwd", "cwd_entries"} to this file, one JSON
                            object a line; with FAKE_COPY_FILE_ARG=--flag, also the content
                            ("file") and mode of the file named after --flag; with
                            FAKE_LOOK_FOR=NAME,NAME..., also "seen_above": every file of
                            those names in the working directory or any above it, the
                            way a CLI looking for its instruction files finds them
    FAKE_SLEEP_S            seconds to sleep, see the modes
    FAKE_EXIT_CODE          exit code, see the modes
    FAKE_FLOOD_BYTES        how many bytes ``flood`` writes
    FAKE_FLOOD_STREAM       ``stdout`` or ``stderr``
    FAKE_PID_FILE           append ``child <pid>`` (and ``grandchild <pid>`` when forking) lines
                            to this file, first thing, so a test can check they are gone
    FAKE_STDIN_COPY         write the bytes received on stdin to this file
    FAKE_IGNORE_SIGTERM     ``1``: ignore SIGTERM in the child and any grandchild
    FAKE_GRANDCHILD_SETSID  ``1``: the grandchild calls setsid(), leaving the process group
    FAKE_GRANDCHILD_DOUBLE_FORK ``1``: the grandchild forks once more and exits, leaving an
                            orphan (recorded as ``daemon <pid>``) that does the rest
    FAKE_GRANDCHILD_CLOSE_STDIO
                            ``1``: the grandchild closes stdin/stdout/stderr, like a daemon
    FAKE_GRANDCHILD_SLEEP_S how long the grandchild sleeps
"""

import json
import os
import signal
import sys
import time

_CHUNK = 4096


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _answer_text(prompt: str = "") -> str:
    # FAKE_ANSWER_DIR: <dir>/<key>.answer is the answer to every prompt that holds <key>,
    # so one fake answers each item of an eval as a test scripted it.
    folder = os.environ.get("FAKE_ANSWER_DIR")
    if folder and prompt:
        for entry in sorted(os.listdir(folder)):
            key = entry.removesuffix(".answer")
            if entry.endswith(".answer") and key in prompt:
                with open(os.path.join(folder, entry), encoding="utf-8") as fh:
                    return fh.read()
    path = os.environ.get("FAKE_ANSWER_FILE")
    if path:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    return _env("FAKE_ANSWER", "fake answer")


def _format(answer: str) -> bytes:
    fmt = _env("FAKE_FORMAT", "text")
    if fmt == "text":
        return (answer + "\n").encode("utf-8", "surrogateescape")
    if fmt == "claude-json":
        doc = {"type": "result", "subtype": "success", "is_error": False, "result": answer}
        return (json.dumps(doc) + "\n").encode()
    if fmt == "codex-jsonl":
        events = [
            {"type": "thread.started", "thread_id": "fake-thread"},
            {"type": "turn.started"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "reasoning", "text": "thinking"},
            },
            {
                "type": "item.completed",
                "item": {"id": "item_1", "type": "agent_message", "text": answer},
            },
        ]
        return "".join(json.dumps(e) + "\n" for e in events).encode()
    if fmt == "gemini-json":
        return (json.dumps({"response": answer}) + "\n").encode()
    more = _more_formats(fmt, answer)
    if more is not None:
        return more
    sys.stderr.write(f"fake_cli: unknown FAKE_FORMAT {fmt!r}\n")
    sys.exit(64)


def _more_formats(fmt: str, answer: str) -> bytes | None:
    """The output shapes of qwen, opencode, aider, cline and amp, as their real binaries
    print them (trimmed to the fields that matter); ``*-error`` shapes are API failures."""
    if fmt == "qwen-json":
        doc = [
            {"type": "system", "subtype": "init", "tools": [], "model": "m"},
            {"type": "assistant", "message": {"content": [{"type": "text", "text": answer}]}},
            {"type": "result", "subtype": "success", "is_error": False, "result": answer},
        ]
        return json.dumps(doc).encode()
    if fmt == "opencode-jsonl":
        events = [
            {"type": "step_start", "part": {"type": "step-start"}},
            {"type": "text", "part": {"type": "text", "text": answer}},
            {"type": "step_finish", "part": {"type": "step-finish", "reason": "stop"}},
        ]
        return "".join(json.dumps(e) + "\n" for e in events).encode()
    if fmt == "opencode-error":
        data = {"message": answer, "statusCode": 400}
        event = {"type": "error", "error": {"name": "APIError", "data": data}}
        return (json.dumps(event) + "\n").encode()
    if fmt in ("aider-text", "aider-error"):
        banner = (
            "Aider v0.86.2\nModel: openai/m with ask edit format\nGit repo: none\n"
            "Repo-map: disabled\n\n"
        )
        if fmt == "aider-error":
            return (banner + f"litellm.BadRequestError: OpenAIException - {answer}\n").encode()
        return (banner + answer + "\n\nTokens: 64 sent, 5 received.\n").encode()
    if fmt in ("cline-jsonl", "cline-error"):
        reason = "error" if fmt == "cline-error" else "completed"
        events = [
            {"type": "agent_event", "event": {"type": "iteration_start", "iteration": 1}},
            {"type": "run_result", "finishReason": reason, "text": answer},
        ]
        return "".join(json.dumps(e) + "\n" for e in events).encode()
    if fmt == "amp-jsonl":
        events = [
            {"type": "system", "subtype": "init", "tools": []},
            {"type": "result", "subtype": "success", "is_error": False, "result": answer},
        ]
        return "".join(json.dumps(e) + "\n" for e in events).encode()
    return None


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _record_pid(role: str, pid: int) -> None:
    path = os.environ.get("FAKE_PID_FILE")
    if path:
        # One O_APPEND write per line keeps concurrent writers from interleaving.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{role} {pid}\n".encode())
        finally:
            os.close(fd)


def _read_stdin() -> bytes:
    data = sys.stdin.buffer.read()
    _keep_stdin_copy(data)
    return data


def _keep_stdin_copy(data: bytes) -> None:
    path = os.environ.get("FAKE_STDIN_COPY")
    if path:
        with open(path, "wb") as fh:
            fh.write(data)


def _sleep(default: str) -> None:
    time.sleep(float(_env("FAKE_SLEEP_S", default)))


def _exit_code() -> int:
    return int(_env("FAKE_EXIT_CODE", "0"))


def _fork_grandchild() -> None:
    pid = os.fork()
    if pid:
        _record_pid("grandchild", pid)
        return
    try:
        if _env("FAKE_GRANDCHILD_DOUBLE_FORK", "") == "1":
            # The classic daemon: fork again and let the middle process exit at once, so the
            # survivor is nobody's descendant any more.
            if os.fork():
                os._exit(0)
            _record_pid("daemon", os.getpid())
        if _env("FAKE_GRANDCHILD_SETSID", "") == "1":
            os.setsid()
        if _env("FAKE_GRANDCHILD_CLOSE_STDIO", "") == "1":
            for fd in (0, 1, 2):
                os.close(fd)
        time.sleep(float(_env("FAKE_GRANDCHILD_SLEEP_S", "3600")))
    finally:
        os._exit(0)


def _flood() -> None:
    fd = 2 if _env("FAKE_FLOOD_STREAM", "stdout") == "stderr" else 1
    remaining = int(_env("FAKE_FLOOD_BYTES", str(100 * 1000 * 1000)))
    block = b"x" * 65536
    while remaining > 0:
        piece = block[:remaining]
        _write(fd, piece)
        remaining -= len(piece)
    _write(fd, _format(_answer_text()))


def _slow_stdin() -> None:
    received = bytearray()
    out_block = b"o" * 8192
    err_block = b"e" * 1024
    while True:
        chunk = os.read(0, _CHUNK)
        if not chunk:
            break
        received += chunk
        _write(1, out_block)
        _write(2, err_block)
        time.sleep(0.001)
    _keep_stdin_copy(bytes(received))
    _write(1, _format(_answer_text()))


def _record_call() -> None:
    """FAKE_ENV_COPY gets the environment as JSON; FAKE_ARGV_LOG one JSON argv per line."""
    path = os.environ.get("FAKE_ENV_COPY")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(dict(os.environ), fh)
    path = os.environ.get("FAKE_ARGV_LOG")
    if path:
        cwd = os.getcwd()
        line = {"argv": sys.argv[1:], "cwd": cwd, "cwd_entries": os.listdir(cwd)}
        flag = os.environ.get("FAKE_COPY_FILE_ARG")
        if flag and flag in sys.argv[1:-1]:
            named = sys.argv[sys.argv.index(flag) + 1]
            with open(named, encoding="utf-8") as fh:
                line["file"] = fh.read()
            line["file_mode"] = oct(os.stat(named).st_mode & 0o777)
        names = [n for n in os.environ.get("FAKE_LOOK_FOR", "").split(",") if n]
        if names:
            line["seen_above"] = _seen_above(cwd, names)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)


def _seen_above(cwd: str, names: list[str]) -> list[str]:
    seen = []
    here = os.path.realpath(cwd)
    while True:
        seen += [os.path.join(here, n) for n in names if os.path.exists(os.path.join(here, n))]
        parent = os.path.dirname(here)
        if parent == here:
            return seen
        here = parent


def _upgrade_demand() -> int:
    """Like opencode told by its provider that the client is too old: the first call (or
    every call, with FAKE_UPGRADE_ALWAYS=1) fails with an upgrade demand."""
    _read_stdin()
    state = _env("FAKE_STATE_FILE", "")
    first = not (state and os.path.exists(state))
    if state:
        with open(state, "a", encoding="utf-8") as fh:
            fh.write("called\n")
    if first or _env("FAKE_UPGRADE_ALWAYS", "") == "1":
        data = {"message": "This model requires a newer version of opencode. Please upgrade."}
        event = {"type": "error", "error": {"name": "UpgradeRequired", "data": data}}
        _write(1, (json.dumps(event) + "\n").encode())
        return 1
    _write(1, _format(_answer_text()))
    return 0


def _answer_to(prompt: str) -> str:
    """The answer text with __QUESTION__ replaced by the question the prompt asks (JSON
    string-escaped), so one fake serves every question of a batch."""
    question = prompt.partition("Question:\n")[2].split("\n\nEvidence rules:", 1)[0]
    return _answer_text(prompt).replace("__QUESTION__", json.dumps(question)[1:-1])


def _record_span() -> None:
    """FAKE_SPAN_LOG: '<FAKE_SPAN_NAME> start|end <time>' lines, so a test can tell how many
    of one CLI were running at once."""
    path = os.environ.get("FAKE_SPAN_LOG")
    if not path:
        return
    import atexit

    name = _env("FAKE_SPAN_NAME", "fake")

    def mark(what: str) -> None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{name} {what} {time.time():.6f}\n")

    mark("start")
    atexit.register(mark, "end")


def main() -> int:
    mode = _env("FAKE_MODE", "answer")
    _record_span()
    _record_pid("child", os.getpid())
    _record_call()
    if mode == "upgrade_demand":
        return _upgrade_demand()
    if _env("FAKE_IGNORE_SIGTERM", "") == "1" or mode == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    if mode == "fork_grandchild":
        _fork_grandchild()
        mode = "answer"

    if mode in ("answer", "echo_stdin", "answer_question"):
        received = _read_stdin()
        _sleep("0")
        if mode == "echo_stdin":
            answer = received.decode("utf-8", "surrogateescape")
        elif mode == "answer_question":
            answer = _answer_to(received.decode("utf-8", "replace"))
        else:
            answer = _answer_text()
        _write(1, _format(answer))
        return _exit_code()
    if mode == "silent":
        _read_stdin()
        return _exit_code()
    if mode == "sleep":
        _sleep("3600")
        return _exit_code()
    if mode == "ignore_sigterm":
        _sleep("3600")
        return 0
    if mode == "exit_code":
        return _exit_code()
    if mode == "crash":
        _read_stdin()
        raise RuntimeError("fake_cli crashed on purpose")
    if mode == "die_mid_answer":
        _read_stdin()
        formatted = _format(_answer_text())
        _write(1, formatted[: max(1, len(formatted) // 2)])
        os.kill(os.getpid(), signal.SIGKILL)
        return 0  # not reached
    if mode == "garbage":
        _read_stdin()
        _write(1, b"\x00\xff\xfe{{not json\x80\x81 <<>> \xc3\x28 ]]}\n")
        return 0
    if mode == "flood":
        _flood()
        return 0
    if mode == "slow_stdin":
        _slow_stdin()
        return 0
    sys.stderr.write(f"fake_cli: unknown FAKE_MODE {mode!r}\n")
    return 64


if __name__ == "__main__":
    sys.exit(main())
