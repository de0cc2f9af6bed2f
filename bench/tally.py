"""Tally and Kendall's W for 10,000 RANK moves over 50 proposals; prints the figures.

    python bench/tally.py

Ballots are random but seeded (the same transcript every run): each ranker orders a random
subset of the proposals with occasional ties and a confidence. Timed separately: parsing the
transcript, the whole tally (Borda x conf, pruning, W, Spearman for dissent), and W alone.
"""

from __future__ import annotations

import random
import statistics
import time

from rune_council.deliberation import concordance
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally

RANKERS = 10_000
PROPOSALS = 50
REPEATS = 3


def transcript(seed: int = 7) -> str:
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    lines = ["@phase propose", *(f'PROPOSE {p} "proposal {p}"' for p in labels), "@phase rank"]
    for r in range(RANKERS):
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


def timed(fn: object, repeats: int = REPEATS) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    text = transcript()
    parsed = parse(text)
    report = tally(parsed)
    ballots = [[list(level) for level in m.ballot] for m in parsed.moves if m.verb == "RANK"]
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    print(f"transcript: {RANKERS} RANK moves over {PROPOSALS} proposals, {len(text) / 1e6:.1f} MB")
    print(f"parse:             {timed(lambda: parse(text)) * 1000:8.0f} ms")
    print(f"tally (all of it): {timed(lambda: tally(parsed)) * 1000:8.0f} ms")
    print(
        f"Kendall's W alone: {timed(lambda: concordance.kendall_w(ballots, labels)) * 1000:8.0f} ms"
    )
    print(
        f"result: W = {report.consensus.w:.6f} ({report.consensus.label}), "
        f"winner {report.winner}, {len(report.dissenters)} dissenting ranker(s)"
    )


if __name__ == "__main__":
    main()
