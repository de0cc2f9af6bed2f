"""The tally's arithmetic against values published by others, never against our own output.

Kendall's W: worked examples whose W is printed in their source (named at each test).
Borda: the same ballots counted by votekit, an independent social-choice library, with the
score vector N-1 .. 0 and the "average" convention for ties, as the design pins it.
"""

from __future__ import annotations

import pytest
from votekit import RankBallot, RankProfile
from votekit.elections import Borda

from rune_council.deliberation import concordance
from rune_council.deliberation.tally import tally_text


def _levels_from_scores(scores: dict[str, float], higher_first: bool) -> list[list[str]]:
    by_value: dict[float, list[str]] = {}
    for item, value in scores.items():
        by_value.setdefault(value, []).append(item)
    return [by_value[v] for v in sorted(by_value, reverse=higher_first)]


def _rank_line(ranker: str, levels: list[list[str]]) -> str:
    return f"{ranker} RANK " + ">".join("=".join(level) for level in levels)


# --------------------------------------------------------------------------- Kendall's W


def test_w_siegel_castellan_tourist_attributes_without_ties() -> None:
    # Siegel & Castellan (1988), as reproduced in the R DescTools help for KendallW:
    # three raters rank eight attributes; published W = 0.6560847 (Friedman chi2 = 13.778).
    ranks = {
        "airfare": (5, 1, 4),
        "climate": (6, 7, 5),
        "season": (7, 6, 1),
        "people": (1, 2, 3),
        "program": (2, 3, 2),
        "publicity": (4, 5, 7),
        "present": (3, 4, 6),
        "interest": (8, 8, 8),
    }
    labels = {name: f"p{i}" for i, name in enumerate(ranks, start=1)}
    lines = [f'PROPOSE {labels[n]} "{n}"' for n in ranks]
    for rater in range(3):
        scores = {labels[n]: float(r[rater]) for n, r in ranks.items()}
        lines.append(_rank_line(f"r{rater + 1}", _levels_from_scores(scores, higher_first=False)))
    report = tally_text("\n".join(lines))
    assert report.consensus.w == pytest.approx(0.6560847, abs=1e-7)
    assert report.consensus.label == "medium"


def test_w_anxiety_ratings_with_ties_tie_corrected() -> None:
    # R DescTools / irr example data "anxiety": 20 subjects rated by 3 raters on a 1-6 scale,
    # many ties. Published: KendallW(anxiety, correct=TRUE) = 0.5396569, chi2(19) = 30.76.
    raters = [
        (3, 3, 3, 4, 5, 5, 2, 3, 5, 2, 2, 6, 1, 5, 2, 2, 1, 2, 4, 3),
        (3, 6, 4, 6, 2, 4, 2, 4, 3, 3, 2, 3, 3, 3, 2, 2, 1, 3, 3, 4),
        (2, 1, 4, 4, 3, 2, 1, 6, 1, 1, 1, 2, 3, 3, 1, 1, 3, 3, 2, 2),
    ]
    lines = [f'PROPOSE p{i} "subject {i}"' for i in range(1, 21)]
    for k, scores in enumerate(raters, start=1):
        table = {f"p{i}": float(s) for i, s in enumerate(scores, start=1)}
        lines.append(_rank_line(f"rater{k}", _levels_from_scores(table, higher_first=True)))
    report = tally_text("\n".join(lines))
    assert report.consensus.w == pytest.approx(0.5396569, abs=1e-7)
    chi2 = 3 * (20 - 1) * (report.consensus.w or 0)
    assert chi2 == pytest.approx(30.76, abs=0.005)


def test_w_strawberry_farms_worked_example() -> None:
    # influentialpoints.com, "Kendall coefficient of concordance", worked example I: four
    # raters rank strawberries from eight farms; published W = 500 / (504 x 16 / 12) = 0.744.
    raters = [
        (8, 4, 2, 3, 5, 1, 6, 7),
        (7, 3, 1, 4, 5, 2, 6, 8),
        (8, 2, 5, 6, 7, 1, 4, 3),
        (8, 3, 4, 2, 5, 1, 6, 7),
    ]
    ballots = []
    for ranks in raters:
        table = {f"farm{j}": float(r) for j, r in enumerate(ranks, start=1)}
        ballots.append(_levels_from_scores(table, higher_first=False))
    w = concordance.kendall_w(ballots, [f"farm{j}" for j in range(1, 9)])
    assert w == pytest.approx(500 / 672, abs=1e-12)
    assert round(w or 0, 3) == 0.744


def test_w_proofwiki_three_competitors() -> None:
    # ProofWiki, "Kendall's Coefficient of Concordance/Examples/Arbitrary Example 1":
    # four judges rank three competitors X, Y, Z; published W = 1/16.
    judges = {"A": (1, 3, 2), "B": (1, 2, 3), "C": (2, 3, 1), "D": (3, 1, 2)}
    lines = ['PROPOSE A "X"', 'PROPOSE B "Y"', 'PROPOSE C "Z"']
    for judge, (x, y, z) in judges.items():
        table = {"A": float(x), "B": float(y), "C": float(z)}
        lines.append(_rank_line(f"judge-{judge}", _levels_from_scores(table, higher_first=False)))
    assert tally_text("\n".join(lines)).consensus.w == pytest.approx(1 / 16, abs=1e-12)


def test_incomplete_w_equals_textbook_w_on_complete_rankings() -> None:
    # The rank stage's form must agree with the published value when nothing is unseen
    # (Siegel & Castellan again: 0.6560847).
    ranks = [(5, 6, 7, 1, 2, 4, 3, 8), (1, 7, 6, 2, 3, 5, 4, 8), (4, 5, 1, 3, 2, 7, 6, 8)]
    items = [f"a{j}" for j in range(8)]
    ballots = [
        _levels_from_scores({items[j]: float(r[j]) for j in range(8)}, higher_first=False)
        for r in ranks
    ]
    w = concordance.incomplete_w(ballots, [items] * 3, items)
    assert w == pytest.approx(0.6560847, abs=1e-7)


# --------------------------------------------------------------------------- Borda x conf


def _votekit_scores(
    candidates: list[str], ballots: list[tuple[list[set[str]], float]]
) -> dict[str, float]:
    n = len(candidates)
    profile = RankProfile(
        ballots=[RankBallot(ranking=tuple(r), weight=w) for r, w in ballots],
        candidates=candidates,
        max_ranking_length=n,
    )
    election = Borda(
        profile,
        n_seats=1,
        score_vector=[float(n - 1 - k) for k in range(n)],
        scoring_tie_convention="average",
        tiebreak="first_place",
    )
    scores = {c: float(s) for c, s in election.election_states[0].scores.items()}
    return {c: scores.get(c, 0.0) for c in candidates}


CASES = {
    "strict full ballots": (
        ["A", "B", "C", "D"],
        [([{"A"}, {"B"}, {"C"}, {"D"}], 1.0), ([{"B"}, {"C"}, {"A"}, {"D"}], 1.0)],
    ),
    "ties": (
        ["A", "B", "C", "D", "E"],
        [([{"A"}, {"B", "C"}, {"D"}, {"E"}], 1.0), ([{"C", "D", "E"}, {"A", "B"}], 1.0)],
    ),
    "partial ballots": (
        ["A", "B", "C", "D", "E"],
        [([{"B"}, {"A"}], 1.0), ([{"E"}], 1.0), ([{"C"}, {"A", "D"}], 1.0)],
    ),
    "weights (conf)": (
        ["A", "B", "C"],
        [([{"A"}, {"B"}, {"C"}], 0.8), ([{"C"}, {"B"}, {"A"}], 0.3), ([{"B"}, {"A", "C"}], 0.55)],
    ),
    "everything at once": (
        ["A", "B", "C", "D", "E", "F"],
        [
            ([{"F"}, {"A", "B"}], 0.9),
            ([{"B"}, {"C"}, {"D", "E", "F"}], 0.25),
            ([{"A"}, {"B"}, {"C"}, {"D"}, {"E"}, {"F"}], 1.0),
            ([{"D", "E"}], 0.6),
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_borda_times_conf_matches_votekit(case: str) -> None:
    candidates, ballots = CASES[case]
    lines = [f'PROPOSE {c} "proposal {c}"' for c in candidates]
    for k, (ranking, weight) in enumerate(ballots, start=1):
        order = ">".join("=".join(sorted(level)) for level in ranking)
        lines.append(f"m{k} RANK {order} conf={weight}")
    report = tally_text("\n".join(lines))
    ours = {s.label: s.score for s in report.scores}
    expected = _votekit_scores(candidates, ballots)
    assert ours == pytest.approx(expected, abs=1e-9)


def test_borda_of_a_hand_checked_ballot_uses_the_mean_of_the_tied_places() -> None:
    # Five proposals, one ranker: B first (4 points), C and D share places 2-3 (mean of 3 and
    # 2), A fourth (1), E unranked (0). Values worked by hand from the rule, conf 0.5.
    report = tally_text("\n".join([*(f"PROPOSE {x}" for x in "ABCDE"), "m RANK B>C=D>A conf=0.5"]))
    assert {s.label: s.score for s in report.scores} == {
        "B": 2.0,
        "C": 1.25,
        "D": 1.25,
        "A": 0.5,
        "E": 0.0,
    }
