"""How far a batch is: a rich bar on a terminal, a plain line now and then elsewhere.

Both read the same ``Pace`` (done / running / failed, councils per minute, ETA); the rate
counts only councils that ran in this invocation, so items kept from an earlier run do not
make a rerun look fast. rich is imported only when a terminal asks for the bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..core.safetext import plain
from .results import Row

PLAIN_EVERY_S = 10.0


@dataclass
class Pace:
    """Counts and rate of one batch run."""

    clock: Callable[[], float] = time.monotonic
    total: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0
    ran: int = 0  # finished councils that ran now (not kept from an earlier run)
    start: float = field(default=0.0)

    def started(self, total: int, bad: int) -> None:
        self.total = total
        self.start = self.clock()

    def item_started(self, run_id: str) -> None:
        self.running += 1

    def item_done(self, row: Row, ran: bool) -> None:
        if row.status == "invalid":
            return  # not an item: never part of the total
        if ran:
            self.running -= 1
            if row.status != "cancelled":
                self.ran += 1
        self.done += 1
        if row.status != "complete":
            self.failed += 1

    @property
    def per_minute(self) -> float | None:
        elapsed = self.clock() - self.start
        if self.ran == 0 or elapsed <= 0:
            return None
        return self.ran * 60.0 / elapsed

    @property
    def eta_s(self) -> float | None:
        rate = self.per_minute
        if rate is None or rate <= 0:
            return None
        return (self.total - self.done) * 60.0 / rate

    def line(self) -> str:
        rate = self.per_minute
        eta = self.eta_s
        return (
            f"batch: {self.done}/{self.total} done, {self.running} running, {self.failed} not "
            f"complete, {'-' if rate is None else f'{rate:.1f}'} councils/min, "
            f"ETA {_duration(eta)}"
        )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class PlainLines(Pace):
    """One line to ``stream`` at most every ``every_s`` seconds, and one at the end."""

    def __init__(self, stream: TextIO, every_s: float = PLAIN_EVERY_S) -> None:
        super().__init__()
        self.stream = stream
        self.every_s = every_s
        self._last = 0.0

    def item_done(self, row: Row, ran: bool) -> None:
        super().item_done(row, ran)
        if row.status == "invalid":
            self.stream.write(f"rune council: skipped line {row.line}: {plain(row.error or '')}\n")
        now = self.clock()
        if now - self._last >= self.every_s:
            self._last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def finish(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()


class Bar(Pace):
    """A rich progress bar redrawn in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        # Item ids are the user's text; emoji codes in them stay text.
        self._console = Console(file=stream, emoji=False)
        self._progress = Progress(
            TextColumn("batch"),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            console=self._console,
            transient=False,
        )
        self._task: Any = None

    def started(self, total: int, bad: int) -> None:
        super().started(total, bad)
        self._task = self._progress.add_task("batch", total=max(total, 1), status="")
        self._progress.start()
        self._refresh()

    def item_started(self, run_id: str) -> None:
        super().item_started(run_id)
        self._refresh()

    def item_done(self, row: Row, ran: bool) -> None:
        super().item_done(row, ran)
        if row.status == "invalid":
            self._console.print(
                f"skipped line {row.line}: {plain(row.error or '')}", markup=False, highlight=False
            )
        self._refresh()

    def _refresh(self) -> None:
        if self._task is None:
            return
        rate = self.per_minute
        status = (
            f"{self.done}/{self.total} done · {self.running} running · "
            f"{self.failed} not complete · "
            f"{'-' if rate is None else f'{rate:.1f}'}/min · ETA {_duration(self.eta_s)}"
        )
        self._progress.update(self._task, completed=self.done, status=status)

    def finish(self) -> None:
        self._refresh()
        self._progress.stop()


class Silent(Pace):
    def finish(self) -> None:
        pass


@contextmanager
def progress(enabled: bool, stream: TextIO | None = None) -> Iterator[Pace]:
    """The view for this process: a bar on a terminal, plain lines otherwise, nothing when
    not ``enabled`` (``--json``). It is closed however the batch ends."""
    out = stream or sys.stderr
    view: Bar | PlainLines | Silent
    if not enabled:
        view = Silent()
    elif out.isatty():
        view = Bar(out)
    else:
        view = PlainLines(out)
    try:
        yield view
    finally:
        view.finish()
