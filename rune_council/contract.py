"""Voice contract v2: the request a caller sends, the answer a voice returns, the result.

These models are the single source of truth. ``contracts/council-voice-contract.schema.json``
is generated from them (``python -m rune_council.schema``) and a test fails when the two drift.
The run file is a ``CouncilResult`` at every moment of a run: a skeleton with every slot
queued, the same document with slots moving through their states, then the arbitrated result.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION: Literal["2.0"] = "2.0"
MAX_VOICES = 5
MIN_VOICES = 2

# A run id becomes part of a file name; nothing that could climb out of the run directory.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_RUN_ID_RE = re.compile(RUN_ID_PATTERN)

Mode = Literal["critique", "review", "judge", "generate"]
Severity = Literal["MUST", "SHOULD", "MAY"]
Decorrelation = Literal["MULTI_FAMILY", "NO_DECORRELATION"]
SlotRole = Literal["standard", "perturbation", "devils_advocate"]
VoiceSource = Literal["external-cli", "subagent"]
VoiceStatus = Literal["queued", "running", "complete", "dropped"]
FamilyConfidence = Literal["confirmed", "unknown"]
CheckOutcome = Literal["pass", "fail", "pending"]
Verified = Literal["true", "false", "unchecked"]
AttemptOutcome = Literal[
    "ok", "exit_nonzero", "timeout", "too_large", "spawn_error", "cancelled", "error_reported"
]
RunStatus = Literal["running", "complete", "cancelled", "failed"]
SlotOutcome = Literal["held", "framing-sensitive", "no-counterclaims", "countered", "not-evaluable"]
DissentLabel = Literal[
    "disagreement",
    "unverified",
    "single-voice",
    "correlated-penalty",
    "framing-sensitive",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=False)


def is_safe_run_id(value: str) -> bool:
    return bool(_RUN_ID_RE.match(value)) and value not in {".", ".."} and ".." not in value


# --------------------------------------------------------------------------- request


class Diversity(_Strict):
    prefer_model_families: list[str] = Field(
        default_factory=list,
        description="Families to seat first, in order (e.g. ['anthropic', 'google']).",
    )


class EvidenceRequirements(_Strict):
    require_evidence: bool = Field(
        default=True, description="Ask every claim to cite evidence as {ref, quote}."
    )
    require_anchor: bool = Field(
        default=False,
        description="Ask every claim to carry an anchor (file:line, step id, symbol).",
    )


class Artifact(_Strict):
    name: str = Field(
        default="artifact",
        min_length=1,
        max_length=256,
        description="How voices refer to the artifact in anchors and evidence refs.",
    )
    text: str | None = Field(default=None, description="The artifact inline.")
    path: str | None = Field(default=None, description="A file the council reads at request time.")

    @model_validator(mode="after")
    def _one_source(self) -> Artifact:
        if (self.text is None) == (self.path is None):
            raise ValueError("artifact needs exactly one of 'text' or 'path'")
        return self


class Budget(_Strict):
    per_voice_timeout_s: float = Field(default=180.0, gt=0, le=3600)
    max_output_bytes: int = Field(default=1_000_000, ge=1024, le=50_000_000)


class PerspectiveRequest(_Strict):
    """What a caller asks the council."""

    schema_version: Literal["2.0"] = "2.0"
    id: str = Field(description="Run id; becomes run-<id>.json, so it must be a safe file name.")
    question: str = Field(min_length=1, max_length=20_000)
    mode: Mode = "judge"
    n: int = Field(default=3, ge=MIN_VOICES, description="Voices wanted; more than 5 is capped.")
    diversity: Diversity = Field(default_factory=Diversity)
    evidence: EvidenceRequirements = Field(default_factory=EvidenceRequirements)
    artifact: Artifact | None = None
    budget: Budget = Field(default_factory=Budget)

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not is_safe_run_id(value):
            raise ValueError(
                f"run id {value!r} is not a safe file name: use 1-128 characters from "
                "A-Z a-z 0-9 . _ - starting with a letter or digit, without '..'"
            )
        return value

    @field_validator("question")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question is blank")
        return value


# --------------------------------------------------------------------------- voice answer


class Evidence(_Strict):
    ref: str = Field(min_length=1, max_length=500, description="file:line, step id, symbol, URL")
    quote: str | None = Field(default=None, max_length=4000)


class AnswerClaim(_Strict):
    text: str = Field(min_length=1, max_length=4000)
    anchor: str | None = Field(default=None, max_length=500)
    severity: Severity | None = None
    evidence: list[Evidence] = Field(default_factory=list, max_length=20)


class VoiceAnswer(_Strict):
    """The one JSON object a voice is asked to return."""

    question_echo: str = Field(min_length=1, max_length=20_000)
    stance: str = Field(min_length=1, max_length=4000)
    claims: list[AnswerClaim] = Field(default_factory=list, max_length=50)


# --------------------------------------------------------------------------- result


class Attempt(_Strict):
    runtime: str
    source: VoiceSource
    outcome: AttemptOutcome
    detail: str = ""
    exit_code: int | None = None
    latency_ms: int | None = None


class RawOutput(_Strict):
    text: str = Field(description="The answer text extracted from the runtime, bounded.")
    truncated: bool = False


class Validity(_Strict):
    well_formed: CheckOutcome = "pending"
    on_topic: CheckOutcome = "pending"


class VerifiedEvidence(_Strict):
    ref: str
    quote: str | None = None
    verified: Verified = "unchecked"
    verified_by: str | None = Field(
        default=None, description="Who checked it; never the voice that produced the claim."
    )
    detail: str = ""


class Claim(_Strict):
    id: str = Field(description="<voice id>.c<k>")
    voice_id: str
    text: str
    anchor: str | None = None
    severity: Severity | None = None
    evidence: list[VerifiedEvidence] = Field(default_factory=list)
    anchor_verified: Verified = "unchecked"


class Voice(_Strict):
    id: str
    slot_role: SlotRole = "standard"
    persona: str | None = None
    source: VoiceSource
    runtime: str
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    is_fallback: bool = False
    status: VoiceStatus = "queued"
    latency_ms: int | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    raw: RawOutput | None = None
    question_echo: str | None = None
    stance: str | None = None
    position: Literal["yes", "no", "mixed", "unclear"] | None = None
    claims: list[Claim] = Field(default_factory=list)
    validity: Validity = Field(default_factory=Validity)
    dropped_by: str | None = None
    drop_reason: str | None = None


class DroppedVoice(_Strict):
    voice_id: str
    runtime: str
    reason: str
    dropped_by: str


class MatchedBy(_Strict):
    method: Literal["anchor", "arbiter"]
    model: str
    key: str = Field(description="The shared anchor or evidence ref that made the match.")


class ClaimCluster(_Strict):
    id: str
    claim_ids: list[str]
    voice_ids: list[str]
    families: list[str]
    matched_by: MatchedBy | None = Field(default=None, description="None for a single claim.")
    conflicting: bool = False


class ConsensusClaim(_Strict):
    claim: str
    cluster_id: str
    claim_ids: list[str]
    voice_ids: list[str]
    families: list[str]
    matched_by: MatchedBy
    severity: Severity | None = None


class DissentEntry(_Strict):
    claim: str
    label: DissentLabel
    voice_ids: list[str]
    families: list[str] = Field(default_factory=list)
    claim_ids: list[str] = Field(default_factory=list)
    severity: Severity | None = None
    detail: str = ""


class Agreement(_Strict):
    consensus_claims: list[ConsensusClaim] = Field(default_factory=list)
    dissent: list[DissentEntry] = Field(default_factory=list)


class SlotCheck(_Strict):
    voice_id: str | None = None
    reserved: bool
    dispatched: bool = False
    outcome: SlotOutcome
    detail: str = ""


class Checks(_Strict):
    perturbation: SlotCheck | None = None
    devils_advocate: SlotCheck | None = None


class DetectedRuntime(_Strict):
    runtime: str
    status: Literal["available", "unavailable", "ineligible"]
    path: str | None = None
    version: str | None = None
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    detail: str = ""


class RuntimeReport(_Strict):
    detected: list[DetectedRuntime] = Field(default_factory=list)
    checked_at: str | None = None
    used: list[str] = Field(default_factory=list)
    degraded_to_subagent: list[str] = Field(
        default_factory=list, description="Voice ids whose slot fell back to a subagent."
    )


class Orchestrator(_Strict):
    pid: int
    host: str
    started_at: str
    heartbeat_at: str


class RunEvent(_Strict):
    seq: int
    at: str
    kind: Literal["council.dispatched", "voice.status", "council.result"]
    voice_id: str | None = None
    status: str | None = None
    detail: str = ""


class CouncilResult(_Strict):
    """The run file, from skeleton to arbitrated result."""

    schema_version: Literal["2.0"] = "2.0"
    id: str
    question: str
    mode: Mode
    status: RunStatus = "running"
    decorrelation: Decorrelation | None = Field(
        default=None,
        description="Set by ARBITRATE; null while running or when the run ended before it.",
    )
    distinct_families: list[str] = Field(default_factory=list)
    voices_requested: int
    voices_valid: int = 0
    voices: list[Voice] = Field(default_factory=list)
    voices_dropped: list[DroppedVoice] = Field(default_factory=list)
    clusters: list[ClaimCluster] = Field(default_factory=list)
    agreement: Agreement = Field(default_factory=Agreement)
    checks: Checks = Field(default_factory=Checks)
    needs_decision: bool = False
    decision: str | None = None
    runtime_report: RuntimeReport = Field(default_factory=RuntimeReport)
    notes: list[str] = Field(default_factory=list)
    request: PerspectiveRequest
    artifact_text: str | None = Field(
        default=None, description="The artifact as the voices saw it, kept for re-arbitration."
    )
    orchestrator: Orchestrator | None = None
    events: list[RunEvent] = Field(default_factory=list)
    started_at: str
    finished_at: str | None = None
    run_file: str | None = None


class RuntimesFile(_Strict):
    """``.rune/runtimes.json``: what DETECT found, reused for the rest of the day."""

    schema_version: Literal["2.0"] = "2.0"
    checked_at: str = Field(description="ISO timestamp of the probe")
    session_marker: str = Field(description="The local date the cache is valid for")
    bridge_path: str | None = None
    detected: list[DetectedRuntime] = Field(default_factory=list)
