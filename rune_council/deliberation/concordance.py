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
from collections import deque
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain, islice, repeat
from operator import add, mul, sub
from typing import Literal, NamedTuple, TypeVar

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


class Placed(NamedTuple):
    """One ranking over ``n`` items in doubled ranks (``2 x`` the mean rank, a whole number).

    ``items`` are the indices the ballot places and ``doubled`` their doubled ranks; the
    ``rest`` items it left out share ``rest_rank``; ``ties`` is the sum of ``t^3 - t`` over
    its tied groups, the rest included. A tuple: a tally of 100,000 rankers makes as many.
    """

    items: Sequence[int]
    doubled: Sequence[int]
    rest_rank: int
    rest: int
    ties: int


# The doubled ranks of an untied ballot of k places (2, 4, ..., 2k), shared by every ballot
# of that length; as bytes where every number fits in one.
_STEPS: dict[int, range] = {}
_STEP_BYTES: dict[int, bytes] = {}


def place(
    ballot: Ballot,
    index: Mapping[str, int],
    n: int,
    *,
    small: bool = False,
    levels: dict[Sequence[str], bytes] | None = None,
) -> Placed:
    """``ballot`` over the ``n`` items numbered by ``index`` (other labels are ignored).

    ``small``: the numbers as bytes (the caller knows ``2 n + 1 < 256``), a fifth of the
    memory of lists, which matters at 100,000 rankers. ``levels`` (with ``small``): each
    level's numbers, kept across the ballots of a tally; the parser shares one tuple per
    level text, so a long tally looks each level up once instead of each of its labels."""
    items: Sequence[int]
    try:
        if levels is not None:
            items = b"".join(map(levels.__getitem__, ballot))
        else:
            items = list(map(index.__getitem__, chain.from_iterable(ballot)))
    except KeyError:
        if levels is not None:
            # Levels not seen before are read once; a label not in ``index`` is left out below.
            try:
                for level in ballot:
                    if level not in levels:
                        levels[level] = bytes(map(index.__getitem__, level))
            except KeyError:
                pass
            else:
                return place(ballot, index, n, small=small, levels=levels)
        known = [kept for level in ballot if (kept := [x for x in level if x in index])]
        return place(known, index, n, small=small)
    at = len(items)
    rest = n - at
    if at == len(ballot) and 0 not in map(len, ballot):  # no ties: places 1, 2, 3, ...
        if small:
            steps: Sequence[int] | None = _STEP_BYTES.get(at)
            if steps is None:
                steps = _STEP_BYTES[at] = bytes(range(2, 2 * at + 1, 2))
            items = bytes(items)  # (already bytes when read from ``levels``)
        else:
            steps = _STEPS.get(at)
            if steps is None:
                steps = _STEPS[at] = range(2, 2 * at + 1, 2)
        return Placed(items, steps, at + n + 1, rest, rest**3 - rest)
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
    if rest > 1:
        ties += rest**3 - rest
    if small:
        return Placed(bytes(items), bytes(doubled), 2 * at + rest + 1, rest, ties)
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


# Per tie class (the sum of t^3 - t): how far each item's doubled rank sum is from "everyone
# in the class left it out", and the class's count and sum of left-out ranks.
TieClasses = dict[int, tuple[list[int], list[int]]]


def add_to_class(classes: TieClasses, row: Placed, n: int) -> list[int]:
    """Count ``row`` in its tie class; returns the class's deltas, for the caller to add
    ``doubled - row.rest_rank`` to at each of the row's items (a caller that walks the
    row's places anyway adds them in the same loop)."""
    entry = classes.get(row.ties)
    if entry is None:
        entry = classes[row.ties] = ([0] * n, [0, 0])
    delta, stats = entry
    stats[0] += 1
    stats[1] += row.rest_rank
    return delta


class TieColumns:
    """Tie classes counted from whole rank vectors, for rankings in bytes (``2 n + 1 < 256``):
    each row's doubled ranks over all ``n`` items, its left-out items at its rest rank, are
    laid out by one ``bytes.maketrans`` (a later entry of ``from`` wins) and appended to its
    class's buffer; each class's column sums are taken at the end, one pass of builtins per
    column. Adding a row's places one by one in Python was a third of a long tally."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._everyone = bytes(range(n))
        self._fill = [bytes((r,)) * n for r in range(256)]
        self._rows: dict[int, tuple[bytearray, list[int]]] = {}

    def add(self, row: Placed) -> None:
        entry = self._rows.get(row.ties)
        if entry is None:
            entry = self._rows[row.ties] = (bytearray(), [0, 0])
        buffer, stats = entry
        stats[0] += 1
        stats[1] += row.rest_rank
        buffer += bytes.maketrans(
            self._everyone + row.items,  # type: ignore[operator]
            self._fill[row.rest_rank] + row.doubled,  # type: ignore[operator]
        )[: self.n]

    def classes(self) -> TieClasses:
        """What :func:`tie_classes` makes of the same rows."""
        n = self.n
        return {
            ties: ([sum(buffer[j::n]) - stats[1] for j in range(n)], stats)
            for ties, (buffer, stats) in self._rows.items()
        }


def tie_classes(rows: Sequence[Placed], n: int) -> TieClasses:
    classes: TieClasses = {}
    for row in rows:
        delta = add_to_class(classes, row, n)
        rest_rank = row.rest_rank
        for j, r in zip(row.items, row.doubled, strict=True):
            delta[j] += r - rest_rank
    return classes


def concordance_of(
    rows: Sequence[Placed], n: int, classes: TieClasses | None = None
) -> tuple[float | None, list[float | None]]:
    """Kendall's W and each ranking's mean Spearman correlation with all the others.

    W is ``12 S / (m^2 (n^3 - n) - m sum(t^3 - t))`` from doubled rank sums, exactly. For the
    correlations each rank vector is centred and scaled to unit length, so a pair's
    correlation is a dot product and the sum over all the others is one dot product with the
    total: O(m n), not O(m^2 n). A ranking's length depends only on its ties, so rankings
    with the same ties are summed as whole numbers first. A ranker that ties everything has
    no correlation and is left out of the means. ``classes``: :func:`tie_classes` of
    ``rows``, when the caller has counted them already.
    """
    m = len(rows)
    if m < 2 or n < 2:
        return None, [None] * m
    if classes is None:
        classes = tie_classes(rows, n)
    w, centred = concordance_base(classes, m, n)
    return w, mean_correlations(rows, centred)


class Centred(NamedTuple):
    """What each ranking's mean correlation is read from: the sum of every defined
    ranking's unit vector (``total``, its sum ``grand``), each tie class's scale, and how
    many others a defined ranking is compared with."""

    n: int
    total: list[float]
    grand: float
    scale: dict[int, float]
    others: int


def concordance_base(classes: TieClasses, m: int, n: int) -> tuple[float | None, Centred]:
    """Kendall's W of ``m`` rankings over ``n`` items from their tie classes, and what
    :func:`mean_correlations` reads each ranking's mean correlation from. The classes are
    whole numbers, so rankings counted in parts and added up class by class (in the order
    the classes first appear) give the same floats as counted in one go."""
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
    return w, Centred(n, total, sum(total), scale, defined - 1)


def mean_correlations(rows: Sequence[Placed], centred: Centred) -> list[float | None]:
    """Each of ``rows``' mean correlation with the other rankings ``centred`` sums up."""
    n, total, grand, scale, others = centred
    centre = n + 1
    means: list[float | None] = []
    append = means.append
    scale_of = scale.get
    at = total.__getitem__
    for items, doubled, rest_rank, _, ties in rows:
        inv_ = scale_of(ties)
        if inv_ is None or others < 1:
            append(None)
            continue
        mine = list(map(at, items))
        dot = (rest_rank - centre) * grand + sum(map(mul, doubled, mine)) - rest_rank * sum(mine)
        # u . (total - u) = u . total - 1, averaged over the other defined rankers.
        append((dot * inv_ - 1.0) / others)
    return means


def merge_classes(first: TieClasses, second: TieClasses) -> TieClasses:
    """The tie classes of two runs of rankings, the second's after the first's: what
    :func:`tie_classes` makes of both runs in one (each class where it first appears)."""
    merged: TieClasses = {t: (list(delta), list(stats)) for t, (delta, stats) in first.items()}
    for t, (delta, stats) in second.items():
        entry = merged.get(t)
        if entry is None:
            merged[t] = (list(delta), list(stats))
        else:
            merged[t] = (list(map(add, entry[0], delta)), list(map(add, entry[1], stats)))
    return merged


def spearman(a: Mapping[str, float], b: Mapping[str, float], items: Sequence[str]) -> float | None:
    """Pearson correlation of two rank vectors (Spearman's rho with mean ranks for ties)."""
    if len(items) < 2:
        return None
    return _pearson([a[i] for i in items], [b[i] for i in items])


# --------------------------------------------------------------------------- incomplete designs


@dataclass(slots=True)
class _Row:
    """One ranker of an incomplete design, kept as large as its ballot: the items it ranked
    (``ids``, their doubled ranks in ``ranks``, grouped by level in ``levels``), the items it
    never saw (``hidden``), and how many it saw but left unranked (``rest``: they share the
    bottom places). The rest is never listed, so a ballot of ten over a thousand answers
    costs ten, not a thousand."""

    hidden: frozenset[int]
    ids: list[int]
    ranks: Sequence[int]
    levels: list[list[int]] | None  # None: no ties, every ranked item a level of its own
    rest: int
    ties: int  # sum of t^3 - t over the ranked levels (the rest not included)

    @property
    def seen(self) -> int:
        return len(self.ids) + self.rest

    @property
    def rest_rank(self) -> int:
        return 2 * len(self.ids) + self.rest + 1

    @property
    def shape(self) -> tuple[int, ...]:
        sizes = (1,) * len(self.ids) if self.levels is None else tuple(map(len, self.levels))
        return (*sizes, self.rest) if self.rest else sizes

    @property
    def level_count(self) -> int:
        return len(self.ids) if self.levels is None else len(self.levels)


def _row(ballot: Ballot, hidden: frozenset[int], index: Mapping[str, int], n: int) -> _Row:
    # Most ballots name one known, visible label per level: placed in one pass of builtins
    # (a loop per level was most of reading a thousand ballots of fifty places).
    if all(len(level) == 1 for level in ballot):
        flat = list(map(index.get, chain.from_iterable(ballot), repeat(-1)))
        if -1 not in flat and hidden.isdisjoint(flat):
            at = len(flat)
            steps = _STEPS.get(at)
            if steps is None:
                steps = _STEPS[at] = range(2, 2 * at + 1, 2)
            return _Row(hidden, flat, steps, None, n - len(hidden) - at, 0)
    levels: list[list[int]] = []
    for level in ballot:
        kept = [j for x in level if (j := index.get(x, -1)) >= 0 and j not in hidden]
        if kept:
            levels.append(kept)
    ids: list[int] = []
    ranks: list[int] = []
    ties = 0
    at = 0
    for kept in levels:
        size = len(kept)
        ids += kept
        ranks += [2 * at + size + 1] * size
        ties += size**3 - size
        at += size
    return _Row(hidden, ids, ranks, levels, n - len(hidden) - at, ties)


def _spread(k: int, rest: int, ties: int) -> int:
    """The centred sum of squares of a ranking's doubled ranks over ``k`` items, given the
    ties among its ranked levels and the size of its tied bottom (``rest``)."""
    return (k**3 - k - ties - (rest**3 - rest)) // 3


def _rows(
    ballots: Sequence[Ballot], unseen: Sequence[Collection[str]], items: Sequence[str]
) -> list[_Row]:
    index = {x: j for j, x in enumerate(items)}
    n = len(items)
    return [
        _row(b, frozenset(index[x] for x in u if x in index), index, n)
        for b, u in zip(ballots, unseen, strict=True)
    ]


def _unseen_of(seen: Sequence[Sequence[str]], items: Sequence[str]) -> list[set[str]]:
    return [set(items).difference(s) for s in seen]


def incomplete_w(
    ballots: Sequence[Ballot], seen: Sequence[Sequence[str]], items: Sequence[str]
) -> float | None:
    """W when ranker ``i`` only saw ``seen[i]`` (answers outside ``items`` are not counted);
    None when nothing can be measured."""
    return incomplete_w_unseen(ballots, _unseen_of(seen, items), items)


def incomplete_w_unseen(
    ballots: Sequence[Ballot], unseen: Sequence[Collection[str]], items: Sequence[str]
) -> float | None:
    """:func:`incomplete_w` for rankers that saw every item but ``unseen[i]``: the rank
    stage's design, where a member is never shown its own answer."""
    n = len(items)
    rows = [r for r in _rows(ballots, unseen, items) if r.seen >= 2]
    if len(rows) < 2 or n < 2:
        return None
    # S = sum_j (R_j - E_j)^2; in doubled ranks each ranker adds rank - (k + 1) to each item
    # it saw. The unranked rest all add the same, so it is added to every item at once and
    # taken back from the items the ranker never saw.
    shared = 0
    deviation = [0] * n
    hidden_by = [0] * n
    by_size: dict[int, tuple[list[int], dict[int, int]]] = {}  # doubled rank sums, per k
    designs: dict[tuple[frozenset[int], tuple[int, ...]], int] = {}
    for row in rows:
        k = row.seen
        rest_rank = row.rest_rank if row.rest else 0
        rest_dev = rest_rank - (k + 1) if row.rest else 0
        shared += rest_dev
        sums = by_size.setdefault(k, ([0], {}))
        sums[0][0] += rest_rank
        extra = sums[1]
        for j in row.hidden:
            deviation[j] -= rest_dev
            hidden_by[j] += 1
            extra[j] = extra.get(j, 0) - rest_rank
        for j, r in zip(row.ids, row.ranks, strict=True):
            deviation[j] += r - (k + 1) - rest_dev
            extra[j] = extra.get(j, 0) + r - rest_rank
        key = (row.hidden, row.shape)
        designs[key] = designs.get(key, 0) + 1
    s4 = sum((shared + d) ** 2 for d in deviation)
    if n <= EXACT_ORDER_LIMIT:
        everything = frozenset(range(n))
        groups = [
            _Design(everything - hidden, shape, count) for (hidden, shape), count in designs.items()
        ]
        best4 = _best_reach(groups, n)
    else:
        # The observed consensus (lowest mean rank first) as the reference order; mean ranks
        # are compared exactly, so equal ones keep the items' order.
        def mean_rank(j: int) -> tuple[int, Fraction]:
            count = len(rows) - hidden_by[j]
            if not count:
                return (1, Fraction(0))
            total = sum(
                (
                    Fraction(base[0] + extra.get(j, 0), 2 * k)
                    for k, (base, extra) in by_size.items()
                ),
                Fraction(0),
            )
            return (0, total / count)

        best4 = _reach(designs, sorted(range(n), key=mean_rank), n)
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


def _reach(
    designs: Mapping[tuple[frozenset[int], tuple[int, ...]], int], order: Sequence[int], n: int
) -> int:
    """4 S for rankers who all agreed with ``order`` under their own design and tie pattern.

    A design's last level takes whatever is left of its items, so only the items before it
    are walked to: the cost is the ranked part, not every item the design saw."""
    shared = 0
    deviation = [0] * n
    for (hidden, shape), count in designs.items():
        k = n - len(hidden)
        last = shape[-1]
        last_dev = count * (k - last)  # (2 (k - last) + last + 1) - (k + 1), count times
        shared += last_dev
        for j in hidden:
            deviation[j] -= last_dev
        walk = (j for j in order if j not in hidden)
        at = 0
        for size in shape[:-1]:
            dev = count * (2 * at + size - k) - last_dev  # doubled rank - (k + 1), less the rest
            for j in islice(walk, size):
                deviation[j] += dev
            at += size
    return sum((shared + d) ** 2 for d in deviation)


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
    """Mean correlation of each ranker with the others over the answers both saw (2+)."""
    items: dict[str, None] = {}
    for s in seen:
        items.update(dict.fromkeys(s))
    return incomplete_mean_spearman_unseen(ballots, _unseen_of(seen, list(items)), list(items))


# A ranking over ``c`` common items as a sparse vector: the doubled rank its unranked rest
# shares, the ranked items and their doubled ranks, and its centred sum of squares.
_Vec = tuple[int, Sequence[int], Sequence[int], int]


class _Sum:
    """Rankings over the same ``c`` items, each scaled to unit length and added up, kept as
    sparse as they came: a constant part, its total, and a column per ranked item. One
    ranking's correlations with all of them together is then one pass over its own ranked
    items (Pearson on doubled ranks, centred at ``c + 1``)."""

    __slots__ = ("area", "c", "column", "count", "level")

    def __init__(self, c: int) -> None:
        self.c = c
        self.count = 0
        self.level = 0.0  # sum of w * (rest - (c + 1))
        self.area = 0.0  # sum of w * sum of (rank - rest) over the ranked items
        self.column: dict[int, float] = {}

    def add(self, vec: _Vec) -> None:
        rest, ids, ranks, spread = vec
        w = 1 / math.sqrt(spread)
        self.count += 1
        self.level += w * (rest - self.c - 1)
        diffs = list(map(sub, ranks, repeat(rest)))
        self.area += w * sum(diffs)
        # A column per ranked item, added to in one pass of builtins: at 2,000 members who
        # rank nearly everything, a loop in Python here was most of the tally.
        column = self.column
        weighted = map(mul, diffs, repeat(w))
        deque(
            map(column.__setitem__, ids, map(add, map(column.get, ids, repeat(0.0)), weighted)),
            maxlen=0,
        )

    def against(self, vec: _Vec) -> float:
        """The sum of ``vec``'s correlations with every ranking added."""
        rest, ids, ranks, spread = vec
        level = rest - self.c - 1
        area = sum(ranks) - rest * len(ids)
        cross = sum(map(mul, ranks, map(self.column.get, ids, repeat(0.0))))
        cross -= rest * sum(map(self.column.get, ids, repeat(0.0)))
        dot = self.c * level * self.level + level * self.area + area * self.level + cross
        return float(dot / math.sqrt(spread))


def _shifted(row: _Row, drop: int, c: int) -> _Vec | None:
    """``row`` over ``c`` items once ``drop`` items of its unranked rest are taken away;
    None when that leaves it nothing to correlate (fewer than two items, or all tied)."""
    rest = row.rest - drop
    if rest < 0 or c < 2:
        return None
    spread = _spread(c, rest, row.ties)
    if spread <= 0:
        return None
    return (row.rest_rank - drop, row.ids, row.ranks, spread)


def _reranked(row: _Row, drop: frozenset[int]) -> _Vec | None:
    """``row`` with the items in ``drop`` (all of which it saw) taken out and the rest
    ranked again: the ones below a dropped item move up, its tied group shrinks."""
    if not drop.intersection(row.ids):
        return _shifted(row, len(drop), row.seen - len(drop))
    if row.ties == 0:  # no ties among the ranked: the kept ones close up, two apart
        ids = [j for j in row.ids if j not in drop]
        at = len(ids)
        rest = row.rest - (len(drop) - (len(row.ids) - at))
        spread = _spread(at + rest, rest, 0) if at + rest >= 2 else 0
        return (2 * at + rest + 1, ids, range(2, 2 * at + 1, 2), spread) if spread > 0 else None
    ids = []
    ranks: list[int] = []
    ties = 0
    at = 0
    for level in row.levels or [[j] for j in row.ids]:
        kept = [j for j in level if j not in drop]
        size = len(kept)
        if size:
            ids += kept
            ranks += [2 * at + size + 1] * size
            ties += size**3 - size
            at += size
    rest = row.rest - (len(drop) - (len(row.ids) - at))
    c = at + rest
    spread = _spread(c, rest, ties) if c >= 2 else 0
    return (2 * at + rest + 1, ids, ranks, spread) if spread > 0 else None


def incomplete_mean_spearman_unseen(
    ballots: Sequence[Ballot], unseen: Sequence[Collection[str]], items: Sequence[str]
) -> list[float | None]:
    """:func:`incomplete_mean_spearman` for rankers that saw every item but ``unseen[i]``.

    A pair of rankers is correlated over the items both saw, each ranking ranked again over
    them. For most pairs that changes nothing but the size of the unranked rest: neither
    ranked what the other never saw. Those pairs are summed for everyone at once, by how
    many items each side never saw. The pairs where it does matter, found through the items
    concerned, are taken back out and done exactly, per group of rankers who never saw the
    same items (that group's members among themselves too). The cost follows the ballots
    and the pairs that touch, not rankers x rankers x items.
    """
    # An item nobody saw is in no common set: leaving it out changes no correlation.
    counts = dict.fromkeys(items, 0)
    for u in unseen:
        for label in u:
            if label in counts:
                counts[label] += 1
    kept = [label for label in items if counts[label] < len(unseen)]
    n = len(kept)
    rows = _rows(ballots, unseen, kept)
    m = len(rows)
    sums = [0.0] * m
    tally = [0] * m

    def credit(i: int, total: _Sum, vec: _Vec | None, sign: int = 1) -> None:
        if vec is not None and total.count:
            sums[i] += sign * total.against(vec)
            tally[i] += sign * total.count

    members: dict[frozenset[int], list[int]] = {}
    for i, row in enumerate(rows):
        members.setdefault(row.hidden, []).append(i)
    sizes: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        sizes.setdefault(len(row.hidden), []).append(i)

    cache: dict[tuple[frozenset[int] | int, int], _Sum] = {}

    def plain(who: Sequence[int], h: int, g: int, key: frozenset[int] | int) -> _Sum:
        """Rows that never saw ``h`` items, correlated with one that never saw ``g`` other
        items, as if nothing either ranked were missing from the other."""
        total = cache.get((key, g))
        if total is None:
            c = n - h - g
            total = cache[(key, g)] = _Sum(c)
            for j in who:
                vec = _shifted(rows[j], g, c)
                if vec is not None:
                    total.add(vec)
        return total

    # 2. Which groups touch: one hides what the other ranked, or both hide the same item.
    hid_by: dict[int, list[frozenset[int]]] = {}
    for hidden in members:
        for x in hidden:
            hid_by.setdefault(x, []).append(hidden)
    ranked_by: dict[int, set[frozenset[int]]] = {}
    touching: set[tuple[frozenset[int], frozenset[int]]] = set()
    for hidden, who in members.items():
        for i in who:
            for x in rows[i].ids:
                ranked_by.setdefault(x, set()).add(hidden)
                for other in hid_by.get(x, ()):
                    touching.add((hidden, other))
    for hidden in members:
        for x in hidden:
            for other in (*ranked_by.get(x, ()), *hid_by[x]):
                touching.add((hidden, other))

    # When most pairs of groups touch (members who rank nearly everything), redoing them
    # pair by pair costs more than correlating every pair of groups directly, over dense
    # vectors: choose by the work each way would do.
    if _dense_is_cheaper(members, rows, touching, n):
        return _dense_means(rows, members, n, sums, tally)

    # 1. Every pair as if it were plain.
    for g, mine in sizes.items():
        for h, theirs in sizes.items():
            if n - g - h < 2:
                continue
            total = plain(theirs, h, g, h)
            for i in mine:
                credit(i, total, _shifted(rows[i], h, n - g - h))

    # 3. Each group among itself: the same items seen, nothing to rank again.
    for hidden, who in members.items():
        g = len(hidden)
        c = n - g
        if n - 2 * g >= 2:
            total = plain(who, g, g, hidden)
            for i in who:
                credit(i, total, _shifted(rows[i], g, n - 2 * g), -1)
        if c < 2:
            continue
        total = _Sum(c)
        vecs = [_shifted(rows[i], 0, c) for i in who]
        for vec in vecs:
            if vec is not None:
                total.add(vec)
        for i, vec in zip(who, vecs, strict=True):
            if vec is not None:
                credit(i, total, vec)
                sums[i] -= 1.0  # itself
                tally[i] -= 1

    # 4. Groups that touch, exactly, instead of as plain; each pair once, both ways.
    done: set[tuple[frozenset[int], frozenset[int]]] = set()
    for a, b in touching:
        if a == b or (b, a) in done:
            continue
        done.add((a, b))
        g, h = len(a), len(b)
        if n - g - h >= 2:
            for here, there, gx, gy in ((a, b, g, h), (b, a, h, g)):
                total = plain(members[there], gy, gx, there)
                for i in members[here]:
                    credit(i, total, _shifted(rows[i], gy, n - g - h), -1)
        c = n - len(a | b)
        if c < 2:
            continue
        vecs_a = [_reranked(rows[i], b - a) for i in members[a]]
        vecs_b = [_reranked(rows[j], a - b) for j in members[b]]
        for mine, vecs, others in (
            (members[a], vecs_a, vecs_b),
            (members[b], vecs_b, vecs_a),
        ):
            total = _Sum(c)
            for vec in others:
                if vec is not None:
                    total.add(vec)
            for i, vec in zip(mine, vecs, strict=True):
                credit(i, total, vec)

    return _means(rows, n, sums, tally)


def _means(
    rows: Sequence[_Row], n: int, sums: Sequence[float], tally: Sequence[int]
) -> list[float | None]:
    """Each ranker's summed correlations over how many there were; the pooled comparison
    for a ranker who shares two answers with no one."""
    out: list[float | None] = []
    pooled: _Pooled | None = None
    for i, row in enumerate(rows):
        if tally[i]:
            out.append(sums[i] / tally[i] + 0.0)
            continue
        if row.level_count + bool(row.rest) < 2:
            out.append(None)  # it tied everything it saw: no correlation with anyone
            continue
        # No pair shares two answers (three members): compare with the others combined.
        pooled = pooled or _Pooled(rows, n)
        out.append(pooled.rho(i))
    return out


def _dense_is_cheaper(
    members: Mapping[frozenset[int], Sequence[int]],
    rows: Sequence[_Row],
    touching: Collection[tuple[frozenset[int], frozenset[int]]],
    n: int,
) -> bool:
    """Whether correlating every pair of groups over dense vectors is less work than the
    sparse way. The sparse way redoes each touching pair per ranker in Python, in steps
    that follow the ballot; the dense way does every pair of groups per ranker in a few
    passes of builtins over all ``n`` items, about ``DENSE_STEP`` times cheaper each."""
    groups = len(members)
    if groups > _DENSE_GROUPS:
        return False
    size = {hidden: len(who) for hidden, who in members.items()}
    length = {
        hidden: sum(len(rows[i].ids) for i in who) / len(who) for hidden, who in members.items()
    }
    sparse = 0.0
    for a, b in touching:
        if a != b:  # each touching pair is listed both ways: each side counted once
            sparse += size[a] * (length[a] + _SPARSE_FIXED)
    dense = (groups + 1) * len(rows) * (n + _DENSE_FIXED) / _DENSE_STEP
    return dense < sparse


# Calibrated on the bench's @own designs (bench/tally.py, sections 3 and 4): a ranker's
# fixed cost per pair, in items, on either path, and how much cheaper a dense item is.
_SPARSE_FIXED = 12
_DENSE_FIXED = 12
_DENSE_STEP = 8
# Above this many groups the dense way is quadratic in them whatever the ballots.
_DENSE_GROUPS = 400


def _dense_means(
    rows: Sequence[_Row],
    members: Mapping[frozenset[int], Sequence[int]],
    n: int,
    sums: list[float],
    tally: list[int],
) -> list[float | None]:
    """Every pair of groups (and each group with itself) correlated directly: each ranker's
    ranks as a dense vector, ranked again over the answers both groups saw, and the other
    group's vectors summed per scale, so a ranker's correlations with a whole group are
    one dot product per scale."""
    dense: list[list[int]] = []
    for row in rows:
        doubled = [row.rest_rank if row.rest else 0] * n
        for j in row.hidden:
            doubled[j] = 0
        deque(map(doubled.__setitem__, row.ids, row.ranks), maxlen=0)
        dense.append(doubled)
    tables: dict[int, list[int]] = {}
    groups = list(members.items())
    for a, (hidden_a, who_a) in enumerate(groups):
        for hidden_b, who_b in groups[a:]:
            k = n - len(hidden_a | hidden_b)
            if k < 2:
                continue
            mine = [(i, *_within(rows[i], dense[i], hidden_b - hidden_a, k, tables)) for i in who_a]
            if hidden_a == hidden_b:
                _correlate(mine, mine, k, sums, tally, same=True)
                continue
            theirs = [
                (j, *_within(rows[j], dense[j], hidden_a - hidden_b, k, tables)) for j in who_b
            ]
            _correlate(mine, theirs, k, sums, tally, same=False)
            _correlate(theirs, mine, k, sums, tally, same=False)
    return _means(rows, n, sums, tally)


def _within(
    row: _Row, doubled: list[int], drop: frozenset[int], k: int, tables: dict[int, list[int]]
) -> tuple[list[int], int]:
    """``doubled`` ranked again without the items in ``drop`` (0 there), over the ``k``
    items left, and its centred sum of squares. Dropping an item moves the ones below it
    up a place (2 in doubled ranks) and shrinks its own tied group by one (1): a function
    of the dropped rank alone, applied as one table."""
    for x in drop:
        cut = doubled[x]
        if not cut:
            continue
        table = tables.get(cut)
        if table is None:
            table = tables[cut] = [
                r - 2 * (r > cut) - (r == cut) for r in range(2 * len(doubled) + 2)
            ]
        doubled = list(map(table.__getitem__, doubled))
        doubled[x] = 0
    if row.ties == 0 and row.rest <= 1:  # no ties, before or after
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

    def __init__(self, rows: Sequence[_Row], n: int) -> None:
        self.rows = [self._relative(row, n) for row in rows]
        self.total = [Fraction(0)] * n
        self.count = [0] * n
        for row in self.rows:
            for j, r in row.items():
                self.total[j] += r
                self.count[j] += 1

    @staticmethod
    def _relative(row: _Row, n: int) -> dict[int, Fraction]:
        k = row.seen
        out = {j: Fraction(row.rest_rank, 2 * k) for j in range(n) if j not in row.hidden}
        for j, r in zip(row.ids, row.ranks, strict=True):
            out[j] = Fraction(r, 2 * k)
        return out

    def rho(self, i: int) -> float | None:
        row = self.rows[i]
        common = [j for j in sorted(row) if self.count[j] > 1]
        if len(common) < 2:
            return None
        own = {j: row[j] for j in common}
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
