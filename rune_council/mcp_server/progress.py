"""One MCP progress notification per voice transition, in the order they happened.

The orchestrator's ``on_event`` is a plain callback; notifications are async sends. A queue
and one sender task keep them in order and never block the council on the host's pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..contract import CouncilResult, RunEvent

Send = Callable[[float, float | None, str], Awaitable[None]]
_DONE = ("complete", "dropped")


def describe(result: CouncilResult, event: RunEvent) -> str | None:
    """``v2 codex complete 3/4``: the voice, its new state, and voices finished of all."""
    if event.kind != "voice.status" or event.voice_id is None:
        return None
    voice = next((v for v in result.voices if v.id == event.voice_id), None)
    if voice is None:
        return None
    finished = sum(1 for v in result.voices if v.status in _DONE)
    return (
        f"{voice.id} {voice.runtime} {event.status or voice.status} {finished}/{len(result.voices)}"
    )


class ProgressReporter:
    """Collects transitions from ``on_event`` and sends them through ``send``."""

    def __init__(self, send: Send | None) -> None:
        self._send = send
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._count = 0
        self._task: asyncio.Task[None] | None = (
            asyncio.ensure_future(self._pump()) if send is not None else None
        )

    def on_event(self, result: CouncilResult, event: RunEvent) -> None:
        if self._send is None:
            return
        message = describe(result, event)
        if message is not None:
            # The callback may come from a worker thread (a blocking subagent callable).
            self._loop.call_soon_threadsafe(self._queue.put_nowait, message)

    async def _pump(self) -> None:
        assert self._send is not None
        while (message := await self._queue.get()) is not None:
            # Progress must grow with every notification; the count of transitions does.
            self._count += 1
            with contextlib.suppress(Exception):  # a host that went away loses progress only
                await self._send(self._count, None, message)

    async def flush(self) -> None:
        """Send what is queued, then stop."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        await self._task

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
