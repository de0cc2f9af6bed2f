"""The chairman: the runtime that merges and writes the verdict, never a seat.

Any ``Runtime`` the caller configured can chair. When there is none, when it fails, or when
its reply is no verdict of this council, each method writes from its own arithmetic instead
and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.contract import Attempt, Budget, PerspectiveRequest, Synthesis
from ..core.runtime import Runtime
from ..runtimes.subagent import FunctionRuntime, SubagentFn
from ..stages.dispatch import ask_within
from ..stages.dispatch import attempt_record as _attempt
from . import rank

# Attempt.output_tail's bound in the contract.
OUTPUT_TAIL_CAP = 4000


def resolve_orchestrator(
    given: SubagentFn | Runtime | None,
    request: PerspectiveRequest,
    runtimes: Mapping[str, Runtime],
) -> tuple[Runtime | None, str | None]:
    """The caller's orchestrator, else the runtime the request names; a note if it is missing."""
    if given is not None:
        if isinstance(given, Runtime):
            return given, None
        return FunctionRuntime(fn=given, name="orchestrator"), None
    name = request.deliberation.orchestrator if request.deliberation else None
    if name is None:
        return None, None
    found = runtimes.get(name)
    if found is None:
        known = ", ".join(sorted(runtimes)) or "none"
        return None, f"orchestrator {name!r} is not an available runtime (available: {known})"
    return found, None


@dataclass(frozen=True)
class Chair:
    runtime: Runtime | None
    budget: Budget

    @property
    def name(self) -> str | None:
        return self.runtime.name if self.runtime is not None else None

    async def ask(self, prompt: str) -> tuple[str | None, Attempt | None, str]:
        """(text, attempt, "ok") or (None, attempt or None, why there is no usable text)."""
        chair = self.runtime
        if chair is None:
            return None, None, "no orchestrator configured"
        reply = await ask_within(chair, prompt, self.budget)
        attempt = _attempt(chair, reply)
        if reply.outcome != "ok":
            return None, attempt, f"{chair.name}: {reply.outcome}: {reply.detail}"
        if not reply.text or not reply.text.strip():
            return None, *self.refused(attempt, "the chairman wrote nothing", reply.text or "")
        return reply.text, attempt, "ok"

    def refused(
        self, attempt: Attempt | None, reason: str, text: str
    ) -> tuple[Attempt | None, str]:
        """A reply that came back but cannot be used, recorded as a failed chairman: its
        attempt is ``malformed`` with the reason and the end of what it wrote, and the reason
        reads as a chairman's that exited non-zero does, so the same fallback follows."""
        if attempt is not None:
            attempt = attempt.model_copy(
                update={
                    "outcome": "malformed",
                    "detail": reason,
                    "output_tail": text[-OUTPUT_TAIL_CAP:] or None,
                }
            )
        return attempt, f"{self.name}: malformed: {reason}"

    async def synthesise(
        self, prompt: str, arithmetic: str, items: Mapping[str, str], noun: str
    ) -> Synthesis:
        """The chairman's verdict, else ``arithmetic`` marked as the fallback.

        ``items`` are what the chairman was given to merge, by the name the prompt gave each
        (see :func:`.rank.synthesis_fault`): a reply that refers to none of them failed, as
        one that exits non-zero has.
        """
        text, attempt, reason = await self.ask(prompt)
        if text is not None:
            reading = rank.read_chairman(text, items, noun)
            if reading.text is not None:
                return Synthesis(
                    text=reading.text,
                    by=self.name,
                    attempt=attempt,
                    open_questions=reading.open,
                    closed=not reading.open,
                    uncertainty_markers=rank.uncertainty_markers(reading.text),
                )
            attempt, reason = self.refused(attempt, reading.reason, text)
        return Synthesis(
            text=arithmetic,
            fallback="arithmetic",
            fallback_reason=reason,
            attempt=attempt,
            uncertainty_markers=rank.uncertainty_markers(arithmetic),
        )
