"""How many calls each runtime may have in flight, shared by every council given the same
``Limits``, and how long an endpoint asked everyone to wait.

A batch runs many councils at once; without a shared bound each would start its own claude,
codex and gemini processes and sixteen councils would mean forty-eight AI CLIs on one
laptop. The rule, written once here: a runtime's cap is the ``max_concurrent`` the user
gave for its name (``[runtimes.NAME]`` in council.toml or a flag), else the runtime's own
``default_max_concurrent`` (every AI CLI and subagent command: a process each; an endpoint:
requests to one server), else none (in-process voices cost nothing to run at once).
Endpoint models share one cap per endpoint (``limit_key``), since a server's rate limit
counts requests to it, not to one of its models.

``Backoff`` is the other shared state: when a server answers 429, every council that holds
the same ``Limits`` waits before asking it again, instead of each finding out for itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

from ..core.runtime import ReplyCheck, Runtime, RuntimeReply, RuntimeWrapper

if TYPE_CHECKING:
    from ..config import CouncilConfig

# Backoff for a 429 that names no wait: doubling from BASE up to CAP, per model.
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0


def limit_key(runtime: Runtime) -> str:
    """What a cap counts: the runtime's name, or its endpoint for an endpoint model."""
    key = getattr(runtime, "limit_key", None)
    return key if isinstance(key, str) else runtime.name


class Backoff:
    """Pauses by key (an endpoint, or an endpoint's model) that every holder respects."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}
        self._streak: dict[str, int] = {}

    def pause(self, key: str, seconds: float) -> None:
        until = self._clock() + max(seconds, 0.0)
        self._until[key] = max(self._until.get(key, 0.0), until)

    def remaining(self, *keys: str) -> float:
        now = self._clock()
        left = 0.0
        for key in keys:
            left = max(left, self._until.get(key, 0.0) - now)
        return left

    def refused(self, key: str) -> float:
        """A 429 with no wait named: pause ``key`` for the next step of the doubling."""
        streak = self._streak.get(key, 0) + 1
        self._streak[key] = streak
        delay: float = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** (streak - 1))
        self.pause(key, delay)
        return delay

    def served(self, key: str) -> None:
        self._streak.pop(key, None)


class Limits:
    """Per-runtime caps and the endpoints' backoff, for every council that shares it.

    Semaphores are made on first use, so one ``Limits`` serves any number of councils on
    one event loop (a batch); each Ray worker process builds its own from the same caps.
    """

    def __init__(self, caps: Mapping[str, int] | None = None) -> None:
        bad = {k: v for k, v in (caps or {}).items() if not isinstance(v, int) or v < 1}
        if bad:
            raise ValueError(f"max_concurrent must be a whole number >= 1: {bad}")
        self.caps: dict[str, int] = dict(caps or {})
        self.backoff = Backoff()
        self._gates: dict[str, asyncio.Semaphore] = {}
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    def cap(self, runtime: Runtime) -> int | None:
        """The one rule: the user's cap for its name, else its own default, else none."""
        key = limit_key(runtime)
        if key in self.caps:
            return self.caps[key]
        if runtime.name in self.caps:
            return self.caps[runtime.name]
        own = getattr(runtime, "default_max_concurrent", None)
        return own if isinstance(own, int) and own >= 1 else None

    @contextlib.asynccontextmanager
    async def slot(self, runtime: Runtime) -> AsyncIterator[None]:
        """Held while one call to ``runtime`` runs; waits while its cap is reached."""
        cap = self.cap(runtime)
        key = limit_key(runtime)
        if cap is None:
            yield
            return
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(cap)
        async with gate:
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.in_flight[key])
            try:
                yield
            finally:
                self.in_flight[key] -= 1

    def wrap(self, runtime: Runtime) -> Limited:
        """``runtime`` with every call going through ``slot``."""
        return Limited(runtime, self)


class Limited(RuntimeWrapper):
    """A runtime whose calls wait for a slot; everything else is the runtime's own."""

    def __init__(self, inner: Runtime, limits: Limits) -> None:
        super().__init__(inner)
        self.limits = limits

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        # The wait for a slot is not part of the voice's timeout: it starts when it may run.
        async with self.limits.slot(self.inner):
            return await super().ask(
                prompt, timeout_s=timeout_s, max_output_bytes=max_output_bytes, check=check
            )


def caps_from_config(config: CouncilConfig | None) -> dict[str, int]:
    """The ``max_concurrent`` of every ``[runtimes.NAME]`` table in force."""
    if config is None:
        return {}
    return {
        name: spec.max_concurrent
        for name, spec in config.runtimes.items()
        if spec.max_concurrent is not None
    }
