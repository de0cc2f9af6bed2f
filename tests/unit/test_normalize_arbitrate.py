"""NORMALIZE and ARBITRATE on hand-built voices: the skill's Constraints, one by one."""

from __future__ import annotations

from rune_council.stages.arbitrate import arbitrate
from rune_council.stages.normalize import normalize, parse_ref
from tests.helpers import PLAN, answer, claim, gated_voice

Q = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step",
    severity="MUST",
    ref="plan.md:6",
    quote="No rollback step is defined.",
)
OFFLINE = claim(
    "Migrating with the site offline for a weekend is a long outage",
    ref="plan.md:4",
    quote="Migrate in one weekend with the site offline.",
)


def run(voices: list, artifact: str | None = PLAN):  # type: ignore[no-untyped-def]
    norm = normalize(voices, "plan.md" if artifact else None, artifact)
    return norm, arbitrate(norm.voices, norm.clusters, norm.near_verbatim)


def test_quote_is_checked_against_the_artifact_not_trusted() -> None:
    honest = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    liar = gated_voice(
        "v2",
        "openai",
        answer(
            Q, "NO", [claim("Rollback is fine", ref="plan.md:6", quote="A full rollback exists")]
        ),
    )
    run([honest, liar])
    assert honest.claims[0].evidence[0].verified == "true"
    assert honest.claims[0].evidence[0].verified_by == "council.mechanical"
    assert liar.claims[0].evidence[0].verified == "false"


def test_quote_with_copied_line_gutter_and_nearby_line_still_verifies() -> None:
    v = gated_voice(
        "v1",
        "anthropic",
        answer(Q, "NO", [claim("x", ref="plan.md:5", quote="6 | No rollback step is defined.")]),
    )
    run([v])
    assert v.claims[0].evidence[0].verified == "true"


def test_line_outside_the_artifact_is_false_and_foreign_ref_unchecked() -> None:
    v = gated_voice(
        "v1",
        "anthropic",
        answer(
            Q,
            "NO",
            [
                claim("a", ref="plan.md:99", quote="No rollback"),
                claim("b", ref="other.py:3", quote="whatever"),
            ],
        ),
    )
    run([v])
    assert v.claims[0].evidence[0].verified == "false"
    assert v.claims[1].evidence[0].verified == "unchecked"


def test_without_an_artifact_nothing_is_verified_so_nothing_is_consensus() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [ROLLBACK]))
    _, verdict = run([a, b], artifact=None)
    assert verdict.decorrelation == "MULTI_FAMILY"
    assert verdict.agreement.consensus_claims == []
    labels = sorted(d.label for d in verdict.agreement.dissent)
    assert labels == ["correlated-penalty", "unverified"]  # identical wording is flagged too
    unverified = next(d for d in verdict.agreement.dissent if d.label == "unverified")
    assert "not mechanically verified" in unverified.detail


def test_two_confirmed_families_with_verified_shared_evidence_make_consensus() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    b = gated_voice(
        "v2",
        "openai",
        answer(
            Q,
            "NO",
            [
                claim(
                    "Nothing describes how to roll back if the migration fails",
                    ref="plan.md:6",
                    quote="No rollback step is defined.",
                )
            ],
        ),
    )
    _norm, verdict = run([a, b])
    assert verdict.decorrelation == "MULTI_FAMILY"
    [c] = verdict.agreement.consensus_claims
    assert c.families == ["anthropic", "openai"]
    assert c.matched_by.method == "arbiter" and c.matched_by.key == "@artifact:6"


def test_anchor_match_clusters_before_evidence() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [{**ROLLBACK, "anchor": "step-5"}]))
    b = gated_voice(
        "v2",
        "google",
        answer(
            Q,
            "NO",
            [
                {
                    **claim(
                        "Step 5 gives no way to roll back if it fails",
                        ref="plan.md:6",
                        quote="No rollback step is defined.",
                    ),
                    "anchor": "Step-5",
                }
            ],
        ),
    )
    _, verdict = run([a, b])
    [c] = verdict.agreement.consensus_claims
    assert c.matched_by.method == "anchor"
    assert c.matched_by.point == "both take up the line's rollback"
    # Each member's own wording is kept: a reader sees what exactly was agreed.
    assert [(m.voice_id, m.text) for m in c.members] == [
        ("v1", "The plan has no rollback step"),
        ("v2", "Step 5 gives no way to roll back if it fails"),
    ]


def test_similar_prose_alone_never_matches() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [claim("Sharding adds operational cost")]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [claim("Sharding adds operational cost.")]))
    norm, verdict = run([a, b])
    assert all(len(c.voice_ids) == 1 for c in norm.clusters)
    assert verdict.agreement.consensus_claims == []
    labels = sorted(d.label for d in verdict.agreement.dissent)
    assert labels == ["correlated-penalty", "single-voice", "single-voice"]


def test_same_family_agreement_is_an_echo() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]), runtime="claude")
    b = gated_voice("v2", "anthropic", answer(Q, "NO", [ROLLBACK]), runtime="claude")
    _, verdict = run([a, b])
    assert verdict.decorrelation == "NO_DECORRELATION"
    assert verdict.agreement.consensus_claims == []
    assert any("NO_DECORRELATION" in d.detail for d in verdict.agreement.dissent)


def test_fallback_and_unknown_voices_do_not_count_as_families() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [ROLLBACK]), fallback=True)
    c = gated_voice("v3", "unknown", answer(Q, "NO", [ROLLBACK]), confirmed=False)
    _, verdict = run([a, b, c])
    assert verdict.decorrelation == "NO_DECORRELATION"
    assert verdict.distinct_families == ["anthropic"]
    assert verdict.agreement.consensus_claims == []


def test_near_verbatim_across_distinct_families_is_flagged_not_trusted() -> None:
    text = "Migrating with the site offline for a weekend is a long outage"
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [OFFLINE]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [{**OFFLINE, "text": text + "."}]))
    _, verdict = run([a, b])
    penalties = [d for d in verdict.agreement.dissent if d.label == "correlated-penalty"]
    assert len(penalties) == 1
    assert "confirmed-distinct families" in penalties[0].detail


def test_near_verbatim_with_a_different_number_is_not_a_copy() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [claim("Use 8 shards for orders")]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [claim("Use 16 shards for orders")]))
    _, verdict = run([a, b])
    assert not [d for d in verdict.agreement.dissent if d.label == "correlated-penalty"]


def test_opposite_claims_on_one_anchor_are_disagreement() -> None:
    a = gated_voice(
        "v1",
        "anthropic",
        answer(Q, "NO", [claim("The lookup service is a bottleneck", anchor="step-2")]),
    )
    b = gated_voice(
        "v2",
        "openai",
        answer(Q, "YES", [claim("The lookup service is not a bottleneck", anchor="step-2")]),
    )
    _, verdict = run([a, b])
    labels = sorted(d.label for d in verdict.agreement.dissent)
    assert labels == ["disagreement", "disagreement"]  # the claim clash and the stance split
    assert verdict.agreement.consensus_claims == []


def test_unresolved_must_claim_needs_a_decision() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [OFFLINE]))
    _, verdict = run([a, b])
    assert verdict.needs_decision
    assert verdict.decision is not None and "rollback" in verdict.decision


def test_perturbation_flip_is_framing_sensitive_and_holding_is_recorded() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "YES, shard", []))
    b = gated_voice("v2", "openai", answer(Q, "NO, do not", []), role="perturbation")
    _, verdict = run([a, b])
    assert verdict.checks.perturbation is not None
    assert verdict.checks.perturbation.outcome == "framing-sensitive"
    assert any(d.label == "framing-sensitive" for d in verdict.agreement.dissent)

    c = gated_voice("v2", "openai", answer(Q, "YES, even so", []), role="perturbation")
    _, verdict = run([a, c])
    assert verdict.checks.perturbation is not None
    assert verdict.checks.perturbation.outcome == "held"


def test_devils_advocate_without_counterclaims_is_positive_signal() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "YES", []))
    b = gated_voice("v2", "openai", answer(Q, "YES", []), role="perturbation")
    c = gated_voice("v3", "google", answer(Q, "YES, I tried", []), role="devils_advocate")
    _, verdict = run([a, b, c])
    assert verdict.checks.devils_advocate is not None
    assert verdict.checks.devils_advocate.outcome == "no-counterclaims"
    assert any("majority held" in n for n in verdict.notes)


def test_ref_parsing_understands_common_spellings() -> None:
    assert parse_ref("plan.md:12", "plan.md").start == 12
    assert parse_ref("docs/plan.md#L3-L5", "plan.md").end == 5
    assert parse_ref("line 4", "plan.md").target == "@artifact"
    assert parse_ref("OrderRouter.route", "plan.md").start is None


def test_devils_advocate_concluding_against_the_majority_counts_as_a_counter() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "YES", []))
    b = gated_voice("v2", "openai", answer(Q, "YES", []), role="perturbation")
    c = gated_voice("v3", "google", answer(Q, "NO, it is premature", []), role="devils_advocate")
    _, verdict = run([a, b, c])
    assert verdict.checks.devils_advocate is not None
    assert verdict.checks.devils_advocate.outcome == "countered"
    assert "against the majority" in verdict.checks.devils_advocate.detail


def test_agreement_the_inverted_framing_did_not_reach_is_flagged() -> None:
    a = gated_voice("v1", "anthropic", answer(Q, "NO", [ROLLBACK]))
    b = gated_voice("v2", "openai", answer(Q, "NO", [{**ROLLBACK, "text": "No way to undo it"}]))
    c = gated_voice("v3", "google", answer(Q, "NO", [OFFLINE]), role="perturbation")
    _, verdict = run([a, b, c])
    # The consensus stands (two confirmed families, verified), but the flag says it rests on
    # the plain framing only.
    assert len(verdict.agreement.consensus_claims) == 1
    [flag] = [d for d in verdict.agreement.dissent if d.label == "framing-sensitive"]
    assert flag.voice_ids == ["v1", "v2"] and "inverted framing (v3)" in flag.detail

    joined = gated_voice("v3", "google", answer(Q, "NO", [ROLLBACK, OFFLINE]), role="perturbation")
    _, verdict = run([a, b, joined])
    assert not [d for d in verdict.agreement.dissent if d.label == "framing-sensitive"]
