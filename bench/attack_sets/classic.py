"""The first catalogue: floods, deep nesting, escape sequences, echoed secrets, odd files,
daemons, SIGTERM/SIGKILL, a reused run id and a hostile endpoint, each against ``rune council``
in a private temp dir whose PATH holds only the test suite's fake CLIs.

Held: the exit is one the attack may end with (never 70, never a signal), no orphan, no leak.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rune_council.runtimes import lineage
from tests.helpers import answer, claim
from tests.test_security_probe_dirs import _age as age_dir
from tests.test_security_probe_dirs import _env as probe_env
from tests.test_security_probe_dirs import _killed_mid_detect as killed_mid_detect

from .kit import OFFLINE, PROXY_PASSWORD, SECRET, Q, Row, World, attack, expect

SECTION = "voices and files"


def _row(
    w: World,
    name: str,
    started: float,
    code: int | None,
    allowed: Sequence[int],
    peak: float,
    leaks: list[str],
    note: str = "",
) -> Row:
    """The row of an attack decided by a process that exited ``code``: held when that exit
    is allowed, no process outlives the attack (counted now) and nothing leaked."""
    allowed = list(allowed)
    seconds = round(time.monotonic() - started, 1)
    orphans = w.orphans()
    problems = []
    if code not in allowed:
        problems.append(f"exited {code}, expected {allowed}")
    if orphans:
        problems.append(f"{orphans} process(es) left running")
    problems += [f"leaked {x}" for x in leaks]
    held = not problems
    why = f"exit {code} as allowed, no orphan, nothing leaked"
    reason = why if held else "; ".join(problems)
    peak = round(peak, 1)
    return Row(name, SECTION, code, allowed, peak, seconds, orphans, leaks, note, held, reason)


def _council(
    w: World,
    name: str,
    *args: str,
    artifact: str = "plan.md",
    allowed: tuple[int, ...] = (0, 1),
    timeout: float = 120,
) -> Row:
    started = time.monotonic()
    code, peak, out, err = w.finish(w.start(Q, "--artifact", artifact, *args), timeout)
    time.sleep(0.3)
    return _row(w, name, started, code, allowed, peak, w.leaks(out, err))


def _forks_a_daemon(sleep_s: float) -> dict[str, Any]:
    """A fake voice's settings: it forks a grandchild cut loose from it (a double fork into a
    session of its own, stdio closed) that sleeps ``sleep_s``, as a daemon would."""
    return {
        "mode": "fork_grandchild",
        "grandchild_double_fork": 1,
        "grandchild_setsid": 1,
        "grandchild_close_stdio": 1,
        "sleep_s": sleep_s,
    }


@attack("stdout flood 100 MB")
def _(w: World) -> Row:
    w.fakes(claude={"mode": "flood", "flood_bytes": 100 * 1000 * 1000})
    return _council(w, "stdout flood 100 MB")


@attack("stderr flood 100 MB")
def _(w: World) -> Row:
    w.fakes(codex={"mode": "flood", "flood_bytes": 100 * 1000 * 1000, "flood_stream": "stderr"})
    return _council(w, "stderr flood 100 MB")


@attack("nested JSON on stdout ([ x 1,000,000)")
def _(w: World) -> Row:
    w.fakes(
        claude={"answer": "[" * 1_000_000, "format": "text"}, codex={"answer": '{"a":' * 200_000}
    )
    return _council(w, "nested JSON on stdout ([ x 1,000,000)")


@attack("nested JSON inside an answer")
def _(w: World) -> Row:
    bomb = '{"question_echo": "' + Q + '", "stance": "NO", "claims": ' + "[" * 150_000 + "}"
    w.fakes(gemini={"answer": bomb})
    return _council(w, "nested JSON inside an answer")


@attack("binary garbage")
def _(w: World) -> Row:
    w.fakes(claude={"mode": "garbage"})
    return _council(w, "binary garbage")


@attack("escape sequences and rich markup in answers and errors")
def _(w: World) -> Row:
    hostile = "\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[2J[/bold][/usr/bin/x]"
    w.fakes(
        claude={"answer": answer(Q, f"NO {hostile}", [claim(f"bad {hostile}")])},
        codex={"answer": f"error {hostile}", "format": "text", "exit_code": 1},
    )
    return _council(w, "escape sequences and rich markup in answers and errors")


@attack("secret and proxy password echoed back")
def _(w: World) -> Row:
    leaky = answer(Q, "NO", [claim(f"key {SECRET} via http://bench:{PROXY_PASSWORD}@127.0.0.1:9")])
    w.fakes(
        claude={"answer": leaky},
        codex={"answer": f"proxy pw {PROXY_PASSWORD}", "format": "text", "exit_code": 1},
    )
    return _council(w, "secret and proxy password echoed back")


@attack("voice hangs, ignores SIGTERM, forks a daemon")
def _(w: World) -> Row:
    w.fakes(
        claude={"mode": "ignore_sigterm"},
        codex=_forks_a_daemon(sleep_s=60),
    )
    return _council(w, "voice hangs, ignores SIGTERM, forks a daemon", "--timeout", "3")


@attack("answer over 200,000 characters")
def _(w: World) -> Row:
    w.fakes(claude={"answer": answer(Q, "NO " + "x" * 260_000, [])})
    return _council(w, "answer over 200,000 characters")


@attack("run file nested 100,000 deep, then list/show")
def _(w: World) -> Row:
    council = w.tmp / ".rune" / "council"
    council.mkdir(parents=True, exist_ok=True)
    (council / "run-bomb.json").write_text('{"id": ' + "[" * 100_000)
    name = "run file nested 100,000 deep, then list/show"
    started = time.monotonic()
    codes, peak, leaks = [], 0.0, []
    for args, ok in ((("list",), (0,)), (("show", "bomb"), (2,))):
        code, p, out, err = w.finish(w.start(*args))
        codes.append(code)
        peak = max(peak, p)
        leaks += w.leaks(out, err)
        if code not in ok:
            return _row(w, name, started, code, ok, peak, leaks)
    return _row(w, name, started, 0, [0], peak, leaks, f"exits {codes}")


@attack("config TOML nested 100,000 deep")
def _(w: World) -> Row:
    w.fakes()
    (w.tmp / ".rune").mkdir(exist_ok=True)
    (w.tmp / ".rune" / "council.toml").write_text("a = " + "[" * 100_000)
    return _council(w, "config TOML nested 100,000 deep", allowed=(2,))


@attack("artifact is a FIFO")
def _(w: World) -> Row:
    w.fakes()
    os.mkfifo(w.tmp / "fifo")
    return _council(w, "artifact is a FIFO", artifact="fifo", allowed=(2,), timeout=30)


@attack("artifact is /dev/zero")
def _(w: World) -> Row:
    w.fakes()
    return _council(w, "artifact is /dev/zero", artifact="/dev/zero", allowed=(2,), timeout=60)


@attack("artifact is a 3 GB sparse file")
def _(w: World) -> Row:
    w.fakes()
    with open(w.tmp / "sparse.md", "wb") as fh:
        fh.truncate(3 * 1024**3)
    return _council(w, "artifact is a 3 GB sparse file", artifact="sparse.md")


@attack("SIGTERM mid-run")
def _(w: World) -> Row:
    w.fakes(claude={"mode": "sleep"}, codex={"mode": "ignore_sigterm"})
    started = time.monotonic()
    proc = w.start(Q, "--artifact", "plan.md", "--id", "term")
    _wait_running(w, 2)
    proc.send_signal(signal.SIGTERM)
    code, peak, out, err = w.finish(proc, timeout=30)
    time.sleep(0.3)
    note = f"run file: {_status(w, 'term')}"
    return _row(w, "SIGTERM mid-run", started, code, [143], peak, w.leaks(out, err), note)


@attack("SIGKILL mid-run, then list")
def _(w: World) -> Row:
    w.fakes(
        claude={"mode": "sleep"},
        codex=_forks_a_daemon(sleep_s=600),
    )
    started = time.monotonic()
    proc = w.start(Q, "--artifact", "plan.md", "--id", "killed")
    _wait_running(w, 3)
    council = w.council_pid(proc)
    if council is not None:
        os.kill(council, signal.SIGKILL)
    w.finish(proc, timeout=30)
    code, peak, out, err = w.finish(w.start("list"))
    time.sleep(0.5)
    note = f"run file: {_status(w, 'killed')}"
    return _row(w, "SIGKILL mid-run, then list", started, code, [0], peak, w.leaks(out, err), note)


@attack("SIGKILL mid-DETECT (probe dir left, no run file), then a council")
def _(w: World) -> Row:
    failures: list[str] = []
    temp_root = w.tmp / "tmp"
    temp_root.mkdir(mode=0o700)
    slow = {**probe_env(w.tmp, w.tmp / "bin-slow", temp_root), **OFFLINE}
    left = killed_mid_detect(w.tmp, slow)  # the suite's scene: a real probe, a real kill
    root = left[0].parent
    sentinel = w.tmp / "outside"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("kept\n")
    link = root / f"rune-council-{lineage.new_run_marker()}.1-abcdefgh"
    link.symlink_to(sentinel)
    for path in (*left, link):
        age_dir(path)  # older than the sweep's age, as if the next council came later
    w.fakes()
    w.rune(
        Q,
        "--artifact",
        "plan.md",
        "--id",
        "next",
        env={**probe_env(w.tmp, w.bin, temp_root), **OFFLINE},
        ok=(0, 1),
    )
    gone = [p for p in left if not p.exists()]
    expect(failures, len(gone) == len(left), f"{len(left) - len(gone)} probe dir(s) still there")
    expect(failures, link.is_symlink(), "the look-alike link was removed")
    expect(failures, (sentinel / "keep.txt").is_file(), "the link's target was touched")
    return w.row(
        failures, f"the next council removed the {len(left)} probe dir(s); a look-alike link stayed"
    )


@attack("same --id twice at once")
def _(w: World) -> Row:
    w.fakes(claude={"sleep_s": 3}, codex={"sleep_s": 3}, gemini={"sleep_s": 3})
    started = time.monotonic()
    both = [w.start(Q, "--artifact", "plan.md", "--id", "twice") for _ in range(2)]
    ended = [w.finish(p, timeout=60) for p in both]
    codes = sorted(code if code is not None else -1 for code, *_ in ended)
    peak = max(p for _, p, _, _ in ended)
    leaks = [leak for _, _, out, err in ended for leak in w.leaks(out, err)]
    # Whichever started second: it must be refused (2) while the other completes (0).
    loser = 2 if codes == [0, 2] else codes[-1]
    return _row(w, "same --id twice at once", started, loser, [2], peak, leaks, f"exits {codes}")


def _wait_running(w: World, voices: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if w.pids.exists() and len(w.pids.read_text().splitlines()) >= voices:
            time.sleep(0.5)
            return
        time.sleep(0.05)


def _status(w: World, run_id: str) -> str:
    path = w.tmp / ".rune" / "council" / f"run-{run_id}.json"
    try:
        return str(json.loads(path.read_text())["status"])
    except (OSError, ValueError, KeyError):
        return "missing"


class _Flood(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        body = b'{"data": [{"id": "lab/m"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        block = b"[" * 65536
        try:
            for _ in range(2000):  # 128 MB of nesting, never closed
                self.wfile.write(block)
        except OSError:
            pass


@attack("HTTP endpoint answers 128 MB of [")
def _(w: World) -> Row:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        w.fakes()
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return _council(w, "HTTP endpoint answers 128 MB of [", "--endpoint", url, "--n", "2")
    finally:
        server.shutdown()
        server.server_close()
