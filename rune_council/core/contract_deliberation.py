"""Voice contract v2, the deliberation's part: ballots, tallies, votes, rankings, the
synthesis, the risk register and the rounds, as a ``CouncilResult``'s ``deliberation`` holds
them.

They belong to the contract as much as ``contract.py``'s models do (the schemas in
``contracts/`` cover them, and ``contract`` names every one of them), but a council without a
deliberation never needs them, and defining a model costs pydantic its fields' collection
in every process. So they live here, and ``contract`` loads this module the first time one
of them is asked for by name or ``CouncilResult``'s schema is built.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .contract import (
    Attempt,
    CouncilType,
    DeliberationMethod,
    UncertaintyMarker,
    VoiceStatus,
    _Strict,
)


class DroppedLine(_Strict):
    """A transcript or ballot line that was not used, and why."""

    line: int
    text: str
    reason: str
    source: str | None = Field(default=None, description="Who wrote it (voice id, orchestrator).")


class MoveError(_Strict):
    """A line that cannot simply be dropped (a REQUIRE with no ev=): the tally is invalid."""

    line: int
    text: str
    reason: str


class RankerDetail(_Strict):
    ranker: str
    line: int
    ballot: str = Field(description="The RANK argument as counted, e.g. p2>p1=p3.")
    conf: float
    points: dict[str, float] = Field(description="Borda points x conf this ranker gave.")
    mean_spearman: float | None = Field(
        default=None, description="Mean Spearman correlation with the other rankers."
    )
    dissenting: bool = False


class ProposalScore(_Strict):
    label: str
    score: float
    text: str | None = None
    blocked: bool = False


class PrunedProposal(_Strict):
    label: str
    line: int
    reason: str


class BlockedProposal(_Strict):
    label: str
    lines: list[int] = Field(description="The unresolved MUST / MUST-NOT critiques.")
    reason: str


class ConsensusScore(_Strict):
    w: float | None = Field(description="Kendall's W, tie-corrected; null when undefined.")
    label: Literal["high", "medium", "low"] | None = None
    method: str = Field(description="How W was computed (complete rankings or incomplete).")
    rankers: int
    proposals: int
    note: str = ""


class SynthMove(_Strict):
    line: int
    text: str
    open: list[str] = Field(default_factory=list)
    closes: bool = Field(description="False when open questions remain: the council stays open.")


class VoteCount(_Strict):
    target: str
    yes: list[str] = Field(default_factory=list)
    no: list[str] = Field(default_factory=list)
    abstain: list[str] = Field(default_factory=list)


class TallyReport(_Strict):
    """What ``rune council tally`` computes from a transcript; also kept in the run file."""

    valid: bool = Field(description="No escalated errors.")
    proposals: list[str]
    rankers: list[RankerDetail] = Field(default_factory=list)
    scores: list[ProposalScore] = Field(default_factory=list)
    final_order: list[list[str]] = Field(
        default_factory=list, description="Best first; proposals with equal scores share a level."
    )
    winner: str | None = Field(
        default=None, description="The single best proposal not blocked from synthesis."
    )
    pruned: list[PrunedProposal] = Field(default_factory=list)
    blocked: list[BlockedProposal] = Field(default_factory=list)
    consensus: ConsensusScore
    dissenters: list[str] = Field(default_factory=list)
    votes: list[VoteCount] = Field(default_factory=list)
    synth: SynthMove | None = None
    dropped: list[DroppedLine] = Field(default_factory=list)
    errors: list[MoveError] = Field(default_factory=list)


class MemberBallot(_Strict):
    voice_id: str
    runtime: str
    outcome: Literal["counted", "failed", "malformed"]
    detail: str = ""
    text: str | None = Field(
        default=None,
        description="The member's raw reply as received, bounded; since 2.6 the ballot was "
        "read from exactly this text, so verify reads it again.",
    )
    latency_ms: int | None = None
    truncated: bool = Field(
        default=False, description="(2.6) The reply was longer than the bound and cut."
    )
    digest: str | None = Field(
        default=None,
        description="(2.6) sha256 of the voter, its runtime and the raw reply, taken when the "
        "reply was received, so verify can tell the reply was not edited since.",
    )
    dropped_lines: list[DroppedLine] = Field(
        default_factory=list,
        description="(2.7) The lines of this reply that were not used, each with its reason (a "
        "label the member was not shown, a RANK superseded by a later one, a line that does "
        "not parse); read again from the reply by verify.",
    )


class AbsentMember(_Strict):
    voice_id: str
    runtime: str
    stage: Literal["answer", "ballot"]
    reason: str


class ConsolidatedItem(_Strict):
    number: int
    text: str
    sources: list[str] = Field(description="Claim ids (v1.c2) and stances (v1.stance) merged.")
    voice_ids: list[str]


class Consolidation(_Strict):
    items: list[ConsolidatedItem]
    by: str | None = Field(default=None, description="The orchestrator runtime that merged.")
    fallback: Literal["deterministic"] | None = None
    fallback_reason: str | None = None
    attempt: Attempt | None = None
    dropped_lines: list[DroppedLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    digest: str | None = Field(
        default=None,
        description="(2.2) sha256 of the model-written content, taken when it was produced, "
        "so verify can tell it was not edited since.",
    )


class ItemTally(_Strict):
    number: int
    text: str
    yes: list[str] = Field(default_factory=list)
    no: list[str] = Field(default_factory=list)
    abstain: list[str] = Field(default_factory=list)
    required: int = Field(description="Yes votes needed: ceil(threshold x denominator).")
    outcome: Literal["passed", "failed", "unvoted"]


class VoteResult(_Strict):
    threshold: float
    denominator: int = Field(description="Ballots counted.")
    counted: list[str] = Field(default_factory=list)
    absent: list[AbsentMember] = Field(default_factory=list)
    items: list[ItemTally] = Field(default_factory=list)
    unvoted: list[int] = Field(default_factory=list)
    consensus: ConsensusScore | None = Field(
        default=None, description="Kendall's W of the ballots read as approve > reject."
    )
    dissenters: list[str] = Field(default_factory=list)
    ballots: list[MemberBallot] = Field(default_factory=list)
    dropped_lines: list[DroppedLine] = Field(default_factory=list)


class RankProposal(_Strict):
    label: str = Field(description="Canonical anonymised label (p1, p2, ...).")
    voice_id: str
    summary: str


class RankShuffle(_Strict):
    voice_id: str
    shown: dict[str, str] = Field(description="Label the member saw -> canonical label.")


class RankResult(_Strict):
    proposals: list[RankProposal]
    shuffles: list[RankShuffle] = Field(default_factory=list)
    ballots: list[MemberBallot] = Field(default_factory=list)
    absent: list[AbsentMember] = Field(default_factory=list)
    transcript: str = Field(description="The ballots in canonical labels; re-run it with tally.")
    tally: TallyReport
    dropped_lines: list[DroppedLine] = Field(default_factory=list)


class Synthesis(_Strict):
    text: str
    by: str | None = None
    fallback: Literal["arithmetic"] | None = Field(
        default=None, description="Set when the chairman failed and the arithmetic wrote it."
    )
    fallback_reason: str | None = None
    attempt: Attempt | None = None
    open_questions: list[str] = Field(default_factory=list)
    closed: bool = True
    uncertainty_markers: list[UncertaintyMarker] = Field(default_factory=list)
    digest: str | None = Field(
        default=None,
        description="(2.2) sha256 of the model-written content, taken when it was produced, "
        "so verify can tell it was not edited since.",
    )


RiskSeverity = Literal["critical", "high", "medium", "low", "unrated"]
RiskLikelihood = Literal["high", "medium", "low", "unrated"]


class Risk(_Strict):
    category: str
    description: str
    severity: RiskSeverity
    likelihood: RiskLikelihood = "unrated"
    identified_by: list[str] = Field(default_factory=list, description="Voice ids.")
    mitigation: str | None = None


class RiskRegister(_Strict):
    risks: list[Risk] = Field(default_factory=list)
    summary: str
    by: str | None = None
    fallback: Literal["arithmetic"] | None = None
    fallback_reason: str | None = None
    digest: str | None = Field(
        default=None,
        description="(2.2) sha256 of the model-written content, taken when it was produced, "
        "so verify can tell it was not edited since.",
    )


class RoundVoice(_Strict):
    voice_id: str
    runtime: str
    status: VoiceStatus
    stance: str | None = None


class RoundRecord(_Strict):
    round: int
    consensus_score: float | None = None
    confidence_label: Literal["high", "medium", "low"] | None = None
    delta: float | None = Field(default=None, description="Change from the previous round.")
    diverged: bool = False
    verdict: str | None = None
    closed: bool = True
    voices: list[RoundVoice] = Field(default_factory=list)
    vote: VoteResult | None = None
    rank: RankResult | None = None


class ChainLink(_Strict):
    red_team_run: str = Field(description="Run id of the red-team council that ran first.")


class Deliberation(_Strict):
    method: DeliberationMethod | None = None
    council_type: CouncilType = "standard"
    consolidation: Consolidation | None = None
    vote: VoteResult | None = None
    rank: RankResult | None = None
    synthesis: Synthesis | None = None
    risk_register: RiskRegister | None = None
    rounds: list[RoundRecord] = Field(default_factory=list)
    converged_early: bool = False
    divergence_detected: bool = False
    halted: bool = False
    chain: ChainLink | None = None
    notes: list[str] = Field(default_factory=list)
