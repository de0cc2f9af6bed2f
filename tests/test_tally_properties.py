"""Properties the tally must keep whatever the ballots: hypothesis looks for counterexamples."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rune_council.core.contract import ConsolidatedItem
from rune_council.deliberation.tally import tally_text
from rune_council.deliberation.vote import count_votes, required_yes

LABELS = [f"p{i}" for i in range(1, 7)]


@st.composite
def ballots(draw: Any) -> tuple[list[str], list[tuple[str, list[list[str]], float]]]:
    n = draw(st.integers(min_value=2, max_value=6))
    labels = LABELS[:n]
    m = draw(st.integers(min_value=1, max_value=7))
    out = []
    for k in range(m):
        chosen = draw(st.permutations(labels))
        keep = draw(st.integers(min_value=1, max_value=n))
        ranked = list(chosen[:keep])
        levels: list[list[str]] = []
        for label in ranked:
            if levels and draw(st.booleans()):
                levels[-1].append(label)
            else:
                levels.append([label])
        conf = draw(st.sampled_from([0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0]))
        out.append((f"m{k}", levels, conf))
    return labels, out


def _transcript(labels: list[str], rows: list[tuple[str, list[list[str]], float]]) -> str:
    lines = [f'PROPOSE {p} "proposal {p}"' for p in labels]
    for who, levels, conf in rows:
        lines.append(f"{who} RANK {'>'.join('='.join(level) for level in levels)} conf={conf:g}")
    return "\n".join(lines)


@settings(max_examples=150, deadline=None)
@given(ballots(), st.randoms(use_true_random=False))
def test_the_order_of_rankers_changes_nothing(case: Any, rnd: Any) -> None:
    labels, rows = case
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    a, b = tally_text(_transcript(labels, rows)), tally_text(_transcript(labels, shuffled))
    assert {s.label: s.score for s in a.scores} == {s.label: s.score for s in b.scores}
    assert a.final_order == b.final_order
    assert a.winner == b.winner
    assert a.consensus.w == b.consensus.w
    assert sorted(a.dissenters) == sorted(b.dissenters)


@settings(max_examples=150, deadline=None)
@given(ballots(), st.sampled_from([0.1, 0.2, 0.5, 0.8]))
def test_scaling_every_conf_by_one_factor_keeps_the_order(case: Any, factor: float) -> None:
    labels, rows = case
    scaled = [(who, levels, conf * factor) for who, levels, conf in rows]
    a, b = tally_text(_transcript(labels, rows)), tally_text(_transcript(labels, scaled))
    assert a.final_order == b.final_order
    assert a.winner == b.winner
    assert a.consensus.w == b.consensus.w  # W reads the rankings, not the confidence


@settings(max_examples=100, deadline=None)
@given(ballots())
def test_a_member_who_cast_no_ballot_changes_no_verdict(case: Any) -> None:
    labels, rows = case
    base = _transcript(labels, rows)
    # An absent member appears in the transcript only as a comment and a stray prose line.
    with_absent = base + "\n# m-absent timed out and sent nothing\nm-absent was not here\n"
    a, b = tally_text(base), tally_text(with_absent)
    assert a.final_order == b.final_order and a.winner == b.winner
    assert a.consensus == b.consensus
    assert [r.ranker for r in a.rankers] == [r.ranker for r in b.rankers]


@st.composite
def votes(draw: Any) -> tuple[list[ConsolidatedItem], dict[str, dict[int, str]], float]:
    k = draw(st.integers(min_value=1, max_value=5))
    items = [
        ConsolidatedItem(number=i, text=f"item {i}", sources=[], voice_ids=[])
        for i in range(1, k + 1)
    ]
    m = draw(st.integers(min_value=0, max_value=6))
    choices = {
        f"v{j}": draw(
            st.dictionaries(
                st.sampled_from(list(range(1, k + 1))),
                st.sampled_from(["yes", "no", "abstain"]),
                min_size=1,
            )
        )
        for j in range(1, m + 1)
    }
    threshold = draw(st.sampled_from([0.5, 0.6, 2 / 3, 0.7, 0.75, 1.0]))
    return items, choices, threshold


@settings(max_examples=200, deadline=None)
@given(votes())
def test_adding_an_absent_member_changes_no_vote_outcome(case: Any) -> None:
    from rune_council.core.contract import AbsentMember

    items, choices, threshold = case
    before = count_votes(items, choices, threshold)
    after = count_votes(
        items,
        choices,
        threshold,
        absent=[AbsentMember(voice_id="v99", runtime="x", stage="answer", reason="timed out")],
    )
    assert [i.outcome for i in before.items] == [i.outcome for i in after.items]
    assert before.denominator == after.denominator == len(choices)
    assert after.absent[0].voice_id == "v99"


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=0, max_value=50),
    st.integers(min_value=1, max_value=20),
    st.integers(min_value=1, max_value=20),
)
def test_required_yes_is_the_exact_ceiling(denominator: int, p: int, q: int) -> None:
    if p > q:
        p, q = q, p
    threshold = p / q
    need = required_yes(threshold, denominator)
    # The smallest whole number of votes whose share reaches the threshold, in exact integers.
    assert need * q >= p * denominator
    assert need == 0 or (need - 1) * q < p * denominator
