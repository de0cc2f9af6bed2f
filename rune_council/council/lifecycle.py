"""The life of one run: every transition written to the run file, a heartbeat, the last write.

``RunLog`` is the single place that changes a running council's status and writes it; the
run file on disk is always the latest state, and a reader can tell a live run from an
abandoned one by the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..core.contract import (
    CouncilResult,
    DroppedVoice,
    RunEvent,
    RunEventKind,
    RunStatus,
    Voice,
    VoiceProcess,
)
from ..core.made import made
from ..recorder import RunRecorder
from ..runtimes import lineage
from .options import OnEvent

HEARTBEAT_S = 5.0
MAX_EVENTS = 400

T = TypeVar("T")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class RunLog:
    """A run's result as it changes, and the one method that records each change."""

    def __init__(self, result: CouncilResult, recorder: RunRecorder, on_event: OnEvent | None):
        self.result = result
        self.recorder = recorder
        self.on_event = on_event
        self._seq = 0

    def emit(self, kind: RunEventKind, voice: Voice | None = None, detail: str = "") -> None:
        self._seq += 1
        event = made(
            RunEvent,
            seq=self._seq,
            at=now(),
            kind=kind,
            voice_id=voice.id if voice else None,
            status=voice.status if voice else self.result.status,
            detail=detail[:500],
        )
        self.result.events.append(event)
        if len(self.result.events) > MAX_EVENTS:
            del self.result.events[: len(self.result.events) - MAX_EVENTS]
        self.write()
        if self.on_event is not None:
            self.on_event(self.result, event)

    def write(self) -> None:
        orch = self.result.orchestrator
        if orch is not None:
            orch.heartbeat_at = now()
            if orch.voice_marker is not None:
                orch.voice_processes = [
                    VoiceProcess(pid=pid, started=started)
                    for pid, started in lineage.live_voices(orch.voice_marker)
                ]
        self.recorder.write(self.result)

    async def heartbeat(self) -> None:
        """Rewrite the file every few seconds so readers see the orchestrator is alive."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            self.write()

    def complete(self) -> None:
        from ..deliberation.metadata import verdict_metadata

        result = self.result
        # A council no voice answered has nothing to call complete.
        result.status = result.ended_status()
        result.finished_at = now()
        result.verdict = verdict_metadata(result)
        self.emit("council.result", detail=f"{result.stamp_label()}, {result.voices_valid} valid")

    def abandon(self, status: RunStatus, note: str) -> None:
        """End the run early (cancelled or failed), keeping every voice that completed."""
        result = self.result
        for voice in result.voices:
            if voice.status in ("queued", "running"):
                voice.status = "dropped"
                voice.dropped_by = "council.dispatch"
                voice.drop_reason = f"run {status} before this voice finished"
                result.voices_dropped.append(
                    DroppedVoice(
                        voice_id=voice.id,
                        runtime=voice.runtime,
                        reason=voice.drop_reason,
                        dropped_by="council.dispatch",
                    )
                )
        result.status = status
        result.voices_valid = sum(1 for v in result.voices if v.status == "complete")
        result.finished_at = now()
        result.notes.append(note)
        # The original error matters more than a failed last write.
        with contextlib.suppress(Exception):
            from ..deliberation.metadata import verdict_metadata

            result.verdict = verdict_metadata(result)
        with contextlib.suppress(Exception):
            self.emit("council.result", detail=note)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    A library caller may already be inside asyncio (a notebook, an async host); there the
    council gets a loop of its own on a worker thread instead of failing.
    """
    box: dict[str, Any] = {}

    async def main() -> None:
        # The value travels in the box, not as the main task's result: when asyncio.run
        # puts the SIGINT handler back it formats the handler, the task and so the task's
        # result in full (a CouncilResult holding the artifact), which cost milliseconds
        # per megabyte of artifact, twice per council.
        box["result"] = await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        kept: T = box["result"]
        return kept

    def worker() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed back to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=worker, name="rune-council")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result
