"""Each arm of an eval scored item by item, and the scoring rule that decides a hit."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rune_council.evaluation.arms import (
    HIT_DISTANCE,
    MIN_SPLIT_ITEMS,
    CouncilOnItem,
    EvalClaim,
    EvalSet,
    ItemRecord,
    SeededPlace,
    VoiceOnItem,
    all_arms,
    best_voice_arm,
    claim_hits,
    council_arms,
    folds,
    majority_arm,
    read_anchor,
    voice_arm,
)
from rune_council.evaluation.report import build_report
from rune_council.stages.normalize import parse_ref

PATH = "src/app.py"
SEED = SeededPlace(path=PATH, line=43)


def claim(*anchors: str) -> EvalClaim:
    return EvalClaim(anchors=list(anchors), text="a finding")


def hits(*anchors: str) -> bool:
    return claim_hits(claim(*anchors), SEED, [PATH, "src/other.py"])


# --------------------------------------------------------------------------- scoring rule


def test_a_claim_within_two_lines_of_the_seeded_line_hits() -> None:
    assert HIT_DISTANCE == 2
    for line in (41, 42, 43, 44, 45):
        assert hits(f"{PATH}:{line}"), line
    for line in (40, 46, 1, 100):
        assert not hits(f"{PATH}:{line}"), line


def test_a_claim_in_another_file_or_with_no_file_does_not_hit() -> None:
    assert not hits("src/other.py:43")
    assert not hits("line 43")
    assert not hits("43")
    assert not hits("the loop in main")
    assert not hits()


def test_a_cited_path_is_read_as_normalize_reads_it() -> None:
    for anchor in ("./src/app.py:43", "b/src/app.py:43", "`src/app.py`:43", "app.py:43"):
        assert hits(anchor), anchor
    assert hits("src/app.py#L44")
    assert hits("src/app.py:L42")


def test_a_range_hits_only_when_it_is_narrow_and_near() -> None:
    assert hits(f"{PATH}:44-48")  # five lines, the first within two of 43
    assert hits(f"{PATH}:46-45")  # reversed, read as 45-46
    assert not hits(f"{PATH}:46-50")  # every line more than two away
    assert not hits(f"{PATH}:40-46")  # seven lines: too wide to point at one place
    assert not hits(f"{PATH}:1-400")


def test_any_of_a_claims_anchors_may_hit() -> None:
    assert hits("src/other.py:3", f"{PATH}:45")


@pytest.mark.parametrize(
    "anchor", ["src/app.py:12", "src/app.py:12-14", "app.py#L7", "app.py:L9", "app.py:3 - 5"]
)
def test_anchor_lines_agree_with_normalize(anchor: str) -> None:
    # The eval reads a line anchor in exactly the forms NORMALIZE does; if one changes, this
    # shows it.
    ref = parse_ref(anchor, None)
    mine = read_anchor(anchor, [PATH])
    assert mine is not None
    assert (mine[1], mine[2]) == (ref.start, ref.end or ref.start)


# --------------------------------------------------------------------------- records


def flawed(
    item_id: str, voices: list[VoiceOnItem], councils: list[CouncilOnItem] | None = None
) -> ItemRecord:
    return ItemRecord(
        id=item_id, label="flawed", seeded=[SEED], voices=voices, councils=councils or []
    )


def clean(
    item_id: str, voices: list[VoiceOnItem], councils: list[CouncilOnItem] | None = None
) -> ItemRecord:
    return ItemRecord(
        id=item_id, label="clean", files=[PATH], voices=voices, councils=councils or []
    )


def v(name: str, *anchors: str, family: str = "f", answered: bool = True) -> VoiceOnItem:
    claims = [claim(a) for a in anchors]
    return VoiceOnItem(voice=name, family=family, claims=claims, answered=answered)


def test_records_refuse_what_cannot_be_scored() -> None:
    with pytest.raises(ValidationError, match="names no seeded place"):
        ItemRecord(id="x", label="flawed")
    with pytest.raises(ValidationError, match="clean but names a seeded place"):
        ItemRecord(id="x", label="clean", seeded=[SEED])
    with pytest.raises(ValidationError, match="lists a voice twice"):
        clean("x", [v("a"), v("a")])
    with pytest.raises(ValidationError, match="share an id"):
        EvalSet(items=[clean("x", []), clean("x", [])])
    with pytest.raises(ValidationError, match="family"):
        EvalSet(items=[clean("x", [v("a", family="g")]), clean("y", [v("a", family="h")])])
    with pytest.raises(ValidationError):
        EvalClaim(anchors=["x" * 501])


def test_the_records_read_back_from_json() -> None:
    records = EvalSet(items=[flawed("1", [v("a", f"{PATH}:43")]), clean("2", [v("a")])])
    again = EvalSet.model_validate(json.loads(records.model_dump_json()))
    assert again == records


# --------------------------------------------------------------------------- arms


def test_voice_arm_hits_alarms_and_skips_what_it_did_not_answer() -> None:
    records = EvalSet(
        items=[
            flawed("f1", [v("a", f"{PATH}:44")]),
            flawed("f2", [v("a", f"{PATH}:10")]),
            clean("c1", [v("a", f"{PATH}:3")]),
            clean("c2", [v("a")]),
            clean("c3", [v("a", f"{PATH}:3", answered=False)]),
            clean("c4", []),
        ]
    )
    got = {o.item: o for o in voice_arm(records, "a").outcomes}
    assert (got["f1"].hit, got["f1"].alarm, got["f1"].right) == (True, True, True)
    assert (got["f2"].hit, got["f2"].alarm, got["f2"].right) == (False, True, False)
    assert (got["c1"].alarm, got["c1"].right) == (True, False)
    assert (got["c2"].alarm, got["c2"].right) == (False, True)
    assert not got["c3"].answered and got["c3"].error is None
    assert not got["c4"].answered


def test_majority_needs_more_than_half_of_the_voices_that_answered() -> None:
    two_of_three = flawed("a", [v("x", f"{PATH}:42"), v("y", f"{PATH}:45"), v("z")])
    one_of_three = flawed("b", [v("x", f"{PATH}:43"), v("y"), v("z", f"{PATH}:9")])
    one_of_two = flawed("c", [v("x", f"{PATH}:43"), v("y"), v("z", answered=False)])
    two_of_two = flawed("d", [v("x", f"{PATH}:43"), v("y", f"{PATH}:44"), v("z", answered=False)])
    nobody = flawed("e", [v("x", answered=False)])
    records = EvalSet(items=[two_of_three, one_of_three, one_of_two, two_of_two, nobody])
    got = {o.item: o for o in majority_arm(records).outcomes}
    assert got["a"].hit and got["a"].alarm
    assert not got["b"].hit and not got["b"].alarm
    assert not got["c"].hit  # one of the two that answered is not more than half
    assert got["d"].hit
    assert not got["e"].answered


def test_majority_false_alarm_needs_voices_to_meet_on_one_place() -> None:
    together = clean("a", [v("x", f"{PATH}:10"), v("y", f"{PATH}:12"), v("z")])
    apart = clean("b", [v("x", f"{PATH}:10"), v("y", f"{PATH}:30"), v("z", f"{PATH}:50")])
    unplaced = clean("c", [v("x", "somewhere"), v("y", "somewhere"), v("z")])
    records = EvalSet(items=[together, apart, unplaced])
    got = {o.item: o for o in majority_arm(records).outcomes}
    assert got["a"].alarm
    assert not got["b"].alarm
    assert not got["c"].alarm  # claims with no place cannot be counted together


def test_council_arms_score_consensus_and_dissent() -> None:
    council = CouncilOnItem(consensus=[claim("src/other.py:3")], dissent=[claim(f"{PATH}:43")])
    records = EvalSet(
        items=[
            flawed("f", [], councils=[council]),
            clean("c", [], councils=[CouncilOnItem(dissent=[claim(f"{PATH}:1")])]),
            clean("gone", [], councils=[CouncilOnItem(answered=False)]),
        ]
    )
    consensus, both = council_arms(records)
    assert consensus.name == "council:consensus" and both.name == "council:consensus+dissent"
    c = {o.item: o for o in consensus.outcomes}
    b = {o.item: o for o in both.outcomes}
    assert not c["f"].hit and c["f"].alarm
    assert b["f"].hit
    assert not c["c"].alarm and b["c"].alarm
    assert not c["gone"].answered and not b["gone"].answered


def _specialists(n: int) -> EvalSet:
    """Voice x is right exactly on the items of fold 0 and y exactly on those of fold 1,
    so a choice made on the items scored looks perfect and a held-apart one does not."""
    ids = [f"i{k:02d}" for k in range(n)]
    base = EvalSet(items=[flawed(i, []) for i in ids])
    first, _ = folds(base, seed=3)
    items = []
    for i in ids:
        x_hit = i in first
        items.append(
            flawed(
                i,
                [
                    v("x", f"{PATH}:43" if x_hit else f"{PATH}:1", family="a"),
                    v("y", f"{PATH}:1" if x_hit else f"{PATH}:43", family="b"),
                ],
            )
        )
    return EvalSet(items=items)


def test_best_voice_is_chosen_on_one_fold_and_scored_on_the_other() -> None:
    records = _specialists(20)
    voices = [voice_arm(records, "x"), voice_arm(records, "y")]
    arm = best_voice_arm(records, voices, seed=3)
    assert [c.voice for c in arm.choices] == ["x", "y"]
    assert all(not c.in_sample and c.chosen_on == 10 and c.scored_on == 10 for c in arm.choices)
    # Each fold's specialist is scored where it fails: held apart, the choice earns nothing.
    assert all(o.answered and not o.hit for o in arm.outcomes)
    assert any("different voices" in n for n in arm.notes)


def test_best_voice_with_too_few_items_is_in_sample_and_says_so() -> None:
    records = _specialists(MIN_SPLIT_ITEMS - 1)
    voices = [voice_arm(records, "x"), voice_arm(records, "y")]
    arm = best_voice_arm(records, voices, seed=3)
    assert len(arm.choices) == 1 and arm.choices[0].in_sample
    assert any("in-sample" in n and "optimistic" in n for n in arm.notes)


def test_folds_are_fixed_by_the_seed_and_balanced_per_label() -> None:
    items = [flawed(f"f{k}", []) for k in range(7)] + [clean(f"c{k}", []) for k in range(6)]
    records = EvalSet(items=items)
    a, b = folds(records, seed=1)
    assert folds(records, seed=1) == (a, b)
    assert folds(records, seed=2) != (a, b)
    assert a.isdisjoint(b) and len(a | b) == 13
    assert sorted(sum(1 for i in fold if i.startswith("f")) for fold in (a, b)) == [3, 4]
    assert sorted(sum(1 for i in fold if i.startswith("c")) for fold in (a, b)) == [3, 3]


def test_all_arms_in_report_order() -> None:
    records = EvalSet(
        items=[flawed("f", [v("a"), v("b")], councils=[CouncilOnItem(), CouncilOnItem(name="r")])]
    )
    names = [a.name for a in all_arms(records)]
    assert names == [
        "voice:a",
        "voice:b",
        "best-voice",
        "majority",
        "council:consensus",
        "council:consensus+dissent",
        "r:consensus",
        "r:consensus+dissent",
    ]


# --------------------------------------------------------------------------- report


def test_report_json_gives_every_rate_or_null_with_the_reason() -> None:
    # Only flawed items, and a voice that never raises anything: false alarms and its
    # precision are undefined, and the report must say why instead of dividing by zero.
    items = [
        flawed(f"f{k}", [v("quiet", family="a"), v("loud", f"{PATH}:43", family="b")])
        for k in range(4)
    ]
    doc = json.loads(build_report(EvalSet(items=items), resamples=100).model_dump_json())
    arms = {a["name"]: a for a in doc["arms"]}
    quiet = arms["voice:quiet"]
    assert quiet["recall"]["value"] == 0.0
    assert quiet["false_alarm"] == {
        "value": None,
        "numerator": 0,
        "denominator": 0,
        "interval": None,
        "reason": "no clean item answered",
    }
    assert quiet["precision"]["value"] is None
    assert quiet["precision"]["reason"] == "no alarm raised"
    assert any("hit none of the 4" in n for n in quiet["notes"])
    loud = arms["voice:loud"]
    assert loud["recall"]["value"] == 1.0 and loud["precision"]["value"] == 1.0
    assert any("no clean items" in n for n in doc["notes"])
    assert doc["hit_distance"] == HIT_DISTANCE


def test_report_compares_pooled_arms_with_the_best_voice_holm_adjusted() -> None:
    items = []
    for k in range(30):
        a_hit, b_hit = k % 2 == 0, k % 3 == 0
        consensus = [claim(f"{PATH}:43")] if k < 24 else []
        items.append(
            flawed(
                f"f{k:02d}",
                [
                    v("a", f"{PATH}:43" if a_hit else f"{PATH}:1", family="x"),
                    v("b", f"{PATH}:43" if b_hit else f"{PATH}:1", family="y"),
                ],
                councils=[CouncilOnItem(consensus=consensus)],
            )
        )
    report = build_report(EvalSet(items=items), resamples=50)
    compared = [c.arm for c in report.comparisons]
    assert compared == ["majority", "council:consensus", "council:consensus+dissent"]
    raw = [c.test.p_value for c in report.comparisons]
    assert all(c.against == "best-voice" and c.items == 30 for c in report.comparisons)
    # Holm multiplies the smallest of three p-values by 3.
    smallest = min(range(3), key=lambda i: raw[i])
    assert report.comparisons[smallest].holm_p == pytest.approx(min(1.0, 3 * raw[smallest]))
    assert len(report.voice_agreement) == 1
    assert [(f.a, f.b) for f in report.family_agreement] == [("x", "y")]
