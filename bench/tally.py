"""The tally's arithmetic at scale; prints the figures.

    python bench/tally.py            # about a minute
    python bench/tally.py --quick    # skips the 100,000-line process

Ballots are random but seeded (the same transcript every run): each ranker orders a random
subset of the proposals with occasional ties and a confidence.

1. 10,000 RANK moves over 50 proposals, in-process: parsing the transcript, the whole tally
   (Borda x conf, pruning, W, Spearman for dissent), W alone, and parse + tally together
   (target 0.5 s). Median and minimum of the repeats.
2. 100,000 RANK lines (12.6 MB) through a whole ``rune council tally FILE`` process, as text
   and as ``--json`` (about 40 MB and 90 MB printed, to /dev/null): wall time and peak memory
   (``wait4``), the printed report included. Target: 5 s and 300 MB.
3. The rank stage's design (``@own``: every ranker's own proposal is unseen, so the rankings
   are incomplete) with 50 proposals and 250 to 2,000 rankers: the concordance (W for
   incomplete rankings and every ranker's mean Spearman) and the whole tally. Doubling the
   rankers should about double the time (target: 1,000 rankers within 1 s).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rune_council.deliberation import concordance
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally

RANKERS = 10_000
PROPOSALS = 50
REPEATS = 3


def transcript(seed: int = 7, rankers: int = RANKERS) -> str:
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    lines = ["@phase propose", *(f'PROPOSE {p} "proposal {p}"' for p in labels), "@phase rank"]
    for r in range(rankers):
        chosen = rnd.sample(labels, rnd.randint(5, PROPOSALS))
        levels: list[list[str]] = []
        for label in chosen:
            if levels and rnd.random() < 0.1:
                levels[-1].append(label)
            else:
                levels.append([label])
        ballot = ">".join("=".join(level) for level in levels)
        lines.append(f"m{r} RANK {ballot} conf={rnd.choice([0.5, 0.7, 0.9, 1.0])}")
    return "\n".join(lines) + "\n"


def own_transcript(rankers: int, seed: int = 11) -> str:
    """Ranker r owns proposal r mod 50 and ranks all the others (no ties)."""
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    lines = ["@phase propose", *(f'PROPOSE {p} "proposal {p}"' for p in labels), "@phase rank"]
    lines += [f"@own m{r} {labels[r % PROPOSALS]}" for r in range(rankers)]
    for r in range(rankers):
        others = [p for p in labels if p != labels[r % PROPOSALS]]
        rnd.shuffle(others)
        lines.append(f"m{r} RANK {'>'.join(others)} conf=0.8")
    return "\n".join(lines) + "\n"


def timed(fn: object, repeats: int = REPEATS) -> float:
    return figures(fn, repeats)[0]


def figures(fn: object, repeats: int = REPEATS) -> tuple[float, float]:
    """Median and minimum wall time of ``repeats`` calls, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


def process(args: list[str]) -> tuple[float, int, int]:
    """Wall time, peak memory (MB) and exit code of ``python -m rune_council.cli ...``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", *args],
        stdout=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[1],
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip the 100,000-line process")
    args = parser.parse_args()

    text = transcript()
    parsed = parse(text)
    report = tally(parsed)
    ballots = [[list(level) for level in m.ballot] for m in parsed.moves if m.verb == "RANK"]
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    print(
        f"1. {RANKERS} RANK moves over {PROPOSALS} proposals, {len(text) / 1e6:.1f} MB, in-process"
    )
    rows = [
        ("parse", lambda: parse(text)),
        ("tally (all of it)", lambda: tally(parsed)),
        ("Kendall's W alone", lambda: concordance.kendall_w(ballots, labels)),
        ("parse + tally", lambda: tally(parse(text))),
    ]
    for name, fn in rows:
        median, best = figures(fn, 5)
        print(f"   {name:<20} median {median * 1000:6.0f} ms, min {best * 1000:6.0f} ms")
    print(
        f"   result: W = {report.consensus.w:.6f} ({report.consensus.label}), "
        f"winner {report.winner}, {len(report.dissenters)} dissenting ranker(s); target 500 ms"
    )

    if not args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            big = Path(tmp) / "ranks.txt"
            big.write_text(transcript(rankers=100_000))
            size = big.stat().st_size / 1e6
            print(f"2. 100000 RANK lines ({size:.1f} MB), a whole `rune council tally` process")
            for extra in ([], ["--json"]):
                wall, peak, code = process(["council", "tally", str(big), *extra])
                shown = " ".join(["rune council tally FILE", *extra])
                print(f"   {shown:<30} {wall:5.2f} s, peak {peak} MB, exit {code}")
            print("   target: 5 s and 300 MB")

    print(f"3. @own (incomplete rankings), {PROPOSALS} proposals")
    for count in (250, 500, 1000, 2000):
        own = parse(own_transcript(count))
        full = tally(own)
        kept = [r for r in full.rankers]
        ballots_ = [[level.split("=") for level in r.ballot.split(">")] for r in kept]
        seen = [[p for p in labels if p not in own.own.get(r.ranker, set())] for r in kept]

        def concord(b: list[list[list[str]]] = ballots_, s: list[list[str]] = seen) -> None:
            concordance.incomplete_w(b, s, labels)
            concordance.incomplete_mean_spearman(b, s)

        conc = figures(concord, 1)[0]
        whole = figures(lambda o=own: tally(o), 1)[0]
        print(
            f"   {count:>5} rankers: concordance {conc:6.2f} s, whole tally {whole:6.2f} s"
            f" (W = {full.consensus.w})"
        )
    print("   target: 1,000 rankers within 1 s; doubling the rankers about doubles the time")


if __name__ == "__main__":
    main()
