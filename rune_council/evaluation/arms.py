"""An eval's per-item records, and each arm's hit or false alarm on every item.

The records are a small typed model of their own, filled from run files by the eval door:
for each item its label (flawed, with the seeded place or places, or clean), every voice's
claims with their anchors, and each council setup's verified cross-family consensus and
single-voice dissent. A voice is named the same way on every item (its runtime and model),
so its arm can be followed across items.

Scoring rule. A claim *hits* a seeded place when one of its anchors names the place's file
and a line within ``HIT_DISTANCE`` (2) lines of it: ``src/app.py:41`` hits a flaw seeded at
``src/app.py:43``, ``src/app.py:46`` does not, nor does ``src/other.py:43``. A range anchor
(``src/app.py:40-44``) hits when some line of it is within that distance and it spans at
most ``2 * HIT_DISTANCE + 1`` lines, so no claim hits by citing a whole file. The file is
read the way NORMALIZE reads a cited path (``stages.places``: quotes, ``./`` and git's
``a/``/``b/`` around it ignored, or the one file whose path ends with it). An anchor with
no file (``line 12``) names no place and hits nothing. Two lines either way because a
reviewer often cites the statement a flaw sits in, or the line above it, and a removed line
has no number of its own in the new file; any wider and a claim about a neighbouring line
would count.

What an arm does on an item:

- on a flawed item it *hits* when one of its claims hits a seeded place;
- it raises an *alarm* when it makes any claim at all (on a clean item every alarm is
  false);
- it is *right* on a flawed item when it hits, on a clean item when it raises no alarm.

The arms:

- ``voice:<id>``: each voice alone, its own claims.
- ``best-voice``: the best single voice chosen without the items it is scored on: items
  are split in two folds by a seeded shuffle within each label, the voice with the highest
  balanced accuracy on one fold is scored on the other, and the other way round, so every
  item is scored by a voice chosen on other items. With fewer than ``MIN_SPLIT_ITEMS``
  items the choice is made on all items and the arm says it is in-sample (optimistic).
- ``majority``: a place more than half of the voices that answered each claim (a claim of
  theirs within ``HIT_DISTANCE`` of it); it hits when such a place is a seeded one and
  alarms when any such place exists. Claims with no place cannot be counted together.
- ``<council>:consensus``: the council's verified cross-family consensus claims.
- ``<council>:consensus+dissent``: those plus the single-voice dissent it reported.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.contract import Attempt, CouncilResult, PromptCost, Voice
from ..stages.places import Places

HIT_DISTANCE = 2
MAX_SPAN = 2 * HIT_DISTANCE + 1
MIN_SPLIT_ITEMS = 10
DEFAULT_COUNCIL = "council"

# The forms NORMALIZE reads as a line ref: path:LINE, path:LINE-END, path#LLINE, path:L12.
_ANCHOR = re.compile(r"^(?P<file>.*?)[:#]L?(?P<start>\d+)(?:\s*[-\u2013]\s*L?(?P<end>\d+))?$")

Label = Literal["flawed", "clean"]
ArmKind = Literal["voice", "best-voice", "majority", "consensus", "consensus+dissent"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SeededPlace(_Model):
    path: str = Field(min_length=1, max_length=1000)
    line: int = Field(ge=1)


class EvalClaim(_Model):
    anchors: list[str] = Field(default_factory=list, max_length=20)
    text: str = Field(default="", max_length=4000)

    @model_validator(mode="after")
    def _bounded(self) -> EvalClaim:
        if any(len(a) > 500 for a in self.anchors):
            raise ValueError("an anchor is over 500 characters")
        return self


class Cost(_Model):
    """What one answer cost: the calls made for it, its wall time (None: not known), and
    its tokens, kept apart by where they come from. ``reported_calls`` of the ``calls``
    carried the endpoint's own count (``Attempt.usage``), summed in ``prompt_tokens`` and
    ``completion_tokens``; ``estimated_prompt_tokens`` is the prompt size the council
    metered (``prompt_cost``: bytes / 4, prompts only), the one figure a CLI voice has."""

    calls: int = Field(default=0, ge=0)
    seconds: float | None = Field(default=None, ge=0)
    reported_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    estimated_prompt_tokens: int | None = Field(default=None, ge=0)


class VoiceOnItem(_Model):
    voice: str = Field(min_length=1, max_length=200)
    family: str = Field(default="unknown", min_length=1, max_length=100)
    answered: bool = True
    claims: list[EvalClaim] = Field(default_factory=list, max_length=200)
    cost: Cost | None = None


class CouncilOnItem(_Model):
    name: str = Field(default=DEFAULT_COUNCIL, min_length=1, max_length=100)
    answered: bool = True
    consensus: list[EvalClaim] = Field(default_factory=list, max_length=200)
    dissent: list[EvalClaim] = Field(default_factory=list, max_length=200)
    cost: Cost | None = None


class ItemRecord(_Model):
    id: str = Field(min_length=1, max_length=200)
    label: Label
    seeded: list[SeededPlace] = Field(default_factory=list, max_length=50)
    files: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="The item's files, for reading anchors; the seeded paths always count.",
    )
    voices: list[VoiceOnItem] = Field(default_factory=list, max_length=50)
    councils: list[CouncilOnItem] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _consistent(self) -> ItemRecord:
        if self.label == "flawed" and not self.seeded:
            raise ValueError(f"item {self.id!r} is flawed but names no seeded place")
        if self.label == "clean" and self.seeded:
            raise ValueError(f"item {self.id!r} is clean but names a seeded place")
        names = [v.voice for v in self.voices]
        if len(set(names)) != len(names):
            raise ValueError(f"item {self.id!r} lists a voice twice")
        councils = [c.name for c in self.councils]
        if len(set(councils)) != len(councils):
            raise ValueError(f"item {self.id!r} lists a council twice")
        return self

    def paths(self) -> list[str]:
        return list(dict.fromkeys([*(s.path for s in self.seeded), *self.files]))


class EvalSet(_Model):
    items: list[ItemRecord]

    @model_validator(mode="after")
    def _consistent(self) -> EvalSet:
        ids = [i.id for i in self.items]
        if len(set(ids)) != len(ids):
            raise ValueError("two items share an id")
        family: dict[str, str] = {}
        for item in self.items:
            for v in item.voices:
                seen = family.setdefault(v.voice, v.family)
                if seen != v.family:
                    raise ValueError(
                        f"voice {v.voice!r} is of family {seen!r} on one item and "
                        f"{v.family!r} on item {item.id!r}"
                    )
        return self

    def voices(self) -> list[str]:
        """Every voice, in the order first seen."""
        return list(dict.fromkeys(v.voice for item in self.items for v in item.voices))

    def families(self) -> dict[str, str]:
        return {v.voice: v.family for item in self.items for v in item.voices}

    def councils(self) -> list[str]:
        return list(dict.fromkeys(c.name for item in self.items for c in item.councils))


class Outcome(_Model):
    item: str
    label: Label
    answered: bool
    hit: bool = False
    alarm: bool = False

    @property
    def right(self) -> bool:
        return self.hit if self.label == "flawed" else not self.alarm

    @property
    def error(self) -> bool | None:
        """Wrong on the item (a miss, or a false alarm), or None when it did not answer."""
        return None if not self.answered else not self.right


class Choice(_Model):
    """Which voice the best-voice arm took, on which items it was chosen, where it scored."""

    voice: str | None
    chosen_on: int  # items the choice was made on
    scored_on: int  # items it was then scored on
    in_sample: bool


class Arm(_Model):
    name: str
    kind: ArmKind
    outcomes: list[Outcome]
    choices: list[Choice] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def answered(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.answered]


# --------------------------------------------------------------------------- cost


def _reported(attempts: Iterable[Attempt]) -> dict[str, int]:
    used = [a.usage for a in attempts if a.usage is not None]
    return {
        "reported_calls": len(used),
        "prompt_tokens": sum(u.prompt_tokens or 0 for u in used),
        "completion_tokens": sum(u.completion_tokens or 0 for u in used),
    }


def _per_prompt(prompt_cost: PromptCost, runtime: str) -> float | None:
    """The estimated tokens of one answer prompt sent to ``runtime``: that runtime's own
    mean when the meter saw it, else the mean over every answer prompt (a slot that failed
    over inside one runtime is metered under the runtime it was seated on)."""
    answers = [u for u in prompt_cost.by_use if u.stage == "answer"]
    mine = [u for u in answers if u.runtime == runtime] or answers
    prompts = sum(u.prompts for u in mine)
    return sum(u.tokens_est for u in mine) / prompts if prompts else None


def voice_cost(voice: Voice, prompt_cost: PromptCost | None) -> Cost:
    """One voice's answer on one item: its calls (every attempt), its latency, the tokens
    its endpoint reported, and the prompt tokens estimated for its calls."""
    estimated: int | None = None
    if prompt_cost is not None and voice.attempts:
        each = [_per_prompt(prompt_cost, a.runtime) for a in voice.attempts]
        if all(e is not None for e in each):
            estimated = round(sum(e for e in each if e is not None))
    return Cost(
        calls=len(voice.attempts),
        seconds=voice.latency_ms / 1000 if voice.latency_ms is not None else None,
        estimated_prompt_tokens=estimated,
        **_reported(voice.attempts),
    )


def council_cost(result: CouncilResult, seconds: float | None) -> Cost:
    """A whole council on one item: every voice's attempts, and every prompt of the later
    stages (ballots, rounds, a chair), which record no attempt and so report no tokens."""
    later = 0
    estimated: int | None = None
    if result.prompt_cost is not None:
        later = sum(u.prompts for u in result.prompt_cost.by_use if u.stage != "answer")
        estimated = result.prompt_cost.tokens_est
    attempts = [a for v in result.voices for a in v.attempts]
    return Cost(
        calls=len(attempts) + later,
        seconds=seconds,
        estimated_prompt_tokens=estimated,
        **_reported(attempts),
    )


# --------------------------------------------------------------------------- places


def read_anchor(anchor: str, paths: Sequence[str]) -> tuple[str, int, int] | None:
    """The (file, first line, last line) an anchor names among ``paths``, or None."""
    m = _ANCHOR.match(anchor.strip())
    if not m:
        return None
    path = Places({p: {} for p in paths}).path(m.group("file"))
    if path is None:
        return None
    start = int(m.group("start"))
    end = int(m.group("end")) if m.group("end") else start
    if end < start:
        start, end = end, start
    return path, start, end


def _near(place: tuple[str, int, int], path: str, line: int) -> bool:
    p, start, end = place
    return (
        p == path
        and end - start + 1 <= MAX_SPAN
        and start - HIT_DISTANCE <= line <= end + HIT_DISTANCE
    )


def claim_places(claim: EvalClaim, paths: Sequence[str]) -> list[tuple[str, int, int]]:
    return [p for a in claim.anchors if (p := read_anchor(a, paths)) is not None]


def claim_hits(claim: EvalClaim, seeded: SeededPlace, paths: Sequence[str]) -> bool:
    """Whether ``claim`` anchors ``seeded`` within the scoring rule's distance."""
    return any(_near(p, seeded.path, seeded.line) for p in claim_places(claim, paths))


def _score(item: ItemRecord, claims: Iterable[EvalClaim], answered: bool) -> Outcome:
    if not answered:
        return Outcome(item=item.id, label=item.label, answered=False)
    claims = list(claims)
    paths = item.paths()
    hit = any(claim_hits(c, s, paths) for c in claims for s in item.seeded)
    return Outcome(item=item.id, label=item.label, answered=True, hit=hit, alarm=bool(claims))


# --------------------------------------------------------------------------- arms


def voice_arm(records: EvalSet, voice: str) -> Arm:
    outcomes = []
    for item in records.items:
        on = next((v for v in item.voices if v.voice == voice), None)
        answered = on is not None and on.answered
        outcomes.append(_score(item, on.claims if on is not None else [], answered))
    return Arm(name=f"voice:{voice}", kind="voice", outcomes=outcomes)


def _majority_outcome(item: ItemRecord) -> Outcome:
    answering = [v for v in item.voices if v.answered]
    if not answering:
        return Outcome(item=item.id, label=item.label, answered=False)
    paths = item.paths()
    cited = [[p for c in v.claims for p in claim_places(c, paths)] for v in answering]
    need = len(answering) // 2 + 1

    def backing(path: str, line: int) -> int:
        return sum(1 for places in cited if any(_near(p, path, line) for p in places))

    hit = any(backing(s.path, s.line) >= need for s in item.seeded)
    # Every line a countable place covers is a candidate; a place wider than MAX_SPAN backs
    # nothing (``_near``), so it proposes nothing either.
    alarm = hit or any(
        backing(path, line) >= need
        for places in cited
        for path, start, end in places
        if end - start + 1 <= MAX_SPAN
        for line in range(start, end + 1)
    )
    return Outcome(item=item.id, label=item.label, answered=True, hit=hit, alarm=alarm)


def majority_arm(records: EvalSet) -> Arm:
    return Arm(
        name="majority",
        kind="majority",
        outcomes=[_majority_outcome(item) for item in records.items],
    )


def council_arms(records: EvalSet, council: str = DEFAULT_COUNCIL) -> tuple[Arm, Arm]:
    """The council's consensus arm, and its consensus-plus-dissent arm."""
    consensus, both = [], []
    for item in records.items:
        on = next((c for c in item.councils if c.name == council), None)
        answered = on is not None and on.answered
        agreed = on.consensus if on is not None else []
        dissent = on.dissent if on is not None else []
        consensus.append(_score(item, agreed, answered))
        both.append(_score(item, [*agreed, *dissent], answered))
    return (
        Arm(name=f"{council}:consensus", kind="consensus", outcomes=consensus),
        Arm(name=f"{council}:consensus+dissent", kind="consensus+dissent", outcomes=both),
    )


def balanced_accuracy(outcomes: Iterable[Outcome]) -> float | None:
    """The mean of recall and (1 - false-alarm rate) over answered items; the one of the
    two that is defined when the items have one label only; None when none answered."""
    flawed = [o for o in outcomes if o.answered and o.label == "flawed"]
    clean = [o for o in outcomes if o.answered and o.label == "clean"]
    parts = []
    if flawed:
        parts.append(sum(o.hit for o in flawed) / len(flawed))
    if clean:
        parts.append(sum(not o.alarm for o in clean) / len(clean))
    return sum(parts) / len(parts) if parts else None


def _best(voices: Sequence[Arm], among: set[str]) -> Arm | None:
    """The voice arm with the highest balanced accuracy on the items in ``among``; ties go
    to the higher recall, then the fewer alarms, then the earlier voice."""
    ranked: list[tuple[float, float, int, int, Arm]] = []
    for k, arm in enumerate(voices):
        chosen = [o for o in arm.outcomes if o.item in among]
        score = balanced_accuracy(chosen)
        if score is None:
            continue
        hits = sum(o.hit for o in chosen if o.answered)
        alarms = sum(o.alarm for o in chosen if o.answered)
        ranked.append((-score, -hits, alarms, k, arm))
    ranked.sort(key=lambda r: r[:4])
    return ranked[0][4] if ranked else None


def folds(records: EvalSet, seed: int) -> tuple[set[str], set[str]]:
    """Two folds of item ids: each label's items in a seeded shuffle, dealt alternately."""
    rng = random.Random(seed)
    out: tuple[set[str], set[str]] = (set(), set())
    for label in ("flawed", "clean"):
        ids = sorted(i.id for i in records.items if i.label == label)
        rng.shuffle(ids)
        for k, item_id in enumerate(ids):
            out[k % 2].add(item_id)
    return out


def best_voice_arm(records: EvalSet, voices: Sequence[Arm], seed: int) -> Arm:
    every = {i.id for i in records.items}
    unanswered = [Outcome(item=i.id, label=i.label, answered=False) for i in records.items]
    if len(records.items) < MIN_SPLIT_ITEMS:
        best = _best(voices, every)
        note = (
            f"chosen in-sample: {len(records.items)} items are fewer than the "
            f"{MIN_SPLIT_ITEMS} a held-apart split needs, so these figures are optimistic"
        )
        return Arm(
            name="best-voice",
            kind="best-voice",
            outcomes=best.outcomes if best is not None else unanswered,
            choices=[
                Choice(
                    voice=best.name.removeprefix("voice:") if best is not None else None,
                    chosen_on=len(every),
                    scored_on=len(every),
                    in_sample=True,
                )
            ],
            notes=[note],
        )
    by_item = {o.item: o for o in unanswered}
    choices = []
    first, second = folds(records, seed)
    for choose_on, score_on in ((first, second), (second, first)):
        best = _best(voices, choose_on)
        if best is not None:
            for o in best.outcomes:
                if o.item in score_on:
                    by_item[o.item] = o
        choices.append(
            Choice(
                voice=best.name.removeprefix("voice:") if best is not None else None,
                chosen_on=len(choose_on),
                scored_on=len(score_on),
                in_sample=False,
            )
        )
    notes = []
    picked = {c.voice for c in choices}
    if len(picked) > 1:
        notes.append("the two folds chose different voices; each scored the other fold")
    return Arm(
        name="best-voice",
        kind="best-voice",
        outcomes=[by_item[i.id] for i in records.items],
        choices=choices,
        notes=notes,
    )


def all_arms(records: EvalSet, seed: int = 0) -> list[Arm]:
    """Every arm the records allow, in report order: each voice, the best voice, the
    majority, then each council's consensus and consensus-plus-dissent."""
    voices = [voice_arm(records, v) for v in records.voices()]
    arms = [*voices]
    if voices:
        arms += [best_voice_arm(records, voices, seed), majority_arm(records)]
    for council in records.councils():
        arms += council_arms(records, council)
    return arms


__all__ = [
    "DEFAULT_COUNCIL",
    "HIT_DISTANCE",
    "MAX_SPAN",
    "MIN_SPLIT_ITEMS",
    "Arm",
    "ArmKind",
    "Choice",
    "Cost",
    "CouncilOnItem",
    "EvalClaim",
    "EvalSet",
    "ItemRecord",
    "Label",
    "Outcome",
    "SeededPlace",
    "VoiceOnItem",
    "all_arms",
    "balanced_accuracy",
    "best_voice_arm",
    "claim_hits",
    "claim_places",
    "council_arms",
    "council_cost",
    "folds",
    "majority_arm",
    "read_anchor",
    "voice_arm",
    "voice_cost",
]
