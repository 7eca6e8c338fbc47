"""ncx2-grid's exact and fast modes against fit_class (the straightforward Algorithm 1).

Exact mode must reproduce fit_class's thresholds to 1e-6 (same grid point) on model and off-model
data, with ties and small cohorts, for both scores and both scalings; its self-check must hand a
class to fit_class when its candidate sets are too narrow. Fast mode must stay within its
documented bound of exact mode (FAST_BOUND in calibrate_builtins.estimators.ncx2.batch)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

import calibrate_builtins.estimators.ncx2.batch as nb
from calibrate_builtins.estimators.ncx2.batch_scores import sankaran_cdf
import calibrate_builtins.estimators.ncx2.search as search
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid, Ncx2GridModel
from calibrate_builtins.estimators.ncx2.search import fit_class, sigma_grid
from calibrate_builtins.datasets.synthetic_impostors import impostor_distances

TARGETS = [0.01, 0.001, 0.0001]
DIMS = (15, 22)


def family(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    if name == "ncx2":
        return rng.uniform(0.01, 3) * np.sqrt(stats.ncx2.rvs(rng.integers(5, 40), rng.uniform(0, 400), size=n,
                                                             random_state=rng))
    if name == "t":
        return np.abs(rng.standard_t(3, n)) + rng.uniform(0, 3)
    if name == "lognormal":
        return rng.lognormal(rng.uniform(-1, 1), rng.uniform(0.05, 0.6), n)
    if name == "gamma":
        return rng.gamma(rng.uniform(1, 100), 1.0, n)
    if name == "ties":
        return np.round(rng.gamma(rng.uniform(5, 40), 1.0, n))
    raise ValueError(name)


FAMILIES = ("ncx2", "t", "lognormal", "gamma", "ties")


def reference_thresholds(classes: dict[str, np.ndarray], score: str, scaling: str, sigma=None) -> np.ndarray:
    """fit_class on every class (its grid from sigma_grid), thresholds from the fitted parameters."""
    fits = [fit_class(d, range(DIMS[0], DIMS[1] + 1), sigma_grid(d, sigma, DIMS, scaling), score, scaling)
            for d in classes.values()]
    dim, sig, lam, fs = map(np.array, zip(*fits))
    model = Ncx2GridModel(list(classes), dim, sig, lam, fs, scaling=scaling, score=score)
    return model.thresholds(TARGETS).values, fits


@pytest.mark.parametrize("score", ["ncc", "bhattacharyya"])
@pytest.mark.parametrize("scaling", ["divide", "multiply"])
def test_exact_mode_equals_fit_class_on_many_datasets(score, scaling):
    rng = np.random.default_rng({"ncc": 1, "bhattacharyya": 2}[score] * 10 + {"divide": 1, "multiply": 2}[scaling])
    classes = {}
    for i, n in enumerate([30, 30, 80, 150, 150, 400, 400, 400, 60, 250]):
        classes[f"c{i}"] = family(rng, FAMILIES[i % len(FAMILIES)], n)
    want, fits = reference_thresholds(classes, score, scaling)
    model = Ncx2Grid(score=score, scaling=scaling, mode="exact").fit(ImpostorDistances.from_lists(classes))
    np.testing.assert_allclose(model.thresholds(TARGETS).values, want, rtol=1e-6)
    for row, (dim, sigma, lam, fs) in zip(model.parameters(), fits):
        assert row["dim"] == dim and row["sigma"] == pytest.approx(sigma, rel=1e-12)
        assert row["lambda"] == pytest.approx(lam, rel=1e-9) and row["fit_score"] == pytest.approx(fs, rel=1e-9)


def test_exact_mode_at_the_benchmark_size():
    # 1,000 distances per class, the default grid (8 dims x 100 sigmas), the scale generator's data
    values, _ = impostor_distances(4, 1000, seed=11, off_model=0.5)
    classes = {f"c{i}": values[:, i] for i in range(values.shape[1])}
    want, _ = reference_thresholds(classes, "ncc", "divide")
    got = Ncx2Grid().fit(ImpostorDistances.from_lists(classes)).thresholds(TARGETS).values
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_exact_mode_with_unequal_cohorts_and_explicit_linear_grid():
    rng = np.random.default_rng(4)
    classes = {f"c{i}": family(rng, FAMILIES[i % 5], n) for i, n in enumerate([40, 333, 120, 41, 200, 90])}
    sigma = {"low": 0.05, "high": 40.0, "steps": 60, "spacing": "linear"}
    want, _ = reference_thresholds(classes, "ncc", "divide", sigma)
    got = Ncx2Grid(sigma=sigma).fit(ImpostorDistances.from_lists(classes)).thresholds(TARGETS).values
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_self_check_widens_narrow_candidate_sets(monkeypatch):
    # one stage-2 and one stage-3 candidate to start with: the self-check must add what is missing
    monkeypatch.setattr(nb, "EXACT_K2", 1)
    monkeypatch.setattr(nb, "EXACT_K3", 1)
    rng = np.random.default_rng(6)
    classes = {f"c{i}": family(rng, FAMILIES[i % 5], 300) for i in range(10)}
    want, _ = reference_thresholds(classes, "ncc", "divide")
    got = Ncx2Grid().fit(ImpostorDistances.from_lists(classes)).thresholds(TARGETS).values
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_unsettled_classes_are_handed_to_fit_class(monkeypatch):
    calls = []
    original = search.fit_class

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(search, "fit_class", counting)
    monkeypatch.setattr(nb, "EXACT_ROUNDS", 0)  # no round of the self-check: nothing is settled
    rng = np.random.default_rng(8)
    classes = {f"c{i}": family(rng, "gamma", 50) for i in range(3)}
    model = Ncx2Grid(sigma={"steps": 20}).fit(ImpostorDistances.from_lists(classes))
    assert len(calls) == 3
    monkeypatch.setattr(nb, "EXACT_ROUNDS", 4)
    again = Ncx2Grid(sigma={"steps": 20}).fit(ImpostorDistances.from_lists(classes))
    assert len(calls) == 3  # settled by the cascade this time
    np.testing.assert_allclose(again.thresholds(TARGETS).values, model.thresholds(TARGETS).values, rtol=1e-6)


def fast_vs_exact(values: np.ndarray, **kwargs) -> np.ndarray:
    n, c = values.shape
    imp = ImpostorDistances(tuple(f"c{i}" for i in range(c)), np.ascontiguousarray(values.T).ravel(), np.arange(c + 1) * n)
    exact = Ncx2Grid(mode="exact", **kwargs).fit(imp).thresholds(TARGETS).values
    fast = Ncx2Grid(mode="fast", **kwargs).fit(imp).thresholds(TARGETS).values
    return np.abs(fast / exact - 1.0)


CASES = ["model", "off-model", "ties", "small", "bhattacharyya", "multiply", "large"]


@pytest.mark.filterwarnings("ignore:ncx2-grid")
@pytest.mark.parametrize("case", CASES)
def test_fast_mode_within_documented_bound(case):
    n, classes, kwargs, rnd = 1000, 120, {}, None
    off = 0.2
    if case == "off-model":
        off = 1.0
    elif case == "ties":  # heavily tied cohorts go to Algorithm 1 in both modes: few classes suffice
        rnd, classes = 2, 4
    elif case == "small":
        n = nb.FAST_EXACT_UPTO + 50  # the smallest cohorts the fast search itself handles
    elif case == "bhattacharyya":
        kwargs = {"score": "bhattacharyya"}
    elif case == "multiply":
        kwargs = {"scaling": "multiply"}
    elif case == "large":
        n, classes = 2 * nb.FAST_MAX_POINTS + 17, 12  # subsampled to FAST_MAX_POINTS
    values, _ = impostor_distances(classes, n, seed=CASES.index(case), off_model=off)
    if rnd is not None:
        values = np.round(values, rnd)
    dev = fast_vs_exact(values, **kwargs)
    bound = nb.FAST_BOUND
    assert dev.max() <= bound, f"{case}: fast thresholds moved {dev.max():.3%} from exact (bound {bound:.0%})"
    # and typically far less: the median class moves by under a tenth of the bound
    assert np.median(dev) <= bound / 10


def test_fast_mode_uses_the_exact_cascade_on_small_cohorts():
    values, _ = impostor_distances(30, nb.FAST_EXACT_UPTO, seed=9, off_model=0.5)
    assert fast_vs_exact(values).max() == 0.0


def test_fast_mode_returns_points_of_the_same_grid():
    values, _ = impostor_distances(20, 500, seed=3)
    imp = ImpostorDistances(tuple(f"c{i}" for i in range(20)), np.ascontiguousarray(values.T).ravel(), np.arange(21) * 500)
    model = Ncx2Grid(mode="fast", sigma={"steps": 30}).fit(imp)
    for i, row in enumerate(model.parameters()):
        grid = sigma_grid(values[:, i], {"steps": 30}, DIMS)
        assert np.min(np.abs(grid / row["sigma"] - 1)) < 1e-12 and 15 <= row["dim"] <= 22
        mean_x = np.mean((values[:, i] / row["sigma"]) ** 2)
        assert row["lambda"] == pytest.approx(max(mean_x - row["dim"], mean_x / (1 + row["dim"])), rel=1e-9)


def test_sankaran_approximation_accuracy():
    for k in (15, 18, 22):
        for lam in (0.0, 3.0, 40.0, 400.0):
            sd = np.sqrt(2 * k + 4 * lam)
            x = np.linspace(max(1e-3, k + lam - 6 * sd), k + lam + 8 * sd, 500)
            err = np.abs(sankaran_cdf(x, k, lam) - special.chndtr(x, k, lam)).max()
            assert err < 2e-3, (k, lam, err)


def test_mode_parameter_and_errors_in_both_modes():
    with pytest.raises(ParameterError, match="mode must be"):
        Ncx2Grid(mode="approximate")
    impostors = ImpostorDistances.from_lists({"good": [0.1, 0.2, 0.3, 0.5], "bad-class": [0.4, 0.4]})
    for mode in ("exact", "fast"):
        with pytest.raises(DataError, match="class 'bad-class'.*at least 2 distinct"):
            Ncx2Grid(sigma={"steps": 5}, mode=mode).fit(impostors)
        with pytest.raises(DataError, match="class 'good'.*no grid point"):
            Ncx2Grid(sigma={"low": 1e40, "high": 2e40, "steps": 3}, mode=mode).fit(
                ImpostorDistances.from_lists({"good": [1.0, 2.0, 3.0]}))


@pytest.mark.parametrize("score", ["ncc", "bhattacharyya"])
def test_heavily_tied_classes_get_algorithm_1s_grid_point(score):
    # an independent review's reproducer: 1,000 distances with 4 distinct values, where the cascade
    # once returned a neighbouring sigma (thresholds off by 1.3-1.7%)
    d = np.round(0.05 * np.sqrt(np.random.default_rng(2).noncentral_chisquare(18, 300, 1000)), 1)
    sigma = {"low": 0.003, "high": 0.2, "steps": 100, "spacing": "log"}
    dim, sig, lam, fs = fit_class(d, range(15, 23), sigma_grid(d, sigma, DIMS, "divide"), score, "divide")
    for mode in ("exact", "fast"):
        (row,) = Ncx2Grid(sigma=sigma, score=score, mode=mode).fit(ImpostorDistances.from_lists({"c": d})).parameters()
        assert (row["dim"], row["sigma"]) == (dim, pytest.approx(sig, rel=1e-12)), mode


@pytest.mark.parametrize("seed", [1, 2, 5, 9])
def test_fast_mode_with_few_degrees_of_freedom_equals_exact(seed):
    # Sankaran's approximation ranks grid points poorly for small dim: fast mode's coarse search once
    # moved these thresholds by 95% (dim [1, 4], Rayleigh distances); such ranges use the exact cascade
    d = np.random.default_rng(seed).rayleigh(1.0, 800)
    imp = ImpostorDistances.from_lists({"c": d})
    exact = Ncx2Grid(dim=[1, 4], mode="exact").fit(imp).thresholds(TARGETS).values
    fast = Ncx2Grid(dim=[1, 4], mode="fast").fit(imp).thresholds(TARGETS).values
    np.testing.assert_allclose(fast, exact, rtol=1e-12)


def test_tie_rule_sends_heavily_tied_cohorts_of_any_size_to_algorithm_1():
    rng = np.random.default_rng(4)
    for n in (300, 50_000):  # the large cohort is judged on a sample of search.TIE_SAMPLE distances
        d = rng.gamma(20.0, 1.0, n)
        assert not search.heavily_tied(d)
        assert search.heavily_tied(np.round(d))  # integer scores, as BSSR1 fingerprints
    # mild ties (97.5% distinct, as BSSR1 face-C) stay in the cascade, which matched Algorithm 1 on them
    d = rng.gamma(20.0, 1.0, 1000)
    d[:25] = d[25:50]
    assert not search.heavily_tied(d)
