"""The attack catalogue, run against ``rune council`` as a user would run it, with figures.

```sh
.venv/bin/python bench/attacks.py          # about two minutes
.venv/bin/python bench/attacks.py --json   # the rows as JSON
```

Every attack is one ``rune council`` process (or a few) in a private temp dir whose PATH holds
only the test suite's fake CLIs, misbehaving as the attack says; an HTTP attack is a loopback
server on 127.0.0.1. For each attack the bench records:

- the exit code, and whether it is one the attack may end with (never 70, never a signal);
- the peak resident memory of the council process (``wait4``'s ru_maxrss, which covers the
  process and the voices it waited for);
- orphans: processes still alive afterwards that carry a voice marker or a pid a fake wrote;
- leaks: planted secrets or raw escape sequences found in stdout, stderr or any file written.

Nothing is asserted: the suite asserts; this prints what happened so the README can quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import PLAN, answer, claim  # noqa: E402

Q = "Should we shard the orders table?"
GOOD = answer(
    Q,
    "NO, not yet",
    [claim("No rollback step", ref="plan.md:6", quote="No rollback step is defined.")],
)
SECRET = "sk-ant-bench-planted-5566778899"
PROXY_PASSWORD = "bench-proxy-pw-31337"
ESCAPES = ("\x1b]0;", "\x1b]52;", "\x1b[2J", "\x9b", "\x9d")
MB = 1024 * 1024


@dataclass
class Row:
    attack: str
    exit: int | None
    allowed: list[int]
    peak_mb: float
    seconds: float
    orphans: int
    leaks: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def survived(self) -> bool:
        return self.exit in self.allowed and not self.leaks and self.orphans == 0


class World:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.pids = tmp / "pids"
        (tmp / "plan.md").write_text(PLAN)
        self.env = {
            "PATH": path_with(self.bin),
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
            "ANTHROPIC_API_KEY": SECRET,
            "HTTPS_PROXY": f"http://bench:{PROXY_PASSWORD}@127.0.0.1:9",
        }

    def fakes(self, **by_name: dict[str, Any]) -> None:
        for name in ("claude", "codex", "gemini"):
            settings = {"answer": GOOD, **by_name.get(name, {})}
            install_fake(self.bin, name, pid_file=self.pids, **settings)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "rune_council.cli", "council", *args],
            cwd=self.tmp,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def finish(
        self, proc: subprocess.Popen[bytes], timeout: float = 120
    ) -> tuple[int | None, float, bytes, bytes]:
        out_chunks: list[bytes] = []
        err_chunks: list[bytes] = []
        readers = [
            threading.Thread(target=lambda: out_chunks.append(proc.stdout.read())),  # type: ignore[union-attr]
            threading.Thread(target=lambda: err_chunks.append(proc.stderr.read())),  # type: ignore[union-attr]
        ]
        for r in readers:
            r.start()
        deadline = time.monotonic() + timeout
        code: int | None = None
        while True:
            # wait4, not poll(): it reaps the council and hands back its peak memory.
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                proc.kill()
                _pid, _status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = code if code is not None else -9
        for r in readers:
            r.join()
        return code, usage.ru_maxrss / 1024, b"".join(out_chunks), b"".join(err_chunks)

    def orphans(self) -> int:
        alive = 0
        if self.pids.exists():
            for line in self.pids.read_text().splitlines():
                pid = int(line.split()[1])
                try:
                    if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                        alive += 1
                except psutil.Error:
                    continue
        return alive

    def leaks(self, out: bytes, err: bytes) -> list[str]:
        texts = [out, err] + [
            p.read_bytes() for p in (self.tmp / ".rune").rglob("*") if p.is_file()
        ]
        found = []
        for secret in (SECRET, PROXY_PASSWORD):
            if any(secret.encode() in t for t in texts):
                found.append(f"secret {secret[:8]}…")
        for seq in ESCAPES:
            if seq.encode() in out or seq.encode() in err:
                found.append(f"escape {seq!r}")
        return found


Attack = Callable[[World], Row]
ATTACKS: list[tuple[str, Attack]] = []


def attack(name: str) -> Callable[[Attack], Attack]:
    def register(fn: Attack) -> Attack:
        ATTACKS.append((name, fn))
        return fn

    return register


def _council(
    w: World,
    name: str,
    *args: str,
    allowed: tuple[int, ...] = (0, 1),
    note: str = "",
    timeout: float = 120,
) -> Row:
    started = time.monotonic()
    code, peak, out, err = w.finish(w.start(Q, "--artifact", "plan.md", *args), timeout)
    time.sleep(0.3)
    return Row(
        name,
        code,
        list(allowed),
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
        note,
    )


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
        codex={
            "mode": "fork_grandchild",
            "grandchild_double_fork": 1,
            "grandchild_setsid": 1,
            "grandchild_close_stdio": 1,
            "sleep_s": 60,
        },
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
    started = time.monotonic()
    codes, peak, leaks = [], 0.0, []
    for args, ok in ((("list",), (0,)), (("show", "bomb"), (2,))):
        code, p, out, err = w.finish(w.start(*args))
        codes.append(code)
        peak = max(peak, p)
        leaks += w.leaks(out, err)
        if code not in ok:
            return Row(
                "run file nested 100,000 deep, then list/show",
                code,
                list(ok),
                round(peak, 1),
                0,
                0,
                leaks,
            )
    return Row(
        "run file nested 100,000 deep, then list/show",
        0,
        [0],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        leaks,
        f"exits {codes}",
    )


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
    started = time.monotonic()
    code, peak, out, err = w.finish(w.start(Q, "--artifact", "fifo"), timeout=30)
    return Row(
        "artifact is a FIFO",
        code,
        [2],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
    )


@attack("artifact is /dev/zero")
def _(w: World) -> Row:
    w.fakes()
    started = time.monotonic()
    code, peak, out, err = w.finish(w.start(Q, "--artifact", "/dev/zero"), timeout=60)
    return Row(
        "artifact is /dev/zero",
        code,
        [2],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
    )


@attack("artifact is a 3 GB sparse file")
def _(w: World) -> Row:
    w.fakes()
    with open(w.tmp / "sparse.md", "wb") as fh:
        fh.truncate(3 * 1024**3)
    started = time.monotonic()
    code, peak, out, err = w.finish(w.start(Q, "--artifact", "sparse.md"), timeout=120)
    return Row(
        "artifact is a 3 GB sparse file",
        code,
        [0, 1],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
    )


@attack("SIGTERM mid-run")
def _(w: World) -> Row:
    w.fakes(claude={"mode": "sleep"}, codex={"mode": "ignore_sigterm"})
    started = time.monotonic()
    proc = w.start(Q, "--artifact", "plan.md", "--id", "term")
    _wait_running(w, 2)
    proc.send_signal(signal.SIGTERM)
    code, peak, out, err = w.finish(proc, timeout=30)
    time.sleep(0.3)
    status = _status(w, "term")
    return Row(
        "SIGTERM mid-run",
        code,
        [143],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
        f"run file: {status}",
    )


@attack("SIGKILL mid-run, then list")
def _(w: World) -> Row:
    w.fakes(
        claude={"mode": "sleep"},
        codex={
            "mode": "fork_grandchild",
            "grandchild_double_fork": 1,
            "grandchild_setsid": 1,
            "grandchild_close_stdio": 1,
            "sleep_s": 600,
        },
    )
    started = time.monotonic()
    proc = w.start(Q, "--artifact", "plan.md", "--id", "killed")
    _wait_running(w, 3)
    proc.send_signal(signal.SIGKILL)
    w.finish(proc, timeout=30)
    code, peak, out, err = w.finish(w.start("list"))
    time.sleep(0.5)
    return Row(
        "SIGKILL mid-run, then list",
        code,
        [0],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        w.leaks(out, err),
        f"run file: {_status(w, 'killed')}",
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
    return Row(
        "same --id twice at once",
        loser,
        [2],
        round(peak, 1),
        round(time.monotonic() - started, 1),
        w.orphans(),
        leaks,
        f"exits {codes}",
    )


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", help="run the attacks whose name contains this")
    args = parser.parse_args()
    rows: list[Row] = []
    for name, run in ATTACKS:
        if args.only and args.only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="rune-attack-") as tmp:
            row = run(World(Path(tmp)))
        rows.append(row)
        if not args.json:
            mark = "ok  " if row.survived else "FAIL"
            print(
                f"{mark} {row.attack:<55} exit {row.exit!s:>4} (allowed {row.allowed})  "
                f"peak {row.peak_mb:6.1f} MB  {row.seconds:5.1f} s  orphans {row.orphans}"
                + (f"  leaks {row.leaks}" if row.leaks else "")
                + (f"  {row.note}" if row.note else ""),
                flush=True,
            )
    if args.json:
        print(json.dumps([asdict(r) | {"survived": r.survived} for r in rows], indent=2))
    else:
        survived = sum(r.survived for r in rows)
        orphans = sum(r.orphans for r in rows)
        leaks = sum(len(r.leaks) for r in rows)
        internal = sum(r.exit == 70 for r in rows)
        print(
            f"\n{survived}/{len(rows)} attacks survived; orphans {orphans}; leaks {leaks}; "
            f"exit 70 seen {internal}"
        )


if __name__ == "__main__":
    main()
