"""calibrate.statistics.verification against brute-force references on seeded data: every figure recomputed by trying every
threshold (or every pair of attempts) in plain numpy/Python, ties counted as ``d <= t`` accepts them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from calibrate.statistics import verification as v


def attempts(seed: int, n_imp: int = 400, n_gen: int = 60, decimals: int | None = 2):
    """Impostor and genuine distances that overlap, rounded so that many tie (within and across the two)."""
    rng = np.random.default_rng(seed)
    imp = rng.normal(3.0, 1.0, n_imp)
    gen = rng.normal(1.2, 0.9, n_gen)
    if decimals is not None:
        imp, gen = np.round(imp, decimals), np.round(gen, decimals)
    return imp, gen


def candidates(imp, gen):
    """Every threshold at which a count can change, and -inf."""
    return np.concatenate([[-np.inf], np.unique(np.concatenate([imp, gen]))])


def rates(imp, gen, t):
    return float(np.mean(imp <= t)), float(np.mean(gen > t))


@pytest.mark.parametrize("seed, decimals", [(0, 1), (1, 2), (2, None), (3, 0)])
def test_one_threshold_is_the_loosest_threshold_admitting_no_more_impostors(seed, decimals):
    imp, gen = attempts(seed, decimals=decimals)
    pooled = v.PooledScores.of(imp, gen)
    grid = candidates(imp, gen)
    for k in (0, 1, 3, 7, 40, 399, 400, 1000):
        ref = v.one_threshold(pooled, k)
        assert ref.false_accepts == int(np.sum(imp <= ref.threshold)) <= k
        assert ref.genuine_accepted == int(np.sum(gen <= ref.threshold))
        # brute force: the best FNR over every threshold that admits at most k impostors
        allowed = [t for t in grid if np.sum(imp <= t) <= k]
        best = min(rates(imp, gen, t)[1] for t in allowed)
        assert ref.fnr == pytest.approx(best, abs=1e-12)
        # and no looser threshold admits at most k: the next impostor value is admitted by anything above
        if k < imp.size:
            assert np.sum(imp <= np.nextafter(ref.threshold, np.inf)) > k


@pytest.mark.parametrize("seed, decimals", [(4, 1), (5, 2), (6, None), (7, 0)])
def test_eer_is_where_fmr_and_fnmr_are_closest_over_every_threshold(seed, decimals):
    imp, gen = attempts(seed, decimals=decimals)
    rate, threshold = v.eer(v.PooledScores.of(imp, gen))
    grid = candidates(imp, gen)
    gaps = [abs(rates(imp, gen, t)[0] - rates(imp, gen, t)[1]) for t in grid]
    best = grid[int(np.argmin(gaps))]  # the first (strictest) of equally close thresholds
    assert threshold == best
    assert rate == pytest.approx(sum(rates(imp, gen, best)) / 2, abs=1e-12)


@pytest.mark.parametrize("seed", [8, 9])
def test_auc_counts_every_genuine_impostor_pair_with_ties_as_half(seed):
    imp, gen = attempts(seed, n_imp=150, n_gen=40, decimals=1)
    pairs = (gen[:, None] < imp[None, :]).sum() + 0.5 * (gen[:, None] == imp[None, :]).sum()
    assert v.auc(v.PooledScores.of(imp, gen)) == pytest.approx(pairs / (gen.size * imp.size), abs=1e-12)
    # sklearn's roc_auc_score on similarities (higher = genuine) is the same quantity, by the rank-sum identity
    ranks = stats.rankdata(np.concatenate([-gen, -imp]))
    mann_whitney = (ranks[:gen.size].sum() - gen.size * (gen.size + 1) / 2) / (gen.size * imp.size)
    assert v.auc(v.PooledScores.of(imp, gen)) == pytest.approx(mann_whitney, abs=1e-12)


def test_d_prime_is_pyeers_definition():
    imp, gen = attempts(10, decimals=None)
    expected = abs(gen.mean() - imp.mean()) / math.sqrt(0.5 * (np.std(gen) ** 2 + np.std(imp) ** 2))
    assert v.d_prime(gen, imp) == pytest.approx(expected, rel=1e-12)


def test_fnmr_at_fmr_reads_the_loosest_threshold_within_each_fmr_and_refuses_what_cannot_be_measured():
    imp, gen = attempts(11, n_imp=2000, n_gen=200, decimals=2)
    metrics = v.verification_metrics(v.PooledScores.of(imp, gen), fmrs=(0.01, 0.001, 0.0001))
    grid = candidates(imp, gen)
    for f in (0.01, 0.001):
        allowed = [t for t in grid if np.mean(imp <= t) <= f + 1e-15]
        assert metrics["fnmr_at_fmr"][repr(f)] == pytest.approx(min(rates(imp, gen, t)[1] for t in allowed), abs=1e-12)
    assert metrics["fnmr_at_fmr"]["0.0001"] is None  # 2,000 impostor attempts cannot measure 1 in 10,000
    zero = [t for t in grid if np.sum(imp <= t) == 0]
    assert metrics["fnmr_at_zero_fmr"] == pytest.approx(min(rates(imp, gen, t)[1] for t in zero), abs=1e-12)
    assert metrics["fmr_at_zero_fnmr"] == pytest.approx(np.mean(imp <= gen.max()), abs=1e-12)
    assert (metrics["impostor_attempts"], metrics["genuine_attempts"]) == (2000, 200)


def test_det_rows_are_monotone_bounded_and_hold_the_extra_thresholds():
    imp, gen = attempts(12, n_imp=30_000, n_gen=3_000, decimals=3)
    pooled = v.PooledScores.of(imp, gen)
    extra = [v.loosest_below(pooled, k) for k in (0, 5, 29, 150)]
    t, fmr, fnmr = v.det_rows(pooled, extra=extra, max_rows=800)
    assert t.size <= 800 and np.all(np.diff(t) > 0)
    assert np.all(np.diff(fmr) >= 0) and np.all(np.diff(fnmr) <= 0)
    assert (fmr[0], fnmr[0], fmr[-1], fnmr[-1]) == (0.0, 1.0, 1.0, 0.0)
    assert set(extra) <= set(t.tolist())
    for i in np.random.default_rng(0).choice(t.size, 40, replace=False):
        assert (fmr[i], fnmr[i]) == pytest.approx(rates(imp, gen, t[i]), abs=1e-12)
    # probit spacing: the low-FMR end is drawn as finely as the bulk (many rows below 1% FMR)
    assert np.sum((fmr > 0) & (fmr < 0.01)) > 40


def test_mcnemar_is_the_exact_two_sided_sign_test():
    for worse, better in ((0, 0), (5, 0), (30, 12), (12, 30), (200, 170)):
        n = worse + better
        expected = 1.0 if n == 0 else min(1.0, stats.binomtest(worse, n, 0.5).pvalue)
        assert v.mcnemar_p(worse, better) == pytest.approx(expected, rel=1e-9)
    rng = np.random.default_rng(13)
    a, b = rng.random(500) < 0.8, rng.random(500) < 0.9
    paired = v.paired_fnr(a, b)
    assert (paired.worse, paired.better) == (int(np.sum(~a & b)), int(np.sum(a & ~b)))
    assert paired.per_1000 == pytest.approx(1000 * (np.mean(~a) - np.mean(~b)))


def test_class_spread_against_binomial_probabilities_and_a_direct_count():
    rng = np.random.default_rng(14)
    n = rng.integers(50, 400, 300)
    fa = rng.binomial(n, 0.01)
    fa[:5] += 20  # a few classes that attract false accepts
    target = 0.01
    got = v.class_spread(fa, n, target)
    p = fa.sum() / n.sum()
    expected_2x = np.mean([1 - stats.binom.cdf(math.floor(2 * target * m), m, p) for m in n])
    assert got["share_classes_over_2x_noise"] == pytest.approx(expected_2x, rel=1e-9)
    pearson = np.sum((fa - n * p) ** 2 / (n * p * (1 - p))) / (n.size - 1)
    assert got["fa_dispersion"] == pytest.approx(pearson, rel=1e-12)
    assert got["fa_share_top_classes"] == pytest.approx(np.sort(fa)[-15:].sum() / fa.sum(), rel=1e-12)
    # binomial noise alone: dispersion near 1
    calm = v.class_spread(rng.binomial(n, 0.01), n, target)["fa_dispersion"]
    assert 0.7 < calm < 1.4


def test_group_figures_against_a_direct_count_and_the_widening_test():
    names = ("F", "M")
    impostors = np.array([[400, 1600, 10], [1600, 6400, 40], [50, 200, 0]])
    false_accepts = np.array([[40, 2, 0], [3, 6, 0], [1, 0, 0]])
    counts = v.GroupCounts(names, impostors, false_accepts, np.array([40, 160, 10]), np.array([2, 24, 1]),
                           np.array([20, 80, 5]))
    got = v.group_figures(counts)
    f, m = got["groups"]["F"], got["groups"]["M"]
    assert f["fmr_same_group"] == pytest.approx(40 / 400) and m["fmr_same_group"] == pytest.approx(6 / 6400)
    assert f["fmr"] == pytest.approx(42 / 2010) and f["fnmr"] == pytest.approx(2 / 40)
    assert (f["fmr_same_group_ci_low"], f["fmr_same_group_ci_high"]) == pytest.approx(
        stats.binomtest(40, 400).proportion_ci(0.95, method="exact"), rel=1e-6)
    assert got["fmr_same_group_max_over_min"] == pytest.approx((40 / 400) / (6 / 6400))
    assert got["fnmr_max_over_min"] == pytest.approx((24 / 160) / (2 / 40))
    assert got["groups"]["unlabelled"]["classes"] == 5 and "fmr_same_group" not in got["groups"]["unlabelled"]
    # one threshold at the same FPR, with the false accepts spread evenly: the estimator widens beyond noise
    even = v.group_figures(v.GroupCounts(names, impostors, np.array([[12, 2, 0], [3, 30, 0], [1, 0, 0]]),
                                         np.array([40, 160, 10]), np.array([5, 20, 1]), np.array([20, 80, 5])))
    z, beyond = v.widening(got["groups"], even["groups"])
    assert beyond and z > 2
    z_same, beyond_same = v.widening(got["groups"], got["groups"])
    assert z_same == pytest.approx(0.0) and not beyond_same


def test_eer_breaks_exact_ties_toward_the_stricter_threshold_by_exact_arithmetic():
    """Ties in |FMR - FNMR| are decided in integers, not by float rounding (fractions as the reference)."""
    from fractions import Fraction

    imp, gen = np.array([0, 0, 2, 2, 3, 4, 4, 4, 5.0]), np.array([0, 0, 1, 1, 3, 3.0])
    rate, threshold = v.eer(v.PooledScores.of(imp, gen))
    assert threshold == 1.0 and rate == pytest.approx((Fraction(2, 9) + Fraction(1, 3)) / 2, abs=1e-15)
    rng = np.random.default_rng(21)
    for _ in range(300):
        imp = rng.integers(0, 8, rng.integers(1, 12)).astype(float)
        gen = rng.integers(0, 6, rng.integers(1, 9)).astype(float)
        grid = candidates(imp, gen)
        exact = [(abs(Fraction(int(np.sum(gen > t)), gen.size) - Fraction(int(np.sum(imp <= t)), imp.size)), t)
                 for t in grid]
        best = min(exact, key=lambda g: g[0])[1]  # the first (strictest) of exactly equal gaps
        assert v.eer(v.PooledScores.of(imp, gen))[1] == best, (imp, gen)


def test_paired_fields_withhold_a_verdict_where_ties_keep_one_threshold_from_the_same_fpr():
    paired = v.PairedComparison(worse=0, better=900, genuine_attempts=1000)
    tied = v.OneThreshold(threshold=-1.0, false_accepts=0, impostor_attempts=5000, genuine_accepted=0,
                          genuine_attempts=1000)
    said = v.paired_fields(paired, 243, tied)
    assert not said["same_fpr"] and not said["beyond_noise"] and said["p_value"] < 1e-6
    near = v.OneThreshold(threshold=1.0, false_accepts=240, impostor_attempts=5000, genuine_accepted=0,
                          genuine_attempts=1000)
    assert v.paired_fields(paired, 243, near)["beyond_noise"]
