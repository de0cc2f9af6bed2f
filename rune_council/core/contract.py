"""Voice contract v2: the request a caller sends, the answer a voice returns, the result.

These models are the single source of truth. The schemas in ``contracts/`` are generated
from them (``python -m rune_council.core.schema contracts``) and a test fails when they drift.
The run file is a ``CouncilResult`` at every moment of a run: a skeleton with every slot
queued, the same document with slots moving through their states, then the arbitrated result.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    field_validator,
    model_validator,
)

from .made import empty

if TYPE_CHECKING:  # what __getattr__ at the end hands out, named for the type checker
    from . import contract_deliberation as _part

    AbsentMember = _part.AbsentMember
    BlockedProposal = _part.BlockedProposal
    ChainLink = _part.ChainLink
    ConsensusScore = _part.ConsensusScore
    ConsolidatedItem = _part.ConsolidatedItem
    Consolidation = _part.Consolidation
    Deliberation = _part.Deliberation
    DroppedLine = _part.DroppedLine
    ItemTally = _part.ItemTally
    MemberBallot = _part.MemberBallot
    MoveError = _part.MoveError
    ProposalScore = _part.ProposalScore
    PrunedProposal = _part.PrunedProposal
    RankProposal = _part.RankProposal
    RankResult = _part.RankResult
    RankShuffle = _part.RankShuffle
    RankerDetail = _part.RankerDetail
    Risk = _part.Risk
    RiskLikelihood = _part.RiskLikelihood
    RiskRegister = _part.RiskRegister
    RiskSeverity = _part.RiskSeverity
    RoundRecord = _part.RoundRecord
    RoundVoice = _part.RoundVoice
    SynthMove = _part.SynthMove
    Synthesis = _part.Synthesis
    TallyReport = _part.TallyReport
    VoteCount = _part.VoteCount
    VoteResult = _part.VoteResult

# Writers write 2.8; readers accept 2.0 to 2.7 too, since each version only added to the
# last. A new version adds optional fields only: bump the minor number here, add it to
# SchemaVersion, regenerate contracts/ and describe it in contracts/council-voice-contract.md.
SCHEMA_VERSION: Literal["2.8"] = "2.8"
SchemaVersion = Literal["2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8"]
MAX_VOICES = 5
MIN_VOICES = 2

# A run id becomes part of a file name; nothing that could climb out of the run directory.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_RUN_ID_RE = re.compile(RUN_ID_PATTERN)

Mode = Literal["critique", "review", "judge", "generate"]
Severity = Literal["MUST", "SHOULD", "MAY"]
Decorrelation = Literal["MULTI_FAMILY", "NO_DECORRELATION"]
SlotRole = Literal["standard", "perturbation", "devils_advocate"]
VoiceSource = Literal["external-cli", "subagent", "external-http"]
VoiceStatus = Literal["queued", "running", "complete", "dropped"]
FamilyConfidence = Literal["confirmed", "unknown"]
CheckOutcome = Literal["pass", "fail", "pending"]
Verified = Literal["true", "false", "unchecked"]
AttemptOutcome = Literal[
    "ok",
    "exit_nonzero",
    "timeout",
    "too_large",
    "spawn_error",
    "cancelled",
    "error_reported",
    # HTTP voices: connection or stream broke, the server answered an error status, or the
    # reply could not be read as a voice answer.
    "transport_error",
    "http_status",
    "malformed",
    # 2.4: still running when the council's deadline passed with enough families answered;
    # the voice was stopped and its slot left out of the verdict.
    "late",
    # 2.7: the server stopped the reply at its token limit (finish_reason "length"), so the
    # answer is incomplete whatever it holds.
    "truncated",
]
# 2.7: the output constraint an endpoint request carried (``response_format``): the voice
# answer's JSON Schema, any JSON object, or none.
ResponseFormatKind = Literal["json_schema", "json_object", "none"]
# ``queued`` (2.2): accepted by a server that runs a bounded number of councils at once and
# has not started this one yet; the file holds the request and no voices. ``no_verdict``
# (2.7): the council ran to its end but no voice's answer counted, so there is no verdict;
# ``complete`` is kept for a run that has one.
RunStatus = Literal["queued", "running", "complete", "no_verdict", "cancelled", "failed"]
# The statuses a run ends with: its council writes it no more.
ENDED_STATUSES: frozenset[RunStatus] = frozenset({"complete", "no_verdict", "cancelled", "failed"})
SlotOutcome = Literal["held", "framing-sensitive", "no-counterclaims", "countered", "not-evaluable"]
DissentLabel = Literal[
    "disagreement",
    "unverified",
    "single-voice",
    "correlated-penalty",
    "framing-sensitive",
]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=False, validate_assignment=False, defer_build=True
    )


def is_safe_run_id(value: str) -> bool:
    return bool(_RUN_ID_RE.fullmatch(value)) and value not in {".", ".."} and ".." not in value


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

    @property
    def shown_name(self) -> str:
        """The name voices are told (and anchors are read against): the file's own name when
        only a path was given, else ``name``. The council and ``verify`` both use this."""
        if self.path is not None and self.name == "artifact":
            return PurePath(self.path).name
        return self.name

    @model_validator(mode="after")
    def _one_source(self) -> Artifact:
        if (self.text is None) == (self.path is None):
            raise ValueError("artifact needs exactly one of 'text' or 'path'")
        return self


class Budget(_Strict):
    per_voice_timeout_s: float = Field(default=180.0, gt=0, le=3600)
    max_output_bytes: int = Field(default=1_000_000, ge=1024, le=50_000_000)
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="2.4: once this many seconds have passed and at least two confirmed "
        "families have answered, the council stops waiting: later voices are recorded late.",
    )


class PartialCouncil(_Strict):
    """2.4: the verdict was reached at the deadline, without the voices still running."""

    deadline_s: float
    late_voice_ids: list[str] = Field(min_length=1)
    detail: str


# --------------------------------------------------------------------------- deliberation options

CouncilType = Literal["standard", "red_team"]
# The name of a registered deliberation method (built in: vote, rank, red_team; a caller can
# register more). The contract checks only the spelling: which names exist is the council's
# registry's to say, so a run file written with an added method still reads anywhere.
DeliberationMethod = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
OnDivergence = Literal["warn", "halt", "continue"]

DEFAULT_ROUND_PREFIX = (
    "An earlier round of this council produced the draft verdict below. Read it critically: "
    "say where it is wrong, weak or incomplete, and what would make it better. Keep what "
    "holds up; change your own position only for a reason you can state."
)


class RoundsOptions(_Strict):
    max_rounds: int = Field(default=1, ge=1, le=10, description="Rounds at most (1: one pass).")
    convergence_threshold: float = Field(
        default=0.85,
        ge=0,
        le=1,
        description="Stop early once the consensus score reaches this (converged_early).",
    )
    round_prompt_prefix: str = Field(
        default=DEFAULT_ROUND_PREFIX,
        min_length=1,
        max_length=4000,
        description="Put before the draft verdict in the prompt of every round after the first.",
    )
    on_divergence: OnDivergence = Field(
        default="warn",
        description="When the consensus score drops by more than 0.05 between rounds: flag "
        "and go on (warn), stop and ask a human (halt), or ignore it (continue).",
    )


class Summon(_Strict):
    """(2.5) A member added to the council in a later round of deliberation."""

    who: str = Field(
        default="any",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$",
        description="A runtime's name, a model family, or 'any': the runtime ALLOCATE's "
        "rule would seat next (a family the council lacks first).",
    )
    round: int = Field(
        default=2, ge=2, le=10, description="The round it joins (on: round), from 2."
    )
    on: Literal["round", "divergence"] = Field(
        default="round",
        description="round: join at ``round``; divergence: join the round after the "
        "consensus score first falls by more than 0.05, if another round runs.",
    )
    persona: str | None = Field(default=None, min_length=1, max_length=1000)
    framing: str | None = Field(default=None, min_length=1, max_length=2000)


class DeliberationOptions(_Strict):
    """Optional stages after ARBITRATE (contract 2.1)."""

    method: DeliberationMethod | None = Field(
        default=None,
        description="vote: consolidate into numbered items and vote; rank: rank the "
        "anonymised answers, tally, synthesise; or the name of any other registered "
        "method. None: the single pass only.",
    )
    council_type: CouncilType = Field(
        default="standard", description="red_team: attack prompts and a risk register."
    )
    vote_threshold: float = Field(
        default=2 / 3,
        gt=0,
        le=1,
        description="An item passes when yes votes >= ceil(threshold x ballots counted).",
    )
    orchestrator: str | None = Field(
        default=None,
        description="Name of the runtime that consolidates and writes the verdict (not a "
        "seat). Unset or failing: the deterministic merge and the arithmetic verdict.",
    )
    rounds: RoundsOptions = Field(default_factory=empty(RoundsOptions))
    shuffle_seed: str | None = Field(
        default=None, description="Seed of each member's answer shuffle; default the run id."
    )
    context: str | None = Field(
        default=None,
        max_length=60_000,
        description="Findings of an earlier council (in a chain, the red team's risk "
        "register), shown to every voice.",
    )
    chained_from: str | None = Field(
        default=None, description="Run id of the red-team council whose register is the context."
    )
    summon: list[Summon] = Field(
        default_factory=list,
        max_length=3,
        description="(2.5) Members added in later rounds; each stays for every round after.",
    )

    @model_validator(mode="after")
    def _summon_in_reach(self) -> DeliberationOptions:
        late = [s for s in self.summon if s.on == "round" and s.round > self.rounds.max_rounds]
        if late:
            raise ValueError(
                f"summon {late[0].who!r} joins in round {late[0].round}, but rounds.max_rounds "
                f"is {self.rounds.max_rounds}: allow that many rounds"
            )
        return self


# A template's or chain's name: a word a user types after --template / --chain.
SETUP_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,47}$"
SetupName = Annotated[str, StringConstraints(pattern=SETUP_NAME_PATTERN)]


class SlotSetup(_Strict):
    """(2.3) How one slot is set up beyond its reserved role: who the voice speaks as and
    what it looks at first. The slot's role framing (perturbation, devil's advocate) stays."""

    persona: str | None = Field(default=None, min_length=1, max_length=1000)
    framing: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="What this slot looks at first; added to, never replacing, its role.",
    )


class TemplateUse(_Strict):
    """(2.3) The named council setup a request was built from."""

    name: SetupName
    version: str = Field(min_length=1, max_length=40)
    source: Literal["builtin", "user", "project"] = Field(
        description="Shipped with the package, the user's council.toml, or the project's."
    )
    digest: str = Field(description="sha256 of the template's settings as applied.")


class ChainRun(_Strict):
    """(2.3) One step of a chain: the template it applies and the run id it writes."""

    template: SetupName
    run_id: str


class ChainPosition(_Strict):
    """(2.3) Where a run sits in a chain of councils; every step's run id is planned before
    the first starts, so each run file names all the others."""

    name: SetupName
    step: int = Field(ge=1, description="This run's step, from 1.")
    runs: list[ChainRun] = Field(min_length=1, max_length=10)


class PerspectiveRequest(_Strict):
    """What a caller asks the council."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    id: str = Field(description="Run id; becomes run-<id>.json, so it must be a safe file name.")
    question: str = Field(min_length=1, max_length=20_000)
    mode: Mode = "judge"
    n: int = Field(default=3, ge=MIN_VOICES, description="Voices wanted; more than 5 is capped.")
    diversity: Diversity = Field(default_factory=empty(Diversity))
    evidence: EvidenceRequirements = Field(default_factory=empty(EvidenceRequirements))
    artifact: Artifact | None = None
    budget: Budget = Field(default_factory=empty(Budget))
    deliberation: DeliberationOptions | None = Field(
        default=None, description="Vote, rank, rounds, red team (2.1); absent: one pass."
    )
    preamble: str | None = Field(
        default=None,
        min_length=1,
        max_length=8000,
        description="(2.3) Told to every voice before the question (a template's setup).",
    )
    slots: list[SlotSetup] = Field(
        default_factory=list,
        max_length=MAX_VOICES,
        description="(2.3) Persona and framing of the first slots, in slot order.",
    )
    artifact_kind: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="(2.3) What the artifact is expected to be (a migration plan, an API "
        "description); every voice is told.",
    )
    template: TemplateUse | None = Field(
        default=None, description="(2.3) The named template this request was built from."
    )
    chain: ChainPosition | None = Field(
        default=None, description="(2.3) The chain of councils this run is a step of."
    )

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


class FormatFallback(_Strict):
    """(2.7) An output constraint an endpoint refused; the request was sent again with the
    next one (json_schema, then json_object, then none)."""

    refused: Literal["json_schema", "json_object"]
    http_status: int | None = None
    detail: str = Field(default="", max_length=1000, description="What the server said.")


# A single call using more tokens than this is not a count a real server reports.
MAX_REPORTED_TOKENS = 1_000_000_000


class TokenUsage(_Strict):
    """(2.8) The tokens an endpoint said one call used, from its reply's ``usage``. A count
    the reply did not give, or gave as anything but a whole number from 0 to
    ``MAX_REPORTED_TOKENS``, is null: unknown, never estimated here."""

    prompt_tokens: int | None = Field(default=None, ge=0, le=MAX_REPORTED_TOKENS)
    completion_tokens: int | None = Field(default=None, ge=0, le=MAX_REPORTED_TOKENS)


class Attempt(_Strict):
    runtime: str
    source: VoiceSource
    outcome: AttemptOutcome
    detail: str = ""
    exit_code: int | None = None
    latency_ms: int | None = None
    model: str | None = Field(
        default=None, description="The model asked, for runtimes that serve several (HTTP)."
    )
    http_status: int | None = Field(
        default=None, description="The HTTP status when the outcome is http_status."
    )
    output_tail: str | None = Field(
        default=None,
        max_length=4000,
        description="The end of what a failed CLI printed (stderr, else stdout), secrets "
        "masked; ``detail`` holds the one-line reason read from it (2.4). Since 2.7 also the "
        "end of an endpoint's reply that was cut at its token limit.",
    )
    response_format: ResponseFormatKind | None = Field(
        default=None,
        description="(2.7) The output constraint the endpoint request behind this outcome "
        "carried: json_schema (the voice answer's wire schema, strict), json_object or none. "
        "Null for a call that asked for no shape (a ballot, a merge) and for CLIs.",
    )
    format_fallbacks: list[FormatFallback] = Field(
        default_factory=list,
        description="(2.7) Constraints the endpoint refused during this attempt, in order.",
    )
    response_format_remembered: bool = Field(
        default=False,
        description="(2.7) The constraint was chosen from this user's cache of what the "
        "endpoint refused before, so the refused ones were not sent again.",
    )
    usage: TokenUsage | None = Field(
        default=None,
        description="(2.8) The tokens the endpoint reported for this call (its reply's "
        "usage); null when it reported none, or none that reads as a count. CLIs report none.",
    )


class RawOutput(_Strict):
    text: str = Field(description="The answer text extracted from the runtime, bounded.")
    truncated: bool = False


class Validity(_Strict):
    well_formed: CheckOutcome = "pending"
    on_topic: CheckOutcome = "pending"


# How GATE read an answer that was not in the contract's exact shape (2.7); each kind is one
# rule of ``answer.py`` and of the contract prose, and none of them touches a quote or anchor.
RepairKind = Literal[
    "comment",  # // or /* */ outside strings, ignored
    "trailing_comma",  # a comma before a closing bracket, ignored
    "unwrapped",  # the answer sat one level down, under "answer", "response" or "result"
    "unknown_keys",  # keys the contract does not name, ignored
    "severity",  # a severity word read through the contract's one table
    "evidence_object",  # one evidence object read as a list of one
    "claim_string",  # a claim given as a plain string read as a claim without evidence
]


class Repair(_Strict):
    """(2.7) One thing GATE did to read a voice's answer; the raw text keeps what was written."""

    kind: RepairKind
    at: str = Field(
        default="",
        max_length=200,
        description="Where in the answer, as a path such as claims[0].severity; empty for the "
        "answer object itself (or the text around it).",
    )
    detail: str = Field(default="", max_length=1000)


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
    model: str | None = Field(
        default=None, description="The model that holds the slot, for HTTP endpoint voices."
    )
    status: VoiceStatus = "queued"
    latency_ms: int | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    raw: RawOutput | None = None
    question_echo: str | None = None
    stance: str | None = None
    position: Literal["yes", "no", "mixed", "unclear"] | None = None
    claims: list[Claim] = Field(default_factory=list)
    validity: Validity = Field(default_factory=empty(Validity))
    repairs: list[Repair] = Field(
        default_factory=list,
        description="(2.7) What GATE repaired to read the answer (comments, trailing commas, a "
        "wrapper, unknown keys, severity words, an evidence object, claims as strings); empty "
        "when the answer was in the contract's exact shape.",
    )
    dropped_by: str | None = None
    drop_reason: str | None = None
    joined_round: int | None = Field(
        default=None,
        ge=2,
        description="(2.5) The round a summoned member joined; it counts from that round on. "
        "None: seated at the start.",
    )


class DroppedVoice(_Strict):
    voice_id: str
    runtime: str
    reason: str
    dropped_by: str


class MatchedBy(_Strict):
    method: Literal["anchor", "arbiter"]
    model: str
    key: str = Field(description="The shared anchor or evidence ref that made the match.")
    point: str | None = Field(
        default=None,
        description="(2.2) Why the claims make the same point, beyond sharing the place.",
    )


class ClaimWording(_Strict):
    """(2.2) One member claim of an agreement, in its own voice's words."""

    claim_id: str
    voice_id: str
    text: str


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
    members: list[ClaimWording] = Field(
        default_factory=list,
        description="(2.2) Every member claim in its own words: what exactly was agreed.",
    )


class DissentEntry(_Strict):
    claim: str
    label: DissentLabel
    voice_ids: list[str]
    families: list[str] = Field(default_factory=list)
    claim_ids: list[str] = Field(default_factory=list)
    severity: Severity | None = None
    detail: str = ""
    members: list[ClaimWording] = Field(
        default_factory=list,
        description="(2.2) The member claims in their own words, when several voices' claims "
        "were matched into one entry.",
    )


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


AuthState = Literal["ready", "logged-out", "unknown"]


class WatchedFile(_Strict):
    path: str
    mtime: float | None = Field(
        default=None, description="Modification time when checked; null when it did not exist."
    )
    size: int | None = Field(default=None, description="(2.6) size in bytes when checked.")
    inode: int | None = Field(
        default=None, description="(2.6) inode when checked (a file replaced has a new one)."
    )
    sha256: str | None = Field(
        default=None,
        description="(2.6) digest of the content, kept for a config file whose content decides "
        "a wrapper's family.",
    )


class AuthVar(_Strict):
    name: str
    set: bool = Field(description="Whether it was set (non-blank) when checked; never its value.")
    sha256: str | None = Field(
        default=None,
        description="(2.6) digest of the value, kept for a variable whose value decides a "
        "wrapper's family (a model name, a config path).",
    )


class DetectedRuntime(_Strict):
    runtime: str
    status: Literal["available", "unavailable", "ineligible"]
    path: str | None = None
    version: str | None = None
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    detail: str = ""
    via: str | None = Field(
        default=None,
        description="A bridge program that runs this agent (1devtool-agent), if not run directly.",
    )
    auth: AuthState | None = Field(
        default=None,
        description="Whether the CLI can answer without a model call being spent to find out "
        "(2.4): ready, logged-out or unknown; null when not checked.",
    )
    auth_detail: str = Field(
        default="",
        description="The evidence for ``auth`` in words: which status command, file or "
        "variable was looked at. Never a credential's value.",
    )
    auth_fix: str | None = Field(
        default=None, description="The one command or setting that makes a logged-out CLI ready."
    )
    auth_files: list[WatchedFile] = Field(
        default_factory=list,
        description="Files the auth check read or looked for; a change to any of them makes "
        "the cached report stale.",
    )
    auth_vars: list[AuthVar] = Field(
        default_factory=list,
        description="Variables the auth check looked at and whether each was set; one set or "
        "unset since makes the cached report stale.",
    )
    binary_mtime: float | None = Field(
        default=None,
        description="2.4: modification time of the file ``path`` resolves to when it was "
        "probed; an upgrade changes it and the cached report is probed again.",
    )
    probe_files: list[WatchedFile] = Field(
        default_factory=list,
        description="(2.6) the binary and every config file the family was read from, as they "
        "were when probed; a change to any makes this entry probed again.",
    )
    probe_vars: list[AuthVar] = Field(
        default_factory=list,
        description="(2.6) variables the family was read from; one changed since makes this "
        "entry probed again.",
    )


class RuntimeReport(_Strict):
    detected: list[DetectedRuntime] = Field(default_factory=list)
    checked_at: str | None = None
    used: list[str] = Field(default_factory=list)
    degraded_to_subagent: list[str] = Field(
        default_factory=list, description="Voice ids whose slot fell back to a subagent."
    )
    consent: str | None = Field(
        default=None,
        description="Whether external CLIs could be dispatched, and who said so.",
    )


class VoiceProcess(_Strict):
    pid: int
    started: float = Field(
        description="The process's start time (Unix seconds): a pid reused by another "
        "process has a different one."
    )


class Orchestrator(_Strict):
    pid: int
    host: str
    started_at: str
    heartbeat_at: str
    voice_marker: str | None = Field(
        default=None,
        description="Value of RUNE_COUNCIL_VOICE (plus '.<n>') in every voice process's "
        "environment; a later command kills what an abandoned run left running.",
    )
    voice_processes: list[VoiceProcess] = Field(
        default_factory=list, description="Voice processes running at the last write."
    )


RunEventKind = Literal[
    "council.dispatched", "voice.status", "council.result", "deliberation.status"
]


class RunEvent(_Strict):
    seq: int
    at: str
    kind: RunEventKind
    voice_id: str | None = None
    status: str | None = None
    detail: str = ""


class UncertaintyMarker(_Strict):
    text: str
    index: int = Field(description="Position among the verdict's uncertain passages.")


class VerdictMetadata(_Strict):
    """On every result (2.1): how aligned the council was and how the verdict closed."""

    consensus_score: float | None = Field(
        default=None, description="Kendall's W of the rankings; null without rankings."
    )
    confidence_label: Literal["high", "medium", "low"] | None = None
    dissent_detected: bool = False
    dissent_basis: Literal["rankings", "votes", "positions"] | None = Field(
        default=None,
        description="Outlier rankers (rankings); (2.7) a vote's split items, the dissenters "
        "being who voted against an item's outcome (votes); or, without either, a YES/NO "
        "split (positions).",
    )
    dissenting_member: str | None = None
    dissenting_members: list[str] = Field(default_factory=list)
    uncertainty_markers: list[UncertaintyMarker] = Field(default_factory=list)
    revision_count: int = Field(default=1, description="Rounds completed.")
    member_count: int = Field(
        description="Members whose answer counted (passed GATE), in any round; dropped "
        "voices are not members."
    )
    council_type: CouncilType = "standard"
    converged_early: bool = False
    divergence_detected: bool = False
    duration_seconds: float | None = None
    closed_at: str | None = None


class ArtifactFile(_Strict):
    """(2.8) The artifact is kept beside the run file, once, not in it: a run file is rewritten
    at every status change, and a copy of the artifact in each version made a council's
    writes grow with artifact size times transitions. The sidecar's name comes from the run
    file's own name (``run-<id>.json`` -> ``run-<id>.artifact``), never from this record;
    readers take its text only when its length and digest are these."""

    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="(2.8) sha256 of the sidecar's bytes (the artifact as UTF-8).",
    )
    bytes: int = Field(ge=0, description="(2.8) The sidecar's length in bytes.")
    inline: bool = Field(
        default=False,
        description="(2.8) The request's inline artifact text is this same text: in the file "
        "request.artifact.text is the empty string, and readers put the sidecar's text back.",
    )


class CouncilResult(_Strict):
    """The run file, from skeleton to arbitrated result."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    id: str
    question: str
    mode: Mode
    status: RunStatus = Field(
        default="running",
        description="complete: ended with a verdict; no_verdict (2.7): ended with no voice "
        "whose answer counted, so nothing was decided (exit 1); cancelled, failed: ended "
        "early; queued, running: not ended.",
    )
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
    agreement: Agreement = Field(default_factory=empty(Agreement))
    checks: Checks = Field(default_factory=empty(Checks))
    needs_decision: bool = False
    decision: str | None = None
    runtime_report: RuntimeReport = Field(default_factory=empty(RuntimeReport))
    notes: list[str] = Field(default_factory=list)
    request: PerspectiveRequest
    artifact_text: str | None = Field(
        default=None,
        description="The artifact as the voices saw it, kept for re-arbitration. Since 2.8 "
        "a run file holds it in its sidecar (artifact_file) and this is null on disk; every "
        "reader and a door's result carry it here.",
    )
    artifact_file: ArtifactFile | None = Field(
        default=None,
        description="(2.8) Set in a run file whose artifact is kept in its sidecar, "
        "run-<id>.artifact beside it. Readers put the text back into artifact_text (and "
        "request.artifact.text when inline); the result a council returns carries the text "
        "and leaves this null.",
    )
    orchestrator: Orchestrator | None = None
    events: list[RunEvent] = Field(default_factory=list)
    started_at: str
    finished_at: str | None = None
    run_file: str | None = None
    deliberation: Deliberation | None = Field(
        default=None, description="Vote / rank / rounds / red team results (2.1)."
    )
    verdict: VerdictMetadata | None = Field(
        default=None, description="Set when the run ends (2.1)."
    )
    partial: PartialCouncil | None = Field(
        default=None,
        description="2.4: set when the deadline ended the wait; the stamp holds for the voices "
        "that answered, and every place that shows it says the council was partial.",
    )

    prompt_cost: PromptCost | None = Field(
        default=None, description="2.4: the size of every prompt sent, by stage and runtime."
    )

    # Never written: set by the reader that put the artifact back from its sidecar
    # (``runs.load``) when it could not, saying why (2.8).
    _artifact_problem: str | None = PrivateAttr(default=None)

    @classmethod
    def model_rebuild(cls, **kwargs: Any) -> bool | None:
        # The deliberation's models are defined on first use (contract_deliberation); the
        # schema of a result that may hold them needs them, so they are loaded first, into
        # this module's globals, where the rebuild resolves every name of this module's
        # models (the caller's frame, whatever its depth, names none of them).
        _load_deliberation()
        return super().model_rebuild(**kwargs)

    @property
    def artifact_problem(self) -> str | None:
        """Why the artifact this run file keeps in its sidecar is not here (missing, altered,
        unreadable), or None. ``verify`` reports it as a difference."""
        return self._artifact_problem

    def ended_status(self) -> RunStatus:
        """The status a council that ran to its end is given: ``complete`` only when at
        least one voice's answer counted (2.7)."""
        return "complete" if self.voices_valid > 0 else "no_verdict"

    def shown_status(self) -> RunStatus:
        """The status every reader tells: a file written before 2.7 called a council that
        no voice answered ``complete``; it is read as ``no_verdict``."""
        if self.status == "complete" and self.voices_valid == 0:
            return "no_verdict"
        return self.status

    def stamp_label(self) -> str | None:
        """The stamp as every door shows it: partial councils say so beside it."""
        if self.decorrelation is None:
            return None
        if self.partial is None:
            return self.decorrelation
        late = len(self.partial.late_voice_ids)
        deadline = f"{self.partial.deadline_s:g} s"
        return f"{self.decorrelation} (partial: {late} late at the {deadline} deadline)"


class PromptUse(_Strict):
    """2.4: what one runtime was sent during one stage of the council."""

    stage: Literal["answer", "deliberation", "chair"]
    runtime: str
    prompts: int
    bytes: int
    tokens_est: int


class PromptCost(_Strict):
    """2.4: every prompt the council sent, by stage and runtime, and the totals. Tokens are
    estimated (UTF-8 bytes / 4, rounded up): a model's own tokenizer will differ."""

    bytes: int = 0
    tokens_est: int = 0
    by_use: list[PromptUse] = Field(default_factory=list)


class RuntimesFile(_Strict):
    """``.rune/runtimes.json``: what DETECT found, reused for the rest of the day."""

    schema_version: SchemaVersion = SCHEMA_VERSION
    checked_at: str = Field(description="ISO timestamp of the probe")
    session_marker: str = Field(description="The local date the cache is valid for")
    bridge_path: str | None = None
    detected: list[DetectedRuntime] = Field(default_factory=list)
    login_shell: str | None = Field(
        default=None, description="The login shell asked for its PATH, if one was asked."
    )
    login_path: list[str] = Field(
        default_factory=list, description="PATH entries the login shell added to the search."
    )
    config_digest: str | None = Field(
        default=None, description="Digest of the user-defined runtimes this report probed."
    )


# --------------------------------------------------------------------------- deliberation results


# Defined in contract_deliberation, named here: ``from .contract import RankResult`` works
# as it always did, and loads that module the first time any of its names is asked for (the
# type checker reads the aliases at the top).
def _load_deliberation() -> None:
    from . import contract_deliberation as part

    here = globals()
    for name, value in vars(part).items():
        if not name.startswith("_") and name not in here:
            here[name] = value


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if not name.startswith("_"):
            _load_deliberation()
            if name in globals():
                return globals()[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
