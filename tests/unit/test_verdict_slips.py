"""Small honesty slips in what the verdict says, each pinned by the output it used to give."""

from __future__ import annotations

from rune_council.core.contract import (
    AbsentMember,
    Attempt,
    CouncilResult,
    Deliberation,
    ItemTally,
    PerspectiveRequest,
    RawOutput,
    RoundRecord,
    RoundVoice,
    Voice,
    VoteResult,
)
from rune_council.deliberation.consolidate import deterministic_merge
from rune_council.deliberation.metadata import verdict_metadata
from rune_council.deliberation.rank import uncertainty_markers
from rune_council.deliberation.tally import tally_text
from rune_council.deliberation.vote import arithmetic_verdict
from rune_council.stages.arbitrate import arbitrate
from rune_council.stages.normalize import normalize
from rune_council.stages.verdict import reach_verdict
from tests.helpers import PLAN, QUESTION, answer, claim, gated_voice

Q = QUESTION


def _verdict(voices: list[Voice]):  # type: ignore[no-untyped-def]
    norm = normalize(voices, "plan.md", PLAN)
    return arbitrate(norm.voices, norm.clusters, norm.near_verbatim)


def test_should_level_claim_that_no_consensus_settles_needs_a_decision() -> None:
    offline = claim(
        "A weekend offline is too long an outage",
        severity="SHOULD",
        ref="plan.md:4",
        quote="Migrate in one weekend with the site offline.",
    )
    reports = claim("Reporting jobs read a stale table", severity="MUST", anchor="step-4")
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [offline]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [reports]))
    verdict = _verdict([a, b])
    # Before: a SHOULD claim alone in dissent left needs_decision false.
    assert verdict.needs_decision is True
    assert verdict.decision is not None
    # Every unresolved claim is named, not only the first.
    assert "A weekend offline is too long an outage" in verdict.decision
    assert "Reporting jobs read a stale table" in verdict.decision
    assert "[SHOULD]" in verdict.decision and "[MUST]" in verdict.decision


def test_may_level_and_settled_claims_need_no_decision() -> None:
    may = claim("Eight shards may be too few", severity="MAY", anchor="step-1")
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [may]))
    b = gated_voice("v2", "openai", answer(Q, "NO", []))
    assert _verdict([a, b]).needs_decision is False

    rollback = claim(
        "The plan has no rollback step",
        severity="SHOULD",
        ref="plan.md:6",
        quote="No rollback step is defined.",
    )
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [rollback]))
    b = gated_voice(
        "v2", "openai", answer(Q, "NO", [{**rollback, "text": "No rollback exists in the plan"}])
    )
    verdict = _verdict([a, b])
    assert len(verdict.agreement.consensus_claims) == 1
    assert verdict.needs_decision is False and verdict.decision is None


def test_merge_does_not_repeat_the_position_word() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO: the copy overruns.", []))
    b = gated_voice("v2", "openai", answer(Q, "yes - it fits", []))
    items = deterministic_merge([a, b], [])
    texts = sorted(i.text for i in items)
    # Before: "NO: NO: the copy overruns."
    assert texts == ["NO: the copy overruns.", "YES: it fits"]


def test_last_uncertain_marker_does_not_swallow_the_absent_line() -> None:
    vote = VoteResult(
        threshold=2 / 3,
        denominator=2,
        counted=["v1", "v2"],
        absent=[AbsentMember(voice_id="v3", runtime="gemini", stage="ballot", reason="timeout")],
        items=[
            ItemTally(number=1, text="Ship it", yes=["v1"], no=["v2"], required=2, outcome="failed")
        ],
    )
    text = arithmetic_verdict(vote)
    [marker] = uncertainty_markers(text)
    # Before: "Item 1 split the council: yes v1; no v2. Absent: v3 (timeout)"
    assert "Absent" not in marker.text
    assert marker.text == "Item 1 split the council: yes v1; no v2."
    assert "Absent: v3 (timeout)" in text


def _voice(vid: str, status: str, runtime: str = "claude") -> Voice:
    return Voice(id=vid, source="external-cli", runtime=runtime, status=status)  # type: ignore[arg-type]


def _result(voices: list[Voice], deliberation: Deliberation | None = None) -> CouncilResult:
    return CouncilResult(
        id="r",
        question=Q,
        mode="judge",
        request=PerspectiveRequest(id="r", question=Q),
        voices_requested=len(voices),
        voices=voices,
        started_at="2026-01-01T00:00:00+00:00",
        deliberation=deliberation,
    )


def test_member_count_leaves_out_dropped_voices() -> None:
    result = _result([_voice("v1", "complete"), _voice("v2", "complete"), _voice("v3", "dropped")])
    # Before: 3, the dropped voice counted as a member.
    assert verdict_metadata(result).member_count == 2
    rounds = Deliberation(
        rounds=[
            RoundRecord(
                round=2,
                voices=[
                    RoundVoice(voice_id="v3", runtime="claude", status="complete"),
                    RoundVoice(voice_id="v4", runtime="codex", status="dropped"),
                ],
            )
        ]
    )
    with_rounds = _result([_voice("v1", "complete"), _voice("v3", "dropped")], rounds)
    assert verdict_metadata(with_rounds).member_count == 2  # v1, and v3 answered in round 2


def test_runtime_that_only_failed_is_not_listed_as_used() -> None:
    voice = Voice(
        id="v1",
        source="subagent",
        runtime="internal",
        model_family="anthropic",
        is_fallback=True,
        status="complete",
        raw=RawOutput(text=answer(Q, "NO", [])),
        attempts=[
            Attempt(runtime="claude", source="external-cli", outcome="exit_nonzero"),
            Attempt(runtime="internal", source="subagent", outcome="ok"),
        ],
    )
    other = gated_voice("v2", "openai", answer(Q, "NO", []), runtime="codex")
    other.attempts = [Attempt(runtime="codex", source="external-cli", outcome="ok")]
    result = _result([voice, other])
    reach_verdict(result, None)
    # Before: ["claude", "codex", "internal"]
    assert result.runtime_report.used == ["codex", "internal"]
    assert result.runtime_report.degraded_to_subagent == ["v1"]


def test_cyclic_rankings_name_no_dissenter() -> None:
    report = tally_text(
        'PROPOSE A "a"\nPROPOSE B "b"\nPROPOSE C "c"\nm1 RANK A>B>C\nm2 RANK B>C>A\nm3 RANK C>A>B\n'
    )
    assert len(report.rankers) == 3
    # Before: every ranker had mean Spearman -0.5 and all three were named dissenters.
    assert [r.mean_spearman for r in report.rankers] == [-0.5, -0.5, -0.5]
    assert report.dissenters == []
    assert not any(r.dissenting for r in report.rankers)
    assert "cycle" in report.consensus.note and "no ranker stands apart" in report.consensus.note


def test_a_lone_outlier_among_agreeing_rankers_is_still_named() -> None:
    report = tally_text(
        'PROPOSE A "a"\nPROPOSE B "b"\nPROPOSE C "c"\nm1 RANK A>B>C\nm2 RANK A>B>C\nm3 RANK C>B>A\n'
    )
    assert report.dissenters == ["m3"]
    assert "cycle" not in report.consensus.note
