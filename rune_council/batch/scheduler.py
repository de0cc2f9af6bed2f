"""Run a batch: at most ``concurrency`` councils at once, each item's outcome one row.

The schedule is the same wherever councils run: K workers take items in file order from
one shared reader (each line prepared by the intake every door uses), decide from the
item's earlier run file whether it runs (``resume``), hand it to a ``Convener`` (the
prepared council run here, a Ray task in ``ray_runner``) and write its row. Stopping the
batch (Ctrl-C, cancelling the task) cancels every running council, whose run file then says
``cancelled``, and writes a ``cancelled`` row for each before it ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.contract import CouncilResult
from ..core.errors import CouncilError, RequestError, RunIdError
from ..council.intake import Door
from ..runtimes.limits import Limits, caps_from_config
from .items import BadLine, Item, describe_duplicates, items, scan
from .results import ResultsFile, Row, Status, Tally, row_for
from .resume import decide

if TYPE_CHECKING:
    from ..core.runtime import Runtime

Convener = Callable[[Item, bool], Awaitable[CouncilResult]]
"""Runs one item's council: (the item, overwrite an earlier run file)."""


class Observer(Protocol):
    """Who watches a batch: the progress view, the --json printer, a test."""

    def started(self, total: int, bad: int) -> None: ...

    def item_started(self, run_id: str) -> None: ...

    def item_done(self, row: Row, ran: bool) -> None: ...


class Quiet:
    def started(self, total: int, bad: int) -> None:
        pass

    def item_started(self, run_id: str) -> None:
        pass

    def item_done(self, row: Row, ran: bool) -> None:
        pass


def batch_door(**settings: Any) -> Door:
    """The batch as a door: its lines are not the operator (an items file may come from
    anywhere), and their artifacts resolve under the items file's folder. ``settings`` are
    the operator's (``rune_dir``, ``defaults``, ``config``, ``env``)."""
    return Door(**{"name": "the batch", "trusted_caller": False, "artifact_root": None, **settings})


@dataclass(frozen=True)
class BatchOptions:
    """How to run a batch.

    ``door`` says who asks and what the operator decided for every line: ``defaults`` (the
    batch's flags, consent among them), ``rune_dir`` (where run files go), ``config`` (read
    once here when None), ``env``; its ``artifact_root`` None means the items file's folder.
    ``limits`` bounds the calls in flight per runtime across every council (default: the
    caps council.toml names). ``runtimes`` replaces detection and everything council.toml
    would seat with exactly these voices, for every council (custom runtimes, tests).
    """

    door: Door = field(default_factory=batch_door)
    limits: Limits | None = None
    runtimes: Sequence[Runtime] | None = None
    concurrency: int = 4
    retry_failed: bool = False
    strict: bool = False
    results: Path | None = None
    ray: bool = False  # run each council as a Ray task (``ray_runner``)
    ray_address: str | None = None  # default $RAY_ADDRESS, else a local cluster

    def results_path(self, items_path: Path) -> Path:
        if self.results is not None:
            return self.results
        return self.door.where.batch_dir / f"{items_path.stem}.results.jsonl"


class CouncilFailed(Exception):
    """A council that failed where it ran (a Ray task); the message is the row's error."""


class BadItems(RequestError):
    """The batch refused to start: ``--strict`` with bad lines, or an id used twice."""

    def __init__(self, message: str, bad: list[BadLine] | None = None) -> None:
        super().__init__(message)
        self.bad = bad or []


@dataclass
class Batch:
    """One run over one items file; ``tally`` stays readable after Ctrl-C."""

    path: Path
    options: BatchOptions
    observer: Observer = field(default_factory=Quiet)
    tally: Tally = field(default_factory=Tally)
    results_path: Path = field(init=False)
    total: int = 0
    running: int = 0
    _bad: list[BadLine] | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.options.concurrency < 1:
            raise RequestError("concurrency must be at least 1")
        self.results_path = self.options.results_path(self.path)
        door = self.options.door
        changes: dict[str, Any] = {}
        if door.artifact_root is None:
            changes["artifact_root"] = self.path.parent.absolute()
        if door.config is None:
            # Read once for every line, as one council reads it once.
            from ..config import load_config

            env = dict(os.environ) if door.env is None else dict(door.env)
            changes["config"] = load_config(door.where, env)
        if changes:
            self.options = dataclasses.replace(
                self.options, door=dataclasses.replace(door, **changes)
            )
        if self.options.limits is None:
            # One set of limits for every council of the batch: that is what bounds them.
            caps = {} if self.options.runtimes is not None else self._configured_caps()
            self.options = dataclasses.replace(self.options, limits=Limits(caps))

    def _configured_caps(self) -> dict[str, int]:
        config = self.options.door.config
        assert config is not None
        return caps_from_config(config)

    def check(self) -> list[BadLine]:
        """The first pass; raises BadItems when the batch must not start. Returns bad lines."""
        found = scan(self.path, self.options.door)
        if found.duplicates:
            raise BadItems(
                f"{self.path}: the same id on more than one line: "
                f"{describe_duplicates(found.duplicates)}; every item needs its own id"
            )
        if self.options.strict and found.bad:
            raise BadItems(
                f"{self.path}: {len(found.bad)} bad line(s); nothing was run (--strict)",
                found.bad,
            )
        self.total = found.items
        self._bad = found.bad
        return found.bad

    async def run(self, convene: Convener | None = None) -> Tally:
        bad = self._bad if self._bad is not None else self.check()
        if convene is None and self.options.ray:
            from .ray_runner import RayConvener, capped_runtimes

            assert self.options.limits is not None
            caps = await capped_runtimes(self.options, self.options.limits)
            ray = RayConvener(self.options, caps)
            self.notes += ray.notes
            try:
                return await self._run(bad, ray)
            finally:
                ray.close()
        return await self._run(bad, convene or self._local)

    async def _run(self, bad: list[BadLine], convener: Convener) -> Tally:
        with ResultsFile(self.results_path) as out:
            self.observer.started(self.total, len(bad))
            for line in bad:
                self._record(out, Row(id=None, line=line.line, status="invalid", error=line.reason))
            queue = self._good_items(out, {b.line for b in bad})
            workers = [
                asyncio.ensure_future(self._worker(queue, out, convener))
                for _ in range(min(self.options.concurrency, max(self.total, 1)))
            ]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        return self.tally

    def _good_items(self, out: ResultsFile, reported: set[int]) -> Iterator[Item]:
        for entry in items(self.path, self.options.door):
            if isinstance(entry, Item):
                yield entry
            elif entry.line not in reported:
                # It went bad since the first pass (its artifact was removed, say).
                row = Row(id=None, line=entry.line, status="invalid", error=entry.reason)
                self._record(out, row)

    async def _worker(self, queue: Iterator[Item], out: ResultsFile, convene: Convener) -> None:
        # One shared iterator: next() never awaits, so two workers never take the same item.
        for item in queue:
            await self._one(item, out, convene)

    def _record(self, out: ResultsFile, row: Row, ran: bool = False) -> None:
        out.write(row)
        self.tally.add(row)
        self.observer.item_done(row, ran)

    async def _one(self, item: Item, out: ResultsFile, convene: Convener) -> None:
        path = self.options.door.where.run_file(item.id)
        try:
            # What the item asks, its artifact as read now: an earlier run of anything
            # else is not this item's.
            request = item.full_request()
        except CouncilError as exc:
            self._record(out, Row(id=item.id, line=item.line, status="failed", error=str(exc)))
            return
        try:
            decision = decide(
                item.id, item.line, path, request, retry_failed=self.options.retry_failed
            )
        except Exception as exc:  # a hostile earlier run file must not end the batch
            why = f"its earlier run file cannot be judged: {type(exc).__name__}: {exc}"
            self._record(out, Row(id=item.id, line=item.line, status="failed", error=why[:500]))
            return
        if decision.action in ("keep", "busy"):
            assert decision.row is not None
            self._record(out, decision.row)
            return
        self.running += 1
        self.observer.item_started(item.id)
        started = time.monotonic()
        try:
            # A chain's earlier steps are files of this item too: a run stopped after its
            # first step left one, which the next run replaces.
            overwrite = decision.action == "rerun" or item.prepared.chain is not None
            result = await convene(item, overwrite)
        except asyncio.CancelledError:
            stopped = "the batch was stopped while it ran; the next run picks it up"
            self._record(out, self._ended(item, "cancelled", stopped, path, started), True)
            raise
        except RunIdError as exc:
            row = Row(id=item.id, line=item.line, status="busy", error=str(exc))
            self._record(out, row, True)
        except CouncilFailed as exc:
            self._record(out, self._ended(item, "failed", str(exc), path, started), True)
        except CouncilError as exc:
            self._record(out, self._ended(item, "failed", str(exc), path, started), True)
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            self._record(out, self._ended(item, "failed", why, path, started), True)
        else:
            self._record(out, row_for(result, item.line, path), True)
        finally:
            self.running -= 1

    @staticmethod
    def _ended(item: Item, status: Status, why: str, path: Path, started: float) -> Row:
        return Row(
            id=item.id,
            line=item.line,
            status=status,
            duration_s=round(time.monotonic() - started, 3),
            run_file=str(path) if path.exists() else None,
            error=" ".join(why.split())[:500],
        )

    async def _local(self, item: Item, overwrite: bool) -> CouncilResult:
        changes: dict[str, Any] = {"overwrite": overwrite, "limits": self.options.limits}
        if self.options.runtimes is not None:
            # Exactly these voices: nothing council.toml names is seated beside them.
            changes.update(runtimes=self.options.runtimes, endpoints=None)
        return await item.prepared.with_options(**changes).aconvene()


async def run_batch(
    path: str | Path, options: BatchOptions | None = None, observer: Observer | None = None
) -> Tally:
    """Run every item of ``path`` here, ``options.concurrency`` councils at once."""
    batch = Batch(Path(path), options or BatchOptions(), observer or Quiet())
    return await batch.run()
