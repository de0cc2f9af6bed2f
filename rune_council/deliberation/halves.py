"""A long transcript tallied in two halves, each read and counted on its own, then put
together into the report the whole transcript's tally makes, byte for byte.

The second half is counted without the first in hand, so it holds to what makes that safe,
and anything else is left to the ordinary tally (:func:`~.tally.tally_parts`): the second
half is RANK lines only (and refused lines), no ``@own`` anywhere, the proposals declared,
and no ranker of the second half ranked in the first (its last ballot would supersede one
the first half counted). Whole numbers (the tie classes) are added up half by half; every
float is made as the one-piece tally makes it: each proposal's Borda points are added to
the first half's totals one by one, in line order, and the mean correlations of both halves
are read from the same merged classes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import reduce
from operator import add
from typing import TypeVar

from ..core.contract import DroppedLine, TallyReport
from . import concordance
from .dsl import Transcript
from .tally import (
    COMPLETE_METHOD,
    MIN_RANKERS_FOR_DISSENT,
    ROUNDING,
    Counted,
    TallyParts,
    _admitted,
    _Borda,
    _borda,
    _consensus,
    _dropped,
    _last_rankings,
    _mark,
    _report,
    _Setup,
    _setup,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Context:
    """What the second half is counted against, from the first half's reading."""

    known: frozenset[str]  # the declared proposals
    active: tuple[str, ...]  # the proposals in play, numbered as the rankings number them
    gone: frozenset[str]  # what policy pruned


@dataclass(slots=True)
class SecondCount:
    """What the first half needs of the second half's count: whole numbers and the points
    in line order, the lines it refused, and who ranked in it."""

    dropped: list[tuple[int, str, str, str | None]]
    ranked: int  # counted ballots with something left to rank
    counted: int
    classes: concordance.TieClasses
    # One column a proposal; :func:`merge` reads each once, so the first half may read
    # them one at a time as they come (together some 10 MB at 100,000 lines).
    points: Iterable[array[float]]


@dataclass(slots=True)
class First:
    """The first half's tally so far."""

    setup: _Setup
    borda: _Borda


def first_context(first: Transcript) -> Context | None:
    """What the second half is to be counted against, read from the first half's moves but
    its RANK lines, which change none of it once the proposals are declared (the first half
    holds every move but RANK lines, or the second half says it cannot be split); None when
    the transcript is not one this module can split (the ordinary tally reads it)."""
    if first.own:
        return None
    setup = _setup(Transcript(moves=[m for m in first.moves if m.verb != "RANK"]))
    return _context(setup) if setup.declared else None


def _context(setup: _Setup) -> Context:
    return Context(frozenset(setup.proposals), tuple(setup.active), frozenset(setup.gone))


def count_first(first: Transcript, context: Context) -> First | None:
    """The first half's ballots counted (None if it was not read as ``context`` says).
    ``first`` is used up: its moves are let go as they are counted."""
    setup = _setup(first)
    first.moves = []
    if _context(setup) != context:
        return None
    rank_moves = _last_rankings(setup.moves, {}, setup.dropped)
    # The report reads no RANK move again, nor a ballot's levels: what is printed is on the
    # counted records, and the moves of 50,000 lines are some 25 MB.
    setup.moves = [m for m in setup.moves if m.verb != "RANK"]
    borda = _borda(_drained(rank_moves), setup.active, setup.gone, classes=True)
    _forget_levels(borda)
    return First(setup, borda)


def _drained(items: list[T]) -> Iterator[T]:
    """``items`` in order, each let go once the next is asked for: a move's memory is free
    for the records counted after it, instead of both being held at once (the two
    processes' peak is at the end of counting)."""
    items.reverse()
    while items:
        yield items.pop()


def _forget_levels(borda: _Borda) -> None:
    """Drop the counted ballots' levels (a ballot is placed when its row ranks something)."""
    borda.ballots = []


def rankers(half: Transcript) -> list[str]:
    """Who sent a RANK in ``half`` (counted or not)."""
    return [m.speaker or f"line-{m.line}" for m in half.moves if m.verb == "RANK"]


def apart(first: Transcript, second: list[str]) -> bool:
    """Whether no ranker of the second half (``rankers``) sent a RANK in the first: its
    last ballot would supersede one the first half counts. (A RANK that is not counted
    would not, so this is stricter than it need be; such a transcript is tallied whole.)"""
    return set(rankers(first)).isdisjoint(second)


def count_second(second: Transcript, context: Context) -> tuple[SecondCount, _Borda] | None:
    """The second half counted against ``context``; None when it holds anything but RANK
    lines and refused ones. ``second`` is used up once it is counted."""
    if second.own or second.errors or any(m.verb != "RANK" for m in second.moves):
        return None
    dropped = [_dropped(d) for d in second.dropped]
    moves = _admitted(second.moves, set(context.known), dropped)
    rank_moves = _last_rankings(moves, {}, dropped)
    del moves
    second.moves = []  # (used up, as in ``count_first``)
    points: list[array[float]] = [array("d") for _ in context.active]
    borda = _borda(
        _drained(rank_moves), list(context.active), set(context.gone), classes=True, points=points
    )
    _forget_levels(borda)
    count = SecondCount(
        dropped=[(d.line, d.text, d.reason, d.source) for d in dropped],
        ranked=_ranked(borda),
        counted=len(borda.rankers),
        classes=borda.classes or {},
        points=points,
    )
    return count, borda


@dataclass(slots=True)
class Merged:
    """Both halves' counts put together: the totals and W of the whole transcript, and
    what each half's mean correlations are read from."""

    totals: list[float]
    w: float | None
    centred: concordance.Centred
    ranked: int
    counting: bool


def merge(first: First, second: SecondCount) -> Merged | None:
    """None when the halves cannot be put together as the whole would be counted: too few
    rankings or proposals for every ranker's correlation to be defined (the ordinary tally
    says why). The halves' rankers are :func:`apart`. The second half's points are read
    once, a column at a time, and only once the halves are known to fit."""
    n = len(first.setup.active)
    ranked = _ranked(first.borda) + second.ranked
    if ranked < MIN_RANKERS_FOR_DISSENT or n < 2:
        return None
    # Each total goes on from where the first half left it, one point at a time, in line
    # order: the same additions, in the same order, as the one-piece tally's.
    totals = [
        reduce(add, points, total)
        for total, points in zip(first.borda.totals, second.points, strict=True)
    ]
    classes = concordance.merge_classes(first.borda.classes or {}, second.classes)
    w, centred = concordance.concordance_base(classes, ranked, n)
    return Merged(totals, w, centred, ranked, True)


def rounded_means(borda: _Borda, centred: concordance.Centred) -> list[float | None]:
    """Each placed ballot's mean correlation, rounded as the tally rounds it for dissent."""
    means = concordance.mean_correlations([r for r in borda.rows if r.items], centred)
    return [None if mean is None else round(mean, ROUNDING) for mean in means]


def _ranked(borda: _Borda) -> int:
    """How many counted ballots rank something (once pruned)."""
    return sum(1 for row in borda.rows if row.items)


def all_below(rounded: list[float | None]) -> bool:
    return all(m is not None and m < 0 for m in rounded)


def mark(borda: _Borda, rounded: list[float | None], counting: bool) -> list[str]:
    """A half's dissenters, once it is known that not every ranker is below zero (then
    nobody would stand apart, and the ordinary tally says why)."""
    placed = [c for c, row in zip(borda.rankers, borda.rows, strict=True) if row.items]
    below = [m is not None and m < 0 for m in rounded]
    return _mark(placed, rounded, below, counting)


def whole_report(
    first: First, merged: Merged, second: SecondCount, dissenters: list[str]
) -> TallyReport:
    """The report of the whole transcript (every field but the rankers' details)."""
    setup = first.setup
    setup.dropped += [
        DroppedLine(line=line, text=text, reason=reason, source=source)
        for line, text, reason, source in second.dropped
    ]
    consensus = _consensus(merged.w, COMPLETE_METHOD, merged.ranked, len(setup.active))
    counted = bool(first.borda.rankers) or second.counted > 0
    return _report(setup, merged.totals, counted, consensus, dissenters)


def zero_table(borda: _Borda) -> list[float] | None:
    """The points table of a zero conf, if a ballot had one: ``0`` and ``-0`` are one key of
    the tables, so the whole tally prints every zero-conf ballot's points from the first
    one's table (``-0`` or ``0``), which the first half may hold."""
    return borda.points_of.get(0.0)


def share_zero(borda: _Borda, table: list[float] | None) -> None:
    """The second half's zero-conf ballots printed from the first half's ``table``."""
    if table is not None and 0.0 in borda.points_of:
        borda.points_of[0.0] = table


def parts_of(report: TallyReport, borda: _Borda, active: tuple[str, ...] | list[str]) -> TallyParts:
    """One half's counted ballots, to be printed as the whole report prints them."""
    rankers: list[Counted] = borda.rankers
    return TallyParts(report, rankers, list(active), borda.points_of)
