"""Multi-round deliberation: when to stop, and what the next round is told.

After each round the consensus score is compared with the threshold and with the previous
round. Reaching ``convergence_threshold`` with a verdict that left nothing open stops early
(``converged_early`` when rounds were left). A drop of more than 0.05 is divergence: ``warn``
flags it and goes on, ``halt`` stops and hands the split to a person, ``continue`` ignores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.contract import RoundsOptions, Voice
from ..stages.allocate import SlotPrompts

DIVERGENCE_DROP = 0.05


@dataclass(frozen=True)
class Decision:
    stop: bool
    converged: bool
    diverged: bool
    halt: bool
    delta: float | None
    reason: str


def decide(
    options: RoundsOptions,
    round_no: int,
    score: float | None,
    previous: float | None,
    closed: bool,
) -> Decision:
    delta = None if score is None or previous is None else round(score - previous, 6)
    # Strictly more than the drop: noise-level wobble is not divergence.
    diverged = delta is not None and -delta > DIVERGENCE_DROP + 1e-12
    last = round_no >= options.max_rounds
    converged = score is not None and score >= options.convergence_threshold and closed
    if diverged and options.on_divergence == "halt":
        return Decision(True, False, True, True, delta, "consensus fell: halted for a person")
    if converged:
        return Decision(True, True, diverged, False, delta, "consensus reached the threshold")
    if last:
        return Decision(True, False, diverged, False, delta, "last configured round")
    return Decision(False, False, diverged, False, delta, "another round")


@dataclass(frozen=True)
class Flags:
    """What the rounds say about the whole deliberation; a flag a round raises stays up."""

    halted: bool = False
    divergence_detected: bool = False
    converged_early: bool = False

    def __or__(self, other: Flags) -> Flags:
        return Flags(
            self.halted or other.halted,
            self.divergence_detected or other.divergence_detected,
            self.converged_early or other.converged_early,
        )


def raised(options: RoundsOptions, round_no: int, decision: Decision) -> Flags:
    """The run-level flags one round's decision raises: the runner sets them as the rounds
    run and ``verify`` folds them again over the recorded rounds, so both read one rule.

    A divergence is reported unless the policy is ``continue``; convergence is early only
    with rounds left to run.
    """
    return Flags(
        halted=decision.halt,
        divergence_detected=decision.diverged and options.on_divergence != "continue",
        converged_early=decision.converged and round_no < options.max_rounds,
    )


def round_prompts(
    prompts: dict[str, SlotPrompts],
    prefix: str,
    draft: str,
    previous: Sequence[Voice],
) -> dict[str, SlotPrompts]:
    """Every member's next prompt: the prefix, the draft verdict, last round's positions."""
    said = [
        f"- Member {chr(ord('A') + i)}: {v.stance}"
        for i, v in enumerate(v for v in previous if v.status == "complete" and v.stance)
    ]
    earlier = "\n".join(said) or "- (no usable answer last round)"
    head = (
        f"{prefix}\n\nDraft verdict from the previous round:\n<<<DRAFT\n{draft}\nDRAFT>>>\n\n"
        f"Positions the members took last round:\n{earlier}\n\n"
        "Now answer again, in the same form as before:\n\n"
    )
    return {
        vid: SlotPrompts(
            primary=head + p.primary,
            fallback=head + p.fallback,
            fallback_persona=p.fallback_persona,
        )
        for vid, p in prompts.items()
    }
