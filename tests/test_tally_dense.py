"""A rank stage where every member ranks nearly every answer but its own (``@own``): the
concordance is taken over dense vectors, group pair by group pair, when that is less work
than the sparse way, and both ways must give the oracle's figures.

``own_dense.dsl`` (30 answers, 120 members, some owning two, ties and short ballots) was
tallied by revision 7ca697a into ``own_dense.txt`` and ``own_dense.json``; the command must
keep printing exactly that.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from rune_council.deliberation import concordance
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally
from tests.oracle import concordance_plain
from tests.test_tally_sparse import _close, sparse_transcript, unseen_designs

FIXTURES = Path(__file__).parent / "fixtures" / "tally_expected"


def test_a_dense_own_rank_stage_prints_what_the_earlier_revision_printed() -> None:
    for extra, expected in (([], "own_dense.txt"), (["--json"], "own_dense.json")):
        done = subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", "tally", "own_dense.dsl", *extra],
            cwd=FIXTURES,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == (FIXTURES / expected).read_text()


def test_the_dense_design_takes_the_dense_way_and_the_sparse_one_does_not() -> None:
    chosen: list[bool] = []
    choose = concordance._dense_is_cheaper

    def spy(*args: Any) -> bool:
        chosen.append(choose(*args))
        return chosen[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(concordance, "_dense_is_cheaper", spy)
        tally(parse((FIXTURES / "own_dense.dsl").read_text()))
        tally(parse(sparse_transcript(300, ballot=5)))
    assert chosen == [True, False]


@pytest.mark.parametrize("dense", [True, False])
@settings(max_examples=200, deadline=None)
@given(case=unseen_designs())
def test_either_way_the_unseen_means_match_the_oracle(dense: bool, case: Any) -> None:
    ballots, unseen, items = case
    seen = [[x for x in items if x not in u] for u in unseen]
    plain = concordance_plain.incomplete_mean_spearman(ballots, seen)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(concordance, "_dense_is_cheaper", lambda *_: dense)
        fast = concordance.incomplete_mean_spearman_unseen(ballots, unseen, items)
    assert all(_close(a, b, 1e-12) for a, b in zip(fast, plain, strict=True)), (fast, plain)
