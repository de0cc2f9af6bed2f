"""The tally as first written, kept as the oracle for the fast one (tests only).

Every ranker's ranks as a table, every pair of rankers compared on its own; slow at scale
but plain enough to read against the rules below.

The tally: a parsed transcript in, a re-runnable decision out.

Order of work, so that policy acts before preference:

1. ``REQUIRE MUST-NOT -> X`` (cited) removes X before anything is counted.
2. Each ranker's last RANK counts; an earlier one is dropped as superseded.
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

from collections.abc import Sequence

from rune_council.core.contract import (
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
from rune_council.deliberation.dsl import BLOCKING, Dropped, Move, Transcript, ballot_text, parse

from . import concordance_plain as concordance

SCORE_EPSILON = 1e-9
ROUNDING = 9
MIN_RANKERS_FOR_DISSENT = 3


def _dropped(d: Dropped) -> DroppedLine:
    return DroppedLine(line=d.line, text=d.text, reason=d.reason)


def borda_points(ballot: Sequence[Sequence[str]], n: int, conf: float = 1.0) -> dict[str, float]:
    """Points one ballot gives, over ``n`` proposals in play."""
    points: dict[str, float] = {}
    place = 0
    for level in ballot:
        if not level:
            continue
        # Places place .. place+len-1 earn n-1-place .. n-len-place; the mean of that run.
        share = (n - 1 - place) - (len(level) - 1) / 2
        for label in level:
            points[label] = share * conf
        place += len(level)
    return points


def _proposals(moves: Sequence[Move]) -> tuple[list[str], dict[str, str], bool]:
    declared: list[str] = []
    texts: dict[str, str] = {}
    for m in moves:
        if m.verb == "PROPOSE" and m.target and m.target not in texts:
            declared.append(m.target)
            texts[m.target] = m.note or ""
    if declared:
        return declared, texts, True
    seen: list[str] = []
    for m in moves:
        labels: list[str] = [x for level in m.ballot for x in level]
        if m.verb in ("CRITIQUE", "REVISE", "REQUIRE", "CLAIM") and m.target:
            labels.append(m.target)
        for label in labels:
            if label not in seen:
                seen.append(label)
    return seen, texts, False


def tally(transcript: Transcript) -> TallyReport:
    dropped = [_dropped(d) for d in transcript.dropped]
    errors = [MoveError(line=e.line, text=e.text, reason=e.reason) for e in transcript.errors]
    proposals, texts, declared = _proposals(transcript.moves)
    known = set(proposals)

    moves: list[Move] = []
    proposed: set[str] = set()
    for m in transcript.moves:
        names = [x for level in m.ballot for x in level]
        if m.verb in ("CRITIQUE", "REVISE", "REQUIRE", "CLAIM") and m.target:
            names.append(m.target)
        unknown = [x for x in names if x not in known]
        if declared and unknown:
            dropped.append(
                DroppedLine(
                    line=m.line, text=m.text, reason=f"names {unknown[0]}, which nobody proposed"
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
        moves.append(m)

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
    gone = {p.label for p in pruned}
    active = [p for p in proposals if p not in gone]

    # One ballot per ranker: the last one counts.
    last_rank: dict[str, Move] = {}
    for m in moves:
        if m.verb == "RANK":
            who = m.speaker or f"line-{m.line}"
            mine = transcript.own.get(who, set()) & {x for level in m.ballot for x in level}
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
                dropped.append(
                    DroppedLine(
                        line=earlier.line,
                        text=earlier.text,
                        reason=f"superseded by {who}'s RANK on line {m.line}",
                        source=who,
                    )
                )
            last_rank[who] = m
    rank_moves = sorted(last_rank.items(), key=lambda kv: kv[1].line)

    n = len(active)
    scores = {p: 0.0 for p in active}
    rankers: list[RankerDetail] = []
    ballots: list[list[list[str]]] = []
    for who, m in rank_moves:
        levels = [[x for x in level if x not in gone] for level in m.ballot]
        levels = [level for level in levels if level]
        conf = 1.0 if m.conf is None else m.conf
        points = borda_points(levels, n, conf)
        for label, value in points.items():
            scores[label] += value
        rankers.append(
            RankerDetail(
                ranker=who, line=m.line, ballot=ballot_text(levels), conf=conf, points=points
            )
        )
        ballots.append(levels)

    # Float sums depend on the order of addition; rounding makes the verdict independent of it.
    scores = {p: round(v, ROUNDING) for p, v in scores.items()}
    blocked = _blocked(moves, gone)
    blocked_labels = {b.label for b in blocked}
    order = _levels(active, scores) if rankers else [[p] for p in active]
    winner = _winner(order, blocked_labels) if rankers else None

    counted = [b for b in ballots if b]
    incomplete = bool(transcript.own)
    seen = [[p for p in active if p not in transcript.own.get(r.ranker, set())] for r in rankers]
    if incomplete:
        w = concordance.incomplete_w(
            [b for b in ballots if b], [s for s, b in zip(seen, ballots, strict=True) if b], active
        )
        method = (
            "kendall_w for incomplete rankings (own answers unseen, not last; tie pattern kept)"
        )
    else:
        w = concordance.kendall_w(counted, active)
        method = "kendall_w (tie-corrected; unranked proposals share the bottom places)"
    note = ""
    if len(counted) < 2:
        note = "fewer than two rankings: W is undefined"
    elif n < 2:
        note = "fewer than two proposals in play: W is undefined"
    elif w is None:
        note = "every ranking ties everything: W is undefined"
    consensus = ConsensusScore(
        w=None if w is None else round(w, 9),
        label=concordance.label_for(w),
        method=method,
        rankers=len(counted),
        proposals=n,
        note=note,
    )

    dissenters: list[str] = []
    if len(counted) >= 2 and n >= 2:
        if incomplete:
            means = concordance.incomplete_mean_spearman(ballots, seen)
        else:
            tables = [concordance.ranks(b, active) for b in ballots]
            means = concordance.mean_spearman(tables, active)
        placed = [
            (detail, None if mean is None else round(mean, ROUNDING))
            for detail, mean, levels in zip(rankers, means, ballots, strict=True)
            if levels
        ]
        apart = concordance.standing_apart([mean for _, mean in placed])
        for (detail, mean), dissenting in zip(placed, apart, strict=True):
            detail.mean_spearman = None if mean is None else round(mean, 6)
            if len(counted) >= MIN_RANKERS_FOR_DISSENT and dissenting:
                detail.dissenting = True
                dissenters.append(detail.ranker)
        everyone_below = bool(placed) and all(m is not None and m < 0 for _, m in placed)
        if len(counted) >= MIN_RANKERS_FOR_DISSENT and everyone_below:
            cycle = concordance.majority_cycle(counted, active)
            shape = (
                f"the rankings form a cycle ({' > '.join(cycle)})"
                if cycle
                else "every ranking disagrees with the others"
            )
            consensus.note = "; ".join(
                x for x in (consensus.note, f"{shape}: no ranker stands apart") if x
            )

    synth_moves = [m for m in moves if m.verb == "SYNTH"]
    synth = None
    if synth_moves:
        last = synth_moves[-1]
        open_items = list(last.open or ())
        synth = SynthMove(
            line=last.line, text=last.note or "", open=open_items, closes=not open_items
        )

    return TallyReport(
        valid=not errors,
        proposals=proposals,
        rankers=rankers,
        scores=[
            ProposalScore(
                label=p,
                score=round(scores[p], 9),
                text=texts.get(p) or None,
                blocked=p in blocked_labels,
            )
            for level in order
            for p in level
        ],
        final_order=order,
        winner=winner,
        pruned=pruned,
        blocked=blocked,
        consensus=consensus,
        dissenters=dissenters,
        votes=_votes(moves, dropped),
        synth=synth,
        dropped=sorted(dropped, key=lambda d: d.line),
        errors=errors,
    )


def _levels(active: list[str], scores: dict[str, float]) -> list[list[str]]:
    ordered = sorted(active, key=lambda p: (-scores[p], active.index(p)))
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
