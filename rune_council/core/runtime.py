"""The runtime protocol: what the council needs from any source of a voice.

A runtime turns one prompt into one reply. The dispatcher knows nothing else about it, so
AI CLIs, HTTP endpoint models, subagent commands, in-process callables and test doubles are
interchangeable behind ``ask``. This module is part of the core: it does no I/O and imports
nothing but the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .contract import Attempt, AttemptOutcome, FamilyConfidence, VoiceSource
from .records import record

ReplyCheck = Callable[[str], str | None]
"""Judges a reply's text: None when it is acceptable, else the reason it is not."""


@record(frozen=True)
class Answerer:
    """Who finally answered, when a runtime may hand a slot to another model (failover)."""

    runtime: str
    model: str | None
    model_family: str
    family_confidence: FamilyConfidence


@record(frozen=True, kw_only=True)
class RuntimeReply:
    outcome: AttemptOutcome
    text: str | None = None
    detail: str
    exit_code: int | None = None
    latency_ms: int = 0
    truncated: bool = False
    # A runtime that tried several models for one slot reports every try here, in order;
    # empty means the reply itself is the only attempt.
    attempts: tuple[Attempt, ...] = ()
    answered_by: Answerer | None = None
    # The end of what a failed CLI printed, kept in the attempt record; ``detail`` is one line.
    output_tail: str | None = None


@runtime_checkable
class Runtime(Protocol):
    """Anything that can voice an answer.

    ``check``, when given, says whether a reply is what the caller asked for (a voice answer
    that parses, say). A runtime that can try another model for the same slot uses it to
    decide whether to; any other runtime may ignore it, since GATE judges every answer.
    """

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> VoiceSource: ...

    @property
    def model_family(self) -> str: ...

    @property
    def family_confidence(self) -> FamilyConfidence: ...

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply: ...


def is_runtime(value: object) -> bool:
    """True for an object that implements the whole protocol (not a bare callable)."""
    return isinstance(value, Runtime)


class RuntimeWrapper:
    """A runtime around another: a subclass changes ``ask``; the name, family and whatever
    else the inner runtime offers (an HTTP voice's ``model``, ``reseats``, ...) read through."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def source(self) -> VoiceSource:
        return self.inner.source

    @property
    def model_family(self) -> str:
        return self.inner.model_family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self.inner.family_confidence

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not set yet (a copy being rebuilt): no endless lookup
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        return await self.inner.ask(
            prompt, timeout_s=timeout_s, max_output_bytes=max_output_bytes, check=check
        )
