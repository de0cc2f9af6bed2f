"""What a council needs once its voices have answered, loaded while they think.

Judging the answers (GATE -> NORMALIZE -> ARBITRATE, the fuzzy matcher under them, their
record classes) takes some 15-20 ms of imports that nothing before it needs, and reading the
answers and completing the verdict build two models' validators (5-7 ms). A council spends
most of its wall time waiting for its voices, so a thread does this then, while the event
loop waits on its sockets: the wait hides it. The thread only imports modules, makes their
classes and builds those validators (all safe from any thread: imports under the import
lock, records and pydantic's models under their own), shares nothing else with the council,
and never decides anything: the council imports and validates what it needs itself when it
gets there, which simply waits for what the thread has under way and costs nothing once it
is done. Whatever goes wrong in the thread is dropped with it, and the council's own import
meets it again and reports it.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time

from ..core.records import make_all

# What the council's judging step imports, first the module it calls (it brings the rest),
# and the verdict's metadata, written as the council completes.
AFTER_ANSWERS = (
    "rune_council.stages.verdict",
    "rune_council.stages.gate",
    "rune_council.stages.normalize",
    "rune_council.stages.arbitrate",
    "rune_council.stages.topic",
    "rune_council.stages.point",
    "rune_council.stages.places",
    "rune_council.deliberation.metadata",
)
# The models every single pass validates once its voices answer (their answers, and the
# verdict's metadata as it completes): their validators are built here, ahead of it.
AFTER_ANSWERS_MODELS = ("VoiceAnswer", "VerdictMetadata")
# How often the thread looks whether the event loop is waiting, how long it must have been
# waiting at every look (it waits for moments too, between sending one voice's request and
# the next: a thread that took the interpreter then would hold up the sending by as much as
# it saves later), and how long the thread waits for that at most.
POLL_S = 0.002
QUIET_S = 0.02
MAX_WAIT_S = 5.0


class Warmup:
    """Started as a council dispatches its voices; ``finish`` before it judges them."""

    def __init__(self) -> None:
        # The event loop's thread: while its innermost frame is the selector's, it is
        # waiting, and once it has been for a while it is waiting for the voices: the
        # thread's imports take nothing from it then.
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rune-council-warmup", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def finish(self) -> None:
        """Stop waiting for an idle moment and let the thread end before the council goes
        on: a process ends quickly only once it is the last thread left."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _loop_is_waiting(self) -> bool:
        frame = sys._current_frames().get(self._loop_thread)
        return (
            frame is not None
            and frame.f_code.co_name == "select"
            and frame.f_code.co_filename.endswith("selectors.py")
        )

    def _quiet(self) -> bool:
        """Whether the event loop was seen waiting at every look for ``QUIET_S``; False when
        the council went on (``finish``) or ``MAX_WAIT_S`` passed first."""
        deadline = time.monotonic() + MAX_WAIT_S
        since: float | None = None
        while not self._stop.wait(POLL_S):
            moment = time.monotonic()
            if moment > deadline:
                return False
            if not self._loop_is_waiting():
                since = None
            elif since is None:
                since = moment
            elif moment - since >= QUIET_S:
                return True
        return False

    def _run(self) -> None:
        try:
            if not self._quiet():
                return
            for name in AFTER_ANSWERS:
                if self._stop.is_set():
                    return
                make_all(vars(importlib.import_module(name)))
            contract = importlib.import_module("rune_council.core.contract")
            for model in AFTER_ANSWERS_MODELS:
                if self._stop.is_set():
                    return
                # Built under pydantic's own lock: a council validating one meanwhile
                # waits for it and uses it.
                getattr(contract, model).model_rebuild()
        except BaseException:  # the council's own import meets it again and reports it
            return
