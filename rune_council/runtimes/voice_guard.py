"""The watcher that kills a council's voices when the council dies without ending them.

Run as its own small program (``python -I -S voice_guard.py <council pid>``), never imported
by the council: ``lineage`` starts one per council process. It reads lines from stdin,
``+<pid> <start>`` when a voice starts and ``-<pid>`` when it has ended, and when the council
is gone (its pidfd fires, stdin reaches end-of-file, or this process is re-parented) it
SIGKILLs the process group of every voice still registered, then exits.

This is what the kernel's parent-death signal did from a ``preexec_fn``; doing it from here
lets the council start its voices without running Python in a forked copy of itself
(CPython can then use vfork). A voice is killed only while the process at its pid started at
the recorded time, so a pid reused since it ended is never touched. It imports nothing from
the package, so it starts in milliseconds and cannot be broken by the council's own state.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys

# How often the parent pid is checked where there is no pidfd to wait on.
_POLL_MS = 100


def _start(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read(4096)
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _kill(voices: dict[int, int]) -> None:
    for pid, started in voices.items():
        handle = None
        with contextlib.suppress(OSError, AttributeError):
            handle = os.pidfd_open(pid)
        try:
            if _start(pid) != started:
                continue  # ended, or the pid is someone else's now
            # A voice leads its own session, so while it lives its group is its own.
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                if handle is not None:
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
        finally:
            if handle is not None:
                os.close(handle)


def _apply(line: bytes, voices: dict[int, int]) -> None:
    try:
        if line.startswith(b"+"):
            pid, started = line[1:].split()
            voices[int(pid)] = int(started)
        elif line.startswith(b"-"):
            voices.pop(int(line[1:]), None)
    except ValueError:
        pass


def main() -> None:
    council = int(sys.argv[1])
    # The terminal's signals are for the council, which ends its voices itself.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    watch = None
    with contextlib.suppress(OSError, AttributeError):
        watch = os.pidfd_open(council)
    voices: dict[int, int] = {}
    pending = b""
    if os.getppid() == council:
        # Our parent is still the council, so the pidfd is the council's and not a reuse.
        with contextlib.suppress(OSError):
            os.write(1, b"ready\n")
    with contextlib.suppress(OSError):
        os.close(1)
    poller = select.poll()
    poller.register(0, select.POLLIN)
    if watch is not None:
        poller.register(watch, select.POLLIN)
    gone = False
    while not gone and os.getppid() == council:
        for fd, _ in poller.poll(None if watch is not None else _POLL_MS):
            if fd == watch:
                gone = True
                continue
            data = os.read(0, 65536)
            if not data:
                gone = True
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                _apply(line, voices)
    # Whatever the council wrote before it died counts too.
    os.set_blocking(0, False)
    with contextlib.suppress(OSError):
        while data := os.read(0, 65536):
            pending += data
    for line in pending.split(b"\n"):
        _apply(line, voices)
    _kill(voices)


if __name__ == "__main__":
    main()
