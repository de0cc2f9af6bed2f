"""Per-voice progress while a council runs: a live table on a terminal, plain lines otherwise.

The orchestrator calls back on every transition (``on_event``). On an interactive stderr a
rich table redraws in place several times a second, so a running voice's elapsed time keeps
moving between transitions; anywhere else (a pipe, a log, a dumb terminal) each transition
is one line, written as it happens. rich is imported only here, and only for a terminal.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..core.safetext import one_line, plain

if TYPE_CHECKING:
    from rich.console import Console

    from ..core.contract import CouncilResult, RunEvent

OnEvent = Callable[["CouncilResult", "RunEvent"], None]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_STYLE = {"queued": "dim", "running": "yellow", "complete": "green", "dropped": "red"}


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def voice_line(
    voice_id: str,
    runtime: str,
    family: str,
    status: str,
    elapsed_s: float | None,
    detail: str,
) -> str:
    """One transition of one voice, as both the plain progress and ``watch`` print it."""
    return (
        f"  {voice_id} {runtime:<14} {family:<10} {status:<9} {seconds(elapsed_s):>6}  {detail}"
    ).rstrip()


@dataclass
class _Row:
    voice_id: str
    runtime: str
    family: str
    role: str
    status: str
    detail: str = ""
    started: float | None = None
    ended: float | None = None
    latency_s: float | None = None

    def elapsed(self, now: float) -> float | None:
        if self.status in ("complete", "dropped"):
            if self.latency_s is not None:
                return self.latency_s
            if self.started is not None and self.ended is not None:
                return self.ended - self.started
            return None
        if self.started is None:
            return None
        return now - self.started


class Board:
    """What the progress view knows: a copy of each voice's state, safe to read from a
    refresh thread while the council's thread updates it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.rows: dict[str, _Row] = {}
        self.run_id = ""
        self.question = ""
        self.began = clock()
        self.outcome: str | None = None
        self.stage = ""  # the latest step after the voices (vote, rank, rounds)

    def update(self, result: CouncilResult, event: RunEvent) -> _Row | None:
        """Fold one event in; returns the row it changed, if it was about a voice."""
        now = self._clock()
        with self._lock:
            if result.id != self.run_id:
                # A chained council starts a second run: its voices are new slots.
                self.rows.clear()
                self.began, self.outcome, self.stage = now, None, ""
            self.run_id, self.question = result.id, result.question
            for voice in result.voices:
                row = self.rows.get(voice.id)
                if row is None:
                    row = self.rows[voice.id] = _Row(
                        voice.id, voice.runtime, voice.model_family, voice.slot_role, voice.status
                    )
                # A fallback changes who answers the slot; show who it is now.
                row.runtime, row.family = voice.runtime, voice.model_family
                if voice.status == "running" and row.started is None:
                    row.started = now
                if voice.status in ("complete", "dropped") and row.ended is None:
                    row.ended = now
                if voice.latency_ms is not None:
                    row.latency_s = voice.latency_ms / 1000
                row.status = voice.status
            if event.kind == "council.result":
                self.outcome = f"{_outcome(result)} in {seconds(now - self.began)}"
            elif event.kind not in ("council.dispatched", "voice.status"):
                self.stage = event.detail
            if event.voice_id and event.voice_id in self.rows:
                changed = self.rows[event.voice_id]
                changed.detail = one_line(event.detail)
                return _Row(**vars(changed))
        return None

    def table(self, width: int | None = None) -> Any:
        """The table as it fits ``width`` columns (None: as wide as its cells need)."""
        from rich import box
        from rich.table import Table
        from rich.text import Text

        now = self._clock()
        with self._lock:
            rows = [_Row(**vars(r)) for r in self.rows.values()]
            title = f"council {self.run_id}: {one_line(self.question, 300)}"
            caption = self.outcome or " · ".join(
                part for part in (f"{seconds(now - self.began)} elapsed", self.stage) if part
            )
        cells = [_cells(row, now) for row in rows]
        # Everything but the status column comes from voices, endpoints or the question:
        # put in as Text, which rich never reads as markup, after escape sequences are gone.
        table = Table(
            title=Text(plain(title)),
            title_justify="left",
            caption=Text(plain(caption)),
            caption_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1, 0, 0),
            expand=False,
        )
        chosen = fit(width, cells)
        for column, column_width in chosen:
            table.add_column(
                column.key,
                justify="right" if column.key == "time" else "left",
                no_wrap=True,
                overflow="ellipsis",
                width=column_width,
            )
        for row, values in zip(rows, cells, strict=True):
            table.add_row(
                *(
                    Text(
                        values[c.key], style=_STYLE.get(row.status, "") if c.key == "status" else ""
                    )
                    for c, _ in chosen
                )
            )
        return table

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.table(options.max_width)


@dataclass(frozen=True)
class _Column:
    key: str
    cap: int  # never wider than this, however long a cell


# The table's columns, left to right. A voice's id, family, status and time are what a
# person watching needs at any width; the others give way (see _GIVE_WAY).
_COLUMNS = (
    _Column("voice", 12),
    _Column("family", 16),
    _Column("status", 10),
    _Column("time", 8),
    _Column("runtime", 24),
    _Column("role", 16),
    _Column("detail", 60),
)
# Applied in order while the table is too wide: (column, squeeze it to this, or None: drop).
# The reason shrinks first, then the role goes, then the runtime and the reason give way;
# only at the end do the essential columns themselves shrink.
_GIVE_WAY: tuple[tuple[str, int | None], ...] = (
    ("detail", 24),
    ("role", None),
    ("runtime", 10),
    ("detail", 12),
    ("detail", None),
    ("runtime", None),
    ("family", 6),
    ("voice", 2),
)
_GAP = 2  # one cell of right padding and one of the separator between two columns


def _cells(row: _Row, now: float) -> dict[str, str]:
    status = row.status
    if status == "running":
        status = f"{_SPINNER[int(now * 10) % len(_SPINNER)]} running"
    return {
        "voice": one_line(plain(row.voice_id), 40),
        "family": one_line(plain(row.family), 40),
        "status": status,
        "time": seconds(row.elapsed(now)),
        "runtime": one_line(plain(row.runtime), 80),
        "role": one_line(plain(row.role), 40),
        "detail": plain(row.detail),
    }


def fit(width: int | None, cells: list[dict[str, str]]) -> list[tuple[_Column, int]]:
    """The columns shown and their widths, so the table fits ``width`` terminal cells.

    Each column is as wide as its widest cell (and its header), within its cap; while the
    sum is too wide, the less important columns shrink or go, in ``_GIVE_WAY``'s order.
    """
    from rich.cells import cell_len

    natural: dict[str, int] = {}
    for column in _COLUMNS:
        widest = max([cell_len(column.key)] + [cell_len(c[column.key]) for c in cells])
        natural[column.key] = min(widest, column.cap)
    # The status column holds its longest word whatever the rows say now, so it does not
    # jump when a voice starts running.
    natural["status"] = max(natural["status"], len("⠋ running"))
    natural["time"] = max(natural["time"], len("99.9s"))
    widths = dict(natural)

    def total() -> int:
        return sum(widths.values()) + _GAP * (len(widths) - 1)

    if width is not None:
        for key, target in _GIVE_WAY:
            excess = total() - width
            if excess <= 0:
                break
            if key not in widths:
                continue
            if target is None:
                del widths[key]
            else:
                widths[key] = max(min(target, widths[key]), widths[key] - excess)
        # A column dropped later may have freed more than an earlier squeeze needed: give
        # the room back to the squeezed columns still shown, the most important first.
        for key in ("voice", "family", "runtime", "detail"):
            if key in widths:
                widths[key] += max(0, min(width - total(), natural[key] - widths[key]))
    return [(column, widths[column.key]) for column in _COLUMNS if column.key in widths]


def _outcome(result: CouncilResult) -> str:
    if result.status == "complete":
        stamp = result.stamp_label() or "no stamp"
        return (
            f"{result.status}: {stamp}, {result.voices_valid}/{result.voices_requested} valid, "
            f"{len(result.voices_dropped)} dropped"
        )
    return f"{result.status}: {result.voices_valid}/{result.voices_requested} answered"


class PlainProgress:
    """One line per transition, for pipes and logs."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.board = Board()

    def __call__(self, result: CouncilResult, event: RunEvent) -> None:
        row = self.board.update(result, event)
        if event.kind == "council.dispatched":
            self._say(f"council {result.id}: dispatching {len(result.voices)} voice(s)")
        elif row is not None:
            self._say(
                voice_line(
                    row.voice_id,
                    row.runtime,
                    row.family,
                    row.status,
                    row.elapsed(time.monotonic()),
                    one_line(event.detail, 400),
                )
            )
        elif event.kind == "council.result":
            self._say(f"council {result.id}: {self.board.outcome}")
        elif event.detail:  # a later stage (vote, rank, a round) reporting progress
            self._say(f"council {result.id}: {event.detail}")

    def _say(self, line: str) -> None:
        self.stream.write(plain(line) + "\n")
        self.stream.flush()


def interactive(stream: TextIO) -> bool:
    """A terminal a table can be redrawn on (not a pipe, not TERM=dumb)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def view_console(out: TextIO) -> Console:
    """The console every live view prints on. Emoji codes stay off: a voice's ``:v:`` is
    text, and rich would otherwise draw it as a picture whatever ``markup`` escaped."""
    from rich.console import Console

    return Console(file=out, highlight=False, emoji=False)


@contextmanager
def progress(enabled: bool = True, stream: TextIO | None = None) -> Iterator[OnEvent | None]:
    """The ``on_event`` callback for a council run, or None when progress is off (--json).

    The live table is drawn on stderr and left showing its final state; stdout stays free
    for the result.
    """
    if not enabled:
        yield None
        return
    out = stream if stream is not None else sys.stderr
    if not interactive(out):
        yield PlainProgress(out)
        return

    from rich.live import Live

    board = Board()

    def on_event(result: CouncilResult, event: RunEvent) -> None:
        board.update(result, event)
        live.refresh()

    console = view_console(out)
    with Live(
        board,
        console=console,
        refresh_per_second=8,
        transient=False,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as live:
        yield on_event
