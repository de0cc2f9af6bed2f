"""Run one untrusted CLI as a subprocess and always get it back under control.

Everything a council member's CLI can do wrong at the process level ends up here: hang,
ignore SIGTERM, flood its output, fork helpers that outlive it, exit while a helper still
holds its stdout, or fail to start at all. ``run_process`` turns each of those into a
``ProcessResult`` instead of an exception or a stuck await, and guarantees that when it
returns (or is cancelled) nothing it started is still running; inside an ``aftercare``
block, that holds when the block ends, and a voice that ended cleanly is finished with just
after its reply is used.

The pipes are created here with ``os.pipe()`` rather than by asyncio's ``PIPE``: owning the
read and write transports lets us drop them the moment we decide the run is over, even if
some stray process still holds the other end, and ``Process.wait()`` then reflects only the
child's exit instead of also waiting for every pipe to close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from ..core import shapes
from . import lineage
from .scratch import scratch_root, sweep_roots

if TYPE_CHECKING:
    import psutil
else:  # loaded on first use: a council of endpoints alone never starts a process
    from .on_first_use import psutil

__all__ = [
    "Outcome",
    "ProcessResult",
    "make_scratch_dir",
    "remove_leftover_dirs",
    "remove_scratch_dir",
    "run_process",
]

# After a timeout nobody waits for the voice's answer any more, so there is nothing for it to
# finish cleanly: a CLI that honours SIGTERM exits in milliseconds, and one that ignores it
# would otherwise hold its slot's fallback for the whole grace period.
KILL_GRACE_S = 0.5

Outcome = Literal["ok", "exit_nonzero", "timeout", "too_large", "spawn_error", "cancelled"]

# Once the child has exited, helpers it left behind get this long to finish writing and
# let go of the output pipes before they are killed.
_EXIT_DRAIN_S = 0.5
# After the tree is killed the pipes should close at once; waiting longer than this means
# something outside the tree holds them.
_POST_KILL_DRAIN_S = 0.5
# How often descendants are recorded while the child runs, so helpers that detach and are
# orphaned before the end can still be found and killed.
_TRACK_INTERVAL_S = 0.25
# How long SIGKILLed processes get to actually disappear before we stop waiting.
_KILL_CONFIRM_S = 1.0
_POLL_S = 0.02


@dataclass(frozen=True)
class ProcessResult:
    """What happened to one CLI run.

    ``exit_code`` is the child's own status (negative for a signal, as asyncio reports it) or
    ``None`` when we killed it or it never started. ``stdout`` is the head of the output, at
    most ``max_stdout`` bytes; ``stderr`` is the tail, at most ``max_stderr`` bytes, because
    that is where errors are. ``run_process`` never returns ``"cancelled"``: it re-raises
    ``CancelledError``; the value exists for callers that record a cancelled run.
    """

    outcome: Outcome
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    elapsed_s: float
    detail: str
    pid: int | None


async def run_process(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    timeout_s: float,
    max_stdout: int = 2_000_000,
    max_stderr: int = 64_000,
    cwd: str | os.PathLike[str] | None = None,
    on_start: Callable[[int], None] | None = None,
    kill_grace_s: float = KILL_GRACE_S,
    marker: str | None = None,
    also_remove: Sequence[str] = (),
) -> ProcessResult:
    """Run ``argv`` with ``stdin`` as its input and exactly ``env`` as its environment.

    The child gets its own session (so its process group can be signalled as a whole) and,
    unless ``cwd`` is given, a fresh empty directory of its own under the user's private
    scratch root (``scratch.scratch_root``), removed afterwards.
    Ending the run means SIGTERM to the group and to every descendant, ``kill_grace_s`` to
    comply, then SIGKILL. A run ends on timeout, when stdout exceeds ``max_stdout``, on
    cancellation, or shortly after the child exits. A failure to start is reported as
    ``"spawn_error"``; an exception from ``on_start`` or a cancellation propagates after
    the cleanup. ``marker`` is the voice marker the child carries, for a caller that made
    other directories for it first (``make_scratch_dir``); by default a new one. Those
    directories go in ``also_remove``: from the call on they are the run's, removed with its
    working directory once nothing it started is running, whatever happens.

    When it returns nothing it started is running and its directories are gone, except
    inside an ``aftercare`` block: there a child that exited and let go of its output has its
    reply returned at once, and the same check and removal follow shortly after, finished
    before the block ends.
    """
    dirs = list(also_remove)
    run: _Run | None = None
    try:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if kill_grace_s < 0 or max_stdout < 0 or max_stderr < 0:
            raise ValueError("kill_grace_s, max_stdout and max_stderr must not be negative")
        started = time.monotonic()
        if marker is None:
            marker = lineage.next_voice_marker()
        elif not shapes.is_voice_marker(marker):
            raise ValueError(f"not a voice marker: {marker!r}")
        scratch: str | None = None
        if cwd is None:
            try:
                scratch = make_scratch_dir(marker)
            except OSError as exc:
                return _not_started(started, f"could not create a working directory: {exc}")
            dirs.append(scratch)
        run = _Run(
            argv=list(argv),
            stdin=stdin,
            env={**env, lineage.MARKER_VAR: marker},
            marker=marker,
            cwd=cwd if cwd is not None else scratch,
            timeout_s=timeout_s,
            max_stdout=max_stdout,
            max_stderr=max_stderr,
            kill_grace_s=kill_grace_s,
            started=started,
            dirs=dirs,
        )
        return await run.execute(on_start)
    finally:
        if run is None or not run.handed_off:
            _remove_dirs(dirs)


def _remove_dirs(dirs: Iterable[str]) -> None:
    for path in dirs:
        remove_scratch_dir(path)


# Inside an ``aftercare`` block, how long after a voice ended its tree is checked and its
# directories removed: long enough for the loop to start what its reply lets it start (the
# next stage's voices), and voices ending within it share one scan of the process table.
AFTERCARE_DELAY_S = 0.01
_aftercare: ContextVar[_Aftercare | None] = ContextVar("rune_council_aftercare", default=None)


@contextlib.asynccontextmanager
async def aftercare() -> AsyncIterator[None]:
    """A block whose voices that end cleanly are finished with after their reply is used.

    Checking that a voice left nothing running reads every process on the machine, and
    removing its directories touches the disk; neither changes its reply. Inside the block a
    voice that exited and closed its output hands its reply back at once and those steps run
    a moment later, off the path from one stage's last answer to the next stage's start (a
    timeout, a flood, a cancellation or a voice whose helpers hold its output is finished
    with before its reply, as outside). When the block ends, however it ends, every voice
    started in it has been finished with.
    """
    care = _Aftercare(asyncio.get_running_loop())
    token = _aftercare.set(care)
    try:
        yield
    finally:
        _aftercare.reset(token)
        await care.settle()


class _Aftercare:
    """The voices of one ``aftercare`` block waiting to be finished with, and those being."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: list[_Run] = []
        self.timer: asyncio.TimerHandle | None = None
        self.running: set[asyncio.Task[None]] = set()

    def add(self, run: _Run) -> None:
        self.waiting.append(run)
        if self.timer is None:
            self.timer = self.loop.call_later(AFTERCARE_DELAY_S, self.start)

    def postpone(self) -> None:
        """A voice was just started: the next ones of its stage are being started too, so
        what waits is done once they are, not between them."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = self.loop.call_later(AFTERCARE_DELAY_S, self.start)

    def start(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.waiting = self.waiting, []
        if batch:
            self.running.add(self.loop.create_task(_finish_all(batch)))

    async def settle(self) -> None:
        """Finish with every voice now; a cancellation meanwhile is held until they are."""
        cancelled = False
        error: BaseException | None = None
        self.start()
        while self.running:
            batch = list(self.running)
            try:
                await asyncio.shield(asyncio.wait(batch))
            except asyncio.CancelledError:
                cancelled = True
            for task in batch:
                if task.done():
                    self.running.discard(task)
                    if not task.cancelled() and error is None:
                        error = task.exception()
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            raise error


async def _finish_all(batch: list[_Run]) -> None:
    """Finish with voices that ended, their trees found in one read of the process table."""
    found: list[list[int] | None] = [None] * len(batch)
    if all(run.tree is not None and run.tree.table for run in batch):
        found = list(lineage.find_lineages([run.tree.query() for run in batch if run.tree]))
    outcomes = await asyncio.gather(
        *(run.finish_later(f) for run, f in zip(batch, found, strict=True)),
        return_exceptions=True,
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def make_scratch_dir(marker: str) -> str:
    """A fresh private (0700) directory for the voice process ``marker`` names.

    Every directory a voice is given (its working directory, the one holding its prompt and
    schema files) is named after its marker and nothing else, so that when a council is
    killed before it can remove them, the next command that finds the run abandoned can
    tell them from anything else and remove them (``remove_leftover_dirs``).
    """
    return tempfile.mkdtemp(prefix=shapes.scratch_prefix(marker), dir=scratch_root().path)


class _Capture(asyncio.Protocol):
    """Collects one output pipe without ever holding more than ``limit`` bytes.

    ``keep_tail`` keeps the last ``limit`` bytes; otherwise the first ``limit`` bytes are
    kept, anything further is dropped and ``overflow`` resolves.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int, *, keep_tail: bool) -> None:
        self.data = bytearray()
        self.limit = limit
        self.keep_tail = keep_tail
        self.overflow: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        if self.keep_tail:
            if len(data) >= self.limit:
                self.data[:] = data[len(data) - self.limit :]
            else:
                self.data += data
                del self.data[: max(0, len(self.data) - self.limit)]
            return
        room = self.limit - len(self.data)
        if len(data) <= room:
            self.data += data
            return
        self.data += data[:room]
        if not self.overflow.done():
            self.overflow.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Feed(asyncio.BaseProtocol):
    """Protocol of the stdin pipe.

    A child that exits (or closes stdin) without reading everything makes the transport
    close with BrokenPipeError; that is normal for a CLI, so the error is deliberately ignored.
    """

    def connection_lost(self, exc: Exception | None) -> None:
        return None


class _ProcessTree:
    """Everything the child started, and the means to end it."""

    def __init__(self, pid: int, marker: str) -> None:
        # start_new_session makes the child the leader of a group whose id is its pid.
        self.pgid = pid
        self.marker = marker
        self.known: dict[int, psutil.Process] = {}
        self.root: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self.root = psutil.Process(pid)
        # Where /proc can be read, one pass over it finds the descendants, the group and the
        # marked processes together; elsewhere psutil answers each question separately.
        self.table = lineage.table_readable()
        started = lineage.start_ticks(pid) if self.table else None
        self.not_before = 0 if started is None else started

    def record_descendants(self) -> None:
        if self.root is None:
            return
        if self.table:
            self._remember(lineage.find_lineages([(self.pgid, self.pgid, None, 0)])[0])
            return
        try:
            descendants = self.root.children(recursive=True)
        except psutil.Error:
            return
        for proc in descendants:
            # psutil.Process remembers the creation time, so a stale entry for a reused pid
            # is replaced here and is never signalled by mistake.
            self.known[proc.pid] = proc

    def _remember(self, pids: Iterable[int]) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
        for proc in found:
            self.known[proc.pid] = proc
        return found

    def query(self) -> lineage.Query:
        """What ``find_lineages`` is asked for to find every process of this tree."""
        return (self.pgid, self.pgid, self.marker, self.not_before)

    def members(self, found: list[int] | None = None) -> list[psutil.Process]:
        """Every live process of the tree; ``found`` is what ``find_lineages`` gave for
        ``query`` just now, when the caller read the process table for several trees."""
        # The marker in the environment finds descendants that left both the group and the
        # parent chain (double fork + setsid + closed stdio) before we recorded them.
        if self.table:
            if found is None:
                found = lineage.find_lineages([self.query()])[0]
            candidates = [*self.known.values(), *self._remember(found)]
        else:
            candidates = [
                *self.known.values(),
                *_group_members(self.pgid),
                *lineage.marked_processes(self.marker),
            ]
        if self.root is not None:
            candidates.append(self.root)
        unique = {(p.pid, _create_time(p)): p for p in candidates}
        return [p for p in unique.values() if _alive(p)]

    async def kill(self, grace_s: float, found: list[int] | None = None) -> None:
        # Collect before signalling: once a parent dies its children are reparented and no
        # longer show up as descendants of the root. The single pass of ``members`` already
        # follows the parent chain.
        if not self.table:
            self.record_descendants()
        members = self.members(found)
        try:
            await _terminate(members, grace_s, pgid=self.pgid)
        finally:
            lineage.reap_adopted(members)


class _Run:
    def __init__(
        self,
        *,
        argv: list[str],
        stdin: bytes,
        env: dict[str, str],
        cwd: str | os.PathLike[str] | None,
        timeout_s: float,
        max_stdout: int,
        max_stderr: int,
        kill_grace_s: float,
        started: float,
        marker: str,
        dirs: list[str],
    ) -> None:
        self.marker = marker
        # Its directories, removed once nothing it started is running.
        self.dirs = dirs
        # Set when an ``aftercare`` block finishes with it after its reply.
        self.handed_off = False
        self.tree: _ProcessTree | None = None
        self._out: _Capture | None = None
        self._err: _Capture | None = None
        self._release: Callable[[], None] = lambda: None
        self.argv = argv
        self.stdin = stdin
        self.env = env
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.max_stdout = max_stdout
        self.max_stderr = max_stderr
        self.kill_grace_s = kill_grace_s
        self.started = started
        self.output_inodes: set[int] = set()
        self.left_behind = False

    async def execute(self, on_start: Callable[[int], None] | None) -> ProcessResult:
        if not self.argv:
            return _not_started(self.started, "empty argv: nothing to run")
        loop = asyncio.get_running_loop()

        # The child's ends are closed in the parent right after the spawn; the parent's
        # ends are closed by their transports, or below if they never get one.
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.output_inodes = {os.fstat(fd).st_ino for fd in (out_r, err_r)}
        stdin_file = open(in_w, "wb", buffering=0)  # noqa: SIM115
        stdout_file = open(out_r, "rb", buffering=0)  # noqa: SIM115
        stderr_file = open(err_r, "rb", buffering=0)  # noqa: SIM115
        loose_files: list[BinaryIO] = [stdin_file, stdout_file, stderr_file]
        # What the pipe holds of the prompt goes in before the child exists, so the child
        # reads it the moment it starts rather than once the loop has connected its pipes
        # (after every other voice of the stage was started); a prompt that fits whole is
        # closed behind it, and the transport writes the rest of a longer one.
        fed = _prefill(in_w, self.stdin)
        if fed == len(self.stdin):
            stdin_file.close()
            loose_files.remove(stdin_file)
        lineage.ensure_subreaper()
        # None once the voice guard watches this process, so the spawn can use vfork.
        setup = lineage.child_setup()
        try:
            try:
                proc = await _start(
                    loop,
                    self.argv,
                    stdin=in_r,
                    stdout=out_w,
                    stderr=err_w,
                    env=self.env,
                    cwd=self.cwd,
                    preexec_fn=setup,
                )
                lineage.spawned_roots.add(proc.pid)
                lineage.track(self.marker, proc.pid, guarded=setup is None)
                care = _aftercare.get()
                if care is not None:
                    care.postpone()
            finally:
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
        except (OSError, ValueError) as exc:
            for f in loose_files:
                f.close()
            return _not_started(self.started, _spawn_detail(exc, self.argv[0], self.cwd))
        except BaseException:
            for f in loose_files:
                f.close()
            raise

        tree = self.tree = _ProcessTree(proc.pid, self.marker)
        out = self._out = _Capture(loop, self.max_stdout, keep_tail=False)
        err = self._err = _Capture(loop, self.max_stderr, keep_tail=True)
        out_transport: asyncio.ReadTransport | None = None
        err_transport: asyncio.ReadTransport | None = None
        in_transport: asyncio.WriteTransport | None = None
        tracker = _tracker(loop)
        exited: asyncio.Future[int] | None = None

        def release() -> None:
            tracker.remove(tree)
            if exited is not None and not exited.done():
                exited.cancel()
            for transport in (out_transport, err_transport):
                if transport is not None:
                    transport.close()
            if in_transport is not None and (
                not in_transport.is_closing() or in_transport.get_write_buffer_size() > 0
            ):
                # Unwritten input would otherwise keep the transport open for good.
                in_transport.abort()
            for f in loose_files:
                f.close()
            proc.release()
            lineage.spawned_roots.discard(proc.pid)
            lineage.untrack(self.marker, proc.pid)

        self._release = release
        try:
            out_transport, _ = await loop.connect_read_pipe(lambda: out, stdout_file)
            loose_files.remove(stdout_file)
            err_transport, _ = await loop.connect_read_pipe(lambda: err, stderr_file)
            loose_files.remove(stderr_file)
            if fed < len(self.stdin):
                in_transport, _ = await loop.connect_write_pipe(_Feed, stdin_file)
                loose_files.remove(stdin_file)
                # The transport writes whatever the pipe accepts as the child reads,
                # interleaved with reading its output, and closes stdin once all is written.
                in_transport.write(self.stdin[fed:])
                in_transport.close()
            if on_start is not None:
                on_start(proc.pid)

            tracker.add(tree)
            exited = proc.exited
            outcome, detail, exit_code = await self._supervise(proc, exited, out, err)
            care = _aftercare.get()
            ended_clean = (
                exited.done() and out.closed.done() and err.closed.done() and not self.left_behind
            )
            if care is not None and ended_clean and not out.overflow.done():
                # Nothing the kill or the rest can find changes this reply: it goes back now.
                # Its root is gone, so there are no more descendants of it to record.
                tracker.remove(tree)
                self.handed_off = True
                care.add(self)
            else:
                await self._finish(tree, out, err)
                if not exited.done():
                    await asyncio.wait({exited}, timeout=_KILL_CONFIRM_S)
            if self.left_behind:
                detail += "; leftover processes held the output open and were killed"
            return ProcessResult(
                outcome=outcome,
                exit_code=exit_code,
                stdout=bytes(out.data),
                stderr=bytes(err.data),
                elapsed_s=time.monotonic() - self.started,
                detail=detail,
                pid=proc.pid,
            )
        except BaseException:
            # Cancelled, or on_start raised: the caller gets the exception, but only after
            # the processes are gone.
            await self._finish(tree, out, err)
            raise
        finally:
            if not self.handed_off:
                release()

    async def finish_later(self, found: list[int] | None) -> None:
        """What returning the reply left for an ``aftercare`` block: the tree killed (its
        processes ``found`` in a read of the table shared with other voices), the rest
        released, the directories removed."""
        try:
            assert self.tree is not None and self._out is not None and self._err is not None
            await self._finish(self.tree, self._out, self._err, found)
        finally:
            self._release()
            _remove_dirs(self.dirs)

    async def _supervise(
        self,
        proc: _Child,
        exited: asyncio.Future[int],
        out: _Capture,
        err: _Capture,
    ) -> tuple[Outcome, str, int | None]:
        """Wait for the event that ends the run; the caller then kills what is left."""
        deadline = self.started + self.timeout_s
        if not exited.done():  # a child that exits at once may be reaped already
            await _wait_any([exited, out.overflow], deadline - time.monotonic())

        if out.overflow.done():
            return "too_large", self._too_large_detail(), proc.returncode
        if not exited.done():
            detail = f"timed out after {float(self.timeout_s)} s; process tree killed"
            return "timeout", detail, None

        code = exited.result()
        # The child is gone but a helper may still be writing into the inherited pipes.
        drain_end = time.monotonic() + _EXIT_DRAIN_S
        while not (out.closed.done() and err.closed.done()) and not out.overflow.done():
            left = drain_end - time.monotonic()
            if left <= 0:
                self.left_behind = True
                break
            await _wait_any([out.closed, err.closed, out.overflow], left)
        if out.overflow.done():
            return "too_large", self._too_large_detail(), code
        if code == 0:
            return "ok", "exited 0", code
        return "exit_nonzero", _exit_detail(code), code

    def _too_large_detail(self) -> str:
        return f"stdout exceeded {self.max_stdout} bytes; process tree killed"

    async def _finish(
        self, tree: _ProcessTree, out: _Capture, err: _Capture, found: list[int] | None = None
    ) -> None:
        """Make sure nothing from the run survives, whatever the outcome."""
        await tree.kill(self.kill_grace_s, found)
        pipes = [out.closed, err.closed]
        if await _all_done(pipes, _POST_KILL_DRAIN_S):
            return
        # Something outside the process tree (it left the session, and its parent died before
        # we saw it) still holds our pipes. Holding them is proof enough it is ours.
        holders = _pipe_writers(self.output_inodes)
        if holders:
            self.left_behind = True
            await _terminate(holders, self.kill_grace_s, pgid=None)
            await _all_done(pipes, _POST_KILL_DRAIN_S)


def _prefill(fd: int, data: bytes) -> int:
    """How much of ``data`` the empty pipe ``fd`` took without blocking (it is left
    non-blocking, as its transport would make it)."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    written = 0
    while written < len(data):
        try:
            n = os.write(fd, view[written:])
        except BlockingIOError:
            break
        if n <= 0:
            break
        written += n
    return written


class _Child:
    """A started voice and the future of its exit status.

    Where the kernel hands out pidfds, the exit is seen by the event loop itself (the pidfd
    turns readable); asyncio's own child watcher on Python 3.11 starts a thread per child
    instead, and a council starting five voices at once on a busy machine paid for each in
    thread start-ups and hand-offs of the interpreter lock. Where there is no pidfd to be
    had (an older kernel, a loop that cannot watch a descriptor), asyncio starts the child and
    waits for it: those are the only two ways a voice's exit is waited for.
    """

    def __init__(
        self,
        pid: int,
        exited: asyncio.Future[int],
        *,
        popen: subprocess.Popen[bytes] | None = None,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        self.pid = pid
        self.exited = exited
        self._popen = popen
        self._process = process
        self._pidfd = -1
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def returncode(self) -> int | None:
        if self._popen is not None:
            return self._popen.returncode
        assert self._process is not None
        return self._process.returncode

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Resolve ``exited`` once the child ends, reaping it from the loop (pidfd only).

        The kernel and the loop were found able to (``_pidfd_usable``), so what is left to
        fail is the descriptor itself (none to spare): the child is then killed and reaped
        and the start fails, as asyncio's own pidfd watcher does."""
        assert self._popen is not None
        try:
            fd = os.pidfd_open(self.pid)
        except OSError:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            self._popen.wait()  # killed before it could do anything: gone at once
            raise
        loop.add_reader(fd, self._reap)
        self._pidfd, self._loop = fd, loop

    def _reap(self) -> None:
        assert self._popen is not None
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            code = 255  # reaped by someone else: its status is lost (asyncio says 255 too)
        else:
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
        self._popen.returncode = code
        self._unwatch()
        if not self.exited.done():
            self.exited.set_result(code)

    def _unwatch(self) -> None:
        if self._pidfd >= 0:
            assert self._loop is not None
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def release(self) -> None:
        """The run is over: a child not reaped yet (it outlived even SIGKILL's confirmation)
        is waited for on a thread of its own, so it never stays a zombie of the loop's."""
        if self._pidfd < 0 or self._popen is None or self._popen.returncode is not None:
            return
        self._unwatch()
        popen = self._popen
        threading.Thread(target=popen.wait, name="rune-voice-reap", daemon=True).start()


@functools.cache
def _pidfd_works() -> bool:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return False
    try:
        os.close(opener(os.getpid()))
    except OSError:
        return False  # a kernel without pidfds (before Linux 5.3)
    return True


# Loops found able to watch a descriptor (a pidfd), by identity; weakly, so a closed loop
# does not stay alive for it.
_watching_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, bool] = (
    weakref.WeakKeyDictionary()
)


def _pidfd_usable(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether a child started now can be waited for through a pidfd on ``loop``: the kernel
    hands them out and the loop can watch one. Otherwise asyncio starts and waits for it."""
    if not _pidfd_works():
        return False
    able = _watching_loops.get(loop)
    if able is None:
        try:
            probe = os.pidfd_open(os.getpid())
        except OSError:
            return False  # no descriptor to spare now: asyncio's way, this once
        try:
            loop.add_reader(probe, lambda: None)
        except NotImplementedError:  # a loop that cannot watch a descriptor
            able = False
        else:
            loop.remove_reader(probe)
            able = True
        finally:
            os.close(probe)
        _watching_loops[loop] = able
    return able


async def _start(
    loop: asyncio.AbstractEventLoop,
    argv: list[str],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    env: dict[str, str],
    cwd: str | os.PathLike[str] | None,
    preexec_fn: Callable[[], None] | None,
) -> _Child:
    """Start ``argv`` as the leader of a new session, on the given descriptors."""
    how: dict[str, Any] = {
        "stdin": stdin,
        "stdout": stdout,
        "stderr": stderr,
        "env": env,
        "cwd": cwd,
        "start_new_session": True,
        "preexec_fn": preexec_fn,
    }
    if not _pidfd_usable(loop):
        process = await asyncio.create_subprocess_exec(*argv, **how)
        return _Child(process.pid, asyncio.ensure_future(process.wait()), process=process)
    popen: subprocess.Popen[bytes] = subprocess.Popen(argv, **how)
    child = _Child(popen.pid, loop.create_future(), popen=popen)
    child.watch(loop)
    return child


class _Tracker:
    """Records the descendants of every voice running on one loop, all of them in one read
    of the process table per tick (where /proc can be read), so voices running together do
    not each pay for a pass over every process on the machine."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.trees: dict[_ProcessTree, None] = {}
        self.task: asyncio.Task[None] | None = None

    def add(self, tree: _ProcessTree) -> None:
        self.trees[tree] = None
        if self.task is None:
            self.task = self.loop.create_task(self._run())

    def remove(self, tree: _ProcessTree) -> None:
        self.trees.pop(tree, None)
        if not self.trees and self.task is not None:
            self.task.cancel()
            self.task = None

    async def _run(self) -> None:
        # Each voice is recorded within _TRACK_INTERVAL_S of its start, then as often.
        while self.trees:
            await asyncio.sleep(_TRACK_INTERVAL_S)
            trees = [t for t in self.trees if t.root is not None]
            tabled = [t for t in trees if t.table]
            if tabled:
                found = lineage.find_lineages([(t.pgid, t.pgid, None, 0) for t in tabled])
                for tree, pids in zip(tabled, found, strict=True):
                    tree._remember(pids)
            for tree in trees:
                if not tree.table:
                    tree.record_descendants()
                if tree.root is not None and not _alive(tree.root):
                    self.trees.pop(tree, None)  # its exit ends its run: nothing more to see
        self.task = None


_trackers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Tracker] = (
    weakref.WeakKeyDictionary()
)


def _tracker(loop: asyncio.AbstractEventLoop) -> _Tracker:
    found = _trackers.get(loop)
    if found is None:
        found = _trackers[loop] = _Tracker(loop)
    return found


async def _terminate(procs: list[psutil.Process], grace_s: float, *, pgid: int | None) -> None:
    """SIGTERM, up to ``grace_s`` to comply, then SIGKILL for whatever is left."""
    _signal_all(procs, signal.SIGTERM, pgid)
    try:
        await _wait_gone(procs, grace_s)
    finally:
        # Also reached when cancelled during the grace period: a second cancellation must
        # not leave the tree running.
        _signal_all(procs, signal.SIGKILL, pgid)
    await _wait_gone(procs, _KILL_CONFIRM_S)


def _signal_all(procs: Iterable[psutil.Process], sig: signal.Signals, pgid: int | None) -> None:
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


async def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while any(_alive(p) for p in procs) and time.monotonic() < end:
        await asyncio.sleep(_POLL_S)


def _alive(proc: psutil.Process) -> bool:
    # A zombie has released everything; it only waits for its parent (or init) to reap it.
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _create_time(proc: psutil.Process) -> float:
    try:
        return proc.create_time()
    except psutil.Error:
        return 0.0


def _group_members(pgid: int) -> list[psutil.Process]:
    members: list[psutil.Process] = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid:
                members.append(psutil.Process(pid))
        except (OSError, psutil.Error):
            continue
    return members


def _pipe_writers(inodes: set[int]) -> list[psutil.Process]:
    """Processes other than us that can write into any of the given pipes (Linux only).

    Only write ends count: a process that merely inherited a read end (say, a worker forked
    from this program) cannot keep the pipe from reaching end-of-file and is none of ours.
    """
    if not sys.platform.startswith("linux") or not inodes:
        return []
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    me = os.getpid()
    writers: list[psutil.Process] = []
    for pid in psutil.pids():
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        if any(_is_pipe_writer(pid, fd, wanted) for fd in fds):
            with contextlib.suppress(psutil.Error):
                writers.append(psutil.Process(pid))
    return writers


def _is_pipe_writer(pid: int, fd: str, wanted: set[str]) -> bool:
    try:
        if os.readlink(f"/proc/{pid}/fd/{fd}") not in wanted:
            return False
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            for line in info:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    except (OSError, ValueError):
        pass
    return False


async def _wait_any(futures: Iterable[asyncio.Future[Any]], timeout_s: float) -> None:
    pending = [f for f in futures if not f.done()]
    if pending and timeout_s > 0:
        await asyncio.wait(pending, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)


async def _all_done(futures: list[asyncio.Future[None]], timeout_s: float) -> bool:
    pending = [f for f in futures if not f.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)
    return all(f.done() for f in futures)


def _exit_detail(code: int) -> str:
    if code >= 0:
        return f"exited {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"killed by {name}"


def _spawn_detail(
    exc: OSError | ValueError, program: str, cwd: str | os.PathLike[str] | None
) -> str:
    if isinstance(exc, ValueError):
        return f"invalid command line or environment: {exc}"
    if cwd is not None and exc.filename is not None and os.fspath(exc.filename) == os.fspath(cwd):
        return f"working directory unusable: {os.fspath(cwd)} ({exc.strerror})"
    if isinstance(exc, FileNotFoundError):
        return f"executable not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {program}"
    return f"could not start {program}: {exc.strerror or exc}"


def _not_started(started: float, detail: str) -> ProcessResult:
    return ProcessResult(
        outcome="spawn_error",
        exit_code=None,
        stdout=b"",
        stderr=b"",
        elapsed_s=time.monotonic() - started,
        detail=detail,
        pid=None,
    )


_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
# Deeper than any working directory a CLI makes; each level holds one descriptor open.
_MAX_DEPTH = 128


def _open_dir(name: str, parent: int) -> int | None:
    """``name`` in the directory open as ``parent``, opened without following a symlink; a
    directory a voice locked (mode 000, ours) is unlocked through a handle, never a path."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        pass
    except OSError:
        return None  # a symlink, not a directory, or already gone
    o_path = getattr(os, "O_PATH", 0)
    if not o_path or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        handle = os.open(name, o_path | (_DIR_FLAGS & ~os.O_ACCMODE), dir_fd=parent)
    except OSError:
        return None
    try:
        if os.fstat(handle).st_uid != os.getuid():
            return None  # not ours to unlock
        # /proc/self/fd/N is the inode the handle holds, whatever the name now points at.
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
        return os.open(f"/proc/self/fd/{handle}", _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    finally:
        os.close(handle)


def _clear(top: int) -> None:
    """Remove everything inside the directory open as ``top``, reaching nothing outside it:
    every step is relative to an open directory, and symlinks are removed, not followed."""
    stack: list[tuple[int, str, list[str]]] = []

    def enter(fd: int, name: str) -> None:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_mode & 0o700 != 0o700:
                os.fchmod(fd, 0o700)  # a voice may have made its own directory read-only
        try:
            names = os.listdir(fd)
        except OSError:
            names = []
        stack.append((fd, name, names))

    enter(top, "")
    while stack:
        fd, name, names = stack[-1]
        if not names:
            stack.pop()
            if stack:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=stack[-1][0])
            continue
        child = names.pop()
        try:
            st = os.stat(child, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and len(stack) < _MAX_DEPTH:
            sub = _open_dir(child, fd)
            if sub is not None:
                enter(sub, child)
            continue
        with contextlib.suppress(OSError):
            os.unlink(child, dir_fd=fd)


def _remove_own_dir(parent: int, name: str) -> bool:
    """Remove directory ``name`` inside ``parent`` if it is a real directory of this user's
    (checked on the opened handle, so a swapped-in symlink or another's directory is left
    alone); whether it was ours to remove."""
    fd = _open_dir(name, parent)
    if fd is None:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return False
        _clear(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=parent)
    return True


def remove_scratch_dir(path: str) -> None:
    """Remove a directory ``make_scratch_dir`` made, whatever the child left in it: its
    symlinks are removed, never followed, and what it locked is unlocked through a handle."""
    parent, name = os.path.split(os.path.abspath(path))
    try:
        parent_fd = os.open(parent, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        _remove_own_dir(parent_fd, name)
    finally:
        os.close(parent_fd)


def remove_leftover_dirs(run: str) -> int:
    """Remove the directories voices of run ``run`` were given when their council was
    killed before it could; how many were removed.

    ``run`` comes from a run file, so it never becomes part of a path: each root a voice's
    directories may be in (``scratch.sweep_roots``) is listed, and only an entry directly
    inside it whose name has the exact shape of one of this run's directories, and that is a
    directory this user owns, is removed.
    """
    if not shapes.is_run_marker(run):
        return 0
    removed = 0
    for where in sweep_roots():
        # The roots come from the user's own settings (TMPDIR, XDG_*, HOME), not the file's;
        # any of them may be reached through a symlink the user made.
        try:
            root = os.open(where, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            for name in os.listdir(root):
                if shapes.is_scratch_dir_name(name, run) and _remove_own_dir(root, name):
                    removed += 1
        except OSError:
            pass
        finally:
            os.close(root)
    return removed
