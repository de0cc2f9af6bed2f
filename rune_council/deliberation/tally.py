"""The tally: a parsed transcript in, a re-runnable decision out.

Order of work, so that policy acts before preference:

1. ``REQUIRE MUST-NOT -> X`` (cited) removes X before anything is counted.
2. Each ranker's last RANK counts; an earlier one is dropped as superseded (:func:`superseded`
   holds the rule, which a member's ballot reply follows too).
3. Borda x confidence: with N proposals in play, the k-th place from the top (0-based) earns
   ``N - 1 - k`` points; tied proposals share the mean of the places they span; a proposal a
   ranker left out gets nothing from that ranker; the points are multiplied by the ranker's
   ``conf`` (1.0 when absent) and summed.
4. A ``CRITIQUE MUST | MUST-NOT -> X`` blocks X from synthesis until a later ``REVISE -> X``.
5. Kendall's W over the rankings (tie-corrected, unranked items at the tied bottom) and each
   ranker's mean Spearman correlation with the others: below 0 is a dissenting ranker
   (with three rankers or more; with two, "the other" is no majority).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

from ..core.contract import (
    BlockedProposal,
    ConsensusScore,
    DroppedLine,
    MoveError,
    ProposalScore,
    PrunedProposal,
    RankerDetail,
    SynthMove,
    TallyReport,
    VoteCount,
)
from . import concordance
from .dsl import BLOCKING, Dropped, Move, Transcript, ballot_text, parse

SCORE_EPSILON = 1e-9
ROUNDING = 9
MIN_RANKERS_FOR_DISSENT = 3
_ALL_SET = set(RankerDetail.model_fields)


def _dropped(d: Dropped) -> DroppedLine:
    return DroppedLine(line=d.line, text=d.text, reason=d.reason)


def _proposals(moves: Sequence[Move]) -> tuple[list[str], dict[str, str], bool]:
    declared: list[str] = []
    texts: dict[str, str] = {}
    for m in moves:
        if m.verb == "PROPOSE" and m.target and m.target not in texts:
            declared.append(m.target)
            texts[m.target] = m.note or ""
    if declared:
        return declared, texts, True
    seen: dict[str, None] = {}
    for m in moves:
        for level in m.ballot:
            for label in level:
                seen.setdefault(label)
        if m.verb in ("CRITIQUE", "REVISE", "REQUIRE", "CLAIM") and m.target:
            seen.setdefault(m.target)
    return list(seen), texts, False


@dataclass(slots=True)
class Counted:
    """One counted ballot, as small as it can be kept: a tally of 100,000 rankers holds this
    many at once, and the detail (a model with a dict of points) is made from it on demand.
    Its points are ``TallyParts.tables[conf][r]`` for each placed item ``active[j]``, with
    ``(j, r)`` from ``zip(row.items, row.doubled)``."""

    ranker: str
    line: int
    ballot: str
    conf: float
    row: concordance.Placed
    mean: float | None = None
    dissenting: bool = False


class TallyParts:
    """A tally whose per-ranker details are made one at a time, for a caller that writes them
    out as they come (``report`` has every field but ``rankers``, which is empty)."""

    def __init__(
        self,
        report: TallyReport,
        counted: list[Counted],
        active: list[str],
        tables: dict[float, list[float]],
    ) -> None:
        self.report = report
        self.counted = counted  # in line order
        self.active = active  # the proposals in play, numbered as the rows number them
        self.tables = tables  # points by doubled rank, one table per conf

    def rankers(self) -> Iterator[RankerDetail]:
        """Every ranker's detail, in line order, as ``tally`` reports them."""
        return map(self.detail, self.counted)

    def detail(self, c: Counted) -> RankerDetail:
        """The detail of one counted ballot."""
        table = self.tables[c.conf]
        # Built here from labels and floats the tally made itself; validating 100,000 such
        # records again cost more than the rest of the tally. Set the way pydantic's own
        # model_construct sets them, every field given, sharing one record of that.
        detail = RankerDetail.__new__(RankerDetail)
        put = object.__setattr__
        put(
            detail,
            "__dict__",
            {
                "ranker": c.ranker,
                "line": c.line,
                "ballot": c.ballot,
                "conf": c.conf,
                "points": dict(
                    zip(
                        map(self.active.__getitem__, c.row.items),
                        map(table.__getitem__, c.row.doubled),
                        strict=True,
                    )
                ),
                "mean_spearman": c.mean,
                "dissenting": c.dissenting,
            },
        )
        put(detail, "__pydantic_fields_set__", _ALL_SET)
        put(detail, "__pydantic_extra__", None)
        put(detail, "__pydantic_private__", None)
        return detail

    def whole(self) -> TallyReport:
        """The report with every ranker's detail in it."""
        report = self.report.model_copy()
        report.rankers = list(self.rankers())
        return report


def tally(transcript: Transcript) -> TallyReport:
    return tally_parts(transcript).whole()


def tally_parts(transcript: Transcript) -> TallyParts:
    """The tally, with the per-ranker details left to be made one at a time.

    The steps of the module's docstring in their order, each a function of its own; every
    line a step refuses is added to ``dropped`` with its reason.
    """
    setup = _setup(transcript)
    counted = _borda(
        _last_rankings(setup.moves, transcript.own, setup.dropped),
        setup.active,
        setup.gone,
        classes=not transcript.own,
    )
    consensus, dissenters = _concordance(counted, setup.active, transcript.own)
    report = _report(setup, counted.totals, bool(counted.rankers), consensus, dissenters)
    return TallyParts(report, counted.rankers, setup.active, counted.points_of)


@dataclass(slots=True)
class _Setup:
    """What the tally knows before it counts a ballot: the proposals, the moves that count
    at all, what policy pruned, and every line refused so far."""

    dropped: list[DroppedLine]
    errors: list[MoveError]
    proposals: list[str]
    texts: dict[str, str]
    declared: bool
    moves: list[Move]
    pruned: list[PrunedProposal]
    gone: set[str]
    active: list[str]


def _setup(transcript: Transcript) -> _Setup:
    dropped = [_dropped(d) for d in transcript.dropped]
    errors = [MoveError(line=e.line, text=e.text, reason=e.reason) for e in transcript.errors]
    proposals, texts, declared = _proposals(transcript.moves)
    moves = _admitted(transcript.moves, set(proposals) if declared else None, dropped)
    pruned = _pruned(moves)
    gone = {p.label for p in pruned}
    active = [p for p in proposals if p not in gone]
    return _Setup(dropped, errors, proposals, texts, declared, moves, pruned, gone, active)


def _report(
    setup: _Setup,
    totals: Sequence[float],
    ranked: bool,
    consensus: ConsensusScore,
    dissenters: list[str],
) -> TallyReport:
    """The report of a tally whose ballots are counted (``ranked``: any ballot counted),
    every field but the rankers' details."""
    active = setup.active
    # Float sums depend on the order of addition; rounding makes the verdict independent of it.
    scores = {p: round(v, ROUNDING) for p, v in zip(active, totals, strict=True)}
    blocked = _blocked(setup.moves, setup.gone)
    blocked_labels = {b.label for b in blocked}
    order = _levels(active, scores) if ranked else [[p] for p in active]
    winner = _winner(order, blocked_labels) if ranked else None
    dropped = setup.dropped
    return TallyReport(
        valid=not setup.errors,
        proposals=setup.proposals,
        rankers=[],
        scores=[
            ProposalScore(
                label=p,
                score=round(scores[p], 9),
                text=setup.texts.get(p) or None,
                blocked=p in blocked_labels,
            )
            for level in order
            for p in level
        ],
        final_order=order,
        winner=winner,
        pruned=setup.pruned,
        blocked=blocked,
        consensus=consensus,
        dissenters=dissenters,
        votes=_votes(setup.moves, dropped),
        synth=_synth(setup.moves),
        dropped=sorted(dropped, key=lambda d: d.line),
        errors=setup.errors,
    )


def _admitted(
    moves: Sequence[Move], known: set[str] | None, dropped: list[DroppedLine]
) -> list[Move]:
    """The moves that count at all: with declared proposals (``known``), none that names a
    label nobody proposed; and no second PROPOSE of one label."""
    admitted: list[Move] = []
    proposed: set[str] = set()
    for m in moves:
        if m.verb == "RANK" and (known is None or known.issuperset(chain.from_iterable(m.ballot))):
            admitted.append(m)  # a ballot of proposed labels (nearly all of a long transcript)
            continue
        unknown = _first_unknown(m, known) if known is not None else None
        if unknown is not None:
            dropped.append(
                DroppedLine(
                    line=m.line, text=m.text, reason=f"names {unknown}, which nobody proposed"
                )
            )
            continue
        if m.verb == "PROPOSE":
            if m.target in proposed:
                dropped.append(
                    DroppedLine(line=m.line, text=m.text, reason=f"{m.target} is already proposed")
                )
                continue
            proposed.add(m.target or "")
        admitted.append(m)
    return admitted


def _pruned(moves: Sequence[Move]) -> list[PrunedProposal]:
    """Step 1: every proposal a cited ``REQUIRE MUST-NOT`` removes, once, at its first line."""
    pruned: list[PrunedProposal] = []
    for m in moves:
        target = m.target
        if (
            m.verb == "REQUIRE"
            and m.modality == "MUST-NOT"
            and target
            and all(p.label != target for p in pruned)
        ):
            why = m.note or "a MUST-NOT requirement"
            pruned.append(
                PrunedProposal(
                    label=target,
                    line=m.line,
                    reason=f"{why} (ev={','.join(m.ev)})",
                )
            )
    return pruned


def _last_rankings(
    moves: Sequence[Move], own: dict[str, set[str]], dropped: list[DroppedLine]
) -> list[tuple[str, Move]]:
    """Step 2: one ballot per ranker, the last one, in line order; a ballot that ranks the
    ranker's own answer does not count, and an earlier one is dropped as superseded."""
    last_rank: dict[str, Move] = {}
    again = False
    for m in moves:
        if m.verb == "RANK":
            who = m.speaker or f"line-{m.line}"
            mine_of = own.get(who)
            mine = mine_of & {x for level in m.ballot for x in level} if mine_of else None
            if mine:
                dropped.append(
                    DroppedLine(
                        line=m.line,
                        text=m.text,
                        reason=f"{who} ranks its own answer {sorted(mine)[0]}",
                        source=who,
                    )
                )
                continue
            earlier = last_rank.get(who)
            if earlier is not None:
                dropped.append(superseded(earlier, m, who, f"{who}'s"))
                again = True
            last_rank[who] = m
    # A ranker keeps the place of its first ballot: sorted only if one ranked again.
    kept = list(last_rank.items())
    return sorted(kept, key=lambda kv: kv[1].line) if again else kept


def superseded(earlier: Move, later: Move, source: str, whose: str = "the") -> DroppedLine:
    """The one rule for a ranker who sends several RANK lines, in a transcript and in a
    member's ballot reply alike: the last one that can be counted counts, and each earlier
    one is kept as dropped, superseded by it. A RANK that cannot be counted (it does not
    parse, names a label its ranker was not shown, or ranks the ranker's own answer) is
    dropped with its own reason and supersedes nothing. The last, not the first, because a
    model that writes two rankings has, as a rule, thought again: it drafts and then
    concludes, or corrects itself."""
    return DroppedLine(
        line=earlier.line,
        text=earlier.text,
        reason=f"superseded by {whose} RANK on line {later.line}",
        source=source,
    )


@dataclass(slots=True)
class _Borda:
    """What step 3 counted: each proposal's points, and every counted ballot in line order
    (its record, its levels without pruned proposals, its places)."""

    totals: list[float]
    rankers: list[Counted]
    ballots: list[Sequence[Sequence[str]]]
    rows: list[concordance.Placed]
    points_of: dict[float, list[float]]
    classes: concordance.TieClasses | None


def _borda(
    rank_moves: Iterable[tuple[str, Move]],
    active: list[str],
    gone: set[str],
    *,
    classes: bool,
    points: list[array[float]] | None = None,
) -> _Borda:
    """Step 3: Borda x confidence over the proposals in play. ``classes``: also count the
    rankings' tie classes for the complete-rankings concordance, in the same walk over each
    ballot's places (the walk is most of the cost of either). ``points``: instead of adding
    them up, keep each proposal's points in line order, for a caller that adds them to the
    totals of the ballots before these (``totals`` is then left at zero)."""
    n = len(active)
    index = {p: j for j, p in enumerate(active)}
    totals = [0.0] * n
    rankers: list[Counted] = []
    rows: list[concordance.Placed] = []
    # Kept as bytes when the ranks fit in one (up to 127 proposals): a fifth of the memory of
    # lists, which matters at 100,000 rankers.
    compact = 2 * n + 1 < 256
    ballots: list[Sequence[Sequence[str]]] = []
    points_of: dict[float, list[float]] = {}
    place = concordance.place
    known: dict[Sequence[str], bytes] = {}  # each level's numbers, read once per level tuple
    ties: concordance.TieClasses | None = {} if classes else None
    add_to_class = concordance.add_to_class
    # Rankings in bytes count their tie classes from whole rank vectors (no step per place).
    columns = concordance.TieColumns(n) if classes and compact else None
    add_columns = columns.add if columns is not None else None
    keep = [] if points is None else [column.append for column in points]
    for who, m in rank_moves:
        levels: Sequence[Sequence[str]] = (
            [kept for level in m.ballot if (kept := [x for x in level if x not in gone])]
            if gone
            else m.ballot
        )
        conf = 1.0 if m.conf is None else m.conf
        row = place(levels, index, n, small=compact, levels=known if compact and not gone else None)
        # A run of tied places with doubled rank r earns the mean of their points, n - r/2;
        # one table per conf, so equal points share one float object in a big tally.
        table = points_of.get(conf)
        if table is None:
            table = points_of[conf] = [(n - r / 2) * conf for r in range(2 * n + 2)]
        # Each proposal's points are added in line order: float sums depend on the order.
        if add_columns is not None and row.items:
            add_columns(row)
        if points is not None:
            for j, r in zip(row.items, row.doubled, strict=True):
                keep[j](table[r])
            if ties is not None and add_columns is None and row.items:
                delta = add_to_class(ties, row, n)
                for j, r in zip(row.items, row.doubled, strict=True):
                    delta[j] += r - row.rest_rank
        elif ties is None or add_columns is not None or not row.items:
            for j, r in zip(row.items, row.doubled, strict=True):
                totals[j] += table[r]
        else:
            delta = add_to_class(ties, row, n)
            rest_rank = row.rest_rank
            for j, r in zip(row.items, row.doubled, strict=True):
                totals[j] += table[r]
                delta[j] += r - rest_rank
        ballot = m.args[0] if m.args and not gone else ballot_text(levels)
        rankers.append(Counted(who, m.line, ballot, conf, row))
        ballots.append(levels)
        rows.append(row)
    if columns is not None:
        ties = columns.classes()
    return _Borda(totals, rankers, ballots, rows, points_of, ties)


def _concordance(
    counted: _Borda, active: list[str], own: dict[str, set[str]]
) -> tuple[ConsensusScore, list[str]]:
    """Step 5: Kendall's W over the rankings, then who stands apart from the others.

    Rankers whose own answers they never saw (``own``) gave incomplete rankings: W and the
    mean Spearman are the incomplete-design forms, over what each ranker saw.
    """
    n = len(active)
    ballots = counted.ballots
    ranked = [b for b in ballots if b]
    unseen: list[set[str]] = []
    complete_means: list[float | None] = []
    if own:
        # What each ranker never saw, not what it saw: a member's own answers are few, the
        # answers it saw are nearly all of them, and listing those for every member made the
        # tally grow with members x answers before a single ballot was read.
        nothing: set[str] = set()
        unseen = [own.get(r.ranker, nothing) for r in counted.rankers]
        w = concordance.incomplete_w_unseen(
            ranked, [u for u, b in zip(unseen, ballots, strict=True) if b], active
        )
        method = (
            "kendall_w for incomplete rankings (own answers unseen, not last; tie pattern kept)"
        )
    else:
        w, complete_means = concordance.concordance_of(
            [r for r in counted.rows if r.items], n, counted.classes
        )
        method = COMPLETE_METHOD
    consensus = _consensus(w, method, len(ranked), n)
    if len(ranked) < 2 or n < 2:
        return consensus, []
    if own:
        means = concordance.incomplete_mean_spearman_unseen(ballots, unseen, active)
    else:
        found = iter(complete_means)
        means = [next(found) if row.items else None for row in counted.rows]
    return consensus, _dissenters(counted, means, ranked, active, consensus)


COMPLETE_METHOD = "kendall_w (tie-corrected; unranked proposals share the bottom places)"


def _consensus(w: float | None, method: str, ranked: int, n: int) -> ConsensusScore:
    note = ""
    if ranked < 2:
        note = "fewer than two rankings: W is undefined"
    elif n < 2:
        note = "fewer than two proposals in play: W is undefined"
    elif w is None:
        note = "every ranking ties everything: W is undefined"
    return ConsensusScore(
        w=None if w is None else round(w, 9),
        label=concordance.label_for(w),
        method=method,
        rankers=ranked,
        proposals=n,
        note=note,
    )


def _dissenters(
    counted: _Borda,
    means: Sequence[float | None],
    ranked: list[Sequence[Sequence[str]]],
    active: list[str],
    consensus: ConsensusScore,
) -> list[str]:
    """Step 5, dissent: each ranker's mean Spearman is kept on its record; below 0 (with
    three rankers or more) it dissents. When everyone is below 0 nobody stands apart, and
    the consensus note says why (a majority cycle, or plain disagreement)."""
    placed = [c for c, levels in zip(counted.rankers, counted.ballots, strict=True) if levels]
    rounded = [
        None if mean is None else round(mean, ROUNDING)
        for mean, levels in zip(means, counted.ballots, strict=True)
        if levels
    ]
    apart = concordance.standing_apart(rounded)
    dissenters = _mark(placed, rounded, apart, len(ranked) >= MIN_RANKERS_FOR_DISSENT)
    everyone_below = bool(rounded) and all(m is not None and m < 0 for m in rounded)
    if len(ranked) >= MIN_RANKERS_FOR_DISSENT and everyone_below:
        cycle = concordance.majority_cycle(ranked, active)
        shape = (
            f"the rankings form a cycle ({' > '.join(cycle)})"
            if cycle
            else "every ranking disagrees with the others"
        )
        consensus.note = "; ".join(
            x for x in (consensus.note, f"{shape}: no ranker stands apart") if x
        )
    return dissenters


def _mark(
    placed: Sequence[Counted],
    rounded: Sequence[float | None],
    apart: Sequence[bool],
    counting: bool,
) -> list[str]:
    """Each placed ballot's mean Spearman kept on its record, and who dissents (``apart``,
    when there are enough rankers for dissent to be ``counting``), in line order."""
    dissenters: list[str] = []
    for counted_, mean, dissenting in zip(placed, rounded, apart, strict=True):
        counted_.mean = None if mean is None else round(mean, 6)
        if counting and dissenting:
            counted_.dissenting = True
            dissenters.append(counted_.ranker)
    return dissenters


def _synth(moves: Sequence[Move]) -> SynthMove | None:
    """The last SYNTH counts; it closes the council when it leaves nothing open."""
    synth_moves = [m for m in moves if m.verb == "SYNTH"]
    if not synth_moves:
        return None
    last = synth_moves[-1]
    open_items = list(last.open or ())
    return SynthMove(line=last.line, text=last.note or "", open=open_items, closes=not open_items)


def _first_unknown(m: Move, known: set[str]) -> str | None:
    if known.issuperset(chain.from_iterable(m.ballot)):
        if m.verb in ("CRITIQUE", "REVISE", "REQUIRE", "CLAIM") and m.target:
            return None if m.target in known else m.target
        return None
    for level in m.ballot:
        for x in level:
            if x not in known:
                return x
    if m.verb in ("CRITIQUE", "REVISE", "REQUIRE", "CLAIM") and m.target and m.target not in known:
        return m.target
    return None


def _levels(active: list[str], scores: dict[str, float]) -> list[list[str]]:
    ordered = sorted(active, key=lambda p: -scores[p])  # stable: equal scores keep their order
    levels: list[list[str]] = []
    for p in ordered:
        if levels and abs(scores[levels[-1][0]] - scores[p]) <= SCORE_EPSILON:
            levels[-1].append(p)
        else:
            levels.append([p])
    return levels


def _winner(order: list[list[str]], blocked: set[str]) -> str | None:
    for level in order:
        open_ = [p for p in level if p not in blocked]
        if open_:
            return open_[0] if len(open_) == 1 else None
    return None


def _blocked(moves: list[Move], gone: set[str]) -> list[BlockedProposal]:
    pending: dict[str, list[Move]] = {}
    for m in moves:
        if not m.target or m.target in gone:
            continue
        if m.verb == "CRITIQUE" and m.modality in BLOCKING:
            pending.setdefault(m.target, []).append(m)
        elif m.verb == "REVISE":
            pending.pop(m.target, None)
    out = []
    for label, critiques in pending.items():
        first = critiques[0]
        why = first.note or f"a {first.modality} critique"
        out.append(
            BlockedProposal(
                label=label,
                lines=[c.line for c in critiques],
                reason=f"unresolved {first.modality} critique: {why}",
            )
        )
    return out


def _votes(moves: list[Move], dropped: list[DroppedLine]) -> list[VoteCount]:
    counts: dict[str, VoteCount] = {}
    cast: dict[tuple[str, str], int] = {}
    for m in moves:
        if m.verb not in ("VOTE", "ABSTAIN") or m.target is None:
            continue
        who = m.speaker or f"line-{m.line}"
        key = (who, m.target)
        if key in cast:
            dropped.append(
                DroppedLine(
                    line=m.line,
                    text=m.text,
                    reason=f"{who} already voted on {m.target} (line {cast[key]})",
                    source=who,
                )
            )
            continue
        cast[key] = m.line
        entry = counts.setdefault(m.target, VoteCount(target=m.target))
        if m.verb == "ABSTAIN":
            entry.abstain.append(who)
        elif m.choice == "yes":
            entry.yes.append(who)
        else:
            entry.no.append(who)
    return list(counts.values())


def tally_text(text: str) -> TallyReport:
    return tally(parse(text))
