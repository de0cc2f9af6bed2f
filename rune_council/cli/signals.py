"""SIGTERM and SIGHUP end a council the way Ctrl-C does.

Python's default for both is to die on the spot: the run file stays ``running``, voices
keep running and their temporary directories stay behind. Turned into a
``KeyboardInterrupt`` they take the same path as Ctrl-C instead -- the running council is
cancelled, its run file says ``cancelled``, every voice's process tree is killed and its
directory removed -- and the command exits 128 + the signal number (143, 129), as a shell
expects of a process ended by that signal.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Terminated", "signal_exit_code", "terminating_signals"]

_HANDLED = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s
)


class Terminated(KeyboardInterrupt):
    """The process was asked to end by ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal that ended the run (SIGINT for a plain Ctrl-C)."""
    return 128 + int(getattr(interrupt, "signum", signal.SIGINT))


@contextmanager
def terminating_signals() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise ``Terminated``; the first one only, so a
    second signal cannot cut the cleanup short."""
    previous = {s: signal.getsignal(s) for s in _HANDLED}

    def handler(signum: int, _frame: FrameType | None) -> None:
        for s in _HANDLED:
            signal.signal(s, signal.SIG_IGN)
        raise Terminated(signum)

    try:
        for s in _HANDLED:
            signal.signal(s, handler)
    except ValueError:  # not the main thread: signals cannot be caught here
        yield
        return
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
