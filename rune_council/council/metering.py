"""How much the council sends: every prompt to every runtime, counted by stage.

Runtimes are wrapped once when they are seated, so every ask is counted wherever it comes
from (a slot, a failover, a ballot, a round, the chairman) without each stage keeping its
own tally. The pipeline says which stage it is in.
"""

from __future__ import annotations

from typing import Literal

from ..core.contract import PromptCost, PromptUse
from ..core.made import made
from ..core.runtime import ReplyCheck, Runtime, RuntimeReply, RuntimeWrapper

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
            made(
                PromptUse,
                stage=stage,
                runtime=runtime,
                prompts=prompts,
                bytes=size,
                tokens_est=estimated_tokens(size),
            )
            for (stage, runtime), (prompts, size) in self._uses.items()
        ]
        total = sum(u.bytes for u in uses)
        return made(PromptCost, bytes=total, tokens_est=estimated_tokens(total), by_use=uses)


class MeteredRuntime(RuntimeWrapper):
    """A runtime whose every prompt is counted; everything else is the runtime's own."""

    def __init__(self, inner: Runtime, meter: PromptMeter, stage: Stage | None = None) -> None:
        super().__init__(inner)
        self._meter = meter
        self._stage = stage

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        self._meter.count(self.inner.name, prompt, self._stage)
        return await super().ask(
            prompt, timeout_s=timeout_s, max_output_bytes=max_output_bytes, check=check
        )
