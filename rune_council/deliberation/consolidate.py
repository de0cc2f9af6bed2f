"""CONSOLIDATE: the answers become numbered items a council can vote on.

An orchestrator (a configured runtime that holds no seat) merges equivalent proposals and
keeps disagreements apart, answering in PROPOSE moves that cite what they merged. When there
is no orchestrator, or it fails, or its answer cannot be used, the deterministic merge below
stands in and the result says so (``fallback: "deterministic"``).

The deterministic merge reuses NORMALIZE: one item per YES / NO / MIXED position, one item
per claim cluster, and a cluster whose members contradict each other is split back into its
claims, because merging a disagreement would average it away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.contract import Claim, ClaimCluster, ConsolidatedItem, DroppedLine, Voice
from ..core.text import normalise
from ..stages.gate import stance_reason
from .dsl import parse, quote

MAX_ITEMS = 40


@dataclass(frozen=True)
class Source:
    id: str  # v1.stance or v1.c2
    voice_id: str
    text: str


def sources_of(voices: Sequence[Voice]) -> list[Source]:
    out: list[Source] = []
    for v in voices:
        if v.status != "complete":
            continue
        if v.stance:
            out.append(Source(f"{v.id}.stance", v.id, v.stance))
        for c in v.claims:
            out.append(Source(c.id, v.id, c.text))
    return out


def orchestrator_prompt(question: str, sources: Sequence[Source]) -> str:
    listing = "\n".join(f"- {s.id}: {quote(s.text)}" for s in sources)
    return (
        "You are the orchestrator of a council. You hold no seat and cast no vote: your job "
        "is to turn the members' answers into numbered items the members will vote on.\n\n"
        f"Question the council answered:\n{question}\n\n"
        "What the members said (each line: source id, then the statement):\n"
        f"{listing}\n\n"
        "Merge statements that say the same thing into one item. Keep statements that "
        "disagree in separate items: never merge a claim with its opposite. Every source id "
        "must appear in exactly one item. Reply with one line per item and nothing else:\n"
        'PROPOSE p1 "<one clear statement to vote on>" ev=<source id>,<source id>\n'
        'PROPOSE p2 "<...>" ev=<source id>\n'
    )


@dataclass
class Reading:
    items: list[ConsolidatedItem] | None
    reason: str
    dropped: list[DroppedLine]
    notes: list[str]


def read_consolidation(text: str, sources: Sequence[Source]) -> Reading:
    """Items from the orchestrator's PROPOSE moves, or None with the reason it is unusable."""
    by_id = {s.id: s for s in sources}
    transcript = parse(text)
    dropped = [
        DroppedLine(line=d.line, text=d.text, reason=d.reason, source="orchestrator")
        for d in transcript.dropped + transcript.errors
    ]
    items: list[ConsolidatedItem] = []
    used: set[str] = set()
    for m in transcript.moves:
        if m.verb != "PROPOSE":
            dropped.append(
                DroppedLine(
                    line=m.line,
                    text=m.text,
                    reason=f"{m.verb} is not an item",
                    source="orchestrator",
                )
            )
            continue
        unknown = [r for r in m.ev if r not in by_id]
        if not m.note or not m.note.strip():
            return Reading(None, f"line {m.line}: an item without text", dropped, [])
        if not m.ev or unknown:
            what = f"unknown source {unknown[0]}" if unknown else "no ev= sources"
            return Reading(None, f"line {m.line}: {what}", dropped, [])
        again = [r for r in m.ev if r in used]
        if again:
            return Reading(None, f"line {m.line}: {again[0]} is merged twice", dropped, [])
        used.update(m.ev)
        items.append(
            ConsolidatedItem(
                number=len(items) + 1,
                text=m.note.strip(),
                sources=list(m.ev),
                voice_ids=_voices(m.ev, by_id),
            )
        )
    if not items:
        return Reading(None, "no PROPOSE item in the answer", dropped, [])
    if len(items) > MAX_ITEMS:
        return Reading(None, f"{len(items)} items is more than {MAX_ITEMS}", dropped, [])
    notes: list[str] = []
    for s in sources:
        if s.id not in used:
            # Nothing a member said disappears: a source left out becomes its own item.
            items.append(
                ConsolidatedItem(
                    number=len(items) + 1, text=s.text, sources=[s.id], voice_ids=[s.voice_id]
                )
            )
            notes.append(f"{s.id} was left out by the orchestrator and kept as item {len(items)}")
    return Reading(items, "ok", dropped, notes)


def _voices(ids: Sequence[str], by_id: dict[str, Source]) -> list[str]:
    return sorted({by_id[i].voice_id for i in ids}, key=_voice_key)


def _voice_key(voice_id: str) -> tuple[int, str]:
    digits = voice_id[1:]
    return (int(digits), voice_id) if digits.isdigit() else (1 << 30, voice_id)


def deterministic_merge(
    voices: Sequence[Voice], clusters: Sequence[ClaimCluster]
) -> list[ConsolidatedItem]:
    valid = [v for v in voices if v.status == "complete"]
    items: list[ConsolidatedItem] = []

    def add(text: str, sources: list[str], voice_ids: list[str]) -> None:
        items.append(
            ConsolidatedItem(
                number=len(items) + 1,
                text=text,
                sources=sources,
                voice_ids=sorted(set(voice_ids), key=_voice_key),
            )
        )

    by_position: dict[str, list[Voice]] = {}
    for v in valid:
        if v.stance:
            by_position.setdefault(v.position or "unclear", []).append(v)
    for position in ("yes", "no", "mixed", "unclear"):
        group = by_position.get(position, [])
        if not group:
            continue
        if position == "unclear":
            for v in group:  # no shared position to merge on
                add(v.stance or "", [f"{v.id}.stance"], [v.id])
            continue
        reason = stance_reason(group[0].stance or "")
        add(
            f"{position.upper()}: {reason or '(no reason given)'}",
            [f"{v.id}.stance" for v in group],
            [v.id for v in group],
        )

    # Word-for-word the same proposal (after case and punctuation) is one ballot item: asking
    # members to vote twice on one sentence would split its votes. This is identity, not
    # similarity; the near-verbatim penalty in the verdict still flags the echo.
    same_text: dict[str, ConsolidatedItem] = {}

    def add_claims(members: list[Claim]) -> None:
        key = normalise(members[0].text)
        earlier = same_text.get(key)
        if earlier is None:
            add(members[0].text, [c.id for c in members], [c.voice_id for c in members])
            same_text[key] = items[-1]
            return
        earlier.sources.extend(c.id for c in members)
        earlier.voice_ids = sorted(
            {*earlier.voice_ids, *(c.voice_id for c in members)}, key=_voice_key
        )

    claims = {c.id: c for v in valid for c in v.claims}
    for cluster in clusters:
        members = [claims[i] for i in cluster.claim_ids if i in claims]
        if not members:
            continue
        if cluster.conflicting:
            for c in members:
                add(c.text, [c.id], [c.voice_id])
            continue
        add_claims(members)
    return items
