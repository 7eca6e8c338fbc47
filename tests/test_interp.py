"""generic-interp and class-interp: the paper's linear-interpolation thresholds, checked against a
brute-force transcription of the formula in exact rational arithmetic.

    tau(e) = (e N) d_(1)                                          if e <= 1/N
    tau(e) = d_(lo) + (N e - lo) / (hi - lo) (d_(hi) - d_(lo))    if e >  1/N,  lo = floor(eN), hi = ceil(eN)

(when eN is an integer, lo = hi and tau = d_(eN)).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from calibrate.contract.base import RunContext
from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.interp import ClassInterp, GenericInterp, interp_threshold


def brute_tau(distances, e: float) -> float:
    """The paper's formula, literally, with 1-based order statistics and exact arithmetic."""
    d = sorted(Fraction(x) for x in distances)
    n = len(d)
    e = Fraction(e)
    order = {i: d[i - 1] for i in range(1, n + 1)}  # i-th lowest distance
    if e <= Fraction(1, n):
        return float(e / Fraction(1, n) * order[1])
    lo, hi = math.floor(e * n), math.ceil(e * n)
    if lo == hi:
        return float(order[lo])
    return float(order[lo] + (n * e - lo) / (hi - lo) * (order[hi] - order[lo]))


def _check(distances, targets):
    got = interp_threshold(np.sort(np.asarray(distances, float)), np.asarray(targets, float))
    want = [brute_tau(distances, t) for t in targets]
    scale = max(1.0, max(abs(x) for x in distances))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale)
    return got


def test_e_at_or_below_one_over_n_is_linear_to_zero():
    d = [0.8, 1.2, 2.0, 3.5]  # N = 4, 1/N = 0.25
    targets = [1e-6, 0.01, 0.1, 0.2, 0.25]
    got = _check(d, targets)
    np.testing.assert_allclose(got, [t * 4 * 0.8 for t in targets], rtol=1e-12)
    assert got[-1] == pytest.approx(0.8)  # at e = 1/N: exactly d_(1), continuous with the other branch


def test_e_times_n_integer_gives_the_order_statistic():
    d = np.random.default_rng(1).gamma(3.0, size=40)
    s = np.sort(d)
    for k in (2, 3, 10, 39, 40):
        e = k / 40
        got = _check(d, [e])
        assert got[0] == pytest.approx(s[k - 1], rel=1e-12)


def test_e_between_order_statistics_interpolates_linearly():
    d = [1.0, 2.0, 4.0, 8.0, 16.0]  # N = 5
    got = _check(d, [0.3, 0.5, 0.7, 0.95])
    # eN = 1.5: halfway between d(1)=1 and d(2)=2; 2.5 -> 3; 3.5 -> 6; 4.75 -> 8 + 0.75 * 8
    np.testing.assert_allclose(got, [1.5, 3.0, 6.0, 14.0], rtol=1e-12)


def test_ties_need_no_special_case():
    d = [0.5, 1.0, 1.0, 1.0, 1.0, 2.0]
    got = _check(d, [0.2, 0.34, 0.5, 0.66, 0.8, 0.9])
    assert np.all(got[1:4] == 1.0)


def test_single_distance_and_zeros():
    _check([2.0], [0.001, 0.5, 0.999])
    _check([0.0, 0.0, 0.3, 0.9], [0.1, 0.4, 0.6])


@pytest.mark.parametrize("seed", range(5))
def test_random_data_and_targets_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    d = np.round(rng.exponential(size=n), int(rng.integers(1, 6)))  # rounding makes ties
    targets = np.concatenate([rng.uniform(0, 1, 30), [1 / n, 0.5 / n, min(0.999, 3 / n)]])
    targets = targets[(targets > 0) & (targets < 1)]
    got = _check(d, targets)
    order = np.argsort(targets)
    assert np.all(np.diff(got[order]) >= 0)  # monotone in the target


def _impostors(seed=0):
    rng = np.random.default_rng(seed)
    return ImpostorDistances.from_lists({f"c{i}": rng.gamma(2.0 + i, size=n) for i, n in enumerate((7, 50, 200, 13))})


TARGETS = (0.005, 0.0025, 0.001, 0.0005, 0.05, 0.3)


def test_class_interp_uses_each_class_own_distances():
    imp = _impostors()
    table = ClassInterp().fit(imp, RunContext()).thresholds(TARGETS)
    for i, cls in enumerate(imp.classes):
        assert table.classes[i] == cls
        np.testing.assert_allclose(table.values[i], [brute_tau(imp.of(i), t) for t in TARGETS], rtol=1e-12)


def test_generic_interp_pools_every_class_and_shares_one_threshold():
    imp = _impostors()
    model = GenericInterp().fit(imp, RunContext())
    table = model.thresholds(TARGETS)
    want = [brute_tau(imp.pooled(), t) for t in TARGETS]
    for i in range(len(imp)):
        np.testing.assert_allclose(table.values[i], want, rtol=1e-12)
    assert model.threshold("c3", 0.05) == pytest.approx(want[4], rel=1e-12)


def test_generic_and_class_thresholds_differ_where_classes_differ():
    imp = _impostors()
    c = ClassInterp().fit(imp).thresholds([0.05]).values[:, 0]
    g = GenericInterp().fit(imp).thresholds([0.05]).values[:, 0]
    assert len(set(g.tolist())) == 1 and len(set(c.tolist())) == len(imp)
    assert c.min() < g[0] < c.max()


def test_models_report_training_counts():
    imp = _impostors()
    assert ClassInterp().fit(imp).parameters() == [{"class": c, "n_train": int(n)} for c, n in zip(imp.classes, imp.counts())]
    assert GenericInterp().fit(imp).parameters()[0] == {"class": "c0", "n_train": 270}


def test_impostor_container_refuses_nan_negative_and_empty_classes():
    from calibrate.errors import DataError

    with pytest.raises(DataError, match="NaN"):
        ImpostorDistances.from_lists({"a": [0.1, np.nan]})
    with pytest.raises(DataError, match="negative"):
        ImpostorDistances.from_lists({"a": [0.1, -0.2]})
    with pytest.raises(DataError, match="class 'b' has no training impostor distances"):
        ImpostorDistances.from_lists({"a": [0.1], "b": []})


def test_the_vectorised_per_class_interpolation_equals_the_formula_class_by_class():
    """class-interp's thresholds for many classes at once (no loop over classes) against interp_threshold
    called on each class (ties, one-value classes and targets below 1/n included), exactly."""
    from calibrate.statistics.order import interp_threshold, interp_thresholds_segments

    rng = np.random.default_rng(8)
    sizes = rng.integers(1, 40, 300)
    per = [np.sort(np.round(rng.gamma(2.0, 1.0, n), 1)) for n in sizes]
    values, offsets = np.concatenate(per), np.r_[0, np.cumsum(sizes)]
    targets = np.array([1e-4, 0.01, 0.05, 0.2, 0.5, 0.99])
    rows = rng.permutation(300)[:120]
    got = interp_thresholds_segments(values, offsets, rows, targets)
    want = np.stack([interp_threshold(per[i], targets) for i in rows])
    np.testing.assert_array_equal(got, want)
