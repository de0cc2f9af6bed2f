"""RANK and SYNTH: members rank each other's answers blind; the tally decides; a chairman writes.

Each answer gets a canonical label (p1, p2, ... in seat order). Each member sees the others'
answers under letters of its own shuffle (A, B, ...), never its own answer, and replies with
a RANK move (and CRITIQUE moves if it wants). The ballots are rewritten in canonical labels
into a transcript that ``rune council tally`` re-runs to the same numbers. The chairman then
writes the verdict from the tally's order; passages where members contradicted each other
start with ``[UNCERTAIN]`` and become structured markers. Without a usable chairman answer,
the verdict is written from the arithmetic and marked ``fallback: "arithmetic"``.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.contract import (
    DissentEntry,
    DroppedLine,
    RankProposal,
    RankShuffle,
    TallyReport,
    UncertaintyMarker,
    Voice,
)
from ..core.safetext import Fence
from .dsl import Move, ballot_text, parse, quote
from .tally import superseded

SUMMARY_CAP = 1500
# How every chairman prompt opens; a reply holding it repeats the prompt, as a base model
# that continues its input does, instead of answering it.
CHAIR_OPENING = "You chair a council"
_UNCERTAIN = re.compile(r"\[UNCERTAIN\]\s*(.+?)(?=\n\s*\n|\n\s*\[UNCERTAIN\]|\Z)", re.DOTALL)


def summary(voice: Voice) -> str:
    parts = [voice.stance or ""]
    for c in voice.claims:
        sev = f"[{c.severity}] " if c.severity else ""
        parts.append(f"- {sev}{c.text}")
    text = "\n".join(p for p in parts if p)
    return text[:SUMMARY_CAP]


def proposals_for(voices: Sequence[Voice]) -> list[RankProposal]:
    valid = [v for v in voices if v.status == "complete"]
    return [
        RankProposal(label=f"p{k}", voice_id=v.id, summary=summary(v))
        for k, v in enumerate(valid, start=1)
    ]


def shuffle_for(seed: str, voice_id: str, proposals: Sequence[RankProposal]) -> RankShuffle:
    """The member's own view: the others' answers under letters, in a reproducible shuffle."""
    others = [p.label for p in proposals if p.voice_id != voice_id]
    random.Random(f"{seed}:{voice_id}").shuffle(others)
    letters = string.ascii_uppercase
    return RankShuffle(voice_id=voice_id, shown={letters[i]: p for i, p in enumerate(others)})


def ballot_prompt(
    question: str, shuffle: RankShuffle, proposals: Sequence[RankProposal], red_team: bool
) -> str:
    by_label = {p.label: p for p in proposals}
    fence = Fence()
    listing = "\n\n".join(
        f"Answer {shown}:\n{fence.wrap(shown, by_label[canonical].summary)}"
        for shown, canonical in shuffle.shown.items()
    )
    letters = list(shuffle.shown)
    example = ">".join(letters) if letters else "A"
    criterion = (
        "Rank the attacks by the severity and the novelty of the risks they found: the answer "
        "that found the most damaging risk nobody else saw comes first."
        if red_team
        else "Rank the answers by the quality of their analysis: correct, specific, supported "
        "by evidence, honest about what is uncertain."
    )
    return (
        "You are a member of a council. Other members answered the question below; their "
        "answers are shown under letters, in an order that means nothing. "
        f"{fence.rule()}\n\n"
        f"Question:\n{question}\n\n{listing}\n\n{criterion}\n"
        "Reply with one RANK line, best first ('>' between places, '=' for a tie) and your "
        "confidence from 0 to 1. You may add CRITIQUE lines; use MUST only for a flaw that "
        "should keep an answer out of the verdict. Nothing else:\n"
        f"RANK {example} conf=0.7\n"
        f'CRITIQUE SHOULD -> {letters[0] if letters else "A"} "<what is wrong>"\n'
    )


@dataclass
class MemberRanking:
    rank: Move | None
    critiques: list[Move]
    dropped: list[DroppedLine]


def read_ranking(voice_id: str, text: str, shuffle: RankShuffle) -> MemberRanking:
    """The member's RANK and critiques, in the letters it was shown.

    Which RANK counts when a reply holds several is :func:`.tally.superseded`'s rule: the
    last one that can be counted. A line naming a letter the member was not shown is
    dropped with that reason, and so counts for nothing and supersedes nothing.
    """
    transcript = parse(text)
    dropped = [
        DroppedLine(line=d.line, text=d.text, reason=d.reason, source=voice_id)
        for d in transcript.dropped + transcript.errors
    ]
    rank: Move | None = None
    critiques: list[Move] = []
    for m in transcript.moves:
        names = [x for level in m.ballot for x in level]
        if m.verb == "CRITIQUE" and m.target:
            names.append(m.target)
        hidden = [x for x in names if x not in shuffle.shown]
        reason = None
        if m.verb not in ("RANK", "CRITIQUE"):
            reason = f"{m.verb} is not part of a ranking ballot"
        elif hidden:
            reason = f"{hidden[0]} was not shown to this member"
        if reason is not None:
            dropped.append(DroppedLine(line=m.line, text=m.text, reason=reason, source=voice_id))
            continue
        if m.verb == "RANK":
            if rank is not None:
                dropped.append(superseded(rank, m, voice_id))
            rank = m
        else:
            critiques.append(m)
    return MemberRanking(rank, critiques, dropped)


def canonical_lines(voice_id: str, ranking: MemberRanking, shuffle: RankShuffle) -> list[str]:
    """The member's moves with its letters replaced by canonical labels."""
    shown = shuffle.shown
    lines: list[str] = []
    if ranking.rank is not None:
        levels = [[shown[x] for x in level] for level in ranking.rank.ballot]
        conf = "" if ranking.rank.conf is None else f" conf={ranking.rank.conf:g}"
        lines.append(f"{voice_id} RANK {ballot_text(levels)}{conf}")
    for c in ranking.critiques:
        modality = f" {c.modality}" if c.modality else ""
        note = f" {quote(c.note)}" if c.note else ""
        ev = f" ev={','.join(c.ev)}" if c.ev else ""
        lines.append(f"{voice_id} CRITIQUE{modality} -> {shown[c.target or '']}{ev}{note}")
    return lines


def transcript_text(
    run_id: str,
    proposals: Sequence[RankProposal],
    rank_lines: Sequence[str],
    critique_lines: Sequence[str],
) -> str:
    head = [
        f"# rank stage of council {run_id}: p-labels are the members' answers, anonymised",
        "@phase propose",
        *(
            f"PROPOSE {p.label} {quote(p.summary.splitlines()[0] if p.summary else '')}"
            for p in proposals
        ),
        "@phase rank",
        *rank_lines,
    ]
    if critique_lines:
        head += ["@phase critique", *critique_lines]
    return "\n".join(head) + "\n"


# --------------------------------------------------------------------------- synthesis


def chairman_prompt(
    question: str,
    proposals: Sequence[RankProposal],
    report: TallyReport,
    disagreements: Sequence[DissentEntry],
    context: str | None = None,
) -> str:
    by_label = {p.label: p for p in proposals}
    scored = {s.label: s for s in report.scores}
    fence = Fence()
    ranked = []
    for place, level in enumerate(report.final_order, start=1):
        for label in level:
            s = scored[label]
            flag = " (BLOCKED from the verdict: unresolved MUST critique)" if s.blocked else ""
            ranked.append(
                f"{place}. [{label}] score {s.score:g}{flag}\n"
                + fence.wrap(label, by_label[label].summary)
            )
    split = "\n".join(f"- {d.claim}" for d in disagreements) or "- none recorded"
    extra = f"\nContext from an earlier council:\n{context}\n" if context else ""
    return (
        f"{CHAIR_OPENING}. The members answered the question below and then ranked each "
        "other's answers blind; the ranking is arithmetic and is not yours to change. "
        f"{fence.rule()}\n\n"
        f"Question:\n{question}\n{extra}\nAnswers, best first by the council's tally:\n\n"
        + "\n\n".join(ranked)
        + f"\n\nWhere members disagreed:\n{split}\n\n"
        "Write the council's verdict for a person in a few short paragraphs, led by the "
        "top-ranked answer. Leave out anything marked BLOCKED. Add nothing that no member "
        "said. Where members contradicted each other and the council did not settle it, "
        "start that paragraph with [UNCERTAIN]. Finish with one line listing the questions "
        "the council left open (empty if none):\n"
        'SYNTH open=["<open question>"]\n'
    )


@dataclass
class ChairReading:
    text: str | None
    open: list[str]
    reason: str


# Words too common to show that a verdict drew on an item, and the prompts' own vocabulary,
# which a reply can repeat without having read a single item.
_COMMON_WORDS = """
    about above after again against also among answer answers because been before being
    below between both cannot chair could council does done each every from have having
    here into itself just like made make many member members more most much must need
    only other ours over question questions rank ranked ranking same shall should since
    some such than that their them then there these they this those through under until
    upon very verdict were what when where which while will with within without would
    your item items paragraph paragraphs score synth tally uncertain open none
"""
_COMMON = frozenset(_COMMON_WORDS.split())
_WORD = re.compile(r"[^\W\d_]{4,}")
# Words compared by their first five letters: "sharding" draws on "shards", "rollbacks" on
# "rollback"; a cruder stem than a linguist's, but the same on every machine.
_STEM = 5


def _stems(text: str) -> set[str]:
    return {w[:_STEM] for w in _WORD.findall(text.casefold()) if w not in _COMMON}


def synthesis_fault(verdict: str, items: Mapping[str, str], noun: str) -> str | None:
    """Why a chairman's verdict is no synthesis of what it was given, or None when it is one.

    ``items`` maps the name each item had in the chairman's prompt (``p2``, ``item 3``) to
    its text; ``noun`` says what they are (answers, items). A verdict synthesises when it
    refers to at least one of them: by its name, or by a word of its text of four letters or
    more that is not one of the commonest (compared by its first five letters). A reply that
    refers to none of them (a refusal, a reply to some other prompt, noise) or that repeats
    the chairman's prompt is no verdict of this council, and the arithmetic writes it
    instead. Items that hold no such word at all can be referred to by name only, so there a
    reply is not held to it.
    """
    if CHAIR_OPENING.casefold() in verdict.casefold():
        return "the reply repeats the chairman's prompt instead of answering it"
    if not items:
        return None
    for name in items:
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", verdict, re.IGNORECASE):
            return None
    said = [stems for text in items.values() if (stems := _stems(text))]
    if not said:
        return None  # nothing to refer to but a name (answers such as a bare "NO, not yet")
    words = _stems(verdict)
    if any(words & stems for stems in said):
        return None
    return (
        f"the reply refers to none of the {len(items)} {noun} it was given, "
        "by name or by what they say"
    )


def read_chairman(text: str, items: Mapping[str, str], noun: str) -> ChairReading:
    """The chairman's verdict and open questions; ``text`` None (with the reason) when the
    reply is no verdict: empty, or no synthesis of the ``items`` (:func:`synthesis_fault`)."""
    body: list[str] = []
    open_items: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("SYNTH"):
            transcript = parse("@phase synth\n" + stripped)
            if transcript.moves:
                open_items = list(transcript.moves[0].open or ())
                if transcript.moves[0].note:
                    body.append(transcript.moves[0].note)
                continue
        body.append(line)
    verdict = "\n".join(body).strip()
    if not verdict:
        return ChairReading(None, [], "the chairman wrote no verdict")
    fault = synthesis_fault(verdict, items, noun)
    if fault is not None:
        return ChairReading(None, [], fault)
    return ChairReading(verdict, open_items, "ok")


def uncertainty_markers(text: str) -> list[UncertaintyMarker]:
    return [
        UncertaintyMarker(text=" ".join(m.group(1).split()), index=i)
        for i, m in enumerate(_UNCERTAIN.finditer(text))
        if m.group(1).strip()
    ]


def arithmetic_verdict(
    proposals: Sequence[RankProposal],
    report: TallyReport,
    disagreements: Sequence[DissentEntry],
) -> str:
    """A verdict anyone can re-derive from the tally, for when no chairman answered."""
    by_label = {p.label: p for p in proposals}
    lines: list[str] = []
    if report.winner is not None:
        top = by_label[report.winner]
        first = top.summary.splitlines()[0] if top.summary else ""
        lines.append(f"The council's tally ranks {report.winner} ({top.voice_id}) first: {first}")
    elif report.rankers:
        lines.append("The tally gives no single answer the top place (a tie, or all blocked).")
    else:
        lines.append("No ranking was counted, so the council names no best answer.")
    scored = ", ".join(f"{s.label} {s.score:g}" for s in report.scores)
    if scored:
        lines.append(f"Borda x confidence: {scored}.")
    w = report.consensus.w
    lines.append(
        f"Consensus: W = {w:g} ({report.consensus.label}) over {report.consensus.rankers} rankings."
        if w is not None
        else f"Consensus: not measurable ({report.consensus.note or 'too few rankings'})."
    )
    for b in report.blocked:
        lines.append(f"{b.label} is blocked from the verdict: {b.reason}.")
    for d in disagreements:
        lines.append(f"\n[UNCERTAIN] {d.claim}.")
    return "\n".join(lines)
