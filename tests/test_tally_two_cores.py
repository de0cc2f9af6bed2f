"""A long tally counted and printed on two cores is the one-process tally, byte for byte.

``rune council tally`` reads and counts the second half of a long transcript in a forked
copy of itself and splices its rankers into the report. What reaches stdout must be what
one process prints (each score, W and correlation to the last digit, every refused line,
the printing filters), for text and JSON; a transcript the halves cannot count apart is
tallied in one process, and a copy that fails leaves the output whole.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.cli.tally_two import TWO_CORES_FROM

LABELS = [f"p{i}" for i in range(1, 10)]

# Runs the CLI on argv[2:] and tells on stderr whether the two-core path printed the report;
# argv[1] == "one" keeps it in one process.
RUN = """
import runpy, sys
from rune_council.cli import tally_two
how, sys.argv = sys.argv[1], ["rune", *sys.argv[2:]]
if how == "one":
    tally_two.TWO_CORES_FROM = 10**12
if how == "copy dies":  # the copy goes as it starts to print, after the halves are counted
    def die(*args):
        import os
        os._exit(3)
    tally_two._placeholder = die
real = tally_two.tallied_on_two_cores
def spy(*args):
    valid = real(*args)
    sys.stderr.write(f"two cores: {valid is not None}\\n")
    return valid
tally_two.tallied_on_two_cores = spy
runpy.run_module("rune_council.cli", run_name="__main__")
"""


def _ballot(rnd: random.Random, labels: list[str]) -> str:
    chosen = rnd.sample(labels, rnd.randint(1, len(labels)))
    levels: list[list[str]] = []
    for label in chosen:
        if levels and rnd.random() < 0.2:
            levels[-1].append(label)  # a tie
        else:
            levels.append([label])
    return ">".join("=".join(level) for level in levels)


def _transcript(rankers: int, *, seed: int = 17, late: list[str] | None = None) -> str:
    """Every move but RANK comes first; the ballots hold the cases the halves must agree on:
    refused lines, unnamed rankers, a ranker who ranks again, confs printed unlike repr."""
    rnd = random.Random(seed)
    lines = [
        "@phase propose",
        *(f'PROPOSE {p} "proposal {p}"' for p in LABELS[:-2]),
        # Text the printing filters act on, in the report's head and end.
        'PROPOSE p8 "see http://user:secret@example.org/x \\u001b[2J now"',
        'PROPOSE p9 "gone"',
        'REQUIRE MUST-NOT -> p9 ev=policy.md:3 "never \x1b]0;title"',
        'c CRITIQUE MUST -> p2 "no rollback"',
        "@phase vote",
        "a VOTE -> p1 yes",
        "@phase synth",
        'SYNTH "take p1" open=["when"]',
        "@phase rank",
    ]
    confs = ["0.5", "0.9", "1", "0.7", "0.00003", "0", "-0", "0.123456789"]
    for k in range(rankers):
        ballot = _ballot(rnd, LABELS)
        conf = rnd.choice(confs)
        roll = rnd.random()
        if roll < 0.01:
            lines.append(f"RANK {ballot} conf={conf}")  # no name: line-N
        elif roll < 0.015:
            lines.append(f"m{k} RANK {ballot}>p42")  # nobody proposed p42
        elif roll < 0.02:
            lines.append(f"m{k} RANK {ballot} oops")  # refused by the parser
        elif roll < 0.025:
            lines.append(f"m{k - 3} RANK {ballot} conf={conf}")  # ranks again, nearby
        else:
            lines.append(f"m{k} RANK {ballot} conf={conf}")
    lines += late or []
    return "\n".join(lines) + "\n"


def _run(how: str, path: Path, *extra: str, limit: bool = False) -> tuple[bytes, str]:
    code = RUN
    if limit:  # files may not grow past 64 kB: the copy's spool fails, stdout does not
        code = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))\n" + RUN
    done = subprocess.run(
        [sys.executable, "-c", code, how, "council", "tally", str(path), *extra],
        capture_output=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout, done.stderr.decode()


def _file(tmp_path: Path, text: str) -> Path:
    # A name with an escape in it: the report's first line holds it.
    path = tmp_path / "ranks \x1b[31mred.dsl"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def long_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _file(tmp_path_factory.mktemp("two"), _transcript(TWO_CORES_FROM + 3_321))


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_two_cores_print_what_one_process_prints(long_file: Path, extra: list[str]) -> None:
    one, said = _run("one", long_file, *extra)
    assert "two cores: False" in said
    two, said = _run("two", long_file, *extra)
    assert "two cores: True" in said
    assert len(one) > 1_000_000
    assert two == one
    # The filters did act: no escape reached the output, the credential is masked.
    assert b"\x1b" not in one and b"secret" not in one
    assert b"superseded by" in one and b"nobody proposed" in one
    assert (b'"dissenting": true' if extra else b"DISSENTING") in one


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_copy_that_cannot_print_leaves_the_output_whole(
    long_file: Path, extra: list[str]
) -> None:
    one, _ = _run("one", long_file, *extra)
    two, said = _run("two", long_file, *extra, limit=True)
    assert "two cores: True" in said
    assert two == one


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_copy_that_dies_before_printing_leaves_the_output_whole(
    long_file: Path, extra: list[str]
) -> None:
    # Its half is counted and printed by this process, from the part of the text it kept.
    one, _ = _run("one", long_file, *extra)
    two, said = _run("copy dies", long_file, *extra)
    assert "two cores: True" in said
    assert two == one


LATE = {
    # A ranker of the first half ranks again in the second: its first ballot is superseded.
    "ranks again": (["m5 RANK p1>p2"], False),
    # Moves that change what the first half counts, after it.
    "late proposal": (['PROPOSE p10 "late"', "m1 RANK p10>p1"], False),
    "late policy": (['REQUIRE MUST-NOT -> p1 ev=x.md:1 "late"'], False),
    "own answers": (["@own m7 p3"], False),
    # A RANK outside the rank phase is refused wherever it is: the halves still count apart.
    "another phase": (["@phase vote", "m7 RANK p1>p2", "x RANK p1"], True),
}


@pytest.mark.parametrize("case", sorted(LATE))
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_lines_after_the_split_that_change_the_first_half(
    tmp_path: Path, case: str, extra: list[str]
) -> None:
    late, apart = LATE[case]
    path = _file(tmp_path, _transcript(TWO_CORES_FROM + 10, seed=3, late=late))
    one, _ = _run("one", path, *extra)
    two, said = _run("two", path, *extra)
    assert f"two cores: {apart}" in said
    assert two == one


def test_everyone_below_zero_is_said_as_the_one_process_tally_says_it(tmp_path: Path) -> None:
    # Three orders in a cycle, equally often: every ranker disagrees with the others, and
    # the consensus note names the cycle.
    orders = ["p1>p2>p3", "p2>p3>p1", "p3>p1>p2"]
    lines = [*(f"PROPOSE {p}" for p in ("p1", "p2", "p3")), "@phase rank"]
    lines += [f"m{k} RANK {orders[k % 3]}" for k in range(3 * (TWO_CORES_FROM // 3 + 1))]
    path = _file(tmp_path, "\n".join(lines) + "\n")
    for extra in ([], ["--json"]):
        one, _ = _run("one", path, *extra)
        two, said = _run("two", path, *extra)
        assert "two cores: False" in said
        assert two == one
    assert b"the rankings form a cycle" in one  # (the JSON's consensus note)


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_many_proposals_count_apart_as_in_one_process(tmp_path: Path, extra: list[str]) -> None:
    # 130 proposals: the ranks no longer fit in a byte, and the tie classes are counted
    # place by place; short ballots leave most proposals unranked.
    rnd = random.Random(5)
    labels = [f"p{i}" for i in range(1, 131)]
    lines = [*(f"PROPOSE {p}" for p in labels), "@phase rank"]
    for k in range(TWO_CORES_FROM + 500):
        ballot = _ballot(rnd, rnd.sample(labels, 8))
        lines.append(f"m{k} RANK {ballot} conf={rnd.choice(['0.3', '1'])}")
    path = _file(tmp_path, "\n".join(lines) + "\n")
    one, _ = _run("one", path, *extra)
    two, said = _run("two", path, *extra)
    assert "two cores: True" in said
    assert two == one


TEXTS = {
    # Lines ended by "\r\n": split, and numbered, as str.splitlines numbers them.
    "crlf": (lambda text: text.replace("\n", "\r\n"), True),
    # A line break only str.splitlines knows, in the first half: read in one piece.
    "line separator": (lambda text: text.replace('p1"\n', 'p1"\u2028\n', 1), False),
    "lone carriage return": (lambda text: text.replace('p1"\n', 'p1"\r \n', 1), False),
    # "@phase" in a note is no directive; a real one in the first half is.
    "phase in a note": (
        lambda text: text.replace('"proposal p1"', '"@phase vote"', 1),
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(TEXTS))
def test_how_the_text_is_split_into_halves(tmp_path: Path, case: str) -> None:
    change, apart = TEXTS[case]
    path = tmp_path / "ranks.dsl"
    path.write_bytes(change(_transcript(TWO_CORES_FROM + 10, seed=9)).encode())
    one, _ = _run("one", path)
    two, said = _run("two", path)
    assert f"two cores: {apart}" in said
    assert two == one
    assert b"line 20020" in one  # (line numbers as the whole file numbers them)
