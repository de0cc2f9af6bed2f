"""The eval statistics against independent implementations and published values.

Reference values come from scipy, statsmodels and numpy, or from a textbook
or article named beside each one; none is our own output.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from rune_council.evaluation import stats as S

# --------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize(("b", "c"), [(3, 9), (0, 5), (1, 1), (7, 0), (12, 11), (2, 20)])
def test_mcnemar_small_counts_use_the_exact_binomial_test(b: int, c: int) -> None:
    got = S.mcnemar(b, c)
    assert got.method == "exact binomial"
    table = [[0, b], [c, 0]]
    assert got.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-12)
    assert got.p_value == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


@pytest.mark.parametrize(("b", "c"), [(150, 86), (40, 20), (30, 31), (13, 40), (100, 99)])
def test_mcnemar_large_counts_use_the_continuity_corrected_chi_square(b: int, c: int) -> None:
    got = S.mcnemar(b, c)
    assert got.method == "chi-square, continuity-corrected"
    ref = sm_mcnemar([[0, b], [c, 0]], exact=False, correction=True)
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert got.p_value == pytest.approx(sps.chi2.sf(ref.statistic, 1), rel=1e-9)


def test_mcnemar_textbook_example_prime_minister_approval() -> None:
    # Agresti, An Introduction to Categorical Data Analysis (2nd ed., 2007), Table 8.1:
    # 1600 people rated the Prime Minister twice; 150 approved then disapproved, 86 the
    # reverse. The book gives z = 4.17, so z^2 = 17.36 (no continuity correction), P < 0.001.
    got = S.mcnemar(150, 86, correction=False)
    assert got.statistic == pytest.approx(17.36, abs=0.005)
    assert got.statistic is not None and got.statistic**0.5 == pytest.approx(4.17, abs=0.005)
    assert got.p_value < 0.001
    assert got.p_value == pytest.approx(sps.chi2.sf(17.355932, 1), rel=1e-5)


def test_mcnemar_with_equal_discordant_counts_is_no_evidence() -> None:
    # The correction is clamped at zero, so b = c gives statistic 0 and p = 1 rather than
    # the unclamped (|0| - 1)^2 / n statsmodels would report.
    got = S.mcnemar(40, 40)
    assert got.statistic == 0.0
    assert got.p_value == 1.0


def test_mcnemar_without_discordant_pairs_says_so() -> None:
    got = S.mcnemar(0, 0)
    assert got.p_value == 1.0
    assert got.method is None
    assert got.note is not None and "no discordant" in got.note


def test_mcnemar_paired_counts_the_discordant_items() -> None:
    council = [True, True, False, True, False, True]
    voice = [True, False, False, False, True, True]
    got = S.mcnemar_paired(council, voice)
    assert (got.a_only, got.b_only) == (2, 1)
    with pytest.raises(ValueError):
        S.mcnemar_paired([True], [True, False])


# --------------------------------------------------------------------------- Holm


def test_holm_matches_the_worked_example_and_statsmodels() -> None:
    # The Holm-Bonferroni method's worked example (Wikipedia, "Holm-Bonferroni method"):
    # p = 0.01, 0.04, 0.03, 0.005 at alpha 0.05 rejects H1 and H4 only.
    p = [0.01, 0.04, 0.03, 0.005]
    got = S.holm(p)
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [x <= 0.05 for x in got] == [True, False, False, True]
    ref = multipletests(p, method="holm")[1]
    assert got == pytest.approx(list(ref))


def test_holm_random_p_values_match_statsmodels() -> None:
    rng = random.Random(7)
    for _ in range(12):
        p = [rng.random() ** 2 for _ in range(rng.randint(1, 9))]
        assert S.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))


# --------------------------------------------------------------------------- exact pieces


@pytest.mark.parametrize(("k", "n"), [(0, 1), (3, 10), (10, 10), (17, 40), (250, 600)])
def test_binomial_two_sided_matches_scipy(k: int, n: int) -> None:
    assert S.binomial_two_sided(k, n) == pytest.approx(sps.binomtest(k, n, 0.5).pvalue)


@pytest.mark.parametrize("x", [0.0, 0.3, 1.0, 3.841458820694124, 10.0, 30.0])
def test_chi_square_tail_matches_scipy(x: float) -> None:
    assert S.chi2_sf_1df(x) == pytest.approx(sps.chi2.sf(x, 1), rel=1e-9)


def test_quantile_matches_numpy_linear() -> None:
    rng = random.Random(3)
    values = sorted(rng.random() for _ in range(37))
    for q in (0.0, 0.025, 0.5, 0.9, 0.975, 1.0):
        assert S.quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


# --------------------------------------------------------------------------- rates


def test_proportion_interval_agrees_with_scipys_percentile_bootstrap() -> None:
    # Different random streams, same method: with 4000 resamples both intervals sit within
    # a percentage point of each other.
    rng = np.random.default_rng(1)
    x = rng.random(120) < 0.3
    got = S.proportion([bool(v) for v in x], undefined="none", resamples=4000, seed=5)
    ref = sps.bootstrap(
        (x.astype(float),), np.mean, method="percentile", n_resamples=4000, random_state=2
    ).confidence_interval
    assert got.value == pytest.approx(float(x.mean()))
    assert got.interval is not None
    assert got.interval.low == pytest.approx(ref.low, abs=0.012)
    assert got.interval.high == pytest.approx(ref.high, abs=0.012)


def test_rates_without_a_denominator_are_none_with_the_reason() -> None:
    got = S.proportion([], undefined="no clean items answered")
    assert got.value is None and got.interval is None
    assert got.reason == "no clean items answered"
    precision = S.ratio(
        [(False, False, "flawed"), (False, False, "clean")], undefined="no alarm raised"
    )
    assert precision.value is None and precision.reason == "no alarm raised"


def test_interval_is_reproducible_from_its_seed_and_moves_with_it() -> None:
    data = [True] * 13 + [False] * 29
    a = S.proportion(data, undefined="-", resamples=500, seed=11)
    b = S.proportion(data, undefined="-", resamples=500, seed=11)
    c = S.proportion(data, undefined="-", resamples=500, seed=12)
    assert a == b
    assert a.interval != c.interval


def test_ratio_keeps_each_label_s_share_in_every_resample() -> None:
    # Precision over 10 flawed items all hit and 10 clean items all alarmed is 0.5 on the
    # data; a resample that drew flawed and clean items freely would move it, a stratified
    # one cannot.
    items = [(True, True, "flawed")] * 10 + [(False, True, "clean")] * 10
    got = S.ratio(items, undefined="-", resamples=300)
    assert got.value == 0.5
    assert got.interval is not None
    assert (got.interval.low, got.interval.high) == (0.5, 0.5)


def test_ratio_counts_resamples_where_the_figure_is_undefined() -> None:
    # One alarm in 30 items: many resamples draw no alarm, so precision is undefined there.
    items = [(True, True, "flawed")] + [(False, False, "flawed")] * 29
    got = S.ratio(items, undefined="-", resamples=400)
    assert got.interval is not None
    assert 0 < got.interval.undefined_resamples < 400


def test_percentile_interval_covers_a_known_rate_about_as_often_as_it_claims() -> None:
    # 200 datasets of 80 items with recall 0.35: the 90% interval should cover 0.35 in
    # roughly 90% of them (a binomial 95% band around 180 of 200 is about 170-189).
    rng = random.Random(2024)
    covered = 0
    for k in range(200):
        data = [rng.random() < 0.35 for _ in range(80)]
        iv = S.proportion(data, undefined="-", resamples=300, level=0.9, seed=k).interval
        assert iv is not None
        covered += iv.low <= 0.35 <= iv.high
    assert 165 <= covered <= 192


# --------------------------------------------------------------------------- agreement


def test_phi_with_one_label_is_the_pearson_correlation_of_the_indicators() -> None:
    rng = random.Random(5)
    a = [rng.random() < 0.4 for _ in range(200)]
    b = [x if rng.random() < 0.6 else rng.random() < 0.4 for x in a]
    got = S.error_agreement("a", a, "b", b, ["flawed"] * 200)
    assert got.correlation == pytest.approx(sps.pearsonr(a, b).statistic)
    assert got.both_wrong == sum(x and y for x, y in zip(a, b, strict=True))
    assert got.independent_rate == pytest.approx(np.mean(a) * np.mean(b))


def test_correlation_is_taken_within_each_label() -> None:
    # Two voices that err independently but both far more on flawed items than on clean
    # ones: pooled naively they look correlated; within each label they are not. The
    # reference demeans each label with numpy and correlates what is left.
    rng = random.Random(9)
    labels = ["flawed"] * 300 + ["clean"] * 300
    rate = {"flawed": 0.6, "clean": 0.05}
    a = [rng.random() < rate[lab] for lab in labels]
    b = [rng.random() < rate[lab] for lab in labels]
    got = S.error_agreement("a", a, "b", b, labels)

    def demeaned(x: list[bool]) -> np.ndarray:
        arr = np.array(x, dtype=float)
        for lab in rate:
            mask = np.array([la == lab for la in labels])
            arr[mask] -= arr[mask].mean()
        return arr

    ref = float(np.corrcoef(demeaned(a), demeaned(b))[0, 1])
    assert got.correlation == pytest.approx(ref)
    naive = float(np.corrcoef(np.array(a, float), np.array(b, float))[0, 1])
    assert naive > 0.3 > abs(ref)
    expected = (
        np.mean(a[:300]) * np.mean(b[:300]) * 300 + np.mean(a[300:]) * np.mean(b[300:]) * 300
    ) / 600
    assert got.independent_rate == pytest.approx(expected)


def test_agreement_skips_items_either_voice_did_not_answer() -> None:
    a = [True, None, False, True]
    b = [True, True, None, False]
    got = S.error_agreement("a", a, "b", b, ["x"] * 4)
    assert got.items == 2 and got.both_wrong == 1
    none = S.error_agreement("a", [None], "b", [True], ["x"])
    assert none.joint_error_rate is None and none.reason == "no item answered by both"


def test_agreement_of_a_voice_that_never_errs_has_no_correlation() -> None:
    got = S.error_agreement("a", [False] * 5, "b", [True, False] * 2 + [True], ["x"] * 5)
    assert got.correlation is None
    assert got.reason is not None and "do not vary" in got.reason


def test_family_agreement_averages_the_voice_pairs_between_families() -> None:
    errs = {
        "c1": [True, False, True, False, True, False],
        "c2": [True, False, True, False, False, True],
        "g1": [False, True, True, False, True, False],
    }
    labels = ["x"] * 6
    pairs = S.pairwise_agreement(errs, labels)
    fams = S.family_agreement(pairs, {"c1": "anthropic", "c2": "anthropic", "g1": "google"})
    by = {(f.a, f.b): f for f in fams}
    within = by[("anthropic", "anthropic")]
    across = by[("anthropic", "google")]
    assert within.voice_pairs == 1 and across.voice_pairs == 2
    ref_across = np.mean([sps.pearsonr(errs[v], errs["g1"]).statistic for v in ("c1", "c2")])
    assert across.correlation == pytest.approx(float(ref_across))
    assert within.correlation == pytest.approx(sps.pearsonr(errs["c1"], errs["c2"]).statistic)


# --------------------------------------------------------------------------- Kish


def test_kish_equal_weights_is_n_over_one_plus_n_minus_one_rho_bar() -> None:
    # Kish (1965): the design effect of n equally weighted observations with mean
    # correlation rho is 1 + (n - 1) * rho, so n_eff = n / (1 + (n - 1) * rho).
    rng = np.random.default_rng(4)
    x = rng.normal(size=(500, 5))
    x[:, 1] += x[:, 0]
    x[:, 2] += 0.5 * x[:, 0]
    r = np.corrcoef(x, rowvar=False)
    n = 5
    rho_bar = (r.sum() - n) / (n * (n - 1))
    assert S.kish(r.tolist()) == pytest.approx(n / (1 + (n - 1) * rho_bar))


def test_kish_weighted_general_form() -> None:
    r = np.array([[1.0, 0.6, 0.1], [0.6, 1.0, 0.2], [0.1, 0.2, 1.0]])
    w = np.array([2.0, 1.0, 0.5])
    assert S.kish(r.tolist(), w.tolist()) == pytest.approx(w.sum() ** 2 / (w @ r @ w))


def test_kish_limits_independent_and_identical() -> None:
    assert S.kish(np.eye(4).tolist()) == pytest.approx(4)
    assert S.kish(np.ones((4, 4)).tolist()) == pytest.approx(1)
    with pytest.raises(ValueError):
        S.kish([[1.0, -1.0], [-1.0, 1.0]])


def test_effective_votes_of_copies_is_one_and_leaves_out_constant_voices() -> None:
    base = [True, False, False, True, False, True, True, False] * 5
    errs = {"a": base, "b": list(base), "c": list(base), "never": [False] * 40}
    got = S.effective_votes(errs, ["x"] * 40, resamples=200)
    assert got.value == pytest.approx(1.0)
    assert got.voices == ["a", "b", "c"]
    assert "never" in got.excluded
    assert got.interval is not None
    assert (got.interval.low, got.interval.high) == pytest.approx((1.0, 1.0))


def test_effective_votes_weights_reach_the_formula() -> None:
    rng = random.Random(1)
    a = [rng.random() < 0.5 for _ in range(400)]
    b = [x if rng.random() < 0.5 else rng.random() < 0.5 for x in a]
    c = [rng.random() < 0.5 for _ in range(400)]
    errs = {"a": a, "b": b, "c": c}
    w = {"a": 1.0, "b": 3.0, "c": 1.0}
    got = S.effective_votes(errs, ["x"] * 400, w, resamples=50)
    r = np.corrcoef(np.array([a, b, c], dtype=float))
    wv = np.array([1.0, 3.0, 1.0])
    assert got.value == pytest.approx(float(wv.sum() ** 2 / (wv @ r @ wv)))
