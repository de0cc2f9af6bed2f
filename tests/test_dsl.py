"""The council DSL's rules, one per test: what is kept, what is dropped and why."""

from __future__ import annotations

import random

import pytest

from rune_council.deliberation.dsl import MAX_LINE, parse, parse_lines, phase_after
from rune_council.deliberation.tally import tally_text


def _reasons(text: str) -> list[str]:
    return [d.reason for d in parse(text).dropped]


def test_a_full_move_with_every_field_parses() -> None:
    t = parse(
        '@phase critique\nv2 CRITIQUE MUST -> p1 ev=plan.md:6,plan.md:7 conf=0.9 "no rollback"'
    )
    [m] = t.moves
    assert (m.speaker, m.verb, m.modality, m.target) == ("v2", "CRITIQUE", "MUST", "p1")
    assert m.ev == ("plan.md:6", "plan.md:7") and m.conf == 0.9 and m.note == "no rollback"
    assert m.phase == "critique" and not t.dropped


def test_rank_ballots_keep_levels_and_ties() -> None:
    [m] = parse("RANK p2>p1=p3>#rollback-first conf=0.8").moves
    assert m.ballot == (("p2",), ("p1", "p3"), ("#rollback-first",))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("RANK claude>p1", "only anonymised labels"),
        ("RANK v1>v2", "only anonymised labels"),
        ('CRITIQUE MUST -> gpt-4 "bad"', "anonymised labels"),
        ("RANK p1>p1", "twice"),
        ("RANK p1 conf=1.5", "outside 0..1"),
        ('CLAIM "sharding is safe"', "CLAIM without ev="),
        ('REQUIRE MAY "may post"  ev=policy.md:3', "REQUIRE MAY is rejected"),
        ('REQUIRE "x" ev=a', "needs MUST, MUST-NOT"),
        ("VOTE -> 1 maybe", "yes or no"),
        ("this is prose, not a move", "no verb"),
        ('SYNTH "done" open=["a", ]', "empty entry"),
        ('CRITIQUE MUST -> p1 "unterminated', "unterminated"),
        ("RANK p1 colour=red", "unknown field colour="),
        ("@phase chat", "unknown directive"),
    ],
)
def test_malformed_lines_are_dropped_with_their_reason(line: str, reason: str) -> None:
    t = parse(f'PROPOSE p1 "a"\n{line}\nPROPOSE p2 "b"')
    assert any(reason in r for r in _reasons(line)), _reasons(line)
    # Never fatal: the lines around it still count.
    assert [m.target for m in t.moves if m.verb == "PROPOSE"] == ["p1", "p2"]


def test_require_without_ev_is_an_error_not_a_drop() -> None:
    report = tally_text('PROPOSE p1 "a"\nREQUIRE MUST-NOT -> p1 "never post without sign-off"')
    assert not report.valid
    assert "escalated" in report.errors[0].reason
    assert report.pruned == []  # an untraceable policy is not applied either


def test_require_must_not_removes_a_proposal_before_ranking() -> None:
    report = tally_text(
        "\n".join(
            [
                'PROPOSE p1 "post to #general now"',
                'PROPOSE p2 "ask for sign-off first"',
                'REQUIRE MUST-NOT -> p1 ev=policy.md:12 "no posting without sign-off"',
                "a RANK p1>p2",
                "b RANK p1>p2",
            ]
        )
    )
    assert report.valid and [p.label for p in report.pruned] == ["p1"]
    assert report.final_order == [["p2"]] and report.winner == "p2"
    assert report.rankers[0].ballot == "p2"


def test_must_critique_blocks_until_revised() -> None:
    base = [
        'PROPOSE p1 "migrate in one weekend"',
        'PROPOSE p2 "migrate per customer range"',
        "a RANK p1>p2",
        "b RANK p1>p2",
        '@phase critique\nc CRITIQUE MUST -> p1 ev=plan.md:6 "no rollback"',
    ]
    blocked = tally_text("\n".join(base))
    assert [b.label for b in blocked.blocked] == ["p1"]
    assert blocked.final_order[0] == ["p1"] and blocked.winner == "p2"
    revised = tally_text("\n".join([*base, '@phase revise\nREVISE -> p1 "adds a rollback step"']))
    assert revised.blocked == [] and revised.winner == "p1"
    # A SHOULD critique is advice, not a block.
    advice = tally_text("\n".join([*base[:4], 'c CRITIQUE SHOULD -> p1 "slow"']))
    assert advice.blocked == [] and advice.winner == "p1"


def test_synth_with_open_questions_does_not_close() -> None:
    open_ = tally_text('@phase synth\nSYNTH "shard later" open=["who owns the lookup service?"]')
    assert open_.synth is not None and not open_.synth.closes
    assert open_.synth.open == ["who owns the lookup service?"]
    closed = tally_text('@phase synth\nSYNTH "shard later" open=[]')
    assert closed.synth is not None and closed.synth.closes


def test_verbs_out_of_their_phase_are_dropped() -> None:
    reasons = _reasons("@phase propose\nRANK p1>p2")
    assert reasons == ["RANK does not belong in the propose phase"]


def test_a_later_rank_by_the_same_member_supersedes_the_earlier() -> None:
    report = tally_text('PROPOSE p1 "a"\nPROPOSE p2 "b"\nm RANK p1>p2\nm RANK p2>p1')
    assert [r.line for r in report.rankers] == [4]
    assert "superseded" in report.dropped[0].reason


def test_ranking_an_unproposed_label_is_dropped() -> None:
    report = tally_text('PROPOSE p1 "a"\nm RANK p1>p9')
    assert report.rankers == [] and "nobody proposed" in report.dropped[0].reason


def test_own_answers_are_unseen_not_last() -> None:
    # Every member ranks the others identically: perfect agreement, whatever it left out.
    lines = ["@own m1 p1", "@own m2 p2", "@own m3 p3"]
    lines += ['PROPOSE p1 "a"', 'PROPOSE p2 "b"', 'PROPOSE p3 "c"']
    lines += ["m1 RANK p2>p3", "m2 RANK p1>p3", "m3 RANK p1>p2"]
    report = tally_text("\n".join(lines))
    assert report.consensus.w == 1.0 and "incomplete" in report.consensus.method
    assert tally_text("\n".join(lines[3:])).consensus.w == pytest.approx(1 / 9)
    own = tally_text("\n".join([*lines, "m1 RANK p1>p2"]))
    assert any("its own answer" in d.reason for d in own.dropped)


def test_comments_fences_and_hash_labels() -> None:
    t = parse('```\n# a comment\nPROPOSE #slow-path "x"  # trailing comment\n```')
    assert [m.target for m in t.moves] == ["#slow-path"] and not t.dropped


def test_the_phase_after_part_of_a_transcript_is_the_phase_its_parse_leaves() -> None:
    # Directives among moves, in notes, indented, cut off, too long to be read, and a
    # phase the parser does not know: the quick reading of @phase lines agrees with
    # reading every line.
    pieces = [
        "@phase rank",
        "  @phase vote  ",
        "@phase synth\r",
        "@phase nowhere",
        "@phase",
        'PROPOSE p1 "@phase critique"',
        "x RANK p1>p2",
        "@phase " + "x" * MAX_LINE,
        "# @phase revise",
        "@phase propose extra",
    ]
    rnd = random.Random(4)
    for _ in range(300):
        lines = [rnd.choice(pieces) for _ in range(rnd.randint(0, 8))]
        text = "\n".join(lines) + "\n"
        assert phase_after(text, len(text)) == parse_lines(text.splitlines())[1], lines
