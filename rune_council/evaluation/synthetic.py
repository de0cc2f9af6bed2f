"""Synthetic voices with set error rates and set correlation, to prove the harness.

Every figure such voices produce is known in closed form, so the harness (``arms`` and
``report``) can be checked against it with no model in the room. Items are drawn from a
seeded ``random.Random``:

- A flawed item has one seeded line; a voice that catches it makes one claim anchored a
  random 0-2 lines from it (inside the scoring rule's distance), one that misses says
  nothing. A clean item has one decoy line, the plausible-looking place where every false
  alarm lands (a random 0-1 lines from it), so false alarms can agree with each other as
  readily as catches do: the hardest case for a majority's false-alarm rate.
- Correlation by a common shock: with probability ``shared`` an item's voices all read one
  uniform draw (a voice catches when it is below its recall, or alarms when it is below
  its false-alarm rate), otherwise each voice draws its own. For voices with equal rates
  the pairwise error correlation is then exactly ``shared``, within each label.
- Copying: a voice with ``copies`` set repeats that voice's claims on an item with
  probability ``copy_rate`` and draws on its own otherwise, so its error correlation with
  the voice it copies is ``copy_rate`` (one family echoing another).
- The council is ARBITRATE's rule in miniature: a place claimed by voices of two or more
  families is consensus, a place one voice claimed alone is single-voice dissent, and a
  place only one family's voices claimed is neither (an echo).

Closed forms, for voices with catch rates p_i (the same with false-alarm rates q_i on
clean items):

- one voice: p_i; three independent voices' majority: p1p2 + p1p3 + p2p3 - 2p1p2p3
  (3p^2 - 2p^3 for equal p); consensus plus dissent: 1 - prod(1 - p_i);
- common shock ``shared`` = rho with equal p: majority rho*p + (1 - rho)(3p^2 - 2p^3), and
  n_eff = n / (1 + (n - 1) rho): n for independent voices, 1 for fully correlated ones.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .arms import CouncilOnItem, EvalClaim, EvalSet, ItemRecord, SeededPlace, VoiceOnItem


class SyntheticVoice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    family: str = Field(min_length=1)
    recall: float = Field(ge=0, le=1)
    false_alarm: float = Field(ge=0, le=1)
    copies: str | None = None
    copy_rate: float = Field(default=0.0, ge=0, le=1)


class Design(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    voices: list[SyntheticVoice] = Field(min_length=1)
    flawed: int = Field(ge=0)
    clean: int = Field(ge=0)
    shared: float = Field(default=0.0, ge=0, le=1)
    seed: int = 0

    @model_validator(mode="after")
    def _copies_earlier_voices(self) -> Design:
        seen: set[str] = set()
        for v in self.voices:
            if v.name in seen:
                raise ValueError(f"voice {v.name!r} is named twice")
            if v.copies is not None and v.copies not in seen:
                raise ValueError(f"voice {v.name!r} copies {v.copies!r}, not listed before it")
            seen.add(v.name)
        return self


def _place_of(path: str, line: int) -> str:
    return f"{path}:{line}"


def _item(design: Design, k: int, label: str, rng: random.Random) -> ItemRecord:
    path = f"synthetic/item{k:04d}.py"
    target = rng.randint(10, 60)
    spread = 2 if label == "flawed" else 1
    shock = rng.random() if rng.random() < design.shared else None
    said: dict[str, list[EvalClaim]] = {}
    for v in design.voices:
        if v.copies is not None and rng.random() < v.copy_rate:
            said[v.name] = said[v.copies]
            continue
        rate = v.recall if label == "flawed" else v.false_alarm
        u = shock if shock is not None and v.copies is None else rng.random()
        if u < rate:
            line = max(1, target + rng.randint(-spread, spread))
            said[v.name] = [EvalClaim(anchors=[_place_of(path, line)], text="a finding")]
        else:
            said[v.name] = []
    voices = [
        VoiceOnItem(voice=v.name, family=v.family, claims=said[v.name]) for v in design.voices
    ]
    # Every claim aims at the one target, so they all meet on one place.
    claiming = [v for v in design.voices if said[v.name]]
    families = {v.family for v in claiming}
    anchors = [a for v in claiming for c in said[v.name] for a in c.anchors]
    council = CouncilOnItem()
    if len(families) >= 2:
        council = CouncilOnItem(consensus=[EvalClaim(anchors=anchors, text="agreed")])
    elif len(claiming) == 1:
        council = CouncilOnItem(dissent=list(said[claiming[0].name]))
    if label == "flawed":
        return ItemRecord(
            id=f"item{k:04d}",
            label="flawed",
            seeded=[SeededPlace(path=path, line=target)],
            voices=voices,
            councils=[council],
        )
    return ItemRecord(
        id=f"item{k:04d}", label="clean", files=[path], voices=voices, councils=[council]
    )


def generate(design: Design) -> EvalSet:
    """The design's items, flawed first, drawn from its seed."""
    rng = random.Random(design.seed)
    labels = ["flawed"] * design.flawed + ["clean"] * design.clean
    return EvalSet(items=[_item(design, k, label, rng) for k, label in enumerate(labels)])


def majority_of_three(p1: float, p2: float, p3: float) -> float:
    """P(at least two of three independent events) with the given probabilities."""
    return p1 * p2 + p1 * p3 + p2 * p3 - 2 * p1 * p2 * p3


def any_of(*ps: float) -> float:
    """P(at least one of independent events)."""
    out = 1.0
    for p in ps:
        out *= 1 - p
    return 1 - out


__all__ = ["Design", "SyntheticVoice", "any_of", "generate", "majority_of_three"]
