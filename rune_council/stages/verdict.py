"""GATE → NORMALIZE → ARBITRATE over a council whose voices have all been dispatched.

The orchestrator runs this at the end of a run and ``rune council verify`` runs it again on
the raw answers a run file recorded, so both must go through this one function: a verdict
is reproducible only if there is a single way to reach it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.contract import CouncilResult, DroppedVoice, Voice
from .arbitrate import arbitrate
from .dispatch import DISPATCH
from .gate import gate
from .normalize import normalize

OnDrop = Callable[[Voice, DroppedVoice], None]


def used_runtimes(result: CouncilResult) -> list[str]:
    """Runtimes that produced an answer; one that only failed was tried, not used."""
    return sorted({a.runtime for v in result.voices for a in v.attempts if a.outcome == "ok"})


def reach_verdict(
    result: CouncilResult, artifact_name: str | None, on_drop: OnDrop | None = None
) -> list[str]:
    """Fill in the verdict on ``result``; returns ARBITRATE's notes for the caller to add."""
    result.voices_dropped = [
        DroppedVoice(
            voice_id=v.id, runtime=v.runtime, reason=v.drop_reason or "dropped", dropped_by=DISPATCH
        )
        for v in result.voices
        if v.status == "dropped" and v.dropped_by == DISPATCH
    ]
    for voice in result.voices:
        dropped = gate(voice, result.request, result.artifact_text)
        if dropped is not None:
            result.voices_dropped.append(dropped)
            if on_drop is not None:
                on_drop(voice, dropped)

    normalized = normalize(result.voices, artifact_name, result.artifact_text)
    verdict = arbitrate(normalized.voices, normalized.clusters, normalized.near_verbatim)
    result.decorrelation = verdict.decorrelation
    result.distinct_families = verdict.distinct_families
    result.clusters = normalized.clusters
    result.agreement = verdict.agreement
    result.checks = verdict.checks
    result.needs_decision = verdict.needs_decision
    result.decision = verdict.decision
    result.voices_valid = sum(1 for v in result.voices if v.status == "complete")
    report = result.runtime_report
    report.used = used_runtimes(result)
    report.degraded_to_subagent = [v.id for v in result.voices if v.is_fallback]
    return verdict.notes
