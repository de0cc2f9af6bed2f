"""What a council needs once its voices have answered, loaded while they think.

Judging the answers (GATE -> NORMALIZE -> ARBITRATE, the fuzzy matcher under them, their
record classes) takes some 15-20 ms of imports that nothing before it needs, and reading the
answers and completing the verdict build two models' validators (5-7 ms). A council spends
most of its wall time waiting for its voices, so a thread does this then, once the council's
event loop is seen waiting on its sockets: the wait hides it. The thread only imports
modules, makes their classes and builds those validators (all safe from any thread: imports
under the import lock, records and pydantic's models under their own), shares nothing else
with the council, and never decides anything: the council imports and validates what it
needs itself when it gets there, which simply waits for what the thread has under way and
costs nothing once it is done. Whatever goes wrong in the thread is dropped with it, and the
council's own import meets it again and reports it.
"""

from __future__ import annotations

import asyncio
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
    # the answer reader and the reply its runtime hands back, both made once a voice answers
    "rune_council.core.answer",
    "rune_council.core.runtime",
)
# Modules whose record classes a reply makes, when the council has loaded them already (an
# endpoint voice's chat result): a council of CLI voices is not to load the HTTP client.
AFTER_ANSWERS_IF_LOADED = ("rune_council.runtimes.http",)
# The models every single pass validates once its voices answer (their answers): their
# validators are built here, ahead of it.
AFTER_ANSWERS_MODELS = ("VoiceAnswer",)
# How the council sees that it is waiting on its voices: every ``TICK_S`` of the event loop
# it looks how much processor time its own thread spent since the last look; under
# ``IDLE_SHARE`` of the time that passed, it was waiting (between one voice's request and the
# next it waits for moments too, too short to show). Only then is the thread started: one
# that ran while the council was sending its requests would hold them up by as much as it
# saves later. It stops looking after ``MAX_WAIT_S``.
TICK_S = 0.02
IDLE_SHARE = 0.1
MAX_WAIT_S = 5.0


class Warmup:
    """Started as a council dispatches its voices (on its event loop); ``finish`` before
    it judges them."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rune-council-warmup", daemon=True)
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> Warmup:
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + MAX_WAIT_S
        self._look(loop, loop.time(), time.thread_time())
        return self

    def _look(self, loop: asyncio.AbstractEventLoop, then: float, spent: float) -> None:
        self._timer = loop.call_later(TICK_S, self._tick, loop, then, spent)

    def _tick(self, loop: asyncio.AbstractEventLoop, then: float, spent: float) -> None:
        now, cpu = loop.time(), time.thread_time()
        if cpu - spent < IDLE_SHARE * (now - then):
            self._timer = None
            self._thread.start()
        elif now < self._deadline:
            self._look(loop, now, cpu)

    def finish(self) -> None:
        """Stop looking, and let the thread end before the council goes on: a process ends
        quickly only once it is the last thread left."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            for name in AFTER_ANSWERS:
                if self._stop.is_set():
                    return
                make_all(vars(importlib.import_module(name)))
            for name in AFTER_ANSWERS_IF_LOADED:
                loaded = sys.modules.get(name)
                if loaded is not None and not self._stop.is_set():
                    make_all(vars(loaded))
            contract = importlib.import_module("rune_council.core.contract")
            for model in AFTER_ANSWERS_MODELS:
                if self._stop.is_set():
                    return
                # Built under pydantic's own lock: a council validating one meanwhile
                # waits for it and uses it.
                getattr(contract, model).model_rebuild()
        except BaseException:  # the council's own import meets it again and reports it
            return
