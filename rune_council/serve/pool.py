"""At most K councils at once, a bounded queue behind them, and a clean stop.

Every accepted ask gets its run file at once (status ``queued``), so it can be read,
listed, followed and cancelled before a slot frees up. The council itself is what the
intake prepared, run by the library; when it starts it replaces the queued document with
its skeleton. A chain holds a slot for all its steps: the first step's file is written at
once, the later ones when their turn comes, and until then the pool still answers for
their ids (they can be followed, and are refused to anyone else).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..core.contract import ChainPosition, ChainRun, CouncilResult, Orchestrator
from ..core.errors import CouncilError, RunFileError
from ..core.paths import RuneDir
from ..recorder import RunRecorder
from ..runs import load

if TYPE_CHECKING:
    from ..council.intake import Prepared
    from .settings import ServeSettings

# Queued files get a fresh heartbeat this often, like a running council's.
HEARTBEAT_S = 5.0
# How long shutdown waits for cancelled councils to write their last state.
STOP_GRACE_S = 20.0
# Chains this server ran, remembered so their list still answers once they end (a chain
# stopped early has no file for its last steps to be found by).
KEPT_CHAINS = 1024


class Duplicate(CouncilError):
    """The run id is taken, by a run file or a council this server holds."""


class Busy(CouncilError):
    """Every slot and every queue place is taken."""


@dataclass(frozen=True)
class Plan:
    """The runs one accepted ask makes: one council, or a chain's steps in order."""

    runs: tuple[ChainRun, ...]
    chain: str | None = None  # None: one council ("none" when it names no template)

    @property
    def ids(self) -> list[str]:
        return [run.run_id for run in self.runs]


def plan_of(prepared: Prepared) -> Plan:
    """Every run id the ask will write, planned before anything runs, so each can be
    refused as a duplicate now and followed before it starts."""
    runs = tuple(
        ChainRun(template=template or "none", run_id=run_id) for template, run_id in prepared.runs()
    )
    return Plan(runs, prepared.chain)


@dataclass
class _Entry:
    prepared: Prepared
    plan: Plan
    recorder: RunRecorder  # the first run's file: the queued document until it starts
    queued: CouncilResult
    started: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.prepared.request.id


def _now() -> str:
    from ..council import now

    return now()


class CouncilPool:
    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.where = RuneDir.resolve(settings.rune_dir)
        self._entries: dict[str, _Entry] = {}
        # Every run id an entry will write (a chain's steps too), to the entry.
        self._by_run: dict[str, _Entry] = {}
        self._chains: OrderedDict[str, Plan] = OrderedDict()
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self._lock = asyncio.Lock()
        self._closing = False
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def running(self) -> int:
        return sum(1 for e in self._entries.values() if e.started)

    @property
    def queued(self) -> int:
        return len(self._entries) - self.running

    def holds(self, run_id: str) -> bool:
        """This server will write, or is writing, the run file of ``run_id``."""
        return run_id in self._by_run

    def chain(self, chain_id: str) -> Plan | None:
        """The plan of a chain this server runs or ran, by the chain's id."""
        return self._chains.get(chain_id)

    async def submit(self, prepared: Prepared) -> Plan:
        """Accept a council (or a chain): write the queued run file of the run that starts
        first and schedule it; or refuse. RequestError: a chain step id is not a file name."""
        plan = plan_of(prepared)
        request = prepared.request
        first = plan.runs[0].run_id
        path = self.where.run_file(first)
        async with self._lock:
            if self._closing:
                raise Busy("the server is shutting down")
            for run_id in plan.ids:
                taken = self.where.run_file(run_id)
                if run_id in self._by_run or taken.exists() or taken.is_symlink():
                    raise Duplicate(f"run id {run_id!r} is already used")
            if len(self._entries) >= self.settings.max_concurrent + self.settings.max_queued:
                raise Busy(
                    f"{self.running} councils running and {self.queued} queued (the limits are "
                    f"{self.settings.max_concurrent} and {self.settings.max_queued})"
                )
            shown = request
            if plan.chain is not None:
                # The first step's document names the whole chain, as its own will.
                position = ChainPosition(name=plan.chain, step=1, runs=list(plan.runs))
                shown = request.model_copy(update={"id": first, "chain": position})
            started = _now()
            queued = CouncilResult(
                id=first,
                question=shown.question,
                mode=shown.mode,
                status="queued",
                voices_requested=shown.n,
                request=shown,
                orchestrator=Orchestrator(
                    pid=os.getpid(),
                    host=socket.gethostname(),
                    started_at=started,
                    heartbeat_at=started,
                ),
                started_at=started,
                run_file=str(path),
                notes=["queued: waiting for a free council slot on the server", *prepared.notes],
            )
            entry = _Entry(prepared, plan, RunRecorder(path), queued)
            entry.recorder.write(queued)
            self._entries[request.id] = entry
            for run_id in plan.ids:
                self._by_run[run_id] = entry
            if plan.chain is not None:
                self._chains[request.id] = plan
                while len(self._chains) > KEPT_CHAINS:
                    self._chains.popitem(last=False)
            entry.task = asyncio.create_task(self._run(entry), name=f"council-{request.id}")
            entry.task.add_done_callback(functools.partial(self._finished, entry))
            if self._heartbeat is None:
                self._heartbeat = asyncio.create_task(self._beat())
        return plan

    async def _run(self, entry: _Entry) -> None:
        async with self._slots:
            entry.started = True
            await self._convene(entry)

    def _finished(self, entry: _Entry, task: asyncio.Task[None]) -> None:
        # A done callback, not a finally: a task cancelled before its first step never
        # enters its own body.
        self._entries.pop(entry.id, None)
        for run_id in entry.plan.ids:
            self._by_run.pop(run_id, None)
        if task.cancelled():
            self._close_unstarted(entry, "cancelled", "the council was cancelled before it started")
            return
        exc = task.exception()
        if exc is not None:
            # A failure before the library wrote its skeleton leaves our queued document.
            self._close_unstarted(entry, "failed", f"the council could not start: {exc}")

    async def _convene(self, entry: _Entry) -> None:
        """The one call into the library: the council (or chain) the intake prepared, as
        the CLI runs it; the queued document written when the ask came in is ours to
        replace."""
        await entry.prepared.with_options(overwrite=True).aconvene()

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
        entry = self._by_run.get(run_id)
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
