"""MCP progress for a council: a notification per transition, against a total known up front.

Each council an ask runs (one, or each step of a chain) is ``SPAN`` of the total, split
evenly over its phases: per round, the members answering, then the deliberation method
(vote, rank, ...) when there is one. A phase's share fills as its voices finish or as the
method reports, and a council's whole span is reached only by its result. So a host shows a
bar that moves through ranking and later rounds as well, and never runs past its end.

The orchestrator's ``on_event`` is a plain callback; notifications are async sends. A queue
and one sender task keep them in order and never block the council on the host's pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from ..core.safetext import plain

if TYPE_CHECKING:
    from ..core.contract import CouncilResult, RunEvent

Send = Callable[[float, float | None, str | None], Awaitable[None]]
SPAN = 100.0
_DONE = ("complete", "dropped")
# Below the end of a phase until the next one starts, so the next always moves forward.
_FILL = 0.95
_STEP = 1e-3


def describe(result: CouncilResult, event: RunEvent) -> str | None:
    """What a host shows for an event: ``v2 codex complete 3/4`` for a voice (the voice, its
    new state, and voices finished of all), the council's own words for the rest."""
    if event.kind == "voice.status":
        voice = next((v for v in result.voices if v.id == event.voice_id), None)
        if voice is None:
            return None
        finished = sum(1 for v in result.voices if v.status in _DONE)
        state = event.status or voice.status
        return f"{voice.id} {voice.runtime} {state} {finished}/{len(result.voices)}"
    detail = plain(event.detail)[:200]
    if event.kind == "council.dispatched":
        return f"dispatching {detail}" if detail else "dispatching"
    if event.kind == "council.result":
        return f"verdict: {detail}" if detail else "verdict"
    return detail or None


def _phases(result: CouncilResult) -> tuple[int, int]:
    """(rounds at most, phases per round) the request plans."""
    d = result.request.deliberation
    if d is None:
        return 1, 1
    return d.rounds.max_rounds, 2 if d.method is not None else 1


class Place:
    """Where one council is, as a share (0 to 1) of its span; 1 only at its result."""

    def __init__(self) -> None:
        self._done = 0  # rounds finished
        self._answering = False  # a member's state changed since the round began
        self._method_reports = 0  # method reports since the members last changed

    def at(self, result: CouncilResult, event: RunEvent) -> float:
        if event.kind == "council.result":
            return 1.0
        rounds, per_round = _phases(result)
        done = len(result.deliberation.rounds) if result.deliberation is not None else 0
        if done != self._done:
            # A round is over; until the next one's members are asked, it has only begun.
            self._done, self._answering, self._method_reports = done, False, 0
        if event.kind == "voice.status":
            self._answering, self._method_reports = True, 0
        elif event.kind == "deliberation.status" and self._answering:
            self._method_reports += 1
        phase = done * per_round
        if not self._answering:
            within = 0.0
        elif self._method_reports and per_round == 2:
            # The members have answered; the method is at work (ballots, a tally, a verdict).
            phase += 1
            within = (1 - 0.5**self._method_reports) * _FILL
        else:
            voices = result.voices
            answered = sum(
                1.0 if v.status in _DONE else 0.5 if v.status == "running" else 0.0 for v in voices
            )
            within = answered / max(1, len(voices)) * _FILL
        return min((phase + within) / (rounds * per_round), _FILL)


class ProgressReporter:
    """Collects transitions from ``on_event`` and sends them through ``send``.

    ``runs``: the ids of the councils the ask runs, in order (``Prepared.runs()``)."""

    def __init__(self, send: Send | None, runs: Sequence[str]) -> None:
        self._send = send
        self._runs = list(runs) or [""]
        self.total = SPAN * len(self._runs)
        self._queue: asyncio.Queue[tuple[float, str] | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._index = 0
        self._places = [Place() for _ in self._runs]
        self._last = 0.0
        self._task: asyncio.Task[None] = asyncio.ensure_future(self._pump())

    def retarget(self, send: Send | None) -> None:
        """Report to another call from now on (a council waiting on the host's subagents
        outlives the call that started it); None reports to nobody until the next one."""
        self._send = send

    def on_event(self, result: CouncilResult, event: RunEvent) -> None:
        if result.id in self._runs:
            self._index = self._runs.index(result.id)
        share = self._places[self._index].at(result, event)
        message = describe(result, event)
        if message is None:
            return
        if len(self._runs) > 1:
            message = f"{result.id}: {message}"
        value = SPAN * (self._index + share)
        # Progress must grow with every notification, and never pass the total.
        value = max(value, self._last + _STEP)
        if value > self.total:
            return
        self._last = value
        if self._send is None:
            return
        # The callback may come from a worker thread (a blocking subagent callable).
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (value, message))

    async def _pump(self) -> None:
        while (item := await self._queue.get()) is not None:
            value, message = item
            send = self._send
            if send is not None:
                with contextlib.suppress(Exception):  # a host that went away loses progress
                    await send(value, self.total, message)
            self._queue.task_done()
        self._queue.task_done()

    async def drain(self) -> None:
        """Send what is queued to the call reporting now, and keep going."""
        await self._queue.join()

    async def flush(self) -> None:
        """Send what is queued, then stop."""
        if self._task.done():
            return
        self._queue.put_nowait(None)
        await self._task

    def stop(self) -> None:
        self._task.cancel()
