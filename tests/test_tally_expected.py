"""`rune council tally` prints what it printed before it was made fast, byte for byte.

``tests/fixtures/tally_expected/mixed.dsl`` was tallied by revision 7ca697a (before the
counted ballots were printed straight from their places) into ``mixed.txt`` and
``mixed.json``; the command must keep printing exactly that, as must the in-process
renderings of the whole report.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally, tally_parts
from rune_council.render import render_tally, tally_json_chunks, tally_lines

FIXTURES = Path(__file__).parent / "fixtures" / "tally_expected"


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "tally", *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_tally_prints_what_the_earlier_revision_printed() -> None:
    assert _cli("mixed.dsl") == (FIXTURES / "mixed.txt").read_text()
    assert _cli("mixed.dsl", "--json") == (FIXTURES / "mixed.json").read_text()


def test_the_whole_report_renders_as_the_committed_output() -> None:
    report = tally(parse((FIXTURES / "mixed.dsl").read_text()))
    assert render_tally(report, "mixed.dsl") + "\n" == (FIXTURES / "mixed.txt").read_text()
    assert report.model_dump_json(indent=2) + "\n" == (FIXTURES / "mixed.json").read_text()


CONFS = ["1", "0.5", "0.8", "0", "-0", "0.00003", "0.0001", "0.123456789", "1e-9", "0.7"]


@pytest.mark.parametrize("seed", range(4))
def test_counted_ballots_print_as_their_details_do(seed: int) -> None:
    # Ties, short ballots, rankers without a name, confs whose points the serializer writes
    # unlike repr (below 1e-4) and a negative zero: the text and the JSON written from the
    # counted ballots are the report's own rendering.
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, 13)]
    lines = [f'PROPOSE {p} "proposal {p}"' for p in labels]
    for k in range(300):
        chosen = rnd.sample(labels, rnd.randint(1, len(labels)))
        ballot = "".join(
            (("=" if rnd.random() < 0.2 else ">") if i else "") + x for i, x in enumerate(chosen)
        )
        who = f"m{k} " if rnd.random() < 0.9 else ""
        conf = f" conf={rnd.choice(CONFS)}" if rnd.random() < 0.9 else ""
        lines.append(f"{who}RANK {ballot}{conf}")
    text = "\n".join(lines) + "\n"
    whole = tally(parse(text))
    parts = tally_parts(parse(text))

    assert "\n".join(tally_lines(parts.report, "t", parts)) == render_tally(whole, "t")
    written = b"".join(tally_json_chunks(parts.report, parts, per_chunk=7))
    assert written.decode() == whole.model_dump_json(indent=2)


def test_means_near_zero_are_written_as_the_serializer_writes_them() -> None:
    # A mean correlation near zero is common in a long tally; below 1e-4 the serializer
    # writes it unlike repr (0.000057, 1e-6). The JSON written from the counted ballots
    # must be the details' own serialization whatever the mean.
    lines = [*(f"PROPOSE p{i}" for i in (1, 2, 3)), "@phase rank"]
    lines += [f"m{k} RANK p{k % 3 + 1}>p{(k + 1) % 3 + 1}" for k in range(6)]
    parts = tally_parts(parse("\n".join(lines) + "\n"))
    means = [round(k * 1e-6, 6) for k in range(-120, 121)]
    means += [1e-7, -3.3e-5, 9.99999e-5, 1e-4, -0.0, 0.5, None]
    for start in range(0, len(means), len(parts.counted)):
        for counted, mean in zip(parts.counted, means[start:], strict=False):
            counted.mean = mean
        written = b"".join(tally_json_chunks(parts.report, parts))
        assert written.decode() == parts.whole().model_dump_json(indent=2)
