"""What every attack set shares: the row it reports, the world it runs in, the registry.

A row's ``held`` is the attack's own criterion (what the person who fixed the class said
"held" means) and, for every attack, an exit code it may end with, nothing leaked and no
process left behind. ``reason`` says in one line why it held or what broke.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rune_council.runtimes import lineage
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

ROOT = Path(__file__).resolve().parents[2]
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
# A bound on every rune process the bench starts: a decoder that ran away would otherwise
# take the machine before its row could say so.
ADDRESS_SPACE = 3 * 1024**3
# Any proxy a child would use leads to a closed loopback port, so nothing a child does can
# reach an address outside 127.0.0.1 (rune's loopback endpoints ignore proxies).
OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class Row:
    attack: str
    section: str
    exit: int | None
    allowed: list[int]
    peak_mb: float
    seconds: float
    orphans: int
    leaks: list[str] = field(default_factory=list)
    note: str = ""
    held: bool = False
    reason: str = ""
    skipped: bool = False
    exits: list[int | None] = field(default_factory=list)  # every process, in order


@dataclass
class Ran:
    """One process the bench ran: its exit, output, time and peak memory (``wait4``)."""

    args: tuple[str, ...]
    exit: int | None
    ok: tuple[int, ...]
    out: bytes
    err: bytes
    seconds: float
    peak_mb: float
    timed_out: bool = False

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    @property
    def text(self) -> str:
        return self.stdout + self.stderr

    @property
    def label(self) -> str:
        shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in self.args)
        return f"`{shown}`"


# Why a launcher: a child's ru_maxrss starts from the memory of the process it was forked
# (or vforked) from, so a process started by the bench itself would report at least the
# bench's own peak. The launcher is a small ``python -S`` that bounds the address space,
# spawns the command (posix_spawn: the command starts from the launcher's few megabytes),
# passes SIGTERM, SIGINT and SIGHUP on, reaps it with wait4 and writes its pid, then its
# status and peak, to a report file; then it ends the way the command ended.
LAUNCHER = r"""
import os, resource, signal, sys
report, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
child, pending = None, []
def forward(signum, _frame):
    if child is None:
        pending.append(signum)
    else:
        os.kill(child, signum)
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, forward)
child = os.posix_spawnp(argv[0], argv, os.environ)
with open(report, "w") as out:
    out.write(f"{child}\n")
for signum in pending:
    os.kill(child, signum)
_pid, status, usage = os.wait4(child, 0)
with open(report, "a") as out:
    out.write(f"{status} {usage.ru_maxrss}\n")
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def launched(report: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` behind the launcher, which writes to ``report``."""
    return [sys.executable, "-S", "-c", LAUNCHER, str(report), str(ADDRESS_SPACE), *argv]


def _report(report: Path | None) -> list[str]:
    try:
        return report.read_text().split("\n") if report else []
    except OSError:
        return []


def launched_pid(report: Path, timeout: float = 10) -> int | None:
    """The pid of the command behind the launcher."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = _report(report)
        if lines and lines[0].strip().isdigit():
            return int(lines[0])
        time.sleep(0.02)
    return None


def wait_reaped(
    proc: subprocess.Popen[bytes], timeout: float, report: Path | None = None
) -> tuple[int | None, float, bool]:
    """Reap ``proc`` with ``wait4``, killing its process group once ``timeout`` has passed.
    The peak is the launched command's own when ``report`` has it, else ``proc``'s."""
    deadline = time.monotonic() + timeout
    peak = 0.0
    timed_out = False
    code: int | None
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # Popen reaped it already (send_signal polls first)
            code = proc.returncode
            break
        if pid:
            code = os.waitstatus_to_exitcode(status)
            peak = usage.ru_maxrss / 1024
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(proc.pid) == proc.pid:
                    os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            _pid, _status, usage = os.wait4(proc.pid, 0)
            code, timed_out, peak = None, True, usage.ru_maxrss / 1024
            break
        time.sleep(0.02)
    proc.returncode = code if code is not None else -9
    lines = _report(report)
    if len(lines) > 1 and lines[1].strip():
        peak = int(lines[1].split()[1]) / 1024
    return code, peak, timed_out


class World:
    """A private temp dir, the test suite's fake CLIs under their real names, and what the
    attack's processes printed, for the leak search at the end."""

    def __init__(self, tmp: Path, name: str = "", section: str = "") -> None:
        self.tmp = tmp
        self.name = name
        self.section = section
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
        self.ran: list[Ran] = []
        self.seen: list[str] = []  # other text an attacker could read (HTTP bodies)
        self.secrets: list[str] = [SECRET, PROXY_PASSWORD]
        self.file_roots: list[Path] = [tmp / ".rune"]
        self.markers: set[str] = set()  # planted voice markers a leftover would carry
        self.cleanups: list[Callable[[], None]] = []
        self.started = time.monotonic()
        self.launches = 0
        self.tails: list[tuple[int | None, str]] = []  # (exit, last stderr line) per process
        self.reports: dict[int, Path] = {}

    # ----------------------------------------------------------------- the classic rows

    def fakes(self, **by_name: dict[str, Any]) -> None:
        for name in ("claude", "codex", "gemini"):
            settings = {"answer": GOOD, **by_name.get(name, {})}
            install_fake(self.bin, name, pid_file=str(self.pids), **settings)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        self.launches += 1
        report = self.tmp / f".launch-{self.launches}"
        proc = subprocess.Popen(
            launched(report, [sys.executable, "-m", "rune_council.cli", "council", *args]),
            cwd=self.tmp,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.reports[proc.pid] = report
        return proc

    def council_pid(self, proc: subprocess.Popen[bytes]) -> int | None:
        """The pid of the ``rune`` process ``start`` launched (to signal it directly)."""
        return launched_pid(self.reports[proc.pid])

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
        code, peak, _timed_out = wait_reaped(proc, timeout, self.reports.get(proc.pid))
        for r in readers:
            r.join()
        err = b"".join(err_chunks)
        self.tails.append((code, _last_line(err)))
        return code, peak, b"".join(out_chunks), err

    def orphans(self) -> int:
        """Processes a fake wrote to the pid file that are still alive."""
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
        texts = [out, err, *(t.encode() for t in self.seen), *self._files()]
        found = []
        for secret in self.secrets:
            if any(secret.encode() in t for t in texts):
                found.append(f"secret {secret[:8]}…")
        for seq in ESCAPES:
            if seq.encode() in out or seq.encode() in err:
                found.append(f"escape {seq!r}")
        return found

    def _files(self) -> Iterator[bytes]:
        for root in self.file_roots:
            for here, _dirs, files in os.walk(root):
                for name in files:
                    path = Path(here, name)
                    if not path.is_symlink() and path.is_file():
                        yield path.read_bytes()

    # ----------------------------------------------------------------- the new rows

    def rune(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        ok: Iterable[int] = (0,),
        timeout: float = 120,
    ) -> Ran:
        """``rune council ARGS`` as a real process in its own session, bounded in memory
        (RLIMIT_AS) and time; output goes to files so a flood cannot fill the bench."""
        self.launches += 1
        report = self.tmp / f".launch-{self.launches}"
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            started = time.monotonic()
            proc = subprocess.Popen(
                launched(report, [sys.executable, "-m", "rune_council.cli", "council", *args]),
                cwd=cwd or self.tmp,
                env=env if env is not None else self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            code, peak, timed_out = wait_reaped(proc, timeout, report)
            seconds = time.monotonic() - started
            out.seek(0)
            err.seek(0)
            ran = Ran(
                tuple(args), code, tuple(ok), out.read(), err.read(), seconds, peak, timed_out
            )
        self.ran.append(ran)
        self.tails.append((code, _last_line(ran.err)))
        return ran

    def row(
        self,
        failures: Sequence[str],
        why: str,
        *,
        note: str = "",
        extra_leaks: Sequence[str] = (),
        peak_mb: float | None = None,
    ) -> Row:
        """The row for what ran: held when every process ended with an exit it may end
        with, within its bound, nothing leaked and the attack's own ``failures`` is empty."""
        problems: list[str] = []
        for ran in self.ran:
            if ran.timed_out:
                problems.append(f"{ran.label} still ran after {ran.seconds:.0f} s and was killed")
            elif ran.exit not in ran.ok:
                problems.append(f"{ran.label} exited {ran.exit}, expected {list(ran.ok)}")
        bad = [r for r in self.ran if r.timed_out or r.exit not in r.ok]
        shown = bad[0] if bad else (self.ran[-1] if self.ran else None)
        leaks = list(extra_leaks)
        outs = [r.out for r in self.ran]
        errs = [r.err for r in self.ran]
        leaks += [x for x in self.leaks(b"\n".join(outs), b"\n".join(errs)) if x not in leaks]
        problems += list(failures)
        held = not problems and not leaks
        peaks = [r.peak_mb for r in self.ran] + ([peak_mb] if peak_mb is not None else [])
        exits = [r.exit for r in self.ran]
        return Row(
            self.name,
            self.section,
            shown.exit if shown else None,
            list(shown.ok) if shown else [],
            round(max(peaks, default=0.0), 1),
            round(time.monotonic() - self.started, 1),
            0,
            leaks,
            note,
            held,
            why if held else "; ".join(problems + [f"leaked {x}" for x in leaks]),
            exits=exits,
        )

    def skip(self, why: str) -> Row:
        return Row(self.name, self.section, None, [], 0.0, 0.0, 0, [], "", False, why, True)

    # ----------------------------------------------------------------- leftovers

    def strays(self) -> list[psutil.Process]:
        """Processes still alive that belong to this attack: they name its temp dir in their
        command line, working directory or environment (every fake's settings do), or carry
        one of the voice markers it planted."""
        tag = str(self.tmp)
        me = os.getpid()
        found = []
        for proc in psutil.process_iter(["pid", "cmdline", "cwd", "environ", "status"]):
            info = proc.info
            if info["pid"] == me or info["status"] == psutil.STATUS_ZOMBIE:
                continue
            env = info["environ"] or {}
            carried = env.get(lineage.MARKER_VAR, "")
            where = " ".join(info["cmdline"] or []) + " " + (info["cwd"] or "")
            if (
                tag in where
                or any(tag in v for v in env.values())
                or (carried and any(carried.startswith(m) for m in self.markers))
            ):
                found.append(proc)
        return found


def run_attack(tmp: Path, name: str, section: str, attack: Callable[[World], Row]) -> Row:
    w = World(tmp, name, section)
    try:
        row = attack(w)
    except Exception as exc:  # the row says what went wrong; the next attack still runs
        row = w.row([f"the attack could not finish: {type(exc).__name__}: {exc}"[:400]], "")
    finally:
        for cleanup in reversed(w.cleanups):
            with contextlib.suppress(Exception):
                cleanup()
    if row.skipped:
        return row
    if not row.held and row.exit not in row.allowed:
        tail = next((t for code, t in reversed(w.tails) if code == row.exit and t), "")
        if tail:
            row.reason += f" (its last stderr line: {clipped(tail, 200)})"
    time.sleep(0.3)  # a killed process takes a moment to go
    strays = w.strays()
    if strays:
        names = ", ".join(sorted({(p.info["cmdline"] or ["?"])[0] for p in strays}))
        row.orphans = max(row.orphans, len(strays))
        row.held = False
        row.reason = f"{len(strays)} process(es) left running ({names}); " + row.reason
        for proc in strays:  # the bench's own children, by pid
            with contextlib.suppress(psutil.Error):
                proc.kill()
    elif row.orphans and row.held:
        row.held = False
        row.reason = f"{row.orphans} process(es) left running; " + row.reason
    return row


Attack = Callable[[World], Row]
ATTACKS: list[tuple[str, str, Attack]] = []


def attack(name: str, section: str = "voices and files") -> Callable[[Attack], Attack]:
    def register(fn: Attack) -> Attack:
        ATTACKS.append((name, section, fn))
        return fn

    return register


def expect(failures: list[str], ok: bool, what: str) -> bool:
    """Note ``what`` as a failure unless ``ok``; returns ``ok``."""
    if not ok:
        failures.append(what)
    return ok


def asserted(failures: list[str], check: Callable[[], Any]) -> None:
    """Run a test suite check that asserts; its message becomes a failure."""
    try:
        check()
    except AssertionError as exc:
        failures.append(str(exc).splitlines()[0][:300] if str(exc) else "a check failed")


def _last_line(err: bytes) -> str:
    lines = [x for x in err.decode("utf-8", "replace").splitlines() if x.strip()]
    return lines[-1] if lines else ""


def clipped(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
