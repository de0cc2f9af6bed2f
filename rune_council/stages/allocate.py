"""Step 2, ALLOCATE: who sits in which slot, with which framing.

One voice per distinct family before any family gets a second seat; the reserved slots
(perturbation, devil's advocate) are named here so ARBITRATE can check they were applied.
"""

from __future__ import annotations

from dataclasses import field

from ..core.contract import (
    FamilyConfidence,
    PerspectiveRequest,
    SlotRole,
    SlotSetup,
    Voice,
    VoiceSource,
)
from ..core.made import made
from ..core.prompts import compose_prompt
from ..core.records import record
from .capacity import capped_voices

# Subagents share one model, so each is pinned to one stance; it does not decorrelate, but
# it keeps them from writing the same essay three times.
PERSONAS = (
    "a pragmatic staff engineer who weighs operational risk and the cost of reversal",
    "a sceptical security and data-integrity reviewer",
    "a performance and capacity engineer who asks for numbers",
    "a maintainer who will own this for five years and cares about simplicity",
    "a product-minded lead who asks whether the problem is worth solving at all",
)


@record(frozen=True)
class Candidate:
    runtime: str
    source: VoiceSource
    model_family: str
    family_confidence: FamilyConfidence


@record(frozen=True)
class SlotPrompts:
    primary: str
    fallback: str
    fallback_persona: str


@record
class Allocation:
    voices: list[Voice]
    prompts: dict[str, SlotPrompts]
    n_effective: int
    notes: list[str] = field(default_factory=list)


def roles_for(n: int) -> list[SlotRole]:
    """Plain readings first; the reserved framings take the last seats."""
    if n >= 3:
        plain: list[SlotRole] = ["standard"] * (n - 2)
        return [*plain, "perturbation", "devils_advocate"]
    pair: list[SlotRole] = ["standard", "perturbation"]
    return pair[:n]


def _family_key(c: Candidate) -> str:
    # Unconfirmed runtimes may share a backend with anyone, but we cannot know which, so
    # each counts as its own group for seating and is ranked after confirmed families.
    return c.model_family if c.family_confidence == "confirmed" else f"unknown:{c.runtime}"


def seat_order(candidates: list[Candidate], prefer: list[str]) -> list[Candidate]:
    """One representative per family (preferred families first), then the rest."""
    groups: dict[str, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(_family_key(c), []).append(c)

    def rank(key: str) -> tuple[int, int, int]:
        head = groups[key][0]
        preferred = prefer.index(head.model_family) if head.model_family in prefer else len(prefer)
        unconfirmed = int(head.family_confidence != "confirmed")
        first_seen = candidates.index(head)
        return (unconfirmed, preferred, first_seen)

    ordered_keys = sorted(groups, key=rank)
    order: list[Candidate] = []
    depth = max((len(g) for g in groups.values()), default=0)
    for level in range(depth):
        for key in ordered_keys:
            if level < len(groups[key]):
                order.append(groups[key][level])
    return order


def reseat(idle: list[Candidate], held_families: set[str], prefer: list[str]) -> Candidate | None:
    """Who takes over a slot whose voice failed: ALLOCATE's own rule, run again.

    The idle runtimes are ranked exactly as at allocation (one per family first, preferred
    families first); the first of a confirmed family the council does not hold yet wins,
    else the first idle runtime of any kind. A subagent comes after this returns None.
    """
    order = seat_order(idle, prefer)
    for c in order:
        if c.family_confidence == "confirmed" and c.model_family not in held_families:
            return c
    return order[0] if order else None


def allocate(
    request: PerspectiveRequest,
    external: list[Candidate],
    subagent: Candidate | None,
    artifact_text: str | None,
) -> Allocation:
    n, capped = capped_voices(request.n)
    notes = [capped] if capped else []

    seats = list(external)
    if subagent is not None and (
        not external
        or (
            subagent.family_confidence == "confirmed"
            and subagent.model_family not in {c.model_family for c in external}
        )
    ):
        seats.append(subagent)
    order = seat_order(seats, request.diversity.prefer_model_families)
    if not external:
        notes.append(
            "no external runtime available: subagent-only council"
            if subagent is not None
            else "no external runtime and no subagent configured: nothing can answer"
        )

    voices: list[Voice] = []
    prompts: dict[str, SlotPrompts] = {}
    for index, role in enumerate(roles_for(n)):
        voice_id = f"v{index + 1}"
        setup = request.slots[index] if index < len(request.slots) else made(SlotSetup)
        # A slot's own persona (a template's) holds for every voice that takes the slot;
        # without one, only a subagent is given a stock persona.
        persona = setup.persona or PERSONAS[index % len(PERSONAS)]
        pick = order[index % len(order)] if order else None
        if pick is None:
            voice = made(Voice, id=voice_id, slot_role=role, source="subagent", runtime="none")
        else:
            voice = made(
                Voice,
                id=voice_id,
                slot_role=role,
                source=pick.source,
                runtime=pick.runtime,
                model_family=pick.model_family,
                family_confidence=pick.family_confidence,
                persona=persona if pick.source == "subagent" or setup.persona else None,
            )
        voices.append(voice)
        prompts[voice_id] = SlotPrompts(
            primary=compose_prompt(request, role, voice.persona, artifact_text, setup.framing),
            fallback=compose_prompt(request, role, persona, artifact_text, setup.framing),
            fallback_persona=persona,
        )
    return Allocation(voices=voices, prompts=prompts, n_effective=n, notes=notes)
