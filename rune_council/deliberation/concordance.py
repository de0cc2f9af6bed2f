"""How far a set of rankings agree: Kendall's W and Spearman's rho, no model involved.

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

The arithmetic runs on doubled ranks (``2 x rank``, whole numbers even with ties), so rank
sums, the dispersion S and its maximum are exact integers and W is one correctly rounded
division, whatever the order of the rankers. Nothing compares every ranker with every other
one: the mean correlations sum unit vectors once and take one dot product per ranker; with
incomplete rankings, the rankers who saw the same answers are handled as one group.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from operator import add, mul, sub
from typing import Literal, TypeVar

Ballot = Sequence[Sequence[str]]
EXACT_ORDER_LIMIT = 7  # above this many items, the best reference order is approximated
K = TypeVar("K", bound=Hashable)


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


# --------------------------------------------------------------------------- complete rankings


@dataclass(frozen=True, slots=True)
class Placed:
    """One ranking over ``n`` items in doubled ranks (``2 x`` the mean rank, a whole number).

    ``items`` are the indices the ballot places and ``doubled`` their doubled ranks; the
    ``rest`` items it left out share ``rest_rank``; ``ties`` is the sum of ``t^3 - t`` over
    its tied groups, the rest included.
    """

    items: Sequence[int]
    doubled: Sequence[int]
    rest_rank: int
    rest: int
    ties: int


def place(ballot: Ballot, index: Mapping[str, int], n: int) -> Placed:
    """``ballot`` over the ``n`` items numbered by ``index`` (other labels are ignored)."""
    try:
        items = list(map(index.__getitem__, chain.from_iterable(ballot)))
    except KeyError:
        known = [kept for level in ballot if (kept := [x for x in level if x in index])]
        return place(known, index, n)
    doubled: list[int] = []
    ties = 0
    at = 0
    for level in ballot:
        size = len(level)
        if size == 1:
            at += 1
            doubled.append(2 * at)
        elif size:
            doubled += [2 * at + size + 1] * size
            ties += size**3 - size
            at += size
    rest = n - at
    if rest > 1:
        ties += rest**3 - rest
    return Placed(items, doubled, 2 * at + rest + 1, rest, ties)


def compact(row: Placed) -> Placed:
    """The same ranking with its numbers as bytes (every number below 256)."""
    return Placed(bytes(row.items), bytes(row.doubled), row.rest_rank, row.rest, row.ties)


def kendall_w(ballots: Sequence[Ballot], items: Sequence[str]) -> float | None:
    """Tie-corrected Kendall's W; None when it is undefined (fewer than 2 of either)."""
    index = {x: j for j, x in enumerate(items)}
    return concordance_of([place(b, index, len(items)) for b in ballots], len(items))[0]


def mean_spearman(ballots: Sequence[Ballot], items: Sequence[str]) -> list[float | None]:
    """Each ranker's mean correlation with every other ranker (complete rankings)."""
    index = {x: j for j, x in enumerate(items)}
    return concordance_of([place(b, index, len(items)) for b in ballots], len(items))[1]


def concordance_of(rows: Sequence[Placed], n: int) -> tuple[float | None, list[float | None]]:
    """Kendall's W and each ranking's mean Spearman correlation with all the others.

    W is ``12 S / (m^2 (n^3 - n) - m sum(t^3 - t))`` from doubled rank sums, exactly. For the
    correlations each rank vector is centred and scaled to unit length, so a pair's
    correlation is a dot product and the sum over all the others is one dot product with the
    total: O(m n), not O(m^2 n). A ranking's length depends only on its ties, so rankings
    with the same ties are summed as whole numbers first. A ranker that ties everything has
    no correlation and is left out of the means.
    """
    m = len(rows)
    if m < 2 or n < 2:
        return None, [None] * m
    # Per tie class: how far each item's rank sum is from "everyone left it out", the count
    # and the sum of the left-out ranks.
    classes: dict[int, tuple[list[int], list[int]]] = {}
    for row in rows:
        entry = classes.get(row.ties)
        if entry is None:
            entry = classes[row.ties] = ([0] * n, [0, 0])
        delta, stats = entry
        stats[0] += 1
        stats[1] += row.rest_rank
        rest_rank = row.rest_rank
        for j, r in zip(row.items, row.doubled, strict=True):
            delta[j] += r - rest_rank

    sums = [sum(stats[1] for _, stats in classes.values())] * n
    for delta, _ in classes.values():
        sums = list(map(add, sums, delta))
    ties = sum(t * stats[0] for t, (_, stats) in classes.items())
    spread = n * sum(r * r for r in sums) - sum(sums) ** 2  # 4 n S, in doubled ranks
    denominator = m * m * (n**3 - n) - m * ties
    w = 3 * spread / (n * denominator) if denominator > 0 else None

    centre = n + 1  # the mean doubled rank
    scale: dict[int, float] = {}
    total = [0.0] * n
    shared = 0.0
    defined = 0
    for t, (delta, (count, rest_sum)) in classes.items():
        sxx = (n**3 - n - t) // 3  # the centred sum of squares of doubled ranks
        if sxx <= 0:
            continue
        inv = scale[t] = 1 / math.sqrt(sxx)
        defined += count
        shared += (rest_sum - count * centre) * inv
        total = [x + d * inv for x, d in zip(total, delta, strict=True)]
    total = [shared + x for x in total]
    grand = sum(total)
    means: list[float | None] = []
    for row in rows:
        inv_ = scale.get(row.ties)
        if inv_ is None or defined < 2:
            means.append(None)
            continue
        mine = list(map(total.__getitem__, row.items))
        dot = (
            (row.rest_rank - centre) * grand
            + sum(map(mul, row.doubled, mine))
            - row.rest_rank * sum(mine)
        )
        # u . (total - u) = u . total - 1, averaged over the other defined rankers.
        means.append((dot * inv_ - 1.0) / (defined - 1))
    return w, means


def spearman(a: Mapping[str, float], b: Mapping[str, float], items: Sequence[str]) -> float | None:
    """Pearson correlation of two rank vectors (Spearman's rho with mean ranks for ties)."""
    if len(items) < 2:
        return None
    return _pearson([a[i] for i in items], [b[i] for i in items])


# --------------------------------------------------------------------------- incomplete designs


@dataclass(frozen=True, slots=True)
class _Seen:
    """One ranker over the items it saw: the sizes of its levels, best first, the unranked
    ones tied last; and its doubled ranks as a dense vector over all items (0 = unseen)."""

    shape: tuple[int, ...]
    doubled: list[int]
    seen: frozenset[int]


def _seen(ballot: Ballot, seen: Sequence[str], index: Mapping[str, int], n: int) -> _Seen:
    mine = {x: index[x] for x in seen if x in index}
    try:
        ids = list(map(mine.__getitem__, chain.from_iterable(ballot)))
        sizes = [size for size in map(len, ballot) if size]
    except KeyError:
        kept = [[mine[x] for x in level if x in mine] for level in ballot]
        ids = [j for level in kept for j in level]
        sizes = [len(level) for level in kept if level]
    ranks: list[int] = []
    at = 0
    for size in sizes:
        ranks += [2 * at + size + 1] * size
        at += size
    doubled = [0] * n
    for j, r in zip(ids, ranks, strict=True):
        doubled[j] = r
    placed = set(ids)
    rest = [j for j in mine.values() if j not in placed]
    for j in rest:
        doubled[j] = 2 * at + len(rest) + 1
    if rest:
        sizes.append(len(rest))
    return _Seen(tuple(sizes), doubled, frozenset(mine.values()))


def incomplete_w(
    ballots: Sequence[Ballot], seen: Sequence[Sequence[str]], items: Sequence[str]
) -> float | None:
    """W when ranker ``i`` only saw ``seen[i]`` (answers outside ``items`` are not counted);
    None when nothing can be measured."""
    n = len(items)
    index = {x: j for j, x in enumerate(items)}
    rows = [_seen(b, s, index, n) for b, s in zip(ballots, seen, strict=True)]
    rows = [r for r in rows if len(r.seen) >= 2]
    if len(rows) < 2 or n < 2:
        return None
    # S = sum_j (R_j - E_j)^2; in doubled ranks each ranker adds rank - (k + 1) to each item.
    deviation = [0] * n
    by_size: dict[int, list[int]] = {}  # k -> doubled rank sums per item, for the mean ranks
    counts = [0] * n
    designs: dict[tuple[frozenset[int], tuple[int, ...]], int] = {}
    for row in rows:
        k = len(row.seen)
        sums = by_size.setdefault(k, [0] * n)
        for j in row.seen:
            deviation[j] += row.doubled[j] - (k + 1)
            sums[j] += row.doubled[j]
            counts[j] += 1
        designs[(row.seen, row.shape)] = designs.get((row.seen, row.shape), 0) + 1
    s4 = sum(d * d for d in deviation)
    groups = [_Design(seen_, shape, count) for (seen_, shape), count in designs.items()]
    if n <= EXACT_ORDER_LIMIT:
        best4 = _best_reach(groups, n)
    else:
        # The observed consensus (lowest mean rank first) as the reference order; mean ranks
        # are compared exactly, so equal ones keep the items' order.
        def mean_rank(j: int) -> tuple[int, Fraction]:
            if not counts[j]:
                return (1, Fraction(0))
            total = sum((Fraction(sums[j], 2 * k) for k, sums in by_size.items()), Fraction(0))
            return (0, total / counts[j])

        best4 = _reach(groups, sorted(range(n), key=mean_rank), n)
    if best4 <= 0:
        return None
    return min(1.0, s4 / best4)


@dataclass(frozen=True, slots=True)
class _Design:
    """Rankers who saw the same items with the same tie pattern: they would fill any reference
    order the same way, so they count once, ``count`` times over."""

    seen: frozenset[int]
    shape: tuple[int, ...]
    count: int

    def fill(self) -> list[int]:
        """The doubled rank at each position of this design's items in a reference order."""
        out: list[int] = []
        at = 0
        for size in self.shape:
            out += [2 * at + size + 1] * size
            at += size
        return out


def _reach(groups: Sequence[_Design], order: Sequence[int], n: int) -> int:
    """4 S for rankers who all agreed with ``order`` under their own design and tie pattern."""
    deviation = [0] * n
    for g in groups:
        mine = [j for j in order if j in g.seen]
        centre = len(g.seen) + 1
        for j, r in zip(mine, g.fill(), strict=False):
            deviation[j] += g.count * (r - centre)
    return sum(d * d for d in deviation)


def _best_reach(groups: Sequence[_Design], n: int) -> int:
    """The largest ``_reach`` over every order of ``n`` items, without trying all n! of them.

    An item's deviation depends only on which items come before it, so the best order is a
    best path through the subsets: ``best(T) = max over j in T of best(T - j) + dev(j, T - j)^2``.
    """
    of_item: list[list[tuple[int, list[int], int, int]]] = [[] for _ in range(n)]
    for g in groups:
        mask = sum(1 << j for j in g.seen)
        fill = g.fill()
        for j in g.seen:
            of_item[j].append((mask, fill, len(g.seen) + 1, g.count))
    best = [0] * (1 << n)
    for chosen in range(1, 1 << n):
        top = None
        for j in range(n):
            if not chosen >> j & 1:
                continue
            before = chosen ^ (1 << j)
            dev = 0
            for mask, fill, centre, count in of_item[j]:
                dev += count * (fill[(before & mask).bit_count()] - centre)
            value = best[before] + dev * dev
            if top is None or value > top:
                top = value
        best[chosen] = top or 0
    return best[-1]


def incomplete_mean_spearman(
    ballots: Sequence[Ballot], seen: Sequence[Sequence[str]]
) -> list[float | None]:
    """Mean correlation of each ranker with the others over the answers both saw (2+).

    Rankers who saw the same answers form a group. For two groups (or one with itself) the
    answers in common are fixed, so each ranker's ranks over them, reranked, are computed
    once per group pair, and the correlations with a whole group come from one dot product
    with the group's summed vectors: O(groups x rankers x answers) instead of O(rankers^2).
    """
    index: dict[str, int] = {}
    for s in seen:
        for x in s:
            index.setdefault(x, len(index))
    n = len(index)
    rows = [_seen(b, s, index, n) for b, s in zip(ballots, seen, strict=True)]
    group_of: dict[frozenset[int], int] = {}
    members: list[list[int]] = []
    for i, row in enumerate(rows):
        g = group_of.setdefault(row.seen, len(members))
        if g == len(members):
            members.append([])
        members[g].append(i)
    sets = list(group_of)
    sums = [0.0] * len(rows)
    counts = [0] * len(rows)
    for a, seen_a in enumerate(sets):
        for b in range(a, len(sets)):
            common = seen_a & sets[b]
            if len(common) < 2:
                continue
            mine = [(i, *_within(rows[i], common)) for i in members[a]]
            theirs = mine if a == b else [(j, *_within(rows[j], common)) for j in members[b]]
            _correlate(mine, theirs, len(common), sums, counts, same=a == b)
            if a != b:
                _correlate(theirs, mine, len(common), sums, counts, same=False)
    out: list[float | None] = []
    pooled: _Pooled | None = None
    for i in range(len(rows)):
        if counts[i]:
            out.append(sums[i] / counts[i])
            continue
        # No pair shares two answers (three members): compare with the others combined.
        pooled = pooled or _Pooled(rows, n)
        out.append(pooled.rho(i))
    return out


def _within(row: _Seen, common: frozenset[int]) -> tuple[list[int], int]:
    """The ranker's doubled ranks reranked over ``common`` (0 elsewhere) and their centred
    sum of squares. Dropping an item moves the ones below it up a place (2 in doubled
    ranks) and shrinks its own tied group by one (1)."""
    doubled = row.doubled
    for r in row.seen - common:
        cut = doubled[r]
        below = list(map(cut.__lt__, doubled))
        doubled = list(
            map(sub, doubled, map(add, below, map(add, below, map(cut.__eq__, doubled))))
        )
        doubled[r] = 0
    k = len(common)
    if len(row.shape) == len(row.seen):  # no ties, before or after
        return doubled, (k**3 - k) // 3
    return doubled, sum(map(mul, doubled, doubled)) - k * (k + 1) ** 2


def _correlate(
    mine: Sequence[tuple[int, list[int], int]],
    theirs: Sequence[tuple[int, list[int], int]],
    k: int,
    sums: list[float],
    counts: list[int],
    *,
    same: bool,
) -> None:
    """Add each of ``mine``'s correlations with every one of ``theirs`` (not itself)."""
    # Rankers with the same spread share a scale, so their vectors add up as whole numbers.
    classes: dict[int, list[int]] = {}
    sizes: dict[int, int] = {}
    for _, doubled, sxx in theirs:
        if sxx:
            total = classes.get(sxx)
            classes[sxx] = doubled if total is None else list(map(add, total, doubled))
            sizes[sxx] = sizes.get(sxx, 0) + 1
    defined = sum(sizes.values())
    offset = k * (k + 1) ** 2  # sum(x) * sum(y) / k for two doubled rankings of k items
    for i, doubled, sxx in mine:
        if not sxx:
            continue
        dot = 0.0
        for spread, total in classes.items():
            dot += (sum(map(mul, doubled, total)) - sizes[spread] * offset) / math.sqrt(spread)
        sums[i] += dot / math.sqrt(sxx) - (1.0 if same else 0.0)
        counts[i] += defined - (1 if same else 0)


class _Pooled:
    """Every ranker's mean relative rank per item, kept exact so that equal means stay equal;
    a ranker is compared with the others' means (its own taken out)."""

    def __init__(self, rows: Sequence[_Seen], n: int) -> None:
        self.rows = rows
        self.total = [Fraction(0)] * n
        self.count = [0] * n
        for row in rows:
            for j in row.seen:
                self.total[j] += Fraction(row.doubled[j], 2 * len(row.seen))
                self.count[j] += 1

    def rho(self, i: int) -> float | None:
        row = self.rows[i]
        common = [j for j in sorted(row.seen) if self.count[j] > 1]
        if len(common) < 2:
            return None
        own = {j: Fraction(row.doubled[j], 2 * len(row.seen)) for j in common}
        pooled = {j: (self.total[j] - own[j]) / (self.count[j] - 1) for j in common}
        return _pearson(_rerank(own, common), _rerank(pooled, common))


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _rerank(values: Mapping[K, Fraction], items: Sequence[K]) -> list[float]:
    """Mean ranks of ``items`` ordered by ``values`` (smaller is better), in ``items`` order."""
    ordered = sorted(items, key=lambda x: values[x])
    out: dict[K, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and values[ordered[j + 1]] == values[ordered[i]]:
            j += 1
        for x in ordered[i : j + 1]:
            out[x] = (i + j) / 2 + 1
        i = j + 1
    return [out[x] for x in items]


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
