"""The fast tally against the straightforward one, on random transcripts.

``tests/oracle`` keeps the tally and concordance as first written: a table of ranks per
ranker, every pair of rankers correlated on its own, every order of up to seven items tried.
The fast code (doubled integer ranks, grouped rankers, a best path through subsets, a parser
shortcut for plain RANK lines) must give the same report. W and the mean correlations are
sums of floats taken in another order, so they are compared to 1e-9 (the report rounds
them to 9 and 6 digits); everything else must be identical.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rune_council.deliberation import concordance
from rune_council.deliberation.dsl import LineError, _plain_rank, parse, parse_move
from rune_council.deliberation.tally import tally
from tests.oracle import concordance_plain, tally_plain

LABELS = [f"p{i}" for i in range(1, 10)]


@st.composite
def ranking(draw: Any, items: list[str], complete: bool = False) -> list[list[str]]:
    order = draw(st.permutations(items))
    keep = len(order) if complete else draw(st.integers(min_value=0, max_value=len(order)))
    levels: list[list[str]] = []
    for label in order[:keep]:
        if levels and draw(st.integers(min_value=0, max_value=3)) == 0:
            levels[-1].append(label)
        else:
            levels.append([label])
    return levels


def _line(who: str, levels: list[list[str]], conf: str) -> str:
    ballot = ">".join("=".join(level) for level in levels)
    return f"{who} RANK {ballot}{conf}"


@st.composite
def transcripts(draw: Any) -> str:
    n = draw(st.integers(min_value=1, max_value=9))
    labels = LABELS[:n]
    declared = draw(st.booleans())
    lines = [f'PROPOSE {p} "proposal {p}"' for p in labels] if declared else []
    members = draw(st.integers(min_value=1, max_value=9))
    own = draw(st.booleans())
    if own:
        for k in range(members):
            if draw(st.integers(min_value=0, max_value=4)):
                lines.append(f"@own m{k} {labels[(k * 7 + 3) % n]}")
    if draw(st.booleans()):
        pruned = draw(st.sampled_from(labels))
        lines.append(f'REQUIRE MUST-NOT -> {pruned} ev=policy.md:1 "not allowed"')
    for _ in range(draw(st.integers(min_value=0, max_value=14))):
        k = draw(st.integers(min_value=0, max_value=members - 1))
        mine = {labels[(k * 7 + 3) % n]} if own else set()
        pool = [p for p in labels if p not in mine or draw(st.integers(0, 9)) == 0]
        levels = draw(ranking(pool)) or [[pool[0]]] if pool else [[labels[0]]]
        conf = draw(st.sampled_from(["", " conf=0.5", " conf=1", " conf=0.25", " conf=0.9"]))
        lines.append(_line(f"m{k}", levels, conf))
    return "\n".join(lines) + "\n"


def _without_floats(report: Any) -> tuple[dict[str, Any], list[float | None], float | None]:
    data = report.model_dump()
    means = [r.pop("mean_spearman") for r in data["rankers"]]
    w = data["consensus"].pop("w")
    return data, means, w


def _close(a: float | None, b: float | None, tol: float) -> bool:
    return (a is None) == (b is None) and (a is None or abs(a - b) <= tol)  # type: ignore[operator]


@settings(max_examples=300, deadline=None)
@given(transcripts())
def test_the_fast_tally_reports_what_the_plain_one_does(text: str) -> None:
    parsed = parse(text)
    fast, plain = tally(parsed), tally_plain.tally(parsed)
    fast_data, fast_means, fast_w = _without_floats(fast)
    plain_data, plain_means, plain_w = _without_floats(plain)
    assert _close(fast_w, plain_w, 2e-9), (fast_w, plain_w)
    assert all(_close(a, b, 2e-6) for a, b in zip(fast_means, plain_means, strict=True))
    assert fast_data == plain_data


@st.composite
def incomplete_designs(draw: Any) -> tuple[list[list[list[str]]], list[list[str]], list[str]]:
    n = draw(st.integers(min_value=2, max_value=9))
    items = LABELS[:n]
    m = draw(st.integers(min_value=2, max_value=10))
    ballots, seen = [], []
    for _ in range(m):
        subset = [x for x in items if draw(st.integers(min_value=0, max_value=3))]
        seen.append(subset)
        ballots.append(draw(ranking(subset)) if subset else [])
    return ballots, seen, items


@settings(max_examples=300, deadline=None)
@given(incomplete_designs())
def test_incomplete_concordance_matches_every_pair_and_every_order(case: Any) -> None:
    ballots, seen, items = case
    fast_w = concordance.incomplete_w(ballots, seen, items)
    plain_w = concordance_plain.incomplete_w(ballots, seen, items)
    assert _close(fast_w, plain_w, 1e-12), (fast_w, plain_w)
    fast = concordance.incomplete_mean_spearman(ballots, seen)
    plain = concordance_plain.incomplete_mean_spearman(ballots, seen)
    assert all(_close(a, b, 1e-12) for a, b in zip(fast, plain, strict=True)), (fast, plain)


@st.composite
def complete_designs(draw: Any) -> tuple[list[list[list[str]]], list[str]]:
    n = draw(st.integers(min_value=1, max_value=9))
    items = LABELS[:n]
    m = draw(st.integers(min_value=0, max_value=12))
    return [draw(ranking(items)) for _ in range(m)], items


@settings(max_examples=300, deadline=None)
@given(complete_designs())
def test_w_and_mean_correlations_match_the_tables(case: Any) -> None:
    ballots, items = case
    assert _close(
        concordance.kendall_w(ballots, items),
        concordance_plain.kendall_w(ballots, items),
        1e-12,
    )
    tables = [concordance_plain.ranks(b, items) for b in ballots]
    plain = concordance_plain.mean_spearman(tables, items)
    fast = concordance.mean_spearman(ballots, items)
    assert all(_close(a, b, 1e-12) for a, b in zip(fast, plain, strict=True)), (fast, plain)


@settings(max_examples=300, deadline=None)
@given(complete_designs(), st.booleans())
def test_tie_columns_count_the_classes_the_places_do(case: Any, partial: bool) -> None:
    # Whole rank vectors laid out by bytes.maketrans, summed by column, against each
    # place added one by one; ballots may leave items out (they share the rest rank).
    ballots, items = case
    if partial:
        ballots = [b[: len(b) // 2 + 1] for b in ballots]
    index = {x: j for j, x in enumerate(items)}
    rows = [concordance.place(b, index, len(items), small=True) for b in ballots]
    rows = [r for r in rows if r.items]
    columns = concordance.TieColumns(len(items))
    for row in rows:
        columns.add(row)
    assert columns.classes() == concordance.tie_classes(rows, len(items))


@settings(max_examples=300, deadline=None)
@given(st.lists(ranking([*LABELS[:6], "p40", "A"]), min_size=1, max_size=8))
def test_shared_level_numbers_place_a_ballot_as_its_labels_do(ballots: Any) -> None:
    # The tally reads each level tuple's numbers once across its ballots; labels outside
    # the items in play are left out as when each label is looked up.
    items = LABELS[:6]
    index = {x: j for j, x in enumerate(items)}
    shared: dict[Any, bytes] = {}
    for ballot in ballots:
        levels = tuple(tuple(level) for level in ballot)
        by_label = concordance.place(levels, index, len(items), small=True)
        assert concordance.place(levels, index, len(items), small=True, levels=shared) == by_label


def test_a_refused_level_is_refused_on_every_line() -> None:
    # The shortcut keeps only the level texts it accepted: a level it refused once is
    # read by the full parser each time, with the full parser's reason.
    lines = [
        "m1 RANK p1>p0",
        "m2 RANK p1>p0",
        "m3 RANK p2=p2>p1",
        "m4 RANK p1>p2=p2",
        "m5 RANK p1>p2",
    ]
    parsed = parse("\n".join(lines))
    reasons = []
    for k, line in enumerate(lines[:4], start=1):
        with pytest.raises(LineError) as caught:
            parse_move(k, line, None)
        reasons.append(str(caught.value))
    assert [(d.line, d.reason) for d in parsed.dropped] == list(enumerate(reasons, start=1))
    assert [m.speaker for m in parsed.moves] == ["m5"]


PIECES = st.sampled_from(
    [
        "m1",
        "m1:",
        "m1::",
        "RANK",
        "RANK:",
        "MUST",
        "p1",
        "p2",
        "p10",
        "A",
        "B",
        "AB",
        "#a-b",
        "#",
        ">",
        "=",
        ">>",
        "p0",
        " ",
        "\t",
        "  ",
        "conf=0.5",
        "conf=1",
        "conf=1.5",
        "conf=0",
        "conf=.5",
        "conf=1.0",
        'conf="0.5"',
        "note=x",
        "->",
        "-> p1",
        '"note"',
        "# c",
        "é",
        "x" * 64,
        "a.b-c_d",
    ]
)


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(PIECES, min_size=1, max_size=8).map("".join),
    st.sampled_from([None, "rank", "vote", "propose"]),
)
def test_the_plain_rank_shortcut_reads_lines_as_the_full_parser_does(
    line: str, phase: str | None
) -> None:
    text = line.strip()
    if not text:
        return
    quick = _plain_rank(7, text, phase, {})
    if quick is None:
        return
    assert quick == parse_move(7, text, phase)


@pytest.mark.parametrize(
    "line",
    [
        "m1 RANK p1>p2=p3 conf=0.5",
        "m1: RANK A>B",
        "RANK p2>p1",
        "m-1.x RANK #a-b=#c>p3 conf=1",
        "m1 RANK p1>p2\tconf=0.75",
    ],
)
def test_plain_rank_lines_take_the_shortcut(line: str) -> None:
    quick = _plain_rank(3, line, "rank", {})
    assert quick is not None and quick == parse_move(3, line, "rank")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("m1 RANK p1>p1", "twice"),
        ("m1 RANK p1>p2 conf=1.5", "outside 0..1"),
        ("RANK RANK p1", "exactly one ballot"),
        ("m1 RANK p1>p2 # a comment", ""),
        ("m1 RANK p1 > p2", "exactly one ballot"),
    ],
)
def test_lines_the_shortcut_leaves_to_the_full_parser(line: str, why: str) -> None:
    assert _plain_rank(3, line, "rank", {}) is None
    if why:
        with pytest.raises(LineError, match=why):
            parse_move(3, line, "rank")


def test_a_long_transcript_shares_one_tuple_per_level() -> None:
    text = "\n".join(f"m{i} RANK p1>p2=p3>p4" for i in range(50))
    moves = parse(text).moves
    assert len(moves) == 50
    assert all(m.ballot[1] is moves[0].ballot[1] for m in moves)


def _cli_tally(path: Any, *extra: str, code: int = 0) -> str:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "tally", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    return done.stdout


def test_the_cli_prints_a_long_tally_exactly_as_rendered(tmp_path: Any) -> None:
    # 2,500 rankers: the text is printed in chunks of 1,000 lines and the JSON document with
    # each ranker's detail spliced in as it is made; both must be the whole report's own
    # rendering, byte for byte.
    import random

    from rune_council.render import render_tally

    rnd = random.Random(3)
    lines = [f'PROPOSE {p} "proposal {p}"' for p in LABELS]
    for k in range(2500):
        chosen = rnd.sample(LABELS, rnd.randint(1, len(LABELS)))
        lines.append(f"m{k} RANK {'>'.join(chosen)} conf={rnd.choice(['0.5', '1'])}")
    text = "\n".join(lines) + "\n"
    path = tmp_path / "ranks.txt"
    path.write_text(text)
    report = tally(parse(text))

    assert _cli_tally(path) == render_tally(report, str(path)) + "\n"
    assert _cli_tally(path, "--json") == report.model_dump_json(indent=2) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        # Every section of the report around the rankers: pruned, blocked, dropped (superseded
        # and unknown), votes, a synth with open questions, an escalated REQUIRE, dissent.
        "\n".join(
            [
                '@phase propose\nPROPOSE p1 "one"\nPROPOSE p2 "two \\"quoted\\""',
                'PROPOSE p3 "three"',
                'PROPOSE p4 "four"\nREQUIRE MUST-NOT -> p4 ev=policy.md:3 "never"',
                'REQUIRE SHOULD -> p1 "uncited"\nc CRITIQUE MUST -> p2 "no rollback"',
                "@phase rank\na RANK p1>p2>p3>p4 conf=0.9\nb RANK p1>p2=p3\nc RANK p1>p3>p2",
                "d RANK p3>p2>p1 conf=0.5\na RANK p2>p1>p3\ne RANK p9>p1",
                "@phase vote\na VOTE -> p1 yes\nb VOTE -> p1 no\nb VOTE -> p1 yes\nc ABSTAIN -> p1",
                '@phase synth\nSYNTH "take p1" open=["who signs off?", "when"]',
            ]
        ),
        # No ranker at all: the document has an empty list where the details would be.
        'PROPOSE p1 "one"\nPROPOSE p2 "two"\na CLAIM -> p1 ev=x.md:1 "fine"',
        # Only rankers whose every choice was pruned.
        'PROPOSE p1 "one"\nREQUIRE MUST-NOT -> p1 ev=p.md:1 "no"\na RANK p1\nb RANK p1',
    ],
)
def test_the_cli_json_is_the_whole_reports_document(tmp_path: Any, text: str) -> None:
    from rune_council.render import render_tally

    path = tmp_path / "t.dsl"
    path.write_text(text)
    report = tally(parse(text))
    code = 0 if report.valid else 1
    assert _cli_tally(path, "--json", code=code) == report.model_dump_json(indent=2) + "\n"
    assert _cli_tally(path, code=code) == render_tally(report, str(path)) + "\n"


@given(
    st.lists(
        st.lists(st.sampled_from(LABELS[:4]), min_size=1, max_size=3, unique=True),
        min_size=1,
        max_size=5,
    )
)
def test_the_shortcut_refuses_a_label_named_in_two_levels_as_the_parser_does(
    levels: list[list[str]],
) -> None:
    # Labels are drawn from four, so many ballots name one in two levels (tied or not).
    line = "m1 RANK " + ">".join("=".join(level) for level in levels)
    shared: dict[str, tuple[str, ...]] = {}
    _plain_rank(1, line, "rank", shared)  # the second reading finds every level shared
    quick = _plain_rank(2, line, "rank", shared)
    try:
        full = parse_move(2, line, "rank")
    except LineError:
        assert quick is None
    else:
        assert quick == full
