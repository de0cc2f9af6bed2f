"""A long report printed on two cores is the one-process report, byte for byte.

``rune council tally`` renders the second half of a long report's rankers in a forked copy
of itself; what reaches stdout must be what the one-process path prints, through the same
filters, for text and JSON alike, and a copy that fails must leave the output whole.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.cli.tally_cmd import TWO_CORES_FROM

LABELS = [f"p{i}" for i in range(1, 9)]

# Prints FILE's tally the way argv[2] says: "one" (one process) or "two" (the forked path,
# which must be taken), as text or with argv[3] == "--json".
PRINTER = """
import gc, sys
from rune_council.cli import tally_cmd
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally_parts
gc.disable()
path, how, as_json = sys.argv[1], sys.argv[2], sys.argv[3:] == ["--json"]
parts = tally_parts(parse(open(path, encoding="utf-8").read()))
if how == "one":
    tally_cmd._print(parts, path, as_json)
elif not tally_cmd._printed_on_two_cores(parts, path, as_json):
    sys.exit("the two-core path was not taken")
"""


def _transcript(rankers: int) -> str:
    rnd = random.Random(17)
    lines = [
        "@phase propose",
        *(f'PROPOSE {p} "proposal {p}"' for p in LABELS[:-2]),
        # Text the printing filters act on, in the part of the report after the rankers.
        'PROPOSE p7 "see http://user:secret@example.org/x \\u001b[2J now"',
        'PROPOSE p8 "gone"',
        'REQUIRE MUST-NOT -> p8 ev=policy.md:3 "never"',
        'c CRITIQUE MUST -> p2 "no rollback"',
        "@phase rank",
        "x RANK p9>p1",
    ]
    for k in range(rankers):
        chosen = rnd.sample(LABELS, rnd.randint(1, len(LABELS)))
        levels: list[list[str]] = []
        for label in chosen:
            if levels and rnd.random() < 0.15:
                levels[-1].append(label)  # a tie
            else:
                levels.append([label])
        ballot = ">".join("=".join(level) for level in levels)
        # Some rankers rank twice: the earlier ballot is dropped as superseded.
        lines.append(f"m{k % (rankers - 50)} RANK {ballot} conf={rnd.choice(['0.5', '0.9', '1'])}")
    lines += ["@phase vote", "a VOTE -> p1 yes", "@phase synth", 'SYNTH "take p1" open=["when"]']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def long_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A name with an escape in it: the header line holds it.
    path = tmp_path_factory.mktemp("two") / "ranks \x1b[31mred.dsl"
    path.write_text(_transcript(TWO_CORES_FROM + 3_321))
    return path


def _run(args: list[str], **kw: object) -> bytes:
    done = subprocess.run(args, capture_output=True, timeout=300, **kw)  # type: ignore[call-overload]
    assert done.returncode in (0, 1), done.stderr
    return done.stdout  # type: ignore[no-any-return]


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_two_cores_print_what_one_process_prints(long_file: Path, extra: list[str]) -> None:
    one = _run([sys.executable, "-c", PRINTER, str(long_file), "one", *extra])
    two = _run([sys.executable, "-c", PRINTER, str(long_file), "two", *extra])
    cli = _run(
        [sys.executable, "-m", "rune_council.cli", "council", "tally", str(long_file), *extra]
    )
    assert len(one) > 1_000_000
    assert two == one
    assert cli == one
    # The filters did act: no escape reached the output, the credential is masked.
    assert b"\x1b" not in one and b"secret" not in one


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_copy_that_cannot_write_leaves_the_output_whole(
    long_file: Path, extra: list[str]
) -> None:
    # Files may not grow past 64 kB: the copy's spool fails, stdout (a pipe) does not, and
    # the first process renders the copy's half itself.
    limited = (
        "import resource, runpy, sys; "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)); "
        "sys.argv = ['rune', *sys.argv[1:]]; "
        "runpy.run_module('rune_council.cli', run_name='__main__')"
    )
    one = _run([sys.executable, "-c", PRINTER, str(long_file), "one", *extra])
    cli = _run([sys.executable, "-c", limited, "council", "tally", str(long_file), *extra])
    assert cli == one
