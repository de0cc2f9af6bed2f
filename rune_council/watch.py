"""Follow a run file that another process is writing, one update per new transition.

The writer replaces the file atomically (temp file + rename), so the file's inode changes on
every write: we watch its directory, not the file, and filter on the name. A file-system
event only says "look again"; what is new is decided by the file's identity (inode, size,
mtime) and by the events' sequence numbers, so a notification lost while the watcher starts,
or several writes folded into one notification, cannot hide or repeat a transition. Every
half second a quiet watcher also asks whether the writer is still alive, because a killed
writer writes nothing more and would otherwise be waited on forever.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .core.errors import RunFileError
from .runs import LOCAL_STALL_WARN_S, UNFINISHED, liveness, load

if TYPE_CHECKING:
    import threading

    from .core.contract import CouncilResult, RunEvent

# Group a burst of writes for at most this long; report a lone write after this much quiet.
DEBOUNCE_MS = 100
STEP_MS = 10
# The longest a watcher sleeps without looking at the file. It also bounds the blind spot
# between reading the file and the subscription taking effect: the first wake-up comes this
# soon after the subscription exists, and it re-reads the file if anything changed.
WAKE_MS = 50
# How often a quiet watcher asks whether the writer is still alive.
TICK_S = 0.5
# Before the run's directory exists there is nothing to subscribe to; poll for it.
MISSING_DIR_POLL_S = 0.05

UpdateKind = Literal["waiting", "started", "events", "stalled", "finished", "abandoned"]


@dataclass(frozen=True)
class Update:
    """Something a reader of the run should be told, once.

    ``waiting``: no run file yet. ``started``: the first document seen (the skeleton, or a
    later state if the watcher came late). ``events``: transitions not reported before.
    ``stalled``: the writer is alive but its heartbeat is late (said once per stall).
    ``finished``: the run has a final status; the last update. ``abandoned``: the writer is
    gone and the run will never finish; the last update.
    """

    kind: UpdateKind
    result: CouncilResult | None = None
    events: tuple[RunEvent, ...] = field(default=())
    detail: str = ""


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _wakeups(path: Path, stop: threading.Event | None) -> Iterator[None]:
    """Yield whenever the run file may have changed, and at least every ``WAKE_MS``."""
    import watchfiles

    directory = path.parent
    name = path.name
    while not directory.is_dir():
        if stop is not None and stop.is_set():
            return
        time.sleep(MISSING_DIR_POLL_S)
        yield None
    for _changes in watchfiles.watch(
        directory,
        watch_filter=lambda _change, changed: Path(changed).name == name,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        rust_timeout=WAKE_MS,
        yield_on_timeout=True,
        recursive=False,
        stop_event=stop,
    ):
        yield None


def follow(
    path: Path,
    *,
    tick_s: float = TICK_S,
    wait_s: float | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Update]:
    """Updates for the run at ``path`` until it finishes or its writer is found dead.

    ``wait_s`` bounds how long to wait for the file to appear (None: for ever). A file that
    is not a run file raises ``RunFileError``; a stop event ends the iteration quietly.
    """
    seen: tuple[int, int, int] | None = None
    last_seq = 0
    current: CouncilResult | None = None
    stalled = False
    deadline = None if wait_s is None else time.monotonic() + wait_s

    if _identity(path) is None:
        yield Update("waiting", detail=f"no run file yet at {path}; waiting for it to appear")

    # Nothing is read before the first wake-up, which comes once the subscription exists:
    # a write racing the start of the watch is then either seen by the subscription or
    # already on disk when we first look.
    last_check = 0.0
    for _ in _wakeups(path, stop):
        if stop is not None and stop.is_set():
            return
        identity = _identity(path)
        if identity is None:
            if current is None and deadline is not None and time.monotonic() > deadline:
                raise RunFileError(f"no run file appeared at {path} within {wait_s:g} s")
            continue
        if identity != seen:
            seen = identity
            try:
                # The artifact is never shown here: its sidecar is not read at each change.
                result = load(path, artifact=False)
            except RunFileError:
                if _identity(path) is None:  # removed between the stat and the read
                    continue
                raise
            if current is None or result.started_at != current.started_at:
                # A new document, or the same id started again: report from its beginning.
                last_seq = 0
                yield Update("started", result)
            current = result
            fresh = tuple(e for e in result.events if e.seq > last_seq)
            if fresh:
                last_seq = fresh[-1].seq
                yield Update("events", result, fresh)
            stalled = False
            if result.status not in UNFINISHED:
                yield Update("finished", result, detail=result.status)
                return
        if current is None or time.monotonic() - last_check < tick_s:
            continue
        last_check = time.monotonic()
        state = liveness(current)
        if state.state == "gone":
            # The writer may have finished between our read and its exit: look once more.
            if _identity(path) != seen:
                last_check = 0.0
                continue
            yield Update("abandoned", current, detail=state.detail)
            return
        if (
            not stalled
            and state.state == "alive"
            and state.heartbeat_age_s is not None
            and state.heartbeat_age_s > LOCAL_STALL_WARN_S
        ):
            stalled = True
            yield Update(
                "stalled",
                current,
                detail=f"no heartbeat for {state.heartbeat_age_s:.0f} s; {state.detail}",
            )
