"""One document for an eval: every arm side by side, the tests between them, and how
decorrelated the voices really were. What ``rune council eval --json`` prints.

Each arm gets recall, false-alarm rate and precision (``stats``), each with its bootstrap
interval or None with the reason. Every arm that pools voices (the majority, each council's
consensus and consensus plus dissent) is compared with the best single voice by McNemar's
test over the items both answered, and the p-values are adjusted together by Holm's method
for the number of comparisons. The decorrelation figures come from the voices' own errors
(a miss on a flawed item, an alarm on a clean one): every pair's error agreement, the same
grouped by family, and the effective number of independent votes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from . import stats
from .arms import (
    HIT_DISTANCE,
    Arm,
    ArmKind,
    Choice,
    Cost,
    EvalSet,
    Outcome,
    all_arms,
    voice_arm,
)

POOLED_KINDS: frozenset[ArmKind] = frozenset({"majority", "consensus", "consensus+dissent"})


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArmFigures(_Frozen):
    name: str
    kind: ArmKind
    answered: int
    unanswered: int
    recall: stats.Rate
    false_alarm: stats.Rate
    precision: stats.Rate
    choices: list[Choice]
    notes: list[str]


TokenSource = Literal["reported", "partly reported", "estimated", "unknown"]


class ArmCost(_Frozen):
    """What an arm's answers cost per item, over the items whose cost is known: a voice's own
    calls, tokens and time, or a whole council's (every voice, every round). The best voice
    and the majority are read from the plain council's own voices, so they cost what it costs.

    Tokens come from two places and are never mixed into one figure: ``reported_*`` are the
    endpoints' own counts (``Attempt.usage``), over the ``reported_calls`` of the ``calls``
    that carried one; ``estimated_prompt_tokens_per_item`` is the council's metered prompt
    size (bytes / 4, prompts only), for the calls that report nothing (CLI voices, ballots).
    ``tokens`` says which the arm has: every call reported, some, none (an estimate only),
    or neither."""

    arm: str
    items: int
    calls_per_item: float | None
    seconds_per_item: float | None
    reason: str | None = None
    calls: int = 0
    reported_calls: int = 0
    reported_tokens_per_item: float | None = None
    reported_prompt_tokens_per_item: float | None = None
    reported_completion_tokens_per_item: float | None = None
    estimated_prompt_tokens_per_item: float | None = None
    tokens: TokenSource = "unknown"


class Comparison(_Frozen):
    arm: str
    against: str
    items: int  # items both answered, which the test is over
    test: stats.McNemar
    holm_p: float  # the p-value adjusted for every comparison in this report


class EvalReport(_Frozen):
    items: int
    flawed: int
    clean: int
    hit_distance: int
    seed: int
    resamples: int
    level: float
    arms: list[ArmFigures]
    comparisons: list[Comparison]
    voice_agreement: list[stats.ErrorAgreement]
    family_agreement: list[stats.FamilyAgreement]
    effective_votes: stats.EffectiveVotes
    notes: list[str]
    costs: list[ArmCost] = []


def figures(arm: Arm, *, seed: int, resamples: int, level: float) -> ArmFigures:
    answered = arm.answered()
    flawed = [o for o in answered if o.label == "flawed"]
    clean = [o for o in answered if o.label == "clean"]

    def rate(successes: list[bool], undefined: str) -> stats.Rate:
        return stats.proportion(
            successes, undefined=undefined, seed=seed, resamples=resamples, level=level
        )

    recall = rate([o.hit for o in flawed], "no flawed item answered")
    false_alarm = rate([o.alarm for o in clean], "no clean item answered")
    precision = stats.ratio(
        [(o.hit, o.alarm, o.label) for o in answered],
        undefined="no alarm raised",
        seed=seed,
        resamples=resamples,
        level=level,
    )
    notes = list(arm.notes)
    if flawed and recall.numerator == 0:
        notes.append(f"hit none of the {len(flawed)} seeded flaws it answered on")
    return ArmFigures(
        name=arm.name,
        kind=arm.kind,
        answered=len(answered),
        unanswered=len(arm.outcomes) - len(answered),
        recall=recall,
        false_alarm=false_alarm,
        precision=precision,
        choices=arm.choices,
        notes=notes,
    )


def _paired(a: Arm, b: Arm) -> tuple[list[bool], list[bool]]:
    theirs = {o.item: o for o in b.outcomes}
    pairs: list[tuple[Outcome, Outcome]] = []
    for o in a.outcomes:
        other = theirs.get(o.item)
        if o.answered and other is not None and other.answered:
            pairs.append((o, other))
    return [x.right for x, _ in pairs], [y.right for _, y in pairs]


def compare(arms: list[Arm]) -> list[Comparison]:
    """Each pooled arm against the best single voice, Holm-adjusted together."""
    best = next((a for a in arms if a.kind == "best-voice"), None)
    if best is None:
        return []
    tests: list[tuple[Arm, int, stats.McNemar]] = []
    for arm in arms:
        if arm.kind in POOLED_KINDS:
            mine, theirs = _paired(arm, best)
            tests.append((arm, len(mine), stats.mcnemar_paired(mine, theirs)))
    adjusted = stats.holm([t.p_value for _, _, t in tests])
    return [
        Comparison(arm=arm.name, against=best.name, items=n, test=test, holm_p=p)
        for (arm, n, test), p in zip(tests, adjusted, strict=True)
    ]


def _cost(arm: str, known: list[Cost]) -> ArmCost:
    if not known:
        return ArmCost(
            arm=arm, items=0, calls_per_item=None, seconds_per_item=None, reason="no cost known"
        )
    n = len(known)
    timed = [c.seconds for c in known if c.seconds is not None]
    calls = sum(c.calls for c in known)
    reported = sum(c.reported_calls for c in known)
    prompt = sum(c.prompt_tokens for c in known)
    completion = sum(c.completion_tokens for c in known)
    estimates = [c.estimated_prompt_tokens for c in known if c.estimated_prompt_tokens is not None]
    tokens: TokenSource
    if reported and reported == calls:
        tokens = "reported"
    elif reported:
        tokens = "partly reported"
    else:
        tokens = "estimated" if estimates else "unknown"
    return ArmCost(
        arm=arm,
        items=n,
        calls_per_item=calls / n,
        seconds_per_item=sum(timed) / len(timed) if timed else None,
        reason=None if timed else "no wall time recorded",
        calls=calls,
        reported_calls=reported,
        reported_tokens_per_item=(prompt + completion) / n if reported else None,
        reported_prompt_tokens_per_item=prompt / n if reported else None,
        reported_completion_tokens_per_item=completion / n if reported else None,
        # Over the items that have one: a run file from before the meter has none.
        estimated_prompt_tokens_per_item=sum(estimates) / len(estimates) if estimates else None,
        tokens=tokens,
    )


def costs(records: EvalSet) -> list[ArmCost]:
    out = []
    for voice in records.voices():
        known = [
            v.cost
            for item in records.items
            for v in item.voices
            if v.voice == voice and v.cost is not None
        ]
        out.append(_cost(f"voice:{voice}", known))
    for council in records.councils():
        known = [
            c.cost
            for item in records.items
            for c in item.councils
            if c.name == council and c.cost is not None
        ]
        out.append(_cost(council, known))
    return out


def scored_items(records: EvalSet, voice_arms: list[Arm] | None = None) -> list[stats.ScoredItem]:
    """Each item's label and the error of every voice on it (None where it did not answer):
    what the decorrelation figures are computed from, here and in ``rune council stats``.
    A voice absent from an item is left out of it, which reads the same as not answering."""
    arms = (
        voice_arms if voice_arms is not None else [voice_arm(records, v) for v in records.voices()]
    )
    family = records.families()
    outcomes = [(a.name.removeprefix("voice:"), a.outcomes) for a in arms]
    scored = []
    for k, item in enumerate(records.items):
        present = {v.voice for v in item.voices}
        voices = [
            stats.ScoredVoice(voice=name, family=family.get(name, "unknown"), error=o[k].error)
            for name, o in outcomes
            if name in present
        ]
        scored.append(stats.ScoredItem(id=item.id, label=item.label, voices=voices))
    return scored


def build_report(
    records: EvalSet,
    *,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
    level: float = stats.DEFAULT_LEVEL,
) -> EvalReport:
    arms = all_arms(records, seed)
    labels = [i.label for i in records.items]
    decorrelated = stats.decorrelation(
        scored_items(records, [a for a in arms if a.kind == "voice"]),
        resamples=resamples,
        level=level,
        seed=seed,
    )
    notes = []
    flawed = labels.count("flawed")
    clean = labels.count("clean")
    if not flawed:
        notes.append("no flawed items: recall and precision cannot be measured")
    if not clean:
        notes.append("no clean items: false alarms cannot be measured")
    if not records.councils():
        notes.append("no council results in the records: only the voice arms are scored")
    return EvalReport(
        items=len(records.items),
        flawed=flawed,
        clean=clean,
        hit_distance=HIT_DISTANCE,
        seed=seed,
        resamples=resamples,
        level=level,
        arms=[figures(a, seed=seed, resamples=resamples, level=level) for a in arms],
        comparisons=compare(arms),
        voice_agreement=decorrelated.voice_agreement,
        family_agreement=decorrelated.family_agreement,
        effective_votes=decorrelated.effective_votes,
        notes=notes,
        costs=costs(records),
    )


__all__ = [
    "POOLED_KINDS",
    "ArmCost",
    "ArmFigures",
    "Comparison",
    "EvalReport",
    "TokenSource",
    "build_report",
    "costs",
    "figures",
    "scored_items",
]
