"""Estimator ncx2-grid (the paper's Algorithm 1) against a plain brute-force reference, mpmath and
generated data with known parameters."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from calibrate.contract.base import RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.manager import build_registry
from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid, Ncx2GridModel
from calibrate_builtins.estimators.ncx2.search import fit_class, sigma_grid

TARGETS = [0.05, 0.01, 0.005, 0.001, 0.0005]


def draw(rng, n, dim, lam, sigma):
    """Distances delta = sigma * sqrt(X), X ~ noncentral chi-square(dim, lam)."""
    return sigma * np.sqrt(stats.ncx2.rvs(dim, lam, size=n, random_state=rng))


def reference_fit(d, dims, sigmas, score, scaling):
    """Algorithm 1 written plainly: loops over dim and sigma, scipy.stats.ncx2, np.corrcoef."""
    phi_ref = np.array([np.sum(d <= x) for x in d], dtype=float)
    best_rho, best = -np.inf, None
    for dim in dims:
        for sigma in sigmas:
            X = (d / sigma) ** 2 if scaling == "divide" else (sigma * d) ** 2
            lam = max(X.mean() - dim, X.mean() / (1 + dim))
            phi = stats.ncx2.cdf(X, dim, lam)
            if np.ptp(phi) == 0:
                continue
            if score == "ncc":
                rho = np.corrcoef(phi_ref, phi)[0, 1]
            else:
                rho = np.sum(np.sqrt(phi_ref / phi_ref.sum() * phi / phi.sum()))
            if rho > best_rho:
                best_rho, best = rho, (dim, sigma, lam)
    return best + (best_rho,)


def reference_thresholds(dim, sigma, lam, scaling, targets):
    q = np.sqrt(stats.ncx2.ppf(targets, dim, lam))
    return sigma * q if scaling == "divide" else q / sigma


def ncx2_cdf_mp(x, k, lam):
    """Noncentral chi-square CDF as the Poisson mixture of central chi-square CDFs (mpmath)."""
    x, k, h = mp.mpf(x), mp.mpf(k), mp.mpf(lam) / 2
    n = int(float(h) + 40 * np.sqrt(float(h)) + 60)
    return mp.fsum(mp.exp(-h + i * mp.log(h) - mp.loggamma(i + 1)) * mp.gammainc(k / 2 + i, 0, x / 2, regularized=True)
                   for i in range(n))


@pytest.mark.parametrize("score", ["ncc", "bhattacharyya"])
@pytest.mark.parametrize("scaling", ["divide", "multiply"])
def test_matches_brute_force_algorithm_1(score, scaling):
    rng = np.random.default_rng(20140901)
    classes = {}
    for c, (n, dim, lam, sigma) in enumerate([(60, 16, 3.0, 0.2), (150, 20, 40.0, 0.03), (90, 18, 200.0, 1.5),
                                             (40, 15, 0.5, 7.0)]):
        classes[f"c{c}"] = draw(rng, n, dim, lam, sigma)
    impostors = ImpostorDistances.from_lists(classes)
    low, high, steps = 0.005, 20.0, 37
    if scaling == "multiply":
        low, high = 1 / high, 1 / low
    sigmas = np.geomspace(low, high, steps)
    est = Ncx2Grid(dim=[15, 21], sigma={"low": low, "high": high, "steps": steps}, score=score, scaling=scaling)
    model = est.fit(impostors)
    table = model.thresholds(TARGETS)
    for i, d in enumerate(classes.values()):
        dim, sigma, lam, rho = reference_fit(d, range(15, 22), sigmas, score, scaling)
        expected = reference_thresholds(dim, sigma, lam, scaling, np.array(TARGETS))
        np.testing.assert_allclose(table.values[i], expected, rtol=1e-6)
        row = model.parameters()[i]
        assert (row["dim"], row["sigma"]) == (dim, pytest.approx(sigma, rel=1e-12))
        assert row["lambda"] == pytest.approx(lam, rel=1e-9)
        assert row["fit_score"] == pytest.approx(rho, rel=1e-9)


def test_fit_class_with_linear_grid_matches_reference():
    rng = np.random.default_rng(7)
    d = draw(rng, 120, 17, 25.0, 0.4)
    sigmas = np.linspace(0.05, 1.0, 30)
    got = fit_class(d, range(15, 20), sigmas, "ncc", "divide")
    want = reference_fit(d, range(15, 20), sigmas, "ncc", "divide")
    assert got[0] == want[0] and got[1] == want[1]
    assert got[2] == pytest.approx(want[2], rel=1e-12) and got[3] == pytest.approx(want[3], rel=1e-12)


def test_ties_go_to_first_in_loop_order(monkeypatch):
    import calibrate_builtins.estimators.ncx2.search as module

    # every grid point scores the same; several sigma blocks per dim exercise the block loop too
    monkeypatch.setattr(module, "_scores", lambda phi_ref, phi, score: np.zeros(phi.shape[0]))
    monkeypatch.setattr(module, "_BLOCK", 6)
    d = np.array([1.0, 2.0, 3.0])
    dim, sigma, _, _ = module.fit_class(d, [7, 5, 6], np.array([3.0, 1.0, 2.0, 4.0]), "ncc", "divide")
    assert (dim, sigma) == (7, 3.0)


@pytest.mark.parametrize("scaling", ["divide", "multiply"])
def test_model_cdf_and_quantile_against_mpmath(scaling):
    mp.mp.dps = 20
    params = [(15, 3.0, 0.7), (22, 300.0, 0.04), (18, 55.0, 2.5)]
    dims, lams, sigmas = map(np.array, zip(*params))
    scale = sigmas if scaling == "divide" else 1 / sigmas
    model = Ncx2GridModel(["a", "b", "c"], dims, sigmas, lams, [1, 1, 1], scaling=scaling)
    thresholds = model.thresholds([0.01, 0.001, 0.0001]).values
    for row, (k, lam, _) in enumerate(params):
        for col, target in enumerate([0.01, 0.001, 0.0001]):
            x = (thresholds[row, col] / scale[row]) ** 2
            assert float(ncx2_cdf_mp(x, k, lam)) == pytest.approx(target, rel=1e-8)
        for x in np.array([0.5, 1.5]) * thresholds[row, 0]:
            expected = float(ncx2_cdf_mp((x / scale[row]) ** 2, k, lam))
            assert model.cdf(row, x) == pytest.approx(expected, rel=1e-8)
    assert model.cdf(0, np.array([-1.0, 0.0])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("score", ["ncc", "bhattacharyya"])
def test_recovers_true_quantiles(score):
    rng = np.random.default_rng(3)
    dim, lam, sigma = 18, 30.0, 0.25
    d = draw(rng, 4000, dim, lam, sigma)
    # the grid holds the true sigma (index 20 of 41)
    grid = {"low": sigma / 1.5, "high": sigma * 1.5, "steps": 41}
    model = Ncx2Grid(dim=[16, 20], sigma=grid, score=score).fit(ImpostorDistances.from_lists({"x": d}))
    truth = sigma * np.sqrt(stats.ncx2.ppf([0.01, 0.001], dim, lam))
    np.testing.assert_allclose(model.thresholds([0.01, 0.001]).values[0], truth, rtol=0.03)


def test_recovers_true_quantiles_with_derived_grid():
    rng = np.random.default_rng(11)
    dim, lam, sigma = 20, 300.0, 0.03  # concentrated, like real impostor distances
    d = draw(rng, 2000, dim, lam, sigma)
    model = Ncx2Grid(dim=[18, 22], sigma={"steps": 80}).fit(ImpostorDistances.from_lists({"x": d}))
    truth = sigma * np.sqrt(stats.ncx2.ppf([0.01, 0.001], dim, lam))
    np.testing.assert_allclose(model.thresholds([0.01, 0.001]).values[0], truth, rtol=0.01)


def test_derived_sigma_range_follows_the_documented_rule():
    rng = np.random.default_rng(5)
    # dispersed data (delta^2 exponential): the moment match degenerates to sigma^2 = m / k, so the
    # grid ends put mean(X) at 4 * dim_high and dim_low / 4, as they do in the multiply mode
    d = np.sqrt(rng.exponential(2.0, size=500))
    m = np.mean(d**2)
    grid = sigma_grid(d, {"steps": 10}, (15, 22))
    assert m / grid[0] ** 2 == pytest.approx(4 * 22) and m / grid[-1] ** 2 == pytest.approx(15 / 4)
    assert np.allclose(np.diff(np.log(grid)), np.log(grid[1] / grid[0]))  # log spacing
    multiply = sigma_grid(d, {"steps": 10}, (15, 22), "multiply")
    assert m * multiply[-1] ** 2 == pytest.approx(4 * 22) and m * multiply[0] ** 2 == pytest.approx(15 / 4)
    # concentrated data: the range is the moment-matched sigmas, halved and doubled
    d = draw(rng, 500, 20, 300.0, 0.03)
    m, v = np.mean(d**2), np.var(d**2)
    moments = [np.sqrt((m - np.sqrt(m * m - k * v / 2)) / k) for k in range(15, 23)]
    grid = sigma_grid(d, None, (15, 22))
    assert grid.size == 100
    assert grid[0] == pytest.approx(min(moments) / 2, rel=1e-9) and grid[-1] == pytest.approx(2 * np.sqrt(m / 15), rel=1e-9)
    multiply = sigma_grid(d, None, (15, 22), "multiply")
    np.testing.assert_allclose(multiply, 1 / grid[::-1], rtol=1e-12)
    # explicit bounds are used as given; one omitted bound is still derived
    np.testing.assert_allclose(sigma_grid(d, {"low": 1, "high": 3, "steps": 3, "spacing": "linear"}), [1, 2, 3])
    assert sigma_grid(d, {"low": 0.001, "steps": 5})[-1] == pytest.approx(grid[-1])
    assert sigma_grid(d, {"low": 2.0, "high": 8.0, "steps": 1}).tolist() == [4.0]


def test_divide_and_multiply_agree_with_default_log_grid():
    rng = np.random.default_rng(9)
    impostors = ImpostorDistances.from_lists({f"c{i}": draw(rng, 80, 17, 60.0, 0.05 * (i + 1)) for i in range(3)})
    divide = Ncx2Grid(sigma={"steps": 40}).fit(impostors)
    multiply = Ncx2Grid(sigma={"steps": 40}, scaling="multiply").fit(impostors)
    np.testing.assert_allclose(multiply.thresholds(TARGETS).values, divide.thresholds(TARGETS).values, rtol=1e-9)
    np.testing.assert_allclose([r["sigma"] for r in multiply.parameters()],
                               [1 / r["sigma"] for r in divide.parameters()], rtol=1e-12)


def test_thresholds_non_decreasing_in_target_and_vectorised():
    rng = np.random.default_rng(13)
    impostors = ImpostorDistances.from_lists({f"c{i}": draw(rng, 50, 16, 10.0 * i, 1.0) for i in range(4)})
    model = Ncx2Grid(sigma={"steps": 25}).fit(impostors)
    targets = [0.002, 0.3, 1e-6, 0.05, 0.0005]  # unsorted on purpose
    values = model.thresholds(targets).values
    order = np.argsort(targets)
    assert np.all(np.diff(values[:, order], axis=1) >= 0) and np.all(np.diff(values[:, order], axis=1).max(axis=1) > 0)
    for i, c in enumerate(impostors.classes):
        assert model.threshold(c, 0.05) == values[i, 3]


def test_state_round_trip_and_parameters():
    rng = np.random.default_rng(17)
    impostors = ImpostorDistances.from_lists({"a": draw(rng, 40, 15, 5.0, 2.0), "b": draw(rng, 40, 19, 80.0, 0.1)})
    model = Ncx2Grid(sigma={"steps": 20}, score="bhattacharyya", scaling="multiply").fit(impostors)
    again = Ncx2GridModel.from_state(json.loads(json.dumps(model.to_state())))
    assert again.parameters() == model.parameters()
    assert (again.scaling, again.score) == ("multiply", "bhattacharyya")
    np.testing.assert_array_equal(again.thresholds(TARGETS).values, model.thresholds(TARGETS).values)
    row = model.parameters()[0]
    assert set(row) == {"class", "dim", "sigma", "lambda", "fit_score"} and row["class"] == "a"
    assert 15 <= row["dim"] <= 22 and 0 < row["fit_score"] <= 1


@pytest.mark.parametrize("kwargs, message", [
    ({"dim": [22, 15]}, "greater than dim high"),
    ({"dim": [15.5, 22]}, "whole numbers"),
    ({"dim": [True, 22]}, "whole numbers"),
    ({"dim": [15]}, "two integers"),
    ({"dim": [0, 3]}, "at least 1"),
    ({"sigma": {"steps": 0}}, "steps must be a whole number >= 1"),
    ({"sigma": {"steps": 2.5}}, "steps must be a whole number >= 1"),
    ({"sigma": {"spacing": "geometric"}}, "spacing must be 'log' or 'linear'"),
    ({"sigma": {"low": -1.0}}, "sigma.low must be a positive number"),
    ({"sigma": {"low": 2.0, "high": 1.0}}, "greater than sigma.high"),
    ({"sigma": {"lo": 1.0}}, "unknown key"),
    ({"sigma": [1, 2]}, "must be a mapping"),
    ({"score": "kl"}, "score must be"),
    ({"scaling": "both"}, "scaling must be"),
])
def test_parameter_validation(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        Ncx2Grid(**kwargs)


def test_parameters_round_trip_through_get_params():
    est = Ncx2Grid(dim=[16, 18], sigma={"steps": 5}, score="bhattacharyya")
    assert est.get_params() == {"dim": [16, 18], "sigma": {"steps": 5}, "score": "bhattacharyya", "scaling": "divide",
                                "mode": "exact"}
    assert type(Ncx2Grid(**est.get_params())) is Ncx2Grid


@pytest.mark.parametrize("values, message", [([0.0, 0.0, 0.0], "all 3 training distances are zero"),
                                             ([0.4, 0.4], "at least 2 distinct")])
def test_degenerate_class_is_a_data_error_naming_it(values, message):
    impostors = ImpostorDistances.from_lists({"good": [0.1, 0.2, 0.3], "bad-class": values})
    with pytest.raises(DataError, match=f"class 'bad-class'.*{message}"):
        Ncx2Grid(sigma={"steps": 5}).fit(impostors)


def test_unusable_grid_is_a_data_error_naming_the_class():
    impostors = ImpostorDistances.from_lists({"far": [1.0, 2.0, 3.0]})
    with pytest.raises(DataError, match="class 'far'.*no grid point"):
        # sigma absurdly large for these distances: X ~ 1e-80, the model CDF underflows to 0 everywhere
        Ncx2Grid(sigma={"low": 1e40, "high": 2e40, "steps": 3}).fit(impostors)


def test_optimum_outside_grid_is_noted():
    rng = np.random.default_rng(19)
    impostors = ImpostorDistances.from_lists({"x": draw(rng, 100, 18, 20.0, 1.0)})
    context = RunContext()
    with pytest.warns(UserWarning, match="edge of the sigma grid"):
        Ncx2Grid(sigma={"low": 0.5, "high": 0.7, "steps": 5}).fit(impostors, context)
    assert len(context.notes) == 1 and "1 of 1 classes" in context.notes[0]


def test_executor_and_progress_are_used():
    rng = np.random.default_rng(23)
    impostors = ImpostorDistances.from_lists({f"c{i}": draw(rng, 30, 16, 5.0, 1.0) for i in range(20)})
    serial = Ncx2Grid(sigma={"steps": 10}).fit(impostors)
    seen = []

    def progress(items, description, total):
        seen.append((description, total))
        return iter(items)

    with ThreadPoolExecutor(2) as pool:
        parallel = Ncx2Grid(sigma={"steps": 10}).fit(impostors, RunContext(progress=progress, executor=pool))
    assert parallel.parameters() == serial.parameters()
    assert seen and "ncx2-grid" in seen[0][0] and seen[0][1] >= 1


def test_registered_under_its_name():
    info = build_registry().get("estimators", "ncx2-grid")
    assert info.factory is Ncx2Grid and info.factory.model_class is Ncx2GridModel
