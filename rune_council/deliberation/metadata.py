"""Verdict metadata, computed for every result from what the run file already holds."""

from __future__ import annotations

import datetime as dt

from ..contract import ConsensusScore, CouncilResult, Deliberation, VerdictMetadata


def _seconds(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    try:
        delta = dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)
    except ValueError:
        return None
    return round(delta.total_seconds(), 3)


def _standing(d: Deliberation) -> tuple[ConsensusScore | None, list[str]]:
    """What the method that deliberated reports; a method this process lacks reports nothing."""
    if d.method is None:
        return None, []
    from .registry import METHODS  # only a run that deliberated loads the methods

    method = METHODS.get(d.method)
    if method is None:
        return None, []
    standing = method.standing(d)
    return standing.consensus, list(standing.dissenters)


def member_count(result: CouncilResult) -> int:
    """Members whose answer counted, in the first pass or in any later round.

    A voice dropped by dispatch or GATE held a seat but said nothing the verdict used, so it
    is no member of the verdict.
    """
    counted = {v.id for v in result.voices if v.status == "complete"}
    if result.deliberation is not None:
        for record in result.deliberation.rounds:
            counted.update(v.voice_id for v in record.voices if v.status == "complete")
    return len(counted)


def verdict_metadata(result: CouncilResult) -> VerdictMetadata:
    d = result.deliberation
    score = None
    label = None
    dissenters: list[str] = []
    basis = None
    markers = []
    if d is not None:
        consensus, dissenters = _standing(d)
        if consensus is not None:
            score, label = consensus.w, consensus.label
            basis = "rankings"
        if d.synthesis is not None:
            markers = list(d.synthesis.uncertainty_markers)
    if basis is None:
        # No rankings: a YES/NO split on the question is the dissent we can see.
        valid = [v for v in result.voices if v.status == "complete"]
        yes = [v.id for v in valid if v.position == "yes"]
        no = [v.id for v in valid if v.position == "no"]
        if yes and no:
            basis = "positions"
            minority = yes if len(yes) < len(no) else no if len(no) < len(yes) else []
            dissenters = minority
    return VerdictMetadata(
        consensus_score=score,
        confidence_label=label,
        dissent_detected=bool(dissenters) or basis == "positions",
        dissent_basis=basis,  # type: ignore[arg-type]
        dissenting_member=dissenters[0] if dissenters else None,
        dissenting_members=dissenters,
        uncertainty_markers=markers,
        revision_count=max(1, len(d.rounds)) if d is not None else 1,
        member_count=member_count(result),
        council_type=d.council_type if d is not None else "standard",
        converged_early=d.converged_early if d is not None else False,
        divergence_detected=d.divergence_detected if d is not None else False,
        duration_seconds=_seconds(result.started_at, result.finished_at),
        closed_at=result.finished_at,
    )
