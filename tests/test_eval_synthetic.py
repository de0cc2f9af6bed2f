"""The harness on synthetic voices whose figures are known in closed form.

Each check is that the closed-form value lies inside the harness's own bootstrap interval
(99%, so a few dozen checks across the designs do not fail by chance together), and that
the point estimate is close to it. Each design's seed is fixed so the test is
deterministic; drawn with each of seeds 100-119, every design held all its checks in 19
or 20 of the 20 runs, as intervals at that level should.
"""

from __future__ import annotations

import pytest

from rune_council.evaluation.report import ArmFigures, EvalReport, build_report
from rune_council.evaluation.stats import Rate
from rune_council.evaluation.synthetic import (
    Design,
    SyntheticVoice,
    any_of,
    generate,
    majority_of_three,
)

LEVEL = 0.99
RESAMPLES = 400
N = 500  # flawed and clean items each
SEED = 100  # the first seed of the sweep described above


def report_for(design: Design) -> EvalReport:
    return build_report(generate(design), resamples=RESAMPLES, level=LEVEL, seed=1)


def arm(report: EvalReport, name: str) -> ArmFigures:
    return next(a for a in report.arms if a.name == name)


def inside(what: object, low: float | None, high: float | None, truth: float) -> None:
    assert low is not None and high is not None, what
    assert low <= truth <= high, f"{truth} outside [{low}, {high}] ({what})"


def check(rate: Rate, truth: float) -> None:
    assert rate.value is not None and rate.interval is not None, rate
    inside(rate, rate.interval.low, rate.interval.high, truth)
    assert rate.value == pytest.approx(truth, abs=0.08)


def three(
    p: float, q: float, families: tuple[str, str, str] = ("a", "b", "c")
) -> list[SyntheticVoice]:
    return [
        SyntheticVoice(name=f"v{k}", family=f, recall=p, false_alarm=q)
        for k, f in enumerate(families)
    ]


def test_independent_voices_match_the_closed_forms(seed: int = SEED) -> None:
    p, q = 0.6, 0.2
    report = report_for(Design(voices=three(p, q), flawed=N, clean=N, seed=seed))
    for k in range(3):
        check(arm(report, f"voice:v{k}").recall, p)
        check(arm(report, f"voice:v{k}").false_alarm, q)
        # Precision of one voice: expected hits over expected alarms.
        check(arm(report, f"voice:v{k}").precision, p * N / (p * N + q * N))
    check(arm(report, "majority").recall, 3 * p**2 - 2 * p**3)
    check(arm(report, "majority").false_alarm, 3 * q**2 - 2 * q**3)
    # Three families: two voices agreeing is always cross-family, so consensus = majority.
    check(arm(report, "council:consensus").recall, 3 * p**2 - 2 * p**3)
    check(arm(report, "council:consensus+dissent").recall, any_of(p, p, p))
    check(arm(report, "council:consensus+dissent").false_alarm, any_of(q, q, q))
    n_eff = report.effective_votes
    assert n_eff.interval is not None and n_eff.value is not None
    inside(n_eff, n_eff.interval.low, n_eff.interval.high, 3.0)
    assert n_eff.value == pytest.approx(3.0, abs=0.35)
    for pair in report.voice_agreement:
        assert pair.lift == pytest.approx(1.0, abs=0.25)
        assert pair.correlation == pytest.approx(0.0, abs=0.1)


def test_fully_correlated_voices_are_one_vote(seed: int = SEED) -> None:
    p, q = 0.55, 0.25
    report = report_for(Design(voices=three(p, q), flawed=N, clean=N, shared=1.0, seed=seed))
    n_eff = report.effective_votes
    assert n_eff.value == pytest.approx(1.0)
    assert n_eff.interval is not None
    assert (n_eff.interval.low, n_eff.interval.high) == pytest.approx((1.0, 1.0))
    # Voting over copies buys nothing: every pooled arm is one voice.
    for name in ("majority", "council:consensus", "council:consensus+dissent", "best-voice"):
        check(arm(report, name).recall, p)
        check(arm(report, name).false_alarm, q)
    for pair in report.voice_agreement:
        assert pair.correlation == pytest.approx(1.0)


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_a_common_shock_sets_the_correlation_and_the_effective_votes(
    rho: float, seed: int = SEED
) -> None:
    p, q = 0.5, 0.3
    voices = [
        SyntheticVoice(name=f"v{k}", family=f"f{k}", recall=p, false_alarm=q) for k in range(5)
    ]
    report = report_for(Design(voices=voices, flawed=N, clean=N, shared=rho, seed=seed))
    n_eff = report.effective_votes
    truth = 5 / (1 + 4 * rho)
    assert n_eff.interval is not None and n_eff.value is not None
    inside(n_eff, n_eff.interval.low, n_eff.interval.high, truth)
    assert n_eff.value == pytest.approx(truth, rel=0.2)
    assert n_eff.mean_correlation == pytest.approx(rho, abs=0.07)


def test_majority_under_a_common_shock(seed: int = SEED) -> None:
    p, q, rho = 0.6, 0.2, 0.5
    report = report_for(Design(voices=three(p, q), flawed=N, clean=N, shared=rho, seed=seed))
    check(arm(report, "majority").recall, rho * p + (1 - rho) * (3 * p**2 - 2 * p**3))
    check(arm(report, "majority").false_alarm, rho * q + (1 - rho) * (3 * q**2 - 2 * q**3))


def test_one_family_copying_another_is_measured_as_an_echo(seed: int = SEED) -> None:
    p, q, c = 0.5, 0.2, 0.8
    voices = [
        SyntheticVoice(name="a", family="anthropic", recall=p, false_alarm=q),
        SyntheticVoice(name="b", family="openai", recall=p, false_alarm=q, copies="a", copy_rate=c),
        SyntheticVoice(name="g", family="google", recall=p, false_alarm=q),
    ]
    report = report_for(Design(voices=voices, flawed=N, clean=N, seed=seed))
    pairs = {(x.a, x.b): x for x in report.voice_agreement}
    assert pairs[("a", "b")].correlation == pytest.approx(c, abs=0.07)
    assert pairs[("a", "g")].correlation == pytest.approx(0.0, abs=0.1)
    families = {(f.a, f.b): f for f in report.family_agreement}
    assert families[("anthropic", "openai")].correlation == pytest.approx(c, abs=0.07)
    assert families[("google", "openai")].correlation == pytest.approx(0.0, abs=0.1)
    # Correlation matrix [[1, c, 0], [c, 1, 0], [0, 0, 1]]: n_eff = 9 / (3 + 2c).
    n_eff = report.effective_votes
    truth = 9 / (3 + 2 * c)
    assert n_eff.interval is not None
    inside(n_eff, n_eff.interval.low, n_eff.interval.high, truth)
    # The copy's "cross-family" agreement makes consensus look like two voices when it is
    # mostly one: a and b both catch it with c*p + (1-c)*p^2, or one of them does and g too.
    both = c * p + (1 - c) * p**2
    one_of_two = 2 * (1 - c) * p * (1 - p)
    check(arm(report, "council:consensus").recall, both + one_of_two * p)
    check(arm(report, "majority").recall, both + one_of_two * p)


def test_unequal_voices_the_held_apart_best_voice_is_the_best_one(seed: int = SEED) -> None:
    voices = [
        SyntheticVoice(name="strong", family="a", recall=0.85, false_alarm=0.1),
        SyntheticVoice(name="mid", family="b", recall=0.5, false_alarm=0.15),
        SyntheticVoice(name="weak", family="c", recall=0.35, false_alarm=0.3),
    ]
    report = report_for(Design(voices=voices, flawed=N, clean=N, seed=seed))
    best = arm(report, "best-voice")
    assert [c.voice for c in best.choices] == ["strong", "strong"]
    assert not any(c.in_sample for c in best.choices)
    check(best.recall, 0.85)
    check(best.false_alarm, 0.1)
    check(arm(report, "majority").recall, majority_of_three(0.85, 0.5, 0.35))
    check(arm(report, "council:consensus+dissent").recall, any_of(0.85, 0.5, 0.35))
    # Majority of a strong voice and two weak ones misses more than the strong voice alone.
    majority = arm(report, "majority").recall.value
    assert majority is not None and best.recall.value is not None
    assert majority < best.recall.value
    test = next(c for c in report.comparisons if c.arm == "majority")
    assert test.holm_p < 0.01


def test_the_same_design_and_seed_give_the_same_records() -> None:
    design = Design(voices=three(0.5, 0.2), flawed=20, clean=20, shared=0.3, seed=5)
    assert generate(design) == generate(design)
    assert generate(design) != generate(design.model_copy(update={"seed": 6}))


def test_a_design_copying_a_voice_not_listed_before_is_refused() -> None:
    with pytest.raises(ValueError, match="not listed before"):
        Design(
            voices=[
                SyntheticVoice(name="b", family="x", recall=0.5, false_alarm=0.1, copies="a"),
                SyntheticVoice(name="a", family="y", recall=0.5, false_alarm=0.1),
            ],
            flawed=1,
            clean=1,
        )
