"""Verdict metadata, computed for every result from what the run file already holds."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import TYPE_CHECKING, Literal

from ..core.contract import CouncilResult, VerdictMetadata
from ..core.made import made

if TYPE_CHECKING:
    # A council without a deliberation never loads the deliberation's models.
    from ..core.contract import (
        ConsensusScore,
        Consolidation,
        Deliberation,
        MemberBallot,
        RiskRegister,
        Synthesis,
    )
from ..stages.arbitrate import decision_text, unresolved_claims


def halt_text(d: Deliberation) -> str | None:
    """Why a halted deliberation stopped, from its round records; None when it did not halt."""
    if not d.halted or not d.rounds:
        return None
    last = d.rounds[-1]
    before = d.rounds[-2].consensus_score if len(d.rounds) > 1 else None
    if before is not None and last.consensus_score is not None:
        return (
            f"Deliberation halted after round {last.round}: the consensus score fell from "
            f"{before:g} to {last.consensus_score:g}; the council is diverging: a person "
            "should decide."
        )
    return f"Deliberation halted after round {last.round}: the council diverged."


def settle_decision(result: CouncilResult) -> None:
    """``needs_decision`` and ``decision`` from the agreement and a halted deliberation.

    The council and ``verify`` both call this, so the rule has one home: a person decides
    when a MUST or SHOULD claim is left unresolved, or when the deliberation halted.
    """
    unresolved = unresolved_claims(result.agreement)
    halt = halt_text(result.deliberation) if result.deliberation is not None else None
    parts = [p for p in (halt, decision_text(unresolved)) if p]
    result.needs_decision = bool(parts)
    result.decision = " ".join(parts) or None


def digest_of(section: Synthesis | RiskRegister | Consolidation | MemberBallot) -> str:
    """sha256 of what a model wrote in a section (its text, summary and risks, or items), or
    of a member's raw ballot reply together with who sent it."""
    from ..core.contract import MemberBallot, RiskRegister, Synthesis

    if isinstance(section, Synthesis):
        content: object = section.text
    elif isinstance(section, RiskRegister):
        content = [section.summary, [r.model_dump(mode="json") for r in section.risks]]
    elif isinstance(section, MemberBallot):
        # The voter is sealed with its reply: a reply moved to another member is an edit too.
        content = [section.voice_id, section.runtime, section.text, section.truncated]
    else:
        content = [i.model_dump(mode="json") for i in section.items]
    raw = json.dumps(content, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def seal(d: Deliberation) -> None:
    """Record a digest of every model-written section as it is filed.

    Only what a model wrote is sealed: deterministic text is re-derived by ``verify``
    instead. A digest proves the text was not edited afterwards without the digest; it
    cannot prove who wrote it.
    """
    for section in (d.synthesis, d.risk_register, d.consolidation):
        if section is not None and section.by is not None and section.fallback is None:
            section.digest = digest_of(section)


def _seconds(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    try:
        delta = dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)
    except ValueError:
        return None
    return round(delta.total_seconds(), 3)


Basis = Literal["rankings", "votes", "positions"]


def _standing(d: Deliberation) -> tuple[ConsensusScore | None, list[str], Basis]:
    """What the method that deliberated reports, and what its dissent is read from (the
    method's own word: a vote's from its votes); a method this process lacks reports
    nothing."""
    if d.method is None:
        return None, [], "rankings"
    from .registry import METHODS  # only a run that deliberated loads the methods

    method = METHODS.get(d.method)
    if method is None:
        return None, [], "rankings"
    standing = method.standing(d)
    return standing.consensus, list(standing.dissenters), standing.basis


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
    basis: Basis | None = None
    markers = []
    if d is not None:
        consensus, dissenters, read_from = _standing(d)
        if consensus is not None:
            score, label = consensus.w, consensus.label
            basis = read_from
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
    # Built without validation: every field below is already of its declared type, and
    # this runs once per result, where building the model's validator would cost more.
    return made(
        VerdictMetadata,
        consensus_score=score,
        confidence_label=label,
        dissent_detected=bool(dissenters) or basis == "positions",
        dissent_basis=basis,
        dissenting_member=dissenters[0] if dissenters else None,
        dissenting_members=list(dissenters),
        uncertainty_markers=markers,
        revision_count=max(1, len(d.rounds)) if d is not None else 1,
        member_count=member_count(result),
        council_type=d.council_type if d is not None else "standard",
        converged_early=d.converged_early if d is not None else False,
        divergence_detected=d.divergence_detected if d is not None else False,
        duration_seconds=_seconds(result.started_at, result.finished_at),
        closed_at=result.finished_at,
    )
