"""What ``verify`` re-derives of a deliberation beyond each method's recount.

The round decisions (delta, divergence, halt, early convergence) come from
``rounds.decide``; deterministic text (the merge when no orchestrator answered, the
arithmetic verdict or risk register when no chairman did) is written again by the function
that wrote it; model-written text is compared with the digest ``metadata.seal`` took when it
was filed; uncertainty markers are read again from the verdict text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .contract import CouncilResult, Deliberation, DeliberationOptions
from .deliberation import rank, redteam, rounds
from .deliberation.consolidate import deterministic_merge
from .deliberation.metadata import digest_of

if TYPE_CHECKING:
    from .verify import Verification


def _dump(value: Any) -> Any:
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _compare(outcome: Verification, name: str, recorded: Any, fresh: Any) -> None:
    from .verify import diff

    outcome.checked.append(name)
    outcome.differences += diff(name, _dump(recorded), _dump(fresh))


def _check_rounds(d: Deliberation, options: DeliberationOptions, outcome: Verification) -> None:
    from .deliberation.registry import METHODS

    method = METHODS.get(d.method) if d.method else None
    previous: float | None = None
    halted = converged_early = divergence = False
    for i, record in enumerate(d.rounds):
        where = f"deliberation.rounds[{i}]"
        if method is not None and (record.rank is not None or record.vote is not None):
            consensus = method.standing(record).consensus
            _compare(
                outcome,
                f"{where}.consensus_score",
                record.consensus_score,
                consensus.w if consensus else None,
            )
        decision = rounds.decide(
            options.rounds, record.round, record.consensus_score, previous, record.closed
        )
        _compare(outcome, f"{where}.delta", record.delta, decision.delta)
        _compare(outcome, f"{where}.diverged", record.diverged, decision.diverged)
        halted = halted or decision.halt
        divergence = divergence or (
            decision.diverged and options.rounds.on_divergence != "continue"
        )
        converged_early = converged_early or (
            decision.converged and record.round < options.rounds.max_rounds
        )
        previous = record.consensus_score
    if d.rounds:
        _compare(outcome, "deliberation.halted", d.halted, halted)
        _compare(outcome, "deliberation.divergence_detected", d.divergence_detected, divergence)
        _compare(outcome, "deliberation.converged_early", d.converged_early, converged_early)


def _check_texts(d: Deliberation, fresh: CouncilResult, outcome: Verification) -> None:
    from .deliberation.methods.vote import _verdict as vote_verdict

    for name, section in (
        ("synthesis", d.synthesis),
        ("risk_register", d.risk_register),
        ("consolidation", d.consolidation),
    ):
        if section is None or section.fallback is not None or section.by is None:
            continue
        if section.digest is None:
            outcome.unchecked.append(
                f"deliberation.{name}: model-written, and no digest was recorded with it"
            )
            continue
        field = {"synthesis": "text", "risk_register": "summary", "consolidation": "items"}[name]
        outcome.checked.append(f"deliberation.{name}.{field} (digest)")
        if digest_of(section) != section.digest:
            from .verify import Difference

            outcome.differences.append(
                Difference(
                    f"deliberation.{name}.{field}",
                    "(edited: does not match the digest recorded when it was written)",
                    section.digest,
                )
            )

    if d.consolidation is not None and d.consolidation.fallback == "deterministic":
        merged = deterministic_merge(fresh.voices, fresh.clusters)
        _compare(outcome, "deliberation.consolidation.items", d.consolidation.items, merged)

    disagreements = [x for x in fresh.agreement.dissent if x.label == "disagreement"]
    register = d.risk_register
    if register is not None and register.fallback == "arithmetic":
        again = redteam.arithmetic_register(
            fresh.voices, fresh.clusters, register.fallback_reason or ""
        )
        _compare(outcome, "deliberation.risk_register", register, again)
    synthesis = d.synthesis
    if synthesis is None:
        return
    _compare(
        outcome,
        "deliberation.synthesis.uncertainty_markers",
        synthesis.uncertainty_markers,
        rank.uncertainty_markers(synthesis.text),
    )
    if synthesis.fallback != "arithmetic":
        return
    text: str | None = None
    if d.council_type == "red_team" and register is not None:
        text = redteam.register_as_context(register, fresh.id)
    elif d.method == "vote" and d.vote is not None:
        text = vote_verdict(d.vote)
    elif d.method == "rank" and d.rank is not None:
        text = rank.arithmetic_verdict(d.rank.proposals, d.rank.tally, disagreements)
    if text is None:
        outcome.unchecked.append("deliberation.synthesis: no arithmetic verdict to re-derive")
        return
    _compare(outcome, "deliberation.synthesis.text", synthesis.text, text)


def check_deliberation_texts(
    recorded: CouncilResult, fresh: CouncilResult, outcome: Verification
) -> None:
    d = recorded.deliberation
    if d is None:
        return
    options = recorded.request.deliberation or DeliberationOptions()
    _check_rounds(d, options, outcome)
    _check_texts(d, fresh, outcome)
