"""Server-Sent Events of one run, read from its run file with the library's watcher.

``watch.follow`` already knows how to notice every write, not repeat a transition and tell
an abandoned run from a live one; it is a blocking iterator, so it runs on a thread and
hands its updates to the event loop. The stream is therefore the same for a council this
server runs and one started from the CLI in the same directory.

Frames: ``status`` (no id) whenever a new document is seen (queued, then running);
``transition`` (id = the event's sequence number) for each run-file event, so a client that
reconnects with ``Last-Event-ID`` gets exactly the ones it missed; ``stalled`` when a live
writer's heartbeat is late; ``end`` last, with the final status or ``abandoned``.

A run the server has accepted but not written yet (a chain's later step) is waited for:
the stream opens with ``status`` ``queued`` and follows the file once it appears; if the
server lets the run go without writing it (the chain was stopped first), it ends
``not-run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ..core.errors import RunFileError
from ..watch import Update, follow

KEEPALIVE_S = 15.0
# How often a stream looks at the server's stop signal while nothing happens.
POLL_S = 0.25


def frame(event: str, data: Any, event_id: int | None = None) -> bytes:
    # json.dumps never emits a raw newline, so the payload is always one data line.
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def parse_last_event_id(raw: str | None) -> int:
    """The sequence number a reconnecting client saw last; 0 for none."""
    if raw is None or not raw.strip():
        return 0
    value = int(raw.strip())  # ValueError: the caller answers 400
    if value < 0:
        raise ValueError("Last-Event-ID must not be negative")
    return value


async def run_events(
    path: Path,
    last_seen: int,
    stop: threading.Event,
    expected: Callable[[], bool] = lambda: False,
) -> AsyncIterator[bytes]:
    """SSE frames for the run at ``path`` until it ends, the client leaves, or ``stop``.
    ``expected()``: the server will still write the file, so its absence is worth waiting."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Update | RunFileError | None] = asyncio.Queue()
    quit_watch = threading.Event()

    def hand_over(item: Update | RunFileError | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        try:
            for update in follow(path, stop=quit_watch):
                hand_over(update)
        except RunFileError as exc:
            hand_over(exc)
        finally:
            hand_over(None)

    run_id = path.name.removeprefix("run-").removesuffix(".json")
    watcher = threading.Thread(target=pump, name=f"sse-{path.name}", daemon=True)
    watcher.start()
    sent = last_seen
    quiet = 0.0
    seen = False
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), POLL_S)
            except TimeoutError:
                if stop.is_set():
                    yield frame("end", {"status": "server-stopped"})
                    return
                if not seen and not expected() and not path.exists():
                    detail = "the server let the run go before it started (a chain stopped early)"
                    yield frame("end", {"status": "not-run", "id": run_id, "detail": detail})
                    return
                quiet += POLL_S
                if quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield b": keep-alive\n\n"
                continue
            quiet = 0.0
            if item is None:
                return
            if isinstance(item, RunFileError):
                yield frame("end", {"status": "unreadable", "detail": str(item)})
                return
            result = item.result
            if item.kind == "waiting":
                yield frame("status", {"status": "queued", "id": run_id})
            elif item.kind == "started" and result is not None:
                seen = True
                yield frame("status", {"status": result.status, "id": result.id})
            elif item.kind == "events":
                for event in item.events:
                    if event.seq <= sent:
                        continue
                    sent = event.seq
                    yield frame("transition", event.model_dump(mode="json"), event.seq)
            elif item.kind == "stalled":
                yield frame("stalled", {"detail": item.detail})
            elif item.kind in ("finished", "abandoned"):
                status = item.detail if item.kind == "finished" else "abandoned"
                payload = {"status": status}
                if item.kind == "abandoned":
                    payload["detail"] = item.detail
                yield frame("end", payload)
                return
    finally:
        quit_watch.set()
