"""Re-derive a finished run's verdict from the raw answers its run file recorded.

GATE, NORMALIZE and ARBITRATE are pure functions, so the raw text of every voice, the
request and the artifact as the voices saw it are enough to compute the result again. The
recomputation is compared with what the file says, field by field: a difference means the
file was edited after the run, or the arbitration code changed since it was written.
Everything derived is recomputed by the very functions the council ran (judge, the decision
rule, the verdict metadata, each method's recount, the deterministic merge and arithmetic
verdicts, the round decisions); model-written text is checked against the digest recorded
when it was produced. Every ballot is read again from the raw reply its member sent, whose
digest was sealed when it arrived, and filed by the very functions that filed it, so each
ballot, voter list, tally and winner is compared with one derived afresh, never taken from
the derived records themselves. The artifact GATE checks quotes against is, since 2.8, read
from the run file's sidecar and must have the length and sha256 the file records. What
cannot be checked is listed in ``CANNOT_CHECK``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .core.contract import (
    CouncilResult,
    Deliberation,
    DeliberationOptions,
    MemberBallot,
    PerspectiveRequest,
    RoundRecord,
    Validity,
    Voice,
)
from .core.errors import RunFileError
from .deliberation import rank, redteam, rounds, vote
from .deliberation.consolidate import deterministic_merge
from .deliberation.metadata import digest_of, settle_decision, verdict_metadata
from .deliberation.method import Recount, Replay, Replays, Results
from .stages.dispatch import DISPATCH
from .stages.verdict import reach_verdict

# What GATE onwards decides about each voice; the rest of a voice is dispatch's record.
VOICE_FIELDS = (
    "status",
    "question_echo",
    "stance",
    "position",
    "claims",
    "validity",
    "repairs",
    "dropped_by",
    "drop_reason",
)
# What GATE onwards decides about the run as a whole.
RESULT_FIELDS = (
    "voices_dropped",
    "voices_valid",
    "decorrelation",
    "distinct_families",
    "clusters",
    "agreement",
    "checks",
    "needs_decision",
    "decision",
)
REPORT_FIELDS = ("used", "degraded_to_subagent")

CANNOT_CHECK = (
    "the raw answers themselves: they are taken as the voices' own words, so a raw answer "
    "edited together with everything derived from it verifies",
    "which model really answered: runtimes, families and attempts are taken as recorded, "
    "and so is a ballot recorded as failed by its runtime",
    "model-written text (a chairman's verdict, risk register or merge) and raw ballot replies "
    "beyond their digests: text and digest edited together go unnoticed, and a digest "
    "cannot say who wrote it",
    "the answers of rounds before the last: their ballots are re-derived from the raw "
    "replies, but what each answer said, and what an earlier vote was on, are taken as "
    "recorded",
)
# The first contract whose writers seal every ballot reply (MemberBallot.digest).
SEALED_BALLOTS = (2, 6)


@dataclass(frozen=True)
class Difference:
    field: str
    recorded: Any
    recomputed: Any


@dataclass
class Verification:
    run_id: str
    checked: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    cannot_check: tuple[str, ...] = CANNOT_CHECK

    @property
    def reproduced(self) -> bool:
        return not self.differences


def artifact_name_of(request: PerspectiveRequest) -> str | None:
    """The name the voices were told, as the orchestrator derived it at request time."""
    return request.artifact.shown_name if request.artifact is not None else None


def _rewind(voice: Voice) -> None:
    """Put a voice back as dispatch left it: answered (raw kept) or dropped before GATE."""
    if voice.raw is None or voice.dropped_by == DISPATCH:
        return
    voice.status = "complete"
    voice.question_echo = None
    voice.stance = None
    voice.position = None
    voice.claims = []
    voice.validity = Validity()
    voice.repairs = []
    voice.dropped_by = None
    voice.drop_reason = None


def recompute(recorded: CouncilResult) -> CouncilResult:
    """A copy of ``recorded`` whose verdict is computed afresh from its raw answers."""
    if recorded.status not in ("complete", "no_verdict"):
        raise RunFileError(
            f"run {recorded.id} is {recorded.status}: only a completed run has a verdict to verify"
        )
    fresh = recorded.model_copy(deep=True)
    request = fresh.request
    for voice in fresh.voices:
        _rewind(voice)
    # Notes also hold allocation remarks made before dispatch; only ARBITRATE's are ours.
    fresh.notes = reach_verdict(fresh, artifact_name_of(request))
    settle_decision(fresh)
    fresh.status = fresh.ended_status()
    if recorded.verdict is not None:
        fresh.verdict = verdict_metadata(fresh)
    return fresh


class _Absent:
    """Stands for a list item one side has and the other does not."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


def diff(path: str, recorded: Any, recomputed: Any) -> list[Difference]:
    """Leaf-level differences between two JSON values, named by their path."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        out: list[Difference] = []
        for key in list(recorded) + [k for k in recomputed if k not in recorded]:
            out += diff(f"{path}.{key}", recorded.get(key), recomputed.get(key))
        return out
    if isinstance(recorded, list) and isinstance(recomputed, list):
        out = []
        for i in range(max(len(recorded), len(recomputed))):
            a = recorded[i] if i < len(recorded) else ABSENT
            b = recomputed[i] if i < len(recomputed) else ABSENT
            if a is ABSENT or b is ABSENT:
                out.append(Difference(f"{path}[{i}]", a, b))
            else:
                out += diff(f"{path}[{i}]", a, b)
        return out
    return [] if recorded == recomputed else [Difference(path, recorded, recomputed)]


def verify(recorded: CouncilResult) -> Verification:
    fresh = recompute(recorded)
    outcome = Verification(run_id=recorded.id)
    # First: without the artifact every quote check below differs for that reason alone.
    check_artifact(recorded, outcome)
    before = recorded.model_dump(mode="json")
    after = fresh.model_dump(mode="json")

    for name in RESULT_FIELDS:
        outcome.checked.append(name)
        outcome.differences += diff(name, before[name], after[name])
    # Compared as read: a file before 2.7 called a council no voice answered complete.
    outcome.checked.append("status")
    outcome.differences += diff("status", recorded.shown_status(), fresh.status)
    for name in REPORT_FIELDS:
        outcome.checked.append(f"runtime_report.{name}")
        outcome.differences += diff(
            f"runtime_report.{name}", before["runtime_report"][name], after["runtime_report"][name]
        )
    if len(before["voices"]) != len(after["voices"]):  # cannot happen: voices are copied
        outcome.differences.append(
            Difference("voices", len(before["voices"]), len(after["voices"]))
        )
    for i, (old, new) in enumerate(zip(before["voices"], after["voices"], strict=False)):
        for name in VOICE_FIELDS:
            outcome.differences += diff(f"voices[{i}].{name}", old[name], new[name])
    outcome.checked.append("voices[*]." + "|".join(VOICE_FIELDS))
    _note_reading_rules(recorded, fresh, outcome)

    if before.get("verdict") is not None:
        outcome.checked.append("verdict")
        skipped = _method_standing_fields(recorded)
        outcome.unchecked += [f"verdict.{name}" for name in skipped]
        found = [
            d
            for d in diff("verdict", before["verdict"], after["verdict"])
            if d.field.split(".")[1].split("[")[0] not in skipped
        ]
        outcome.differences += _vote_dissent_by_older_rule(recorded, found, outcome)

    _check_deliberation(recorded, outcome)
    check_ballot_seals(recorded, outcome)
    replay_ballots(recorded, fresh, outcome)
    check_deliberation_texts(recorded, fresh, outcome)
    _check_summoned(recorded, outcome)

    outcome.checked.append("notes (ARBITRATE's)")
    for note in after["notes"]:
        if note not in before["notes"]:
            outcome.differences.append(Difference("notes", "(missing)", note))
    return outcome


def check_artifact(recorded: CouncilResult, outcome: Verification) -> None:
    """A 2.8 run file keeps its artifact in a sidecar and records its length and digest: the
    artifact GATE quoted from must be that one, read back whole, or nothing that depends on
    it can be reproduced."""
    record = recorded.artifact_file
    if record is None:
        return
    outcome.checked.append("artifact_file (the sidecar's length and sha256)")
    claimed = f"{record.bytes} bytes, sha256 {record.sha256}"
    problem = recorded.artifact_problem
    if problem is None and recorded.artifact_text is None:
        problem = "the artifact was not read from its sidecar"
    elif problem is None and recorded.artifact_text is not None:
        data = recorded.artifact_text.encode("utf-8", errors="replace")
        if len(data) != record.bytes or hashlib.sha256(data).hexdigest() != record.sha256:
            problem = "the artifact does not match the digest its run file records"
    if problem is not None:
        outcome.differences.append(Difference("artifact_file", claimed, problem))


# The first contract whose GATE reads answers by the repair rules of ``answer.py``.
REPAIRED_ANSWERS = (2, 7)


def _note_reading_rules(
    recorded: CouncilResult, fresh: CouncilResult, outcome: Verification
) -> None:
    """An older file's voices are read by today's rules; say so where that reads them anew."""
    major, minor = (int(x) for x in recorded.schema_version.split("."))
    if (major, minor) >= REPAIRED_ANSWERS:
        return
    for i, (old, new) in enumerate(zip(recorded.voices, fresh.voices, strict=False)):
        if new.repairs or (old.status, old.drop_reason) != (new.status, new.drop_reason):
            outcome.unchecked.append(
                f"voices[{i}]: recorded by contract {recorded.schema_version}, before answers "
                f"were read by the {REPAIRED_ANSWERS[0]}.{REPAIRED_ANSWERS[1]} rules "
                "(repairs recorded, two different answers ambiguous, a cut answer truncated); "
                "read again by those rules, so a difference here may be the rules, not an edit"
            )


# The first contract whose verdict reads a vote's dissent from the votes (dissent_basis
# "votes"), and whose ballots list the lines they did not count (MemberBallot.dropped_lines).
VOTES_READ = (2, 7)
VOTE_DISSENT_FIELDS = (
    "dissent_detected",
    "dissent_basis",
    "dissenting_member",
    "dissenting_members",
)


def _version(recorded: CouncilResult) -> tuple[int, int]:
    major, minor = (int(x) for x in recorded.schema_version.split("."))
    return major, minor


def _vote_dissent_by_older_rule(
    recorded: CouncilResult, found: list[Difference], outcome: Verification
) -> list[Difference]:
    """``found`` without the vote dissent an older file recorded by the older rule (which
    read it from the approvals' concordance, as "rankings"); where today's rule reads it
    otherwise, that is said instead."""
    d = recorded.deliberation
    if d is None or d.method != "vote" or _version(recorded) >= VOTES_READ:
        return found
    older = [x for x in found if x.field.split(".")[1].split("[")[0] in VOTE_DISSENT_FIELDS]
    if older:
        outcome.unchecked.append(
            f"verdict.{'|'.join(VOTE_DISSENT_FIELDS)}: recorded by contract "
            f"{recorded.schema_version}, before a vote's dissent was read from its votes "
            f"({VOTES_READ[0]}.{VOTES_READ[1]}); today's rule reads it anew, so a "
            "difference here may be the rule, not an edit"
        )
    return [x for x in found if x not in older]


def _without_ballot_drops(value: Any) -> Any:
    """A re-derived vote or rank record as a writer before 2.7 filed it: its ballots list no
    dropped lines (the method's own ``dropped_lines`` list still holds every one)."""
    if isinstance(value, dict) and isinstance(value.get("ballots"), list):
        for ballot in value["ballots"]:
            if isinstance(ballot, dict):
                ballot["dropped_lines"] = []
    return value


# The parts of the verdict block that a deliberation method's own standing decides.
METHOD_STANDING_FIELDS = ("consensus_score", "confidence_label", "dissent_basis")


def _method_standing_fields(recorded: CouncilResult) -> tuple[str, ...]:
    """Verdict fields that cannot be re-derived here: the method that decided them is absent."""
    delib = recorded.deliberation
    if delib is None or delib.method is None:
        return ()
    from .deliberation.registry import METHODS

    return () if delib.method in METHODS else METHOD_STANDING_FIELDS


def _check_deliberation(recorded: CouncilResult, outcome: Verification) -> None:
    """Re-run what the optional stages decided by arithmetic alone.

    The method that deliberated says what its arithmetic recomputes: a rank stage keeps its
    ballots as a transcript in canonical labels, so its tally is recomputed whole; a vote's
    ballots went through a model-written consolidation, so what is re-checked there is the
    count of the recorded votes under the absence-aware threshold.
    """
    delib = recorded.deliberation
    if delib is None or delib.method is None:
        return
    from .deliberation.registry import METHODS

    method = METHODS.get(delib.method)
    if method is None:  # added by a caller this process does not have: nothing to recount
        return
    places = [("deliberation", delib)] + [
        (f"deliberation.rounds[{i}]", r) for i, r in enumerate(delib.rounds)
    ]
    for where, part in places:
        for recount in method.recount(where, part):
            _file_recount(recount, outcome)


def _file_recount(recount: Recount, outcome: Verification) -> None:
    outcome.checked.append(recount.name)
    for name, was, now in recount.values:
        if isinstance(was, dict):
            outcome.differences += diff(name, was, now)
        elif was != now:
            outcome.differences.append(Difference(name, was, now))


# --------------------------------------------------------------------------- ballots
# A ballot is what a member replied; everything else about it (what it counted for, who
# is listed as voting what, the transcript, the tally, the winner) is derived. The reply is
# checked against the digest sealed when it arrived, then filed again by the method that
# filed it, and the result compared whole with the record.


def _ballot_places(d: Deliberation) -> list[tuple[str, Results]]:
    return [("deliberation", d)] + [
        (f"deliberation.rounds[{i}]", r) for i, r in enumerate(d.rounds)
    ]


def _ballots_at(where: str, part: Results) -> list[tuple[str, list[MemberBallot]]]:
    found = []
    if part.vote is not None:
        found.append((f"{where}.vote.ballots", part.vote.ballots))
    if part.rank is not None:
        found.append((f"{where}.rank.ballots", part.rank.ballots))
    return found


def _sealed(recorded: CouncilResult) -> bool:
    major, minor = (int(x) for x in recorded.schema_version.split("."))
    return (major, minor) >= SEALED_BALLOTS


def check_ballot_seals(recorded: CouncilResult, outcome: Verification) -> None:
    """Each raw ballot reply against the digest sealed when it was received."""
    d = recorded.deliberation
    if d is None or _method_standing_fields(recorded):
        return  # a method not installed here: its records are left unread, as they are above
    sealed = _sealed(recorded)
    seals_found = False
    for where, part in _ballot_places(d):
        for name, ballots in _ballots_at(where, part):
            if not ballots:
                continue
            if not sealed:
                seals_found = seals_found or any(b.digest is not None for b in ballots)
                continue
            outcome.checked.append(f"{name}[*].text (digest)")
            for j, ballot in enumerate(ballots):
                if ballot.digest is None:
                    outcome.differences.append(
                        Difference(
                            f"{name}[{j}].digest",
                            None,
                            f"(a {recorded.schema_version} run file seals every ballot reply)",
                        )
                    )
                elif digest_of(ballot) != ballot.digest:
                    outcome.differences.append(
                        Difference(
                            f"{name}[{j}].text",
                            "(tampered: the reply, its voter or runtime does not match the "
                            "digest sealed when the reply was received)",
                            ballot.digest,
                        )
                    )
    if seals_found:
        # Only a writer of the sealing contract or later puts digests on ballots: the
        # version was lowered, as if to have the ballots taken unchecked.
        outcome.differences.append(
            Difference(
                "schema_version",
                recorded.schema_version,
                "2.6 or later: its ballots carry the digests only those writers seal",
            )
        )


def _earlier_seats(record: RoundRecord, last: list[Voice]) -> list[Voice]:
    """An earlier round's seats as its ballots saw them, from what its record kept."""
    sources = {v.id: v.source for v in last}
    why = {
        a.voice_id: a.reason
        for part in (record.vote, record.rank)
        if part is not None
        for a in part.absent
        if a.stage == "answer"
    }
    return [
        Voice(
            id=rv.voice_id,
            source=sources.get(rv.voice_id, "subagent"),
            runtime=rv.runtime,
            status=rv.status,
            stance=rv.stance,
            drop_reason=why.get(rv.voice_id),
        )
        for rv in record.voices
    ]


def replay_ballots(recorded: CouncilResult, fresh: CouncilResult, outcome: Verification) -> None:
    """Every round's ballots filed again from the raw replies, by the method that filed them."""
    d = recorded.deliberation
    if d is None or d.method is None:
        return
    from .deliberation.registry import METHODS

    method = METHODS.get(d.method)
    if method is None:
        return  # said once, by check_deliberation_texts
    places = [(w, p) for w, p in _ballot_places(d) if p.vote is not None or p.rank is not None]
    if not places:
        return
    if not isinstance(method, Replays):
        outcome.unchecked.append(
            f"deliberation: method {d.method!r} does not say how to read its raw ballot "
            "replies again; only its own recount of the recorded ballots is checked"
        )
        return
    if not _sealed(recorded):
        for where, part in places:
            for name, _ in _ballots_at(where, part):
                outcome.unchecked.append(
                    f"{name}: recorded by contract {recorded.schema_version}, before ballot "
                    "replies were sealed and read from the recorded text alone, so the "
                    "ballots are not re-derived from the raw replies; only the count of the "
                    "recorded ballots is checked"
                )
        return
    options = recorded.request.deliberation or DeliberationOptions()
    seed = options.shuffle_seed or recorded.request.id
    for where, part in places:
        # The deliberation's own sections are its last round's.
        record = part if isinstance(part, RoundRecord) else (d.rounds[-1] if d.rounds else None)
        final = record is None or record is d.rounds[-1]
        voices = fresh.voices if record is None or final else _earlier_seats(record, fresh.voices)
        replay = Replay(
            where=where,
            number=record.round if record is not None else 1,
            run_id=recorded.request.id,
            seed=seed,
            options=options,
            voices=voices,
            answers_kept=final,
            consolidation=d.consolidation if final else None,
        )
        for recount in method.replay(replay, part):
            values = recount.values
            if _version(recorded) < VOTES_READ:
                values = [(n, was, _without_ballot_drops(now)) for n, was, now in values]
            before = len(outcome.differences)
            _file_recount(
                Recount(f"{recount.name} (re-derived from the raw replies)", values),
                outcome,
            )
            # A ballot's digest is compared on its own, in words, by check_ballot_seals.
            outcome.differences[before:] = [
                x for x in outcome.differences[before:] if not _is_seal(x.field)
            ]


def _is_seal(name: str) -> bool:
    return name.endswith(".digest") and ".ballots[" in name


def _check_summoned(recorded: CouncilResult, outcome: Verification) -> None:
    """A summoned member takes part from the round it joined, in every round after, and in
    no round before: so it counts in no threshold before it sat."""
    joined = {v.id: v.joined_round for v in recorded.voices if v.joined_round is not None}
    if not joined:
        return
    outcome.checked.append("voices[*].joined_round against the round records")
    d = recorded.deliberation
    records = d.rounds if d is not None else []
    if not any(r.round >= min(joined.values()) for r in records):
        outcome.differences.append(
            Difference("voices[*].joined_round", dict(joined), "(no round record that late)")
        )
    for i, record in enumerate(records):
        present = {v.voice_id for v in record.voices}
        counted = set(record.vote.counted) if record.vote is not None else set()
        ranked = {b.voice_id for b in record.rank.ballots} if record.rank is not None else set()
        for vid, first in joined.items():
            where = f"deliberation.rounds[{i}]"
            if record.round < first and vid in present | counted | ranked:
                outcome.differences.append(
                    Difference(where, f"{vid} took part", f"{vid} joined in round {first}")
                )
            elif record.round >= first and vid not in present:
                outcome.differences.append(
                    Difference(f"{where}.voices", f"{vid} absent", f"{vid} sits from round {first}")
                )


# --------------------------------------------------------------------------- deliberation
# Beyond each method's recount: the round decisions come from ``rounds.decide`` and the
# run's flags from ``rounds.raised``, as the runner took them; deterministic text (the merge
# when no orchestrator answered, the arithmetic verdict or risk register when no chairman
# did) is written again by the function that wrote it; model-written text is compared with
# the digest ``metadata.seal`` took when it was filed; uncertainty markers are read again
# from the verdict text.


def _dump(value: Any) -> Any:
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _compare(outcome: Verification, name: str, recorded: Any, fresh: Any) -> None:
    outcome.checked.append(name)
    outcome.differences += diff(name, _dump(recorded), _dump(fresh))


def _check_rounds(d: Deliberation, options: DeliberationOptions, outcome: Verification) -> None:
    from .deliberation.registry import METHODS

    method = METHODS.get(d.method) if d.method else None
    previous: float | None = None
    flags = rounds.Flags()
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
        flags |= rounds.raised(options.rounds, record.round, decision)
        previous = record.consensus_score
    if d.rounds:
        _compare(outcome, "deliberation.halted", d.halted, flags.halted)
        _compare(
            outcome,
            "deliberation.divergence_detected",
            d.divergence_detected,
            flags.divergence_detected,
        )
        _compare(outcome, "deliberation.converged_early", d.converged_early, flags.converged_early)


def _check_texts(d: Deliberation, fresh: CouncilResult, outcome: Verification) -> None:
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
        text = vote.arithmetic_verdict(d.vote)
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
    if _method_standing_fields(recorded):
        outcome.unchecked.append(f"deliberation: method {d.method!r} is not installed here")
        return
    options = recorded.request.deliberation or DeliberationOptions()
    _check_rounds(d, options, outcome)
    _check_texts(d, fresh, outcome)
