"""Concordance as first written, kept as the oracle for the fast one (tests only).

How far a set of rankings agree: Kendall's W and Spearman's rho, no model involved.

Ballots are lists of levels, best first (``[["p2"], ["p1", "p3"]]``). Ranks are 1-based and
tied items share the mean of the places they span.

Two forms of W:

* ``kendall_w`` — the textbook coefficient with the tie correction,
  ``12 S / (m^2 (n^3 - n) - m * sum(t^3 - t))``. Every ranker ranks every item; an item a
  ranker left out takes the tied bottom places, so leaving things out is itself a statement.
* ``incomplete_w`` — for the rank stage, where a member never sees its own answer. Its own
  answer is missing by design, not placed last by choice, and putting it at the bottom would
  make perfect agreement look like W = 0.36 with five members. Each ranker's ranks are
  compared with what each item would expect at random, ``S = sum_j (R_j - E_j)^2``, and W is
  ``S`` over the largest ``S`` the same design and tie pattern could reach. For complete,
  untied rankings it is exactly the textbook W; for the balanced "everyone but yourself"
  design it is Durbin's W, ``12 S / (lambda^2 n (n^2 - 1))``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Literal

Ballot = Sequence[Sequence[str]]
EXACT_ORDER_LIMIT = 7  # above this many items, the best reference order is approximated


def label_for(w: float | None) -> Literal["high", "medium", "low"] | None:
    if w is None:
        return None
    if w >= 0.8:
        return "high"
    if w >= 0.5:
        return "medium"
    return "low"


def ranks(ballot: Ballot, items: Sequence[str]) -> dict[str, float]:
    """Mean ranks over ``items``; items missing from the ballot share the bottom places."""
    out: dict[str, float] = {}
    place = 0
    wanted = set(items)
    for level in ballot:
        members = [x for x in level if x in wanted]
        if not members:
            continue
        mean = place + (len(members) + 1) / 2
        for x in members:
            out[x] = mean
        place += len(members)
    rest = [x for x in items if x not in out]
    if rest:
        mean = place + (len(rest) + 1) / 2
        for x in rest:
            out[x] = mean
    return out


def tie_sizes(rank_of: Mapping[str, float]) -> list[int]:
    counts: dict[float, int] = {}
    for r in rank_of.values():
        counts[r] = counts.get(r, 0) + 1
    return [c for c in counts.values() if c > 1]


def kendall_w(ballots: Sequence[Ballot], items: Sequence[str]) -> float | None:
    """Tie-corrected Kendall's W; None when it is undefined (fewer than 2 of either)."""
    m, n = len(ballots), len(items)
    if m < 2 or n < 2:
        return None
    tables = [ranks(b, items) for b in ballots]
    sums = [sum(t[x] for t in tables) for x in items]
    mean = sum(sums) / n
    s = sum((r - mean) ** 2 for r in sums)
    ties = sum(t**3 - t for table in tables for t in tie_sizes(table))
    denominator = m * m * (n**3 - n) - m * ties
    if denominator <= 0:
        return None
    return 12 * s / denominator


def spearman(a: Mapping[str, float], b: Mapping[str, float], items: Sequence[str]) -> float | None:
    """Pearson correlation of two rank vectors (Spearman's rho with mean ranks for ties)."""
    if len(items) < 2:
        return None
    xs = [a[i] for i in items]
    ys = [b[i] for i in items]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def mean_spearman(
    tables: Sequence[Mapping[str, float]], items: Sequence[str]
) -> list[float | None]:
    """Each ranker's mean correlation with every other ranker (complete rankings).

    Each rank vector is centred and scaled to unit length, so a pair's correlation is a dot
    product and the sum over all the others is one dot product with the total: O(m n), not
    O(m^2 n). A ranker that ties everything has no correlation and is left out of the means.
    """
    units: list[list[float] | None] = []
    for table in tables:
        xs = [table[i] for i in items]
        mean = sum(xs) / len(xs) if xs else 0.0
        centred = [x - mean for x in xs]
        norm = math.sqrt(sum(c * c for c in centred))
        units.append([c / norm for c in centred] if len(items) >= 2 and norm > 0 else None)
    defined = [u for u in units if u is not None]
    total = [sum(col) for col in zip(*defined, strict=True)] if defined else []
    out: list[float | None] = []
    for u in units:
        if u is None or len(defined) < 2:
            out.append(None)
            continue
        # u . (total - u) = u . total - 1, averaged over the other defined rankers.
        out.append((sum(a * b for a, b in zip(u, total, strict=True)) - 1.0) / (len(defined) - 1))
    return out


# --------------------------------------------------------------------------- incomplete designs


def _shape(ballot: Ballot, seen: Sequence[str]) -> list[int]:
    """Level sizes of a ballot over the items its ranker saw (unranked ones tie at the bottom)."""
    wanted = set(seen)
    sizes = [n for level in ballot if (n := sum(1 for x in level if x in wanted))]
    rest = len(seen) - sum(sizes)
    if rest:
        sizes.append(rest)
    return sizes


def _fill(order: Sequence[str], seen: Sequence[str], sizes: Sequence[int]) -> dict[str, float]:
    """Ranks a ranker with this tie pattern would give if it agreed with ``order``."""
    mine = [x for x in order if x in set(seen)]
    out: dict[str, float] = {}
    place = 0
    for size in sizes:
        group = mine[place : place + size]
        mean = place + (size + 1) / 2
        for x in group:
            out[x] = mean
        place += size
    return out


def _dispersion(tables: Sequence[Mapping[str, float]], items: Sequence[str]) -> float:
    total = 0.0
    for x in items:
        observed = sum(t[x] for t in tables if x in t)
        expected = sum((len(t) + 1) / 2 for t in tables if x in t)
        total += (observed - expected) ** 2
    return total


def incomplete_w(
    ballots: Sequence[Ballot], seen: Sequence[Sequence[str]], items: Sequence[str]
) -> float | None:
    """W when ranker ``i`` only saw ``seen[i]``; None when nothing can be measured."""
    pairs = [(b, s) for b, s in zip(ballots, seen, strict=True) if len(s) >= 2]
    if len(pairs) < 2 or len(items) < 2:
        return None
    tables = [ranks(b, s) for b, s in pairs]
    shapes = [_shape(b, s) for b, s in pairs]
    s = _dispersion(tables, items)

    def reach(order: Sequence[str]) -> float:
        agreed = [_fill(order, sn, sh) for (_, sn), sh in zip(pairs, shapes, strict=True)]
        return _dispersion(agreed, items)

    if len(items) <= EXACT_ORDER_LIMIT:
        best = max(reach(order) for order in itertools.permutations(items))
    else:
        # The observed consensus (lowest mean rank first) as the reference order. Compared
        # exactly: as first written, float sums broke exact ties by rounding (9/14 as
        # 0.6428571428571429 for one item and ...428 for another), and the fast tally keeps
        # equal means in the items' order, as the rule says.
        def mean_rank(x: str) -> Fraction | float:
            values = [Fraction(t[x]) / len(t) for t in tables if x in t]
            return sum(values, Fraction(0)) / len(values) if values else math.inf

        best = reach(sorted(items, key=mean_rank))
    if best <= 0:
        return None
    return min(1.0, s / best)


def incomplete_mean_spearman(
    ballots: Sequence[Ballot], seen: Sequence[Sequence[str]]
) -> list[float | None]:
    """Mean correlation of each ranker with the others over the answers both saw (2+)."""
    tables = [ranks(b, s) for b, s in zip(ballots, seen, strict=True)]
    out: list[float | None] = []
    for i, mine in enumerate(tables):
        values: list[float] = []
        for j, other in enumerate(tables):
            if j == i:
                continue
            common = [x for x in seen[i] if x in other]
            if len(common) < 2:
                continue
            rho = spearman(_rerank(mine, common), _rerank(other, common), common)
            if rho is not None:
                values.append(rho)
        if not values:
            # No pair shares two answers (three members): compare with the others combined.
            others = [t for j, t in enumerate(tables) if j != i]
            common = [x for x in seen[i] if any(x in t for t in others)]
            if len(common) >= 2:
                # Exact fractions: two items whose pooled means are equal must tie, and
                # float division can split such a tie into a spurious order.
                pooled = {
                    x: sum(Fraction(t[x]) / len(t) for t in others if x in t)
                    / sum(1 for t in others if x in t)
                    for x in common
                }
                rho = spearman(_rerank(mine, common), _rerank(pooled, common), common)
                if rho is not None:
                    values.append(rho)
        out.append(sum(values) / len(values) if values else None)
    return out


def _rerank(values: Mapping[str, float | Fraction], items: Sequence[str]) -> dict[str, float]:
    """Mean ranks of ``items`` ordered by ``values`` (smaller is better)."""
    ordered = sorted(items, key=lambda x: values[x])
    out: dict[str, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and values[ordered[j + 1]] == values[ordered[i]]:
            j += 1
        mean = (i + j) / 2 + 1
        for x in ordered[i : j + 1]:
            out[x] = mean
        i = j + 1
    return out


def standing_apart(means: Sequence[float | None]) -> list[bool]:
    """Which members dissent: a mean Spearman below 0, against a council that has a centre.

    When every member is below 0 (a cycle such as A>B>C, B>C>A, C>A>B) there is no majority
    for anyone to stand apart from, so no one is named.
    """
    below = [m is not None and m < 0 for m in means]
    return [False] * len(below) if below and all(below) else below


def majority_cycle(ballots: Sequence[Ballot], items: Sequence[str]) -> list[str] | None:
    """A cycle in the pairwise majorities (x beats y on more ballots than y beats x), if any."""
    tables = [ranks(b, items) for b in ballots]
    beats: dict[str, list[str]] = {x: [] for x in items}
    for x in items:
        for y in items:
            if x != y and sum(t[x] < t[y] for t in tables) > sum(t[y] < t[x] for t in tables):
                beats[x].append(y)

    def walk(path: list[str]) -> list[str] | None:
        for nxt in beats[path[-1]]:
            if nxt == path[0] and len(path) > 2:
                return [*path, nxt]
            if nxt not in path:
                found = walk([*path, nxt])
                if found:
                    return found
        return None

    for start in items:
        found = walk([start])
        if found:
            return found
    return None
