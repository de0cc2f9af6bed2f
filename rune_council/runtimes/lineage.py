"""Every process a voice starts stays within our reach, even after the council dies.

Three mechanisms, each covering what the others miss:

- Each voice's environment carries a marker (``RUNE_COUNCIL_VOICE=<run>.<n>``). Descendants
  inherit it however they detach (double fork, setsid, closed stdio), so the whole lineage
  of a voice can be found by reading ``/proc/<pid>/environ``; the run part lets a later
  command find what an abandoned run left behind.
- On Linux the voice is started with a parent-death signal: if the council is killed
  outright (SIGKILL), the kernel kills the voice with it.
- On Linux the council becomes a child subreaper, so a daemonizing descendant is re-parented
  to the council rather than to init while the council lives.

Where a mechanism is missing (another OS, no ctypes) the others still apply.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..core import shapes

if TYPE_CHECKING:
    import psutil
else:  # loaded on first use: a council of endpoints alone never starts a process
    from .on_first_use import psutil

__all__ = [
    "MARKER_VAR",
    "child_setup",
    "current_run_marker",
    "ensure_subreaper",
    "find_lineage",
    "find_lineages",
    "kill_if_voice",
    "kill_marked",
    "kill_recorded",
    "live_voices",
    "marked_processes",
    "new_run_marker",
    "next_voice_marker",
    "reap_adopted",
    "run_marker",
    "start_ticks",
    "table_readable",
    "track",
    "untrack",
]

MARKER_VAR = "RUNE_COUNCIL_VOICE"

# A process's start time as psutil reads it twice can differ by clock-tick rounding.
_START_SLACK_S = 1.0
# Enough of /proc/<pid>/environ for any real environment.
_ENVIRON_CAP = 1_000_000

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

# Voices started outside any council run (direct library use) still get a marker unique to
# this process, so their lineage can be found all the same.
_PROCESS_MARKER = os.urandom(shapes.RUN_MARKER_BYTES).hex()
_run_marker: ContextVar[str] = ContextVar("rune_council_run_marker", default=_PROCESS_MARKER)
_serial = itertools.count(1)
_subreaper_lock = threading.Lock()
_subreaper: bool | None = None
# Pids started directly by run_process: asyncio waits for these itself, so they are never
# reaped here.
spawned_roots: set[int] = set()
# Voice processes alive now, by run marker: (pid, start time) for the run file.
_live: dict[str, dict[int, float]] = {}
_live_lock = threading.Lock()


def track(voice_marker: str, pid: int, *, guarded: bool = False) -> None:
    """Record a voice process as running; ``guarded`` when it was started without the
    parent-death signal because the voice guard ends it if this process dies."""
    if guarded:
        _guard.add(pid)
    run = voice_marker.rsplit(".", 1)[0]
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        return
    with _live_lock:
        _live.setdefault(run, {})[pid] = started


def untrack(voice_marker: str, pid: int) -> None:
    _guard.remove(pid)
    run = voice_marker.rsplit(".", 1)[0]
    with _live_lock:
        procs = _live.get(run)
        if procs is not None:
            procs.pop(pid, None)
            if not procs:
                del _live[run]


def live_voices(run: str) -> list[tuple[int, float]]:
    """(pid, start time) of the voice processes of run ``run`` that are running now."""
    with _live_lock:
        return sorted(_live.get(run, {}).items())


def kill_recorded(run: str, processes: list[tuple[int, float]]) -> int:
    """SIGKILL each recorded (pid, start time) that is still a voice of run ``run``; how many.

    The list comes from a run file, which anyone can write: a pid is signalled only when the
    process it names now started at the recorded time, belongs to this user and carries the
    run's marker, so a planted file can name any process and still reach none.
    """
    if not shapes.is_run_marker(run):
        return 0
    count = 0
    for pid, started in processes[: shapes.MAX_RECORDED_PROCESSES]:
        if shapes.is_start_time(started) and kill_if_voice(pid, run, started=started):
            count += 1
    return count


def _environ_value(proc: psutil.Process, name: str) -> str | None:
    """The value of ``name`` the way the process's own ``getenv`` sees it (the first one)."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                data = fh.read(_ENVIRON_CAP)
        except OSError:
            return None
        key = name.encode() + b"="
        for entry in data.split(b"\0"):
            if entry.startswith(key):
                return entry[len(key) :].decode("ascii", errors="replace")
        return None
    try:
        return proc.environ().get(name)
    except psutil.Error:
        return None


def _mine(proc: psutil.Process) -> bool:
    """Run by this user, really and effectively (a setuid program the user started is not)."""
    if not hasattr(os, "getuid"):
        return True  # no uids to compare; the marker still has to match
    try:
        uids = proc.uids()
    except (psutil.Error, AttributeError):
        return False
    me = os.getuid()
    return bool(uids.real == me and uids.effective == me)


def _pidfd(pid: int) -> int | None:
    """A handle on the process itself, where the system has one: a signal sent through it
    reaches that process or nothing, however soon its pid is reused."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not hasattr(signal, "pidfd_send_signal"):
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def kill_if_voice(
    pid: int, run: str, *, started: float | None = None, not_before: float | None = None
) -> bool:
    """SIGKILL ``pid`` if, and only if, it is a live voice process of run ``run``.

    A voice process is this user's, carries ``RUNE_COUNCIL_VOICE=<run>.<n>`` (inherited,
    never set by anyone but this program) and, when given, started at ``started`` and not
    before ``not_before``. The checks and the signal go to one process: through a pidfd on
    Linux, elsewhere through psutil, which refuses a pid reused since it looked.
    """
    if not shapes.is_run_marker(run) or not shapes.is_voice_pid(pid) or pid == os.getpid():
        return False
    handle = _pidfd(pid)
    try:
        proc = psutil.Process(pid)
        created = proc.create_time()
        if started is not None and abs(created - started) > _START_SLACK_S:
            return False  # the pid now belongs to someone else
        if not_before is not None and created < not_before - _START_SLACK_S:
            return False  # a marker is inherited; it never predates its run
        if not _mine(proc) or not shapes.is_voice_marker(_environ_value(proc, MARKER_VAR), run):
            return False
        if handle is not None:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        else:
            proc.kill()
    except (psutil.Error, OSError, ValueError):
        return False
    finally:
        if handle is not None:
            os.close(handle)
    return True


def new_run_marker() -> str:
    return os.urandom(shapes.RUN_MARKER_BYTES).hex()


def current_run_marker() -> str:
    return _run_marker.get()


@contextlib.contextmanager
def run_marker(marker: str) -> Iterator[None]:
    """Mark every voice started inside the block as belonging to run ``marker``."""
    token = _run_marker.set(marker)
    try:
        yield
    finally:
        _run_marker.reset(token)


def next_voice_marker() -> str:
    return shapes.voice_marker(_run_marker.get(), next(_serial))


@functools.cache
def _libc_prctl() -> Callable[..., int] | None:
    # Looked up on the first voice process, not at import: finding libc can run ldconfig.
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


def ensure_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (once; Linux only)."""
    global _subreaper
    with _subreaper_lock:
        if _subreaper is None:
            prctl = _libc_prctl()
            _subreaper = prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        return _subreaper


def child_setup() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child's life to this process (Linux only), or None.

    None as well when this process's voice guard (``_VoiceGuard``) is running: it does the
    same from outside, and without a ``preexec_fn`` CPython starts the child with vfork
    instead of copying the whole council. A child started without one must be given to
    ``track`` with ``guarded=True``. The parent-death signal fires when the forking thread
    dies, which for asyncio is the event loop's thread: it outlives every voice it starts.
    A parent that died before the signal was armed is detected by the changed parent pid.
    """
    prctl = _libc_prctl()
    if prctl is None or _guard.watching():
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(125)

    return arm


class _VoiceGuard:
    """One ``voice_guard`` process per council process, told of every voice it must end.

    It is started on the first voice (which still gets the parent-death signal) and used
    from the first voice after it said it is running; until then, and if it cannot start,
    every voice keeps its ``preexec_fn``. If it dies, the next registration starts another
    and hands it every voice still running.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner = 0  # the pid that started it: a forked copy needs its own
        self.pid = 0
        self.commands = -1
        self.ready_fd = -1
        self.ready = False
        self.failed = False
        self.voices: dict[int, int] = {}

    def watching(self) -> bool:
        with self.lock:
            if self.owner != os.getpid():
                self._start()
            elif not self.ready and self.ready_fd >= 0:
                self._check_ready()
            return self.ready

    def _start(self) -> None:
        if self.owner != os.getpid():
            # A forked copy must not keep its parent's guard from seeing end-of-file.
            for fd in (self.commands, self.ready_fd):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        self.owner, self.ready, self.voices = os.getpid(), False, {}
        self.pid, self.commands, self.ready_fd = 0, -1, -1
        if self.failed or not sys.executable or _libc_prctl() is None:
            return
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "voice_guard.py")
        cmd_r = cmd_w = ready_r = ready_w = -1
        try:
            cmd_r, cmd_w = os.pipe()
            ready_r, ready_w = os.pipe()
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", script, str(os.getpid())],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, cmd_r, 0),
                    (os.POSIX_SPAWN_DUP2, ready_w, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )
        except OSError:
            self.failed = True
            for fd in (cmd_w, ready_r):
                if fd >= 0:
                    os.close(fd)
            return
        finally:
            for fd in (cmd_r, ready_w):
                if fd >= 0:
                    os.close(fd)
        os.set_blocking(cmd_w, False)
        os.set_blocking(ready_r, False)
        self.commands, self.ready_fd = cmd_w, ready_r

    def _check_ready(self) -> None:
        try:
            said = os.read(self.ready_fd, 16)
        except BlockingIOError:
            return
        except OSError:
            said = b""
        os.close(self.ready_fd)
        self.ready_fd = -1
        if said.startswith(b"ready"):
            self.ready = True
        else:
            # It exited before it could watch: keep the parent-death signal for good.
            self.failed = True
            self._reap()

    def _reap(self) -> None:
        if self.pid:
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, os.WNOHANG)

    def _send(self, line: bytes) -> bool:
        try:
            return os.write(self.commands, line) == len(line)
        except OSError:
            return False

    def add(self, pid: int) -> None:
        started = start_ticks(pid)
        if started is None:
            return  # already gone
        with self.lock:
            if self.commands < 0:
                return  # no guard was ever watching (no prctl, or it failed to start)
            self.voices[pid] = started
            if self._send(f"+{pid} {started}\n".encode()):
                return
            # The guard died (or stopped reading): a new one takes over every live voice.
            voices = self.voices
            os.close(self.commands)
            self.commands = -1
            self._reap()
            self._start()
            self.voices = voices
            for known, at in voices.items():
                self._send(f"+{known} {at}\n".encode())

    def remove(self, pid: int) -> None:
        with self.lock:
            if self.voices.pop(pid, None) is not None and self.owner == os.getpid():
                self._send(f"-{pid}\n".encode())


_guard = _VoiceGuard()


def _environ_block(pid: int) -> bytes | None:
    """``pid``'s environment as ``_needle`` looks for a variable in it, or None if unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            # The block starts without a NUL; prepend one so the first variable matches
            # like the others.
            return b"\0" + fh.read(_ENVIRON_CAP)
    except OSError:
        return None


def _environ_has(pid: int, needle: bytes) -> bool:
    data = _environ_block(pid)
    return data is not None and needle in data


def _needle(marker: str, *, prefix: bool) -> bytes:
    return f"\0{MARKER_VAR}={marker}{'' if prefix else chr(0)}".encode()


def table_readable() -> bool:
    """Whether ``find_lineage`` can read the process table itself (Linux's /proc)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _stat(pid: int) -> tuple[int, int, int, bool] | None:
    """(parent pid, process group, start in clock ticks since boot, is a zombie) of ``pid``."""
    # Read through the bare descriptor: a scan reads this for every process on the machine,
    # once per voice as it ends, and a file object's set-up cost more than the read.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | _CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name is in parentheses and may itself hold spaces or parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[19]), fields[0] in (b"Z", b"X")
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in the clock ticks ``find_lineage`` compares (Linux only)."""
    row = _stat(pid)
    return None if row is None else row[2]


# What ``find_lineages`` is asked for one voice: (root, pgid, marker, not_before).
Query = tuple[int, int, str | None, int]


def find_lineage(root: int, pgid: int, marker: str | None, *, not_before: int = 0) -> list[int]:
    """Pids of every live process of one voice, from a single read of /proc (Linux only).

    A process is the voice's when it descends from ``root``, is in process group ``pgid``, or
    (``marker`` given) carries the voice's marker in its environment: the marker finds what
    left both the group and the parent chain. ``not_before`` is the root's own start (from
    ``start_ticks``): a marker is inherited, so a process that started earlier cannot carry it,
    and its environment is not read. Zombies are left out; they hold nothing.
    """
    return find_lineages([(root, pgid, marker, not_before)])[0]


def find_lineages(queries: Sequence[Query]) -> list[list[int]]:
    """``find_lineage`` for several voices at once, from one read of /proc: voices that end
    together pay for one pass over every process on the machine, not one each."""
    me = os.getpid()
    uid = os.getuid()
    needles = [None if q[2] is None else _needle(q[2], prefix=False) for q in queries]
    marked = [i for i, needle in enumerate(needles) if needle is not None]
    groups: dict[int, list[int]] = {}
    for i, query in enumerate(queries):
        groups.setdefault(query[1], []).append(i)
    children: dict[int, list[int]] = {}
    found: list[set[int]] = [set() for _ in queries]
    try:
        names = os.listdir("/proc")
    except OSError:
        return [[] for _ in queries]
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        row = _stat(pid)
        if row is None or row[3]:
            continue
        ppid, group, started, _ = row
        children.setdefault(ppid, []).append(pid)
        for i in groups.get(group, ()):
            found[i].add(pid)
        # A marker is inherited, so a process older than a voice cannot carry its marker:
        # its environment is read only for the voices it could belong to.
        wanted = [i for i in marked if started >= queries[i][3] and pid not in found[i]]
        if not wanted or not _own(pid, uid):
            continue
        environ = _environ_block(pid)
        if environ is None:
            continue
        for i in wanted:
            needle = needles[i]
            if needle is not None and needle in environ:
                found[i].add(pid)
    for i, (root, *_rest) in enumerate(queries):
        seen = {root}
        stack = [root]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    found[i].add(child)
                    stack.append(child)
    return [sorted(f) for f in found]


def _own(pid: int, uid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def marked_processes(marker: str, *, prefix: bool = False) -> list[psutil.Process]:
    """Live processes whose environment carries ``marker`` (or, with ``prefix``, any marker
    that starts with it)."""
    needle = _needle(marker, prefix=prefix)
    me = os.getpid()
    found: list[psutil.Process] = []
    if sys.platform.startswith("linux"):
        uid = os.getuid()
        for pid in psutil.pids():
            if pid == me:
                continue
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
            except OSError:
                continue
            if _environ_has(pid, needle):
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(pid))
        return found
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(MARKER_VAR, "")
        except psutil.Error:
            continue
        if proc.pid != me and (value.startswith(marker) if prefix else value == marker):
            found.append(proc)
    return found


def reap_adopted(procs: list[psutil.Process]) -> None:
    """Collect the exit status of killed processes that were re-parented to us.

    As subreaper we inherit orphans; once dead they stay zombies until we wait for them.
    Only processes we just killed are waited for, and never the ones asyncio waits for.
    """
    me = os.getpid()
    for proc in procs:
        if proc.pid in spawned_roots:
            continue
        try:
            if proc.ppid() != me:
                continue
        except psutil.Error:
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(proc.pid, os.WNOHANG)


def kill_marked(run: str, *, not_before: float | None = None) -> int:
    """SIGKILL every live voice process of run ``run``; how many were signalled.

    ``not_before`` (a Unix time) spares processes created before it: a marker can only be
    inherited, never predate the run that made it. ``run`` may come from a run file, so it
    must be a marker this program could have made before anything is searched for.
    """
    if not shapes.is_run_marker(run):
        return 0
    count = 0
    for proc in marked_processes(f"{run}.", prefix=True):
        if kill_if_voice(proc.pid, run, not_before=not_before):
            count += 1
    return count
