"""At most K councils at once, a bounded queue behind them, and a clean stop.

Every accepted request gets its run file at once (status ``queued``), so it can be read,
listed, followed and cancelled before a slot frees up. The council itself is the library's
``aconvene``; when it starts it replaces the queued document with its skeleton.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..contract import CouncilResult, Orchestrator, PerspectiveRequest
from ..errors import CouncilError, RunFileError
from ..paths import RuneDir
from ..recorder import RunRecorder
from ..runs import load

if TYPE_CHECKING:
    from ..runtimes.base import Runtime
    from .settings import ServeSettings

# Queued files get a fresh heartbeat this often, like a running council's.
HEARTBEAT_S = 5.0
# How long shutdown waits for cancelled councils to write their last state.
STOP_GRACE_S = 20.0


class Duplicate(CouncilError):
    """The run id is taken, by a run file or a council this server holds."""


class Busy(CouncilError):
    """Every slot and every queue place is taken."""


@dataclass
class _Entry:
    request: PerspectiveRequest
    endpoints: tuple[str, ...] | None
    recorder: RunRecorder
    queued: CouncilResult
    started: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)


def _now() -> str:
    from ..council import now

    return now()


class CouncilPool:
    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.where = RuneDir.resolve(settings.rune_dir)
        self._entries: dict[str, _Entry] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self._lock = asyncio.Lock()
        self._closing = False
        self._heartbeat: asyncio.Task[None] | None = None
        self._subagent: Runtime | None = None
        if settings.subagent_command:
            from ..runtimes.subagent import CommandRuntime

            self._subagent = CommandRuntime.from_command_line(
                settings.subagent_command, model_family=settings.subagent_family
            )

    @property
    def running(self) -> int:
        return sum(1 for e in self._entries.values() if e.started)

    @property
    def queued(self) -> int:
        return len(self._entries) - self.running

    def holds(self, run_id: str) -> bool:
        return run_id in self._entries

    async def submit(self, request: PerspectiveRequest, endpoints: Sequence[str] | None) -> None:
        """Accept a council: write its queued run file and schedule it; or refuse."""
        path = self.where.run_file(request.id)
        async with self._lock:
            if self._closing:
                raise Busy("the server is shutting down")
            if request.id in self._entries or path.exists() or path.is_symlink():
                raise Duplicate(f"run id {request.id!r} is already used")
            if len(self._entries) >= self.settings.max_concurrent + self.settings.max_queued:
                raise Busy(
                    f"{self.running} councils running and {self.queued} queued (the limits are "
                    f"{self.settings.max_concurrent} and {self.settings.max_queued})"
                )
            started = _now()
            queued = CouncilResult(
                id=request.id,
                question=request.question,
                mode=request.mode,
                status="queued",
                voices_requested=request.n,
                request=request,
                orchestrator=Orchestrator(
                    pid=os.getpid(),
                    host=socket.gethostname(),
                    started_at=started,
                    heartbeat_at=started,
                ),
                started_at=started,
                run_file=str(path),
                notes=["queued: waiting for a free council slot on the server"],
            )
            entry = _Entry(
                request, tuple(endpoints) if endpoints else None, RunRecorder(path), queued
            )
            entry.recorder.write(queued)
            self._entries[request.id] = entry
            entry.task = asyncio.create_task(self._run(entry), name=f"council-{request.id}")
            entry.task.add_done_callback(functools.partial(self._finished, entry))
            if self._heartbeat is None:
                self._heartbeat = asyncio.create_task(self._beat())

    async def _run(self, entry: _Entry) -> None:
        async with self._slots:
            entry.started = True
            await self._convene(entry)

    def _finished(self, entry: _Entry, task: asyncio.Task[None]) -> None:
        # A done callback, not a finally: a task cancelled before its first step never
        # enters its own body.
        self._entries.pop(entry.request.id, None)
        if task.cancelled():
            self._close_unstarted(entry, "cancelled", "the council was cancelled before it started")
            return
        exc = task.exception()
        if exc is not None:
            # A failure before the library wrote its skeleton leaves our queued document.
            self._close_unstarted(entry, "failed", f"the council could not start: {exc}")

    async def _convene(self, entry: _Entry) -> None:
        """The one call into the library: the same council the CLI runs."""
        from ..council import CouncilOptions, aconvene

        endpoints = None
        if entry.endpoints is not None:
            from ..endpoints import setup_from_options

            endpoints = setup_from_options(
                self.where, endpoints=entry.endpoints, with_subagent=self._subagent is None
            )
        options = CouncilOptions(
            subagent=self._subagent,
            subagent_family=self.settings.subagent_family,
            rune_dir=self.where.root,
            endpoints=endpoints,
            allow_external=self.settings.allow_external,
            # The file is ours: the queued document written when the request came in.
            overwrite=True,
        )
        await aconvene(entry.request, options)

    def _close_unstarted(
        self, entry: _Entry, status: Literal["cancelled", "failed"], note: str
    ) -> None:
        """End a run that never reached the library's own bookkeeping; leave any other alone."""
        try:
            current = load(entry.recorder.path)
        except RunFileError:
            return
        if current.status != "queued":
            return  # the library recorded how it ended
        current.status = status
        current.finished_at = _now()
        current.notes.append(note)
        with contextlib.suppress(CouncilError, OSError):
            entry.recorder.write(current)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            for entry in list(self._entries.values()):
                if entry.started or entry.queued.orchestrator is None:
                    continue
                entry.queued.orchestrator.heartbeat_at = _now()
                with contextlib.suppress(CouncilError, OSError):
                    entry.recorder.write(entry.queued)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a council this server holds and wait for its last write; False if not ours."""
        entry = self._entries.get(run_id)
        if entry is None or entry.task is None:
            return False
        entry.task.cancel()
        await asyncio.wait({entry.task}, timeout=STOP_GRACE_S)
        return True

    async def close(self) -> None:
        """Stop taking councils and cancel the rest; each run file ends ``cancelled``."""
        async with self._lock:
            self._closing = True
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_GRACE_S)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
