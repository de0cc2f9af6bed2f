"""Test doubles for code that convenes a council: scripted voices and well-formed answers.

A skill that calls ``convene`` can test what it does with the result without any AI CLI,
endpoint or network, the way httpx's ``MockTransport`` stands in for a server::

    def test_review_sees_cross_family_agreement(scripted_council):
        scripted_council.add("anthropic", "openai", answer=answer_for(QUESTION, "NO"))
        result = scripted_council.convene({"id": "t1", "question": QUESTION, "n": 2})
        assert result.decorrelation == "MULTI_FAMILY"

``scripted_council`` is a pytest fixture, available wherever rune-council is installed (the
package registers it as a pytest plug-in) or by importing it from
``rune_council.pytest_plugin``. Everything here also works without pytest.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core.contract import (
    AttemptOutcome,
    CouncilResult,
    FamilyConfidence,
    PerspectiveRequest,
    VoiceSource,
)
from .core.runtime import ReplyCheck, RuntimeReply

__all__ = [
    "AnswerEcho",
    "Failure",
    "ScriptedCouncil",
    "ScriptedRuntime",
    "answer_for",
    "claim",
    "claim_on",
]


@dataclass(frozen=True)
class Failure:
    """A scripted failed call: the outcome and detail a real runtime would report."""

    outcome: AttemptOutcome = "error_reported"
    detail: str = "scripted failure"
    exit_code: int | None = None


Step = str | Failure | Callable[[str], "str | Failure"]
"""One call's behaviour: the reply text, a failure, or a function of the prompt to either
(a function that raises fails the call with ``error_reported``)."""

_numbers = itertools.count(1)


class ScriptedRuntime:
    """A council voice that replies from a script, one step per call (the last repeats).

    ``family`` is the model family it speaks for, confirmed unless it is ``unknown`` or
    ``confirmed=False``; ``delay_s`` makes every call that slow, so a per-voice timeout
    shorter than it ends the call as ``timeout``. ``prompts`` records what it was asked.
    """

    def __init__(
        self,
        *script: Step,
        family: str = "unknown",
        name: str | None = None,
        confirmed: bool = True,
        source: VoiceSource = "external-cli",
        delay_s: float = 0.0,
    ) -> None:
        if not script:
            raise ValueError("a scripted runtime needs at least one step")
        self._script = list(script)
        self._family = family
        self._confidence: FamilyConfidence = (
            "confirmed" if confirmed and family != "unknown" else "unknown"
        )
        self._name = name or f"scripted-{family}-{next(_numbers)}"
        self._source: VoiceSource = source
        self.delay_s = delay_s
        self.prompts: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> VoiceSource:
        return self._source

    @property
    def model_family(self) -> str:
        return self._family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self._confidence

    def _next_step(self) -> Step:
        index = min(len(self.prompts), len(self._script)) - 1
        return self._script[index]

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        started = time.monotonic()
        self.prompts.append(prompt)
        step = self._next_step()

        def ms() -> int:
            return int((time.monotonic() - started) * 1000)

        if self.delay_s > timeout_s:
            await asyncio.sleep(timeout_s)
            return RuntimeReply(
                outcome="timeout", detail=f"timed out after {timeout_s:g} s", latency_ms=ms()
            )
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        try:
            reply = step(prompt) if callable(step) else step
        except Exception as exc:  # a step that raises is a failed call, as for a real host
            reply = Failure("error_reported", f"{type(exc).__name__}: {exc}")
        if isinstance(reply, Failure):
            return RuntimeReply(
                outcome=reply.outcome,
                detail=reply.detail,
                exit_code=reply.exit_code,
                latency_ms=ms(),
            )
        if len(reply.encode("utf-8")) > max_output_bytes:
            return RuntimeReply(
                outcome="too_large",
                detail=f"answer exceeded {max_output_bytes} bytes",
                latency_ms=ms(),
            )
        # ``check`` is ignored on purpose: like a CLI, this runtime has no other model to
        # try, so GATE judges the reply as it would any voice's.
        return RuntimeReply(outcome="ok", text=reply, detail="answered", latency_ms=ms())


def claim(
    text: str,
    *,
    anchor: str | None = None,
    severity: str | None = None,
    ref: str | None = None,
    quote: str | None = None,
) -> dict[str, Any]:
    """One claim of a voice answer; ``ref`` (and ``quote``) make its evidence."""
    out: dict[str, Any] = {"text": text}
    if anchor:
        out["anchor"] = anchor
    if severity:
        out["severity"] = severity
    if ref:
        evidence: dict[str, Any] = {"ref": ref}
        if quote is not None:
            evidence["quote"] = quote
        out["evidence"] = [evidence]
    return out


def claim_on(
    artifact: str, line: int, text: str, *, name: str = "artifact", severity: str | None = None
) -> dict[str, Any]:
    """A claim citing line ``line`` (1-based) of ``artifact`` with that line as its quote, so
    the verification gate can find the quote where the reference points."""
    lines = artifact.splitlines()
    if not 1 <= line <= len(lines):
        raise ValueError(f"line {line} is outside the artifact's {len(lines)} lines")
    return claim(text, severity=severity, ref=f"{name}:{line}", quote=lines[line - 1].strip())


def answer_for(
    request: PerspectiveRequest | Mapping[str, Any] | str,
    stance: str,
    claims: Sequence[Mapping[str, Any]] = (),
    *,
    fenced: bool = True,
) -> str:
    """A voice answer that passes GATE for ``request`` (or a bare question): the question
    echoed word for word, the stance and the claims, wrapped the way models wrap JSON."""
    if isinstance(request, str):
        question = request
    elif isinstance(request, PerspectiveRequest):
        question = request.question
    else:
        question = str(request["question"])
    body = json.dumps(
        {"question_echo": question, "stance": stance, "claims": [dict(c) for c in claims]},
        indent=1,
    )
    if fenced:
        return f"Here is my answer.\n```json\n{body}\n```\nThanks."
    return body


def question_in(prompt: str) -> str:
    """The question a council prompt asks (what a voice echoes back)."""
    _head, sep, rest = prompt.partition("Question:\n")
    if not sep:
        raise ValueError("the prompt asks no question")
    return rest.split("\n\nEvidence rules:", 1)[0]


@dataclass(frozen=True)
class AnswerEcho:
    """A step that answers whatever question the prompt asks, with this stance and these
    claims: one scripted voice serves a whole batch of different questions. It is a plain
    value, so it pickles (a Ray task can carry it)."""

    stance: str = "NO"
    claims: tuple[Mapping[str, Any], ...] = ()

    def __call__(self, prompt: str) -> str:
        return answer_for(question_in(prompt), self.stance, self.claims)


class ScriptedCouncil:
    """Scripted voices and a private ``.rune`` directory: a whole council, no model needed."""

    def __init__(self, rune_dir: str | os.PathLike[str]) -> None:
        self.rune_dir = Path(rune_dir)
        self.runtimes: list[ScriptedRuntime] = []

    def add(
        self,
        *families: str,
        answer: Step | None = None,
        script: Sequence[Step] = (),
        delay_s: float = 0.0,
        confirmed: bool = True,
    ) -> list[ScriptedRuntime]:
        """One scripted voice per family named, all replying ``answer`` (or ``script``)."""
        steps = [answer] if answer is not None else list(script)
        added = [
            ScriptedRuntime(*steps, family=f, delay_s=delay_s, confirmed=confirmed)
            for f in families
        ]
        self.runtimes += added
        return added

    def convene(
        self, request: PerspectiveRequest | Mapping[str, Any], **options: Any
    ) -> CouncilResult:
        # Imported on use: the pytest plug-in loads this module in every test session.
        from .council import CouncilOptions, convene

        return convene(request, CouncilOptions(**self._options(options)))

    async def aconvene(
        self, request: PerspectiveRequest | Mapping[str, Any], **options: Any
    ) -> CouncilResult:
        from .council import CouncilOptions, aconvene

        return await aconvene(request, CouncilOptions(**self._options(options)))

    def _options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "runtimes": list(self.runtimes),
            "rune_dir": self.rune_dir,
            "env": {"PATH": os.defpath, "HOME": str(self.rune_dir.parent)},
            **options,
        }
