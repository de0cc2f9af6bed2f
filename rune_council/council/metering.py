"""How much the council sends: every prompt to every runtime, counted by stage.

Runtimes are wrapped once when they are seated, so every ask is counted wherever it comes
from (a slot, a failover, a ballot, a round, the chairman) without each stage keeping its
own tally. The pipeline says which stage it is in.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from ..contract import FamilyConfidence, PromptCost, PromptUse, VoiceSource
from ..runtime import ReplyCheck, Runtime, RuntimeReply

if TYPE_CHECKING:
    from .seating import Seating

Stage = Literal["answer", "deliberation", "chair"]


def estimated_tokens(size_bytes: int) -> int:
    # About four bytes a token for English prose and code under the common tokenizers; the
    # estimate is for comparing councils, not for billing.
    return -(-size_bytes // 4)


class PromptMeter:
    def __init__(self) -> None:
        self.stage: Stage = "answer"
        self._uses: dict[tuple[Stage, str], list[int]] = {}

    def count(self, runtime: str, prompt: str, stage: Stage | None = None) -> None:
        entry = self._uses.setdefault((stage or self.stage, runtime), [0, 0])
        entry[0] += 1
        entry[1] += len(prompt.encode("utf-8"))

    def cost(self) -> PromptCost:
        uses = [
            PromptUse(
                stage=stage,
                runtime=runtime,
                prompts=prompts,
                bytes=size,
                tokens_est=estimated_tokens(size),
            )
            for (stage, runtime), (prompts, size) in self._uses.items()
        ]
        total = sum(u.bytes for u in uses)
        return PromptCost(bytes=total, tokens_est=estimated_tokens(total), by_use=uses)


class MeteredRuntime:
    """A runtime whose every prompt is counted; everything else is the runtime's own."""

    def __init__(self, inner: Runtime, meter: PromptMeter, stage: Stage | None = None) -> None:
        self._inner = inner
        self._meter = meter
        self._stage = stage

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def source(self) -> VoiceSource:
        return self._inner.source

    @property
    def model_family(self) -> str:
        return self._inner.model_family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self._inner.family_confidence

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        self._meter.count(self._inner.name, prompt, self._stage)
        return await self._inner.ask(
            prompt, timeout_s=timeout_s, max_output_bytes=max_output_bytes, check=check
        )

    def __getattr__(self, attr: str) -> Any:
        # What a particular runtime offers besides the protocol (an HTTP voice's model,
        # whether it may be reseated, ...) reads through to it.
        return getattr(self._inner, attr)


def metered(seats: Seating, meter: PromptMeter) -> Seating:
    """The same seating with every runtime counted; one wrapper per runtime, so a runtime
    seated twice (a CLI that is also the subagent) is still one object."""
    wrapped: dict[int, Runtime] = {}

    def wrap(runtime: Runtime) -> Runtime:
        return wrapped.setdefault(id(runtime), MeteredRuntime(runtime, meter))

    subagent = wrap(seats.subagent) if seats.subagent is not None else None
    return dataclasses.replace(
        seats, available=[wrap(r) for r in seats.available], subagent=subagent
    )
