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

from ..safetext import markup, one_line, plain

if TYPE_CHECKING:
    from rich.console import Console

    from ..contract import CouncilResult, RunEvent

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

    def table(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        now = self._clock()
        with self._lock:
            rows = [_Row(**vars(r)) for r in self.rows.values()]
            title = f"council {self.run_id}: {self.question}"
            caption = self.outcome or " · ".join(
                part for part in (f"{seconds(now - self.began)} elapsed", self.stage) if part
            )
        # Everything but the status column comes from voices, endpoints or the question:
        # shown as text, never read as markup or passed through as escape sequences.
        table = Table(
            title=markup(title),
            title_justify="left",
            caption=markup(caption),
            caption_justify="left",
            expand=False,
        )
        for name in ("voice", "runtime", "family", "role", "status", "elapsed", "detail"):
            table.add_column(
                name,
                justify="right" if name == "elapsed" else "left",
                no_wrap=True,
                overflow="ellipsis",
                max_width=60 if name == "detail" else None,
            )
        for row in rows:
            status = row.status
            if status == "running":
                status = f"{_SPINNER[int(now * 10) % len(_SPINNER)]} running"
            table.add_row(
                markup(row.voice_id),
                markup(row.runtime),
                markup(row.family),
                markup(row.role),
                Text(status, style=_STYLE.get(row.status, "")),
                seconds(row.elapsed(now)),
                markup(row.detail),
            )
        return table

    def __rich__(self) -> Any:
        return self.table()


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
        get_renderable=board.table,
        console=console,
        refresh_per_second=8,
        transient=False,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as live:
        yield on_event
