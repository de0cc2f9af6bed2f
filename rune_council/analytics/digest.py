"""One run file reduced to what the statistics need.

A digest is small (no voice text beyond names the run file gave), JSON-able and validated
on the way back in from the index, since the index sits in a directory anyone may have
written to. Everything here reads what the pipeline recorded; no rule of the council is
decided again: consensus is what ARBITRATE put in ``agreement.consensus_claims`` (already
anchored to a shared place and mechanically verified), and the families that answered are
the run's ``distinct_families`` (confirmed, non-fallback voices that passed GATE).
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.contract import CouncilResult, Voice
from ..runs import parse_time

# Names from a run file end up in tables and pictures; longer ones are cut.
MAX_NAME = 60
# A drop reason is grouped by its head ("malformed", "off-topic"); the rest varies per run.
MAX_REASON = 40

CallResult = Literal["answered", "dropped", "timed_out"]


class _Digest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Call(_Digest):
    """One call to a runtime for a slot, and what became of it."""

    runtime: str = Field(max_length=MAX_NAME)
    result: CallResult
    reason: str | None = Field(default=None, max_length=MAX_REASON)
    # The call failed and the slot was seated again on another runtime or a subagent.
    fell_back: bool = False
    # Only calls that returned an answer: a timeout's latency is the timeout.
    latency_ms: int | None = Field(default=None, ge=0)


class Round(_Digest):
    number: int = Field(ge=1)
    score: float | None = None
    closed: bool = True
    # The voice whose answer the rank tally put first; vote rounds name no single winner.
    winner: str | None = Field(default=None, max_length=MAX_NAME)


class Deliberated(_Digest):
    method: str | None = Field(default=None, max_length=MAX_NAME)
    threshold: float = 0.85
    rounds: list[Round] = Field(default_factory=list, max_length=100)
    revision_count: int = Field(default=1, ge=0)
    converged_early: bool = False
    halted: bool = False


class RunDigest(_Digest):
    name: str = Field(max_length=300)
    started: float | None = Field(default=None, description="Unix seconds")
    status: str = Field(max_length=20)
    stamp: str | None = Field(default=None, max_length=20)
    needs_decision: bool = False
    consensus_claims: int = Field(default=0, ge=0)
    families: list[str] = Field(default_factory=list, max_length=50)
    # [family a, family b, consensus claims they share], a < b.
    agreed: list[tuple[str, str, int]] = Field(default_factory=list, max_length=1300)
    dissented: list[tuple[str, str]] = Field(default_factory=list, max_length=1300)
    # Dissent entries naming each family, and those where it stood alone (single voice).
    dissent: dict[str, int] = Field(default_factory=dict, max_length=50)
    alone: dict[str, int] = Field(default_factory=dict, max_length=50)
    calls: list[Call] = Field(default_factory=list, max_length=500)
    w: float | None = None
    deliberation: Deliberated | None = None


def _name(text: str) -> str:
    return text[:MAX_NAME]


def _reason_head(reason: str | None) -> str:
    head = (reason or "dropped").split(":", 1)[0].strip().lower()
    return head[:MAX_REASON] or "dropped"


def _calls(voice: Voice) -> list[Call]:
    calls: list[Call] = []
    last = len(voice.attempts) - 1
    for i, attempt in enumerate(voice.attempts):
        runtime = _name(attempt.runtime)
        if attempt.outcome == "ok":
            if i < last or voice.status == "complete":
                calls.append(
                    Call(runtime=runtime, result="answered", latency_ms=attempt.latency_ms)
                )
            elif voice.status == "dropped":
                # It answered, and GATE threw the answer out.
                calls.append(
                    Call(
                        runtime=runtime,
                        result="dropped",
                        reason=_reason_head(voice.drop_reason),
                        latency_ms=attempt.latency_ms,
                    )
                )
            # Otherwise the answer is not gated yet: no verdict on this call so far.
            continue
        fell_back = i < last
        if attempt.outcome == "timeout":
            calls.append(Call(runtime=runtime, result="timed_out", fell_back=fell_back))
        else:
            calls.append(
                Call(runtime=runtime, result="dropped", reason=attempt.outcome, fell_back=fell_back)
            )
    return calls


def _pairs(families: list[str] | set[str]) -> list[tuple[str, str]]:
    return list(combinations(sorted(set(families)), 2))


def _dissented(result: CouncilResult, answered: set[str]) -> set[tuple[str, str]]:
    """Pairs of answering families that took opposite sides in this run.

    Opposite sides: one said YES and the other NO, or their claims were matched on the same
    place and say opposite things (a ``disagreement`` entry holding claims).
    """
    pairs: set[tuple[str, str]] = set()
    sides: dict[str, set[str]] = {"yes": set(), "no": set()}
    for voice in result.voices:
        if voice.status == "complete" and voice.position in sides:
            sides[voice.position].add(voice.model_family)
    for a in sides["yes"]:
        for b in sides["no"]:
            if a != b:
                pairs.add((min(a, b), max(a, b)))
    for entry in result.agreement.dissent:
        if entry.label == "disagreement" and entry.claim_ids:
            pairs.update(_pairs(entry.families))
    return {p for p in pairs if p[0] in answered and p[1] in answered}


def _deliberated(result: CouncilResult) -> Deliberated | None:
    d = result.deliberation
    if d is None:
        return None
    options = result.request.deliberation
    rounds = []
    for record in d.rounds:
        winner = None
        if record.rank is not None and record.rank.tally.winner is not None:
            by_label = {p.label: p.voice_id for p in record.rank.proposals}
            winner = by_label.get(record.rank.tally.winner)
        rounds.append(
            Round(
                number=record.round,
                score=record.consensus_score,
                closed=record.closed,
                winner=_name(winner) if winner else None,
            )
        )
    return Deliberated(
        method=_name(d.method) if d.method else None,
        threshold=options.rounds.convergence_threshold if options else 0.85,
        rounds=rounds,
        revision_count=result.verdict.revision_count if result.verdict else len(rounds) or 1,
        converged_early=d.converged_early,
        halted=d.halted,
    )


def digest(result: CouncilResult, name: str) -> RunDigest:
    """The statistics' view of one run; ``name`` is the run file's name without ``run-``."""
    answered = {_name(f) for f in result.distinct_families}
    agreed: dict[tuple[str, str], int] = {}
    for claim in result.agreement.consensus_claims:
        for pair in _pairs({_name(f) for f in claim.families} & answered):
            agreed[pair] = agreed.get(pair, 0) + 1
    dissent: dict[str, int] = {}
    alone: dict[str, int] = {}
    for entry in result.agreement.dissent:
        for family in {_name(f) for f in entry.families}:
            dissent[family] = dissent.get(family, 0) + 1
            if entry.label == "single-voice":
                alone[family] = alone.get(family, 0) + 1
    started = parse_time(result.started_at)
    return RunDigest(
        name=name[:300],
        started=started.timestamp() if started else None,
        # As every reader tells it: an older file called an empty council complete.
        status=result.shown_status(),
        stamp=result.decorrelation,
        needs_decision=result.needs_decision,
        consensus_claims=len(result.agreement.consensus_claims),
        families=sorted(answered),
        agreed=[(a, b, n) for (a, b), n in sorted(agreed.items())],
        dissented=sorted(_dissented(result, answered)),
        dissent=dissent,
        alone=alone,
        calls=[c for v in result.voices for c in _calls(v)],
        w=result.verdict.consensus_score if result.verdict else None,
        deliberation=_deliberated(result),
    )
