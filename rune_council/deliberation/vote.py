"""VOTE: every member that answered votes on every numbered item; absence shrinks the count.

An item passes when its yes votes reach ``ceil(threshold x ballots counted)``. A member that
failed, timed out or sent a ballot with no usable vote is absent: it leaves the denominator
rather than counting as a no. An item nobody voted on is ``unvoted``, not rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Literal

from ..core.contract import (
    AbsentMember,
    ConsensusScore,
    ConsolidatedItem,
    DroppedLine,
    ItemTally,
    MemberBallot,
    VoteResult,
)
from . import concordance
from .dsl import parse, quote

Choice = str  # "yes" | "no" | "abstain"
THRESHOLD_PRECISION = 10_000


def required_yes(threshold: float, denominator: int) -> int:
    """``ceil(threshold x denominator)`` without float drift (0.7 x 10 is 7, not 7.000...1)."""
    exact = Fraction(threshold).limit_denominator(THRESHOLD_PRECISION)
    return math.ceil(exact * denominator)


def ballot_prompt(question: str, items: Sequence[ConsolidatedItem], red_team: bool) -> str:
    listing = "\n".join(f"{i.number}. {quote(i.text)}" for i in items)
    aim = (
        "Vote yes on an item if it is a real risk that belongs in the risk register."
        if red_team
        else "Vote yes on an item if you would stand behind it as part of the council's answer."
    )
    example = "\n".join(f"VOTE -> {i.number} yes" for i in items[:2])
    return (
        "You are a member of a council. The members' answers to the question below were "
        "merged into numbered items, and now every member votes on every item.\n\n"
        f"Question:\n{question}\n\nItems:\n{listing}\n\n{aim} Vote no if you would not. "
        "If you cannot judge an item, abstain.\n"
        "Reply with one line per item and nothing else, in exactly this form:\n"
        f"{example}\n"
        'VOTE -> <number> no "<optional short reason>"\n'
        "ABSTAIN -> <number>\n"
    )


def read_ballot(
    voice_id: str, text: str, numbers: Sequence[int]
) -> tuple[dict[int, Choice], list[DroppedLine]]:
    """The member's choices by item number; lines that are not a usable vote are dropped."""
    wanted = {str(n): n for n in numbers}
    transcript = parse(text)
    dropped = [
        DroppedLine(line=d.line, text=d.text, reason=d.reason, source=voice_id)
        for d in transcript.dropped + transcript.errors
    ]
    choices: dict[int, Choice] = {}
    for m in transcript.moves:
        reason = None
        if m.verb not in ("VOTE", "ABSTAIN"):
            reason = f"{m.verb} is not a vote"
        elif m.target not in wanted:
            reason = f"there is no item {m.target}"
        elif wanted[m.target] in choices:
            reason = f"a second vote on item {m.target}"
        if reason is not None:
            dropped.append(DroppedLine(line=m.line, text=m.text, reason=reason, source=voice_id))
            continue
        assert m.target is not None
        choices[wanted[m.target]] = "abstain" if m.verb == "ABSTAIN" else (m.choice or "no")
    return choices, dropped


def count_votes(
    items: Sequence[ConsolidatedItem],
    choices: Mapping[str, Mapping[int, Choice]],
    threshold: float,
    *,
    ballots: Sequence[MemberBallot] = (),
    absent: Sequence[AbsentMember] = (),
    dropped: Sequence[DroppedLine] = (),
) -> VoteResult:
    """``choices`` holds the counted ballots only; the absent are listed, never counted."""
    counted = [voter for voter in choices if choices[voter]]
    denominator = len(counted)
    need = required_yes(threshold, denominator)
    tallies: list[ItemTally] = []
    unvoted: list[int] = []
    for item in items:
        yes = [v for v in counted if choices[v].get(item.number) == "yes"]
        no = [v for v in counted if choices[v].get(item.number) == "no"]
        abstain = [v for v in counted if choices[v].get(item.number) == "abstain"]
        outcome: Literal["passed", "failed", "unvoted"]
        if not (yes or no or abstain):
            outcome = "unvoted"
            unvoted.append(item.number)
        else:
            outcome = "passed" if len(yes) >= need else "failed"
        tallies.append(
            ItemTally(
                number=item.number,
                text=item.text,
                yes=yes,
                no=no,
                abstain=abstain,
                required=need,
                outcome=outcome,
            )
        )
    consensus, dissenters = approval_concordance(items, {v: choices[v] for v in counted})
    return VoteResult(
        threshold=threshold,
        denominator=denominator,
        counted=counted,
        absent=list(absent),
        items=tallies,
        unvoted=unvoted,
        consensus=consensus,
        dissenters=dissenters,
        ballots=list(ballots),
        dropped_lines=list(dropped),
    )


def approval_concordance(
    items: Sequence[ConsolidatedItem], choices: Mapping[str, Mapping[int, Choice]]
) -> tuple[ConsensusScore, list[str]]:
    """W of the ballots read as rankings: approved items tied above everything else."""
    labels = [str(i.number) for i in items]
    ballots = [
        [[str(n) for n, c in sorted(mine.items()) if c == "yes"]] for mine in choices.values()
    ]
    w = concordance.kendall_w(ballots, labels)
    dissenters: list[str] = []
    if len(ballots) >= 3 and len(labels) >= 2:
        means = concordance.mean_spearman(ballots, labels)
        rounded = [None if mean is None else round(mean, 9) for mean in means]
        apart = concordance.standing_apart(rounded)
        dissenters = [v for v, dissenting in zip(choices, apart, strict=True) if dissenting]
    return (
        ConsensusScore(
            w=None if w is None else round(w, 9),
            label=concordance.label_for(w),
            method="kendall_w over approvals (yes above no, abstain and silence; tie-corrected)",
            rankers=len(ballots),
            proposals=len(labels),
            note="" if w is not None else "undefined: fewer than two ballots or items, or all tied",
        ),
        dissenters,
    )


def dissenters_of(result: VoteResult) -> list[str]:
    """Who dissented, read from the votes themselves: every counted member that voted
    against an item's outcome where the council split on it (no on an item that passed,
    yes on one that failed), in the order the ballots were counted.

    A split is dissent however the members stand overall: a vote of two that splits has
    nobody standing apart by concordance, yet one of them was outvoted. An abstention
    takes no side, and an item nobody voted on splits nobody.
    """
    against: set[str] = set()
    for item in result.items:
        if item.yes and item.no:
            # The outcome as the votes give it, under the item's own count of yes needed.
            against.update(item.no if len(item.yes) >= item.required else item.yes)
    return [v for v in result.counted if v in against]


def recount(recorded: VoteResult) -> VoteResult:
    """The recorded ballots, as the item tallies list them, counted again by :func:`count_votes`.

    Every member named on a tally is a voter, listed or not among ``counted``: a vote cast by
    someone the count left out is still a vote, and the recount shows the difference.
    """
    voters = list(recorded.counted)
    for item in recorded.items:
        voters += [v for v in (*item.yes, *item.no, *item.abstain) if v not in voters]
    choices: dict[str, dict[int, Choice]] = {v: {} for v in voters}
    for item in recorded.items:
        for choice, names in (("yes", item.yes), ("no", item.no), ("abstain", item.abstain)):
            for v in names:
                choices[v][item.number] = choice
    items = [
        ConsolidatedItem(number=i.number, text=i.text, sources=[], voice_ids=[])
        for i in recorded.items
    ]
    return count_votes(items, choices, recorded.threshold)


def arithmetic_verdict(result: VoteResult) -> str:
    """The verdict the count alone supports, for when no chairman answered; ``verify`` writes
    it again from the recorded count."""
    lines = [
        f"Vote of {result.denominator} counted ballot(s); an item needed "
        f"{result.items[0].required if result.items else 0} yes vote(s) "
        f"(threshold {result.threshold:g} of the ballots counted)."
    ]
    for i in result.items:
        lines.append(
            f"{i.number}. {i.outcome.upper()} ({len(i.yes)} yes, {len(i.no)} no, "
            f"{len(i.abstain)} abstain): {i.text}"
        )
    split = [i for i in result.items if i.yes and i.no]
    for i in split:
        lines.append(
            f"\n[UNCERTAIN] Item {i.number} split the council: yes {', '.join(i.yes)}; "
            f"no {', '.join(i.no)}."
        )
    if result.absent:
        # A blank line first: an [UNCERTAIN] marker runs to the end of its paragraph.
        lines.append("\nAbsent: " + ", ".join(f"{a.voice_id} ({a.reason})" for a in result.absent))
    return "\n".join(lines)
