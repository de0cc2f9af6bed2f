"""The statistics that decide whether a council beats its best voice. Pure: no I/O.

Every figure here can be worked out by hand from per-item outcomes, and every choice is
written down so a reader can redo it:

Rates, each with an interval or None with the reason when it is undefined:

- recall: of the flawed items an arm answered, the share where it hit a seeded flaw;
- false-alarm rate: of the clean items it answered, the share where it raised any claim;
- precision: of the items where it raised an alarm, the share where the alarm was a hit.

Intervals are percentile bootstrap intervals over items (Efron & Tibshirani 1993, ch. 13):
items are drawn with replacement ``resamples`` times from a seeded ``random.Random``, the
figure is recomputed on each resample, and the interval is the (1-level)/2 and (1+level)/2
quantiles of those values, interpolated linearly between order statistics (Hyndman & Fan
type 7, numpy's default). The percentile method was chosen over BCa or a normal
approximation because it needs no distributional assumption, stays inside [0, 1] for a rate,
and is reproducible from the seed alone. Resampling is stratified by label (flawed items
from the flawed items, clean from the clean): a dataset's mix of flawed and clean items is
fixed by whoever built it, not drawn at random, so a resample keeps it. A resample on which
a figure is undefined (precision with no alarm drawn) is left out and counted in the
interval's ``undefined_resamples``. Known limits: a rate of exactly 0 or 1 gets a zero-width
interval, and with a few dozen items the percentile interval covers somewhat less than its
level; show the counts beside the rates.

McNemar's test compares two arms on the same items from the discordant pairs alone (items
one arm got right and the other wrong; McNemar 1947). With fewer than ``EXACT_BELOW`` (25)
discordant pairs the two-sided exact binomial test is used (the discordant count of one arm
against Binomial(b + c, 1/2)), the usual advice because the chi-square approximation is
poor there; from 25 on, the chi-square statistic with Edwards' continuity correction,
(|b - c| - 1)^2 / (b + c) on one degree of freedom, the correction clamped at zero so that
b = c gives a statistic of 0. Holm's step-down correction (Holm 1979) adjusts the p-values
of several comparisons made at once.

Error agreement of two voices (or families) says how often they are wrong together against
what independence predicts. An error is a miss on a flawed item or an alarm on a clean one.
Independence is taken given the label: two voices that both miss more often on flawed items
than they alarm on clean ones are not correlated for that, since a vote is taken on each
item knowing nothing of its label. So the expected joint error rate is, per label, the
product of the two voices' error rates there, averaged over items, and the correlation is
the pooled within-label correlation of the two error indicators (each label's covariance
and variances summed, then divided, as in an analysis of covariance); with a single label
it is exactly the phi coefficient of the 2x2 table.

``decorrelation`` gathers these for one eval from its ``ScoredItem`` records: the eval's
report and ``rune council stats`` both call it, so the two show the same figures.

The effective number of independent votes is Kish's effective sample size (Kish 1965,
*Survey Sampling*, on the design effect of correlated observations) applied to the voices'
error correlation, as in "Nine Judges, Two Effective Votes" (arXiv 2605.29800), which found
nine frontier judges from seven families carried about two independent votes:

    n_eff = (sum_i w_i)^2 / sum_i sum_j w_i w_j rho_ij        (rho_ii = 1)

which for equal weights is n / (1 + (n - 1) * mean off-diagonal rho). Independent voices
give n, voices that always err together give 1; negatively correlated errors give more
than n (the voices cover each other's mistakes), which is reported as it comes.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import combinations
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0
# Discordant pairs below this use the exact binomial test; from here on the chi-square.
EXACT_BELOW = 25

K = TypeVar("K", bound=Hashable)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Interval(_Frozen):
    low: float
    high: float
    level: float
    method: str = "percentile bootstrap over items, stratified by label"
    resamples: int
    undefined_resamples: int = 0
    seed: int


class Rate(_Frozen):
    """A share with its counts; ``value`` is None exactly when ``denominator`` is 0."""

    value: float | None
    numerator: int
    denominator: int
    interval: Interval | None
    reason: str | None = None  # why the value or the interval is missing


class McNemar(_Frozen):
    a_only: int  # items the first arm got right and the second wrong (b)
    b_only: int  # items the second got right and the first wrong (c)
    method: Literal["exact binomial", "chi-square, continuity-corrected", "chi-square"] | None
    statistic: float | None  # the chi-square value; None for the exact test
    p_value: float
    note: str | None = None

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only


class ErrorAgreement(_Frozen):
    """How two voices err together, over the items both answered."""

    a: str
    b: str
    items: int
    a_errors: int
    b_errors: int
    both_wrong: int
    joint_error_rate: float | None  # both wrong / items
    independent_rate: float | None  # what independence given the label predicts
    lift: float | None  # joint / independent: 1 is independent, above 1 they err together
    correlation: float | None  # pooled within-label phi of the error indicators
    reason: str | None = None


class FamilyAgreement(_Frozen):
    """Two families (or one with itself): the mean over the voice pairs between them."""

    a: str
    b: str
    voice_pairs: int
    joint_error_rate: float | None
    independent_rate: float | None
    correlation: float | None
    correlated_pairs: int  # the pairs whose correlation was defined, which the mean is over
    reason: str | None = None


class EffectiveVotes(_Frozen):
    value: float | None
    voices: list[str]  # the voices counted
    excluded: dict[str, str]  # voice -> why it was left out
    mean_correlation: float | None
    interval: Interval | None
    reason: str | None = None


# --------------------------------------------------------------------------- bootstrap


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, linear between the closest ranks (Hyndman & Fan type 7)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    h = (len(sorted_values) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def _draw(stratum: Counter[K], rng: random.Random) -> Counter[K]:
    keys = list(stratum)
    total = sum(stratum.values())
    cum: list[int] = []
    running = 0
    for key in keys:
        running += stratum[key]
        cum.append(running)
    return Counter(rng.choices(keys, cum_weights=cum, k=total))


def bootstrap(
    strata: Sequence[Sequence[K]],
    statistic: Callable[[Counter[K]], float | None],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Interval | None:
    """The percentile interval of ``statistic`` over item resamples, or None when it is
    undefined on every resample.

    Each item is a hashable outcome; ``statistic`` sees the counts of the outcomes drawn.
    Items of one stratum are drawn only from that stratum, as many as it has. Drawing by
    distinct outcome gives the same distribution as drawing items one by one, and keeps the
    statistic's work to the handful of distinct outcomes.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    rng = random.Random(seed)
    pools = [Counter(s) for s in strata if s]
    values: list[float] = []
    undefined = 0
    for _ in range(resamples):
        drawn: Counter[K] = Counter()
        for pool in pools:
            drawn.update(_draw(pool, rng))
        value = statistic(drawn)
        if value is None:
            undefined += 1
        else:
            values.append(value)
    if not values:
        return None
    values.sort()
    tail = (1 - level) / 2
    return Interval(
        low=quantile(values, tail),
        high=quantile(values, 1 - tail),
        level=level,
        resamples=resamples,
        undefined_resamples=undefined,
        seed=seed,
    )


# --------------------------------------------------------------------------- rates


def _share(counts: Counter[tuple[bool, bool]]) -> float | None:
    den = counts[(True, True)] + counts[(False, True)]
    return counts[(True, True)] / den if den else None


def ratio(
    items: Sequence[tuple[bool, bool, Hashable]],
    *,
    undefined: str,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Rate:
    """The share of counted items that are successes, with its bootstrap interval.

    Each item is (success, counted, stratum); an uncounted item adds to neither side but is
    still drawn, so the denominator varies between resamples as it would between datasets.
    ``undefined`` is the reason given when no item is counted.
    """
    if any(success and not counted for success, counted, _ in items):
        raise ValueError("an item cannot be a success without being counted")
    numerator = sum(1 for success, _, _ in items if success)
    denominator = sum(1 for _, counted, _ in items if counted)
    if denominator == 0:
        return Rate(value=None, numerator=0, denominator=0, interval=None, reason=undefined)
    by_stratum: dict[Hashable, list[tuple[bool, bool]]] = {}
    for success, counted, stratum in items:
        by_stratum.setdefault(stratum, []).append((success, counted))
    interval = bootstrap(
        list(by_stratum.values()), _share, resamples=resamples, level=level, seed=seed
    )
    return Rate(
        value=numerator / denominator,
        numerator=numerator,
        denominator=denominator,
        interval=interval,
        reason=None if interval is not None else "undefined on every resample",
    )


def proportion(
    successes: Sequence[bool],
    *,
    undefined: str,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Rate:
    """The share of ``successes`` that are true, over items of one stratum."""
    return ratio(
        [(s, True, None) for s in successes],
        undefined=undefined,
        resamples=resamples,
        level=level,
        seed=seed,
    )


# --------------------------------------------------------------------------- comparisons


def binomial_two_sided(k: int, n: int) -> float:
    """Two-sided exact p-value of ``k`` successes in ``n`` fair trials: twice the smaller
    tail, at most 1 (the distribution is symmetric, so this is also the sum of all outcomes
    no more likely than ``k``)."""
    if n == 0:
        return 1.0
    small = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(small + 1))
    return min(1.0, 2 * tail / (1 << n))


def chi2_sf_1df(x: float) -> float:
    """P(X >= x) for chi-square with one degree of freedom: X is a squared normal."""
    return math.erfc(math.sqrt(max(x, 0.0) / 2))


def mcnemar(
    a_only: int, b_only: int, *, exact_below: int = EXACT_BELOW, correction: bool = True
) -> McNemar:
    """McNemar's test from the discordant counts: ``a_only`` items only the first arm got
    right, ``b_only`` items only the second got right."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts cannot be negative")
    n = a_only + b_only
    if n == 0:
        return McNemar(
            a_only=0,
            b_only=0,
            method=None,
            statistic=None,
            p_value=1.0,
            note="no discordant pairs: the arms were right and wrong on the same items",
        )
    if n < exact_below:
        return McNemar(
            a_only=a_only,
            b_only=b_only,
            method="exact binomial",
            statistic=None,
            p_value=binomial_two_sided(a_only, n),
        )
    diff = abs(a_only - b_only)
    if correction:
        diff = max(diff - 1, 0)
    stat = diff**2 / n
    return McNemar(
        a_only=a_only,
        b_only=b_only,
        method="chi-square, continuity-corrected" if correction else "chi-square",
        statistic=stat,
        p_value=chi2_sf_1df(stat),
    )


def mcnemar_paired(
    first: Sequence[bool],
    second: Sequence[bool],
    *,
    exact_below: int = EXACT_BELOW,
    correction: bool = True,
) -> McNemar:
    """McNemar's test on two arms' right/wrong outcomes over the same items, in order."""
    if len(first) != len(second):
        raise ValueError("paired outcomes must cover the same items")
    a_only = sum(1 for x, y in zip(first, second, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(first, second, strict=True) if y and not x)
    return mcnemar(a_only, b_only, exact_below=exact_below, correction=correction)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    The k-th smallest of m p-values is multiplied by m - k + 1, capped at 1, and made no
    smaller than the adjusted value before it, so the adjusted values keep their order.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------- agreement

Errors = Sequence[bool | None]  # per item: wrong, right, or None when the voice did not answer


class _PairCounts:
    """Per label: items both answered, each one's errors, and errors together."""

    def __init__(self) -> None:
        self.by_label: dict[Hashable, list[int]] = {}

    def add(self, label: Hashable, ea: bool, eb: bool, times: int = 1) -> None:
        cell = self.by_label.setdefault(label, [0, 0, 0, 0])
        cell[0] += times
        cell[1] += times * ea
        cell[2] += times * eb
        cell[3] += times * (ea and eb)

    def totals(self) -> tuple[int, int, int, int]:
        n = a = b = ab = 0
        for cn, ca, cb, cab in self.by_label.values():
            n, a, b, ab = n + cn, a + ca, b + cb, ab + cab
        return n, a, b, ab

    def independent(self) -> float | None:
        n = sum(c[0] for c in self.by_label.values())
        if n == 0:
            return None
        return sum(ca * cb / cn for cn, ca, cb, _ in self.by_label.values() if cn) / n

    def correlation(self) -> float | None:
        cov = var_a = var_b = 0.0
        for cn, ca, cb, cab in self.by_label.values():
            if cn == 0:
                continue
            cov += cab - ca * cb / cn
            var_a += ca - ca * ca / cn
            var_b += cb - cb * cb / cn
        if var_a <= 0 or var_b <= 0:
            return None
        return max(-1.0, min(1.0, cov / math.sqrt(var_a * var_b)))


def _pair_counts(a: Errors, b: Errors, labels: Sequence[Hashable]) -> _PairCounts:
    if not len(a) == len(b) == len(labels):
        raise ValueError("error indicators and labels must cover the same items")
    counts = _PairCounts()
    for ea, eb, label in zip(a, b, labels, strict=True):
        if ea is not None and eb is not None:
            counts.add(label, ea, eb)
    return counts


def error_agreement(
    a_name: str, a: Errors, b_name: str, b: Errors, labels: Sequence[Hashable]
) -> ErrorAgreement:
    """How often two voices are wrong on the same item, against independence given the
    label, over the items both answered."""
    counts = _pair_counts(a, b, labels)
    n, na, nb, nab = counts.totals()
    if n == 0:
        return ErrorAgreement(
            a=a_name,
            b=b_name,
            items=0,
            a_errors=0,
            b_errors=0,
            both_wrong=0,
            joint_error_rate=None,
            independent_rate=None,
            lift=None,
            correlation=None,
            reason="no item answered by both",
        )
    independent = counts.independent()
    correlation = counts.correlation()
    reason = None
    if correlation is None:
        reason = "a voice's errors do not vary within a label (never or always wrong)"
    return ErrorAgreement(
        a=a_name,
        b=b_name,
        items=n,
        a_errors=na,
        b_errors=nb,
        both_wrong=nab,
        joint_error_rate=nab / n,
        independent_rate=independent,
        lift=(nab / n) / independent if independent else None,
        correlation=correlation,
        reason=reason,
    )


def pairwise_agreement(
    errors: Mapping[str, Errors], labels: Sequence[Hashable]
) -> list[ErrorAgreement]:
    """``error_agreement`` for every pair of voices, in the mapping's order."""
    return [error_agreement(a, errors[a], b, errors[b], labels) for a, b in combinations(errors, 2)]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def family_agreement(
    pairs: Sequence[ErrorAgreement], family_of: Mapping[str, str]
) -> list[FamilyAgreement]:
    """Voice-pair figures grouped by the pair of families: each figure is the mean over the
    voice pairs between the two families (within one family when they are the same), each
    pair weighted alike whatever the number of items it shares."""
    groups: dict[tuple[str, str], list[ErrorAgreement]] = {}
    for pair in pairs:
        fa, fb = sorted((family_of[pair.a], family_of[pair.b]))
        groups.setdefault((fa, fb), []).append(pair)
    out: list[FamilyAgreement] = []
    for (fa, fb), members in sorted(groups.items()):
        joint = [p.joint_error_rate for p in members if p.joint_error_rate is not None]
        indep = [p.independent_rate for p in members if p.independent_rate is not None]
        corr = [p.correlation for p in members if p.correlation is not None]
        out.append(
            FamilyAgreement(
                a=fa,
                b=fb,
                voice_pairs=len(members),
                joint_error_rate=_mean(joint),
                independent_rate=_mean(indep),
                correlation=_mean(corr),
                correlated_pairs=len(corr),
                reason=None if corr else "no voice pair between them had a defined correlation",
            )
        )
    return out


# --------------------------------------------------------------------------- effective votes


def kish(correlation: Sequence[Sequence[float]], weights: Sequence[float] | None = None) -> float:
    """Kish's effective number of votes from a correlation matrix (diagonal taken as 1)."""
    n = len(correlation)
    if n == 0:
        raise ValueError("no voices")
    w = list(weights) if weights is not None else [1.0] * n
    if len(w) != n or any(len(row) != n for row in correlation):
        raise ValueError("the correlation matrix must be square, with one weight per voice")
    if any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("weights must be non-negative and not all zero")
    denominator = sum(
        w[i] * w[j] * (1.0 if i == j else correlation[i][j]) for i in range(n) for j in range(n)
    )
    if denominator <= 0:
        raise ValueError("the correlations leave no positive variance (not a valid matrix)")
    return sum(w) ** 2 / denominator


Pattern = tuple[Hashable, tuple[bool | None, ...]]  # (label, each voice's error or None)


def _correlations(counts: Counter[Pattern], voices: int) -> list[list[float]] | None:
    """The voices' error correlation matrix from pattern counts; None when a pair has none."""
    matrix = [[1.0] * voices for _ in range(voices)]
    for i, j in combinations(range(voices), 2):
        pair = _PairCounts()
        for (label, errs), times in counts.items():
            ei, ej = errs[i], errs[j]
            if ei is not None and ej is not None:
                pair.add(label, ei, ej, times)
        rho = pair.correlation()
        if rho is None:
            return None
        matrix[i][j] = matrix[j][i] = rho
    return matrix


def _n_eff_of(counts: Counter[Pattern], voices: int, weights: Sequence[float]) -> float | None:
    matrix = _correlations(counts, voices)
    if matrix is None:
        return None
    try:
        return kish(matrix, weights)
    except ValueError:
        return None


def effective_votes(
    errors: Mapping[str, Errors],
    labels: Sequence[Hashable],
    weights: Mapping[str, float] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> EffectiveVotes:
    """Kish's effective number of independent votes over the voices' error correlation,
    with its bootstrap interval (items resampled within each label).

    A voice whose errors never vary within a label (never wrong, or always) has no defined
    correlation with anyone: it is left out and named in ``excluded``, since counting it as
    independent or as a copy would both be a guess.
    """
    excluded: dict[str, str] = {}
    kept: list[str] = []
    for name, errs in errors.items():
        if len(errs) != len(labels):
            raise ValueError("error indicators and labels must cover the same items")
        if weights is not None and weights.get(name, 1.0) == 0:
            excluded[name] = "weight 0"
            continue
        per_label: dict[Hashable, set[bool]] = {}
        for e, label in zip(errs, labels, strict=True):
            if e is not None:
                per_label.setdefault(label, set()).add(e)
        if not per_label:
            excluded[name] = "answered no item"
        elif all(len(seen) < 2 for seen in per_label.values()):
            excluded[name] = "its errors do not vary within a label (never or always wrong)"
        else:
            kept.append(name)
    w = [weights.get(v, 1.0) if weights is not None else 1.0 for v in kept]

    def empty(reason: str) -> EffectiveVotes:
        return EffectiveVotes(
            value=None,
            voices=kept,
            excluded=excluded,
            mean_correlation=None,
            interval=None,
            reason=reason,
        )

    if not kept:
        return empty("no voice's errors vary")
    items: list[Pattern] = [
        (label, tuple(errors[v][k] for v in kept)) for k, label in enumerate(labels)
    ]
    matrix = _correlations(Counter(items), len(kept))
    if matrix is None:
        return empty("some pair of voices shares no item on which both errors vary")
    try:
        value = kish(matrix, w)
    except ValueError as exc:
        return empty(str(exc))
    rhos = [matrix[i][j] for i, j in combinations(range(len(kept)), 2)]
    by_label: dict[Hashable, list[Pattern]] = {}
    for item in items:
        by_label.setdefault(item[0], []).append(item)
    interval = bootstrap(
        list(by_label.values()),
        lambda c: _n_eff_of(c, len(kept), w),
        resamples=resamples,
        level=level,
        seed=seed,
    )
    return EffectiveVotes(
        value=value,
        voices=kept,
        excluded=excluded,
        mean_correlation=_mean(rhos),
        interval=interval,
    )


# --------------------------------------------------------------------------- one eval's picture


class ScoredVoice(_Frozen):
    voice: str = Field(min_length=1, max_length=200)
    family: str = Field(default="unknown", min_length=1, max_length=100)
    error: bool | None  # a miss or a false alarm; None when it did not answer


class ScoredItem(_Frozen):
    """One item as the decorrelation figures see it: its label, and each voice's error.
    What an eval keeps beside its results, so ``rune council stats`` computes the same
    figures from the same inputs as the eval's own report."""

    id: str = Field(min_length=1, max_length=200)
    label: Literal["flawed", "clean"]
    voices: list[ScoredVoice] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _once_each(self) -> ScoredItem:
        names = [v.voice for v in self.voices]
        if len(set(names)) != len(names):
            raise ValueError(f"item {self.id!r} lists a voice twice")
        return self


class Decorrelation(_Frozen):
    """How decorrelated an eval's voices were: every pair's error agreement, the same
    grouped by family, and the effective number of independent votes."""

    items: int
    voice_agreement: list[ErrorAgreement]
    family_agreement: list[FamilyAgreement]
    effective_votes: EffectiveVotes


def decorrelation(
    items: Sequence[ScoredItem],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Decorrelation:
    """The decorrelation figures of an eval's items. A voice is followed by name across
    items (missing from an item: it did not answer there) and keeps the family it was
    first seen with."""
    family: dict[str, str] = {}
    for item in items:
        for v in item.voices:
            family.setdefault(v.voice, v.family)
    labels = [item.label for item in items]
    by_item = [{v.voice: v.error for v in item.voices} for item in items]
    errors = {name: [seen.get(name) for seen in by_item] for name in family}
    pairs = pairwise_agreement(errors, labels)
    return Decorrelation(
        items=len(items),
        voice_agreement=pairs,
        family_agreement=family_agreement(pairs, family),
        effective_votes=effective_votes(
            errors, labels, resamples=resamples, level=level, seed=seed
        ),
    )


__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "EXACT_BELOW",
    "Decorrelation",
    "EffectiveVotes",
    "ErrorAgreement",
    "FamilyAgreement",
    "Interval",
    "McNemar",
    "Rate",
    "ScoredItem",
    "ScoredVoice",
    "binomial_two_sided",
    "bootstrap",
    "chi2_sf_1df",
    "decorrelation",
    "effective_votes",
    "error_agreement",
    "family_agreement",
    "holm",
    "kish",
    "mcnemar",
    "mcnemar_paired",
    "pairwise_agreement",
    "proportion",
    "quantile",
    "ratio",
]
