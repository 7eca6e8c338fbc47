"""gpd-tail, znorm, shrinkage, ncx2-tail, ncx2-cv and auto: against scipy and brute force on seeded data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats

from calibrate.contract.base import RunContext
from calibrate.errors import DataError, ParameterError, RecipeError
from calibrate.contract.manager import build_registry
from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.auto import Auto
from calibrate_builtins.estimators.gpd_tail import GpdTail, TailFit, fit_lower_tail, gpd_mle, gpd_pwm, guard_shape
from calibrate_builtins.estimators.interp import interp_threshold
from calibrate_builtins.estimators.ncx2.tail import Ncx2Cv, Ncx2Tail, fit_class_tail, tail_loglik
from calibrate_builtins.estimators.shrinkage import Shrinkage, interp_rows
from calibrate_builtins.estimators.znorm import Znorm, ZnormModel, loo_location_scale, location_scale

TARGETS = [0.05, 0.01, 0.005, 0.001, 0.0005]


def impostors(rows: dict) -> ImpostorDistances:
    return ImpostorDistances.from_lists({k: np.asarray(v, float) for k, v in rows.items()})


def lognormal_classes(seed: int, n_classes: int, n: int) -> tuple[ImpostorDistances, list[np.ndarray]]:
    """Per class log-normal distances with class-specific location and scale; also a fresh test sample."""
    rng = np.random.default_rng(seed)
    mu, sd = rng.normal(0, 0.3, n_classes), rng.uniform(0.1, 0.4, n_classes)
    train = {f"c{i:03d}": np.exp(rng.normal(mu[i], sd[i], n)) for i in range(n_classes)}
    test = [np.exp(rng.normal(mu[i], sd[i], 4 * n)) for i in range(n_classes)]
    return impostors(train), test


def achieved_ratio(model, test: list[np.ndarray], targets) -> np.ndarray:
    tau = model.thresholds(targets).values
    fa = np.array([[np.sum(t <= tau[i, k]) for k in range(len(targets))] for i, t in enumerate(test)]).sum(axis=0)
    return fa / sum(t.size for t in test) / np.asarray(targets)


# ---- GPD ------------------------------------------------------------------------------------

@pytest.mark.parametrize("xi,beta", [(0.25, 1.5), (-0.3, 2.0), (0.0, 0.7)])
def test_pwm_recovers_gpd_parameters(xi, beta):
    x = stats.genpareto.rvs(xi, scale=beta, size=200_000, random_state=np.random.default_rng(1))
    est_xi, est_beta = gpd_pwm(x)
    assert est_xi == pytest.approx(xi, abs=0.02)
    assert est_beta == pytest.approx(beta, rel=0.02)


def test_pwm_matches_hosking_wallis_formula_on_a_small_sample():
    x = np.array([0.3, 0.1, 2.2, 0.9, 0.05, 1.4])
    xs, n = np.sort(x), x.size
    a0 = xs.mean()
    a1 = sum(xs[j] * (n - 1 - j) / (n - 1) for j in range(n)) / n  # j is 0-based: weight (n - j) / (n - 1), 1-based
    k_hw = a0 / (a0 - 2 * a1) - 2
    assert gpd_pwm(x) == pytest.approx((-k_hw, 2 * a0 * a1 / (a0 - 2 * a1)), rel=1e-12)


def _nll(x, xi, beta) -> float:
    return float(-stats.genpareto.logpdf(x, xi, scale=beta).sum())


@pytest.mark.parametrize("xi", [0.8, 0.3, 0.0, -0.2, -0.45, -0.8])
@pytest.mark.parametrize("n", [40, 300, 4400])
def test_mle_is_the_maximum_likelihood_scipy_genpareto_fit_approaches(xi, n):
    """numpy's profile-likelihood search (no scipy.stats) against scipy.stats.genpareto.fit(x, floc=0),
    whose Nelder-Mead stops within about 1e-4: the same estimates to 1e-3, a likelihood at least as high."""
    x = stats.genpareto.rvs(xi, scale=1.0, size=n, random_state=np.random.default_rng(n))
    c, loc, scale = stats.genpareto.fit(x, floc=0)
    ours = gpd_mle(x)
    assert ours == pytest.approx((c, scale), rel=1e-3, abs=1e-4)
    assert _nll(x, *ours) <= _nll(x, c, scale) + 1e-9 * n


def test_mle_beats_every_point_of_a_brute_force_grid_around_it():
    x = stats.genpareto.rvs(0.2, scale=2.0, size=500, random_state=np.random.default_rng(9))
    xi, beta = gpd_mle(x)
    best = _nll(x, xi, beta)
    for dx in np.linspace(-0.05, 0.05, 21):
        for rb in np.linspace(0.95, 1.05, 21):
            assert best <= _nll(x, xi + dx, beta * rb) + 1e-9


def test_mle_without_a_maximum_ends_at_the_support_edge_and_guard_bounds_it():
    """Uniform-like exceedances (a shape below -1): the likelihood grows without bound at the support's edge;
    the search returns a finite fit there, which guard_shape takes to its bounds with the data in its support."""
    x = np.linspace(0.01, 1.0, 200)
    xi, beta = gpd_mle(x)
    assert np.isfinite(xi) and np.isfinite(beta) and beta > 0 and xi < -0.9
    g_xi, g_beta = guard_shape(x, xi, beta, (-5.0, 0.9))
    assert -5.0 <= g_xi <= 0.9 and -g_beta / g_xi >= x.max()


@pytest.mark.parametrize("xi", [0.3, 0.0, -0.4])
def test_tail_quantile_and_cdf_agree_with_scipy(xi):
    fit = TailFit(u=5.0, p_u=0.1, xi=xi, beta=0.8, k=100)
    e = np.array([0.05, 0.01, 1e-3, 1e-5])
    expected = fit.u - stats.genpareto.ppf(1 - e / fit.p_u, xi, scale=fit.beta)
    assert fit.quantile(e) == pytest.approx(expected, rel=1e-10)
    assert fit.cdf(fit.quantile(e)) == pytest.approx(e, rel=1e-9)


def test_fit_lower_tail_uses_the_lowest_k_as_exceedances_below_the_next():
    d = np.sort(np.random.default_rng(3).gamma(4.0, 1.0, 500))
    fit, x = fit_lower_tail(d, tail_fraction=0.1, min_exceedances=15, method="mle", shape_bounds=(-1.0, 0.9))
    assert fit.k == 50 and fit.u == d[50] and fit.p_u == pytest.approx(0.1)
    assert x == pytest.approx(d[50] - d[:50])
    assert (fit.xi, fit.beta) == pytest.approx(gpd_mle(d[50] - d[:50]), rel=1e-12)


def test_gpd_tail_extrapolates_a_gamma_lower_tail():
    # 20000 draws per class; the default count rule fits the lowest 2 sqrt(n) = 283 (1.4%)
    rng = np.random.default_rng(4)
    shapes = [3.0, 6.0]
    imp = impostors({f"c{i}": rng.gamma(k, 1.0, 20_000) for i, k in enumerate(shapes)})
    tau = GpdTail().fit(imp).thresholds([1e-3, 5e-4, 1e-4]).values
    truth = np.array([stats.gamma.ppf([1e-3, 5e-4, 1e-4], k) for k in shapes])
    assert tau == pytest.approx(truth, rel=0.08)
    # the lowest 10% of a gamma(3) is not yet a GPD tail: the fixed-fraction rule is far off
    coarse = GpdTail(tail_fraction=0.1).fit(imp).thresholds([1e-4]).values[0, 0]
    assert coarse < 0.7 * truth[0, 2]


def test_gpd_pooling_modes():
    rng = np.random.default_rng(5)
    rows = {f"c{i}": rng.gamma(3 + i, 1.0, 400) for i in range(4)}
    imp = impostors(rows)
    pooled = GpdTail(pooling="pooled").fit(imp)
    tau = pooled.thresholds(TARGETS).values
    assert np.all(tau == tau[0])  # one threshold for every class
    ref, _ = fit_lower_tail(np.sort(np.concatenate(list(rows.values()))))
    assert tau[0, -1] == pytest.approx(max(float(ref.quantile(np.array([TARGETS[-1]]))[0]), 0.0))
    # shrunk: xi_c = w xi_own + (1 - w) xi_shared, xi_shared from all exceedances scaled by their class mean
    fits = [fit_lower_tail(np.sort(v)) for v in rows.values()]
    shared, _ = gpd_pwm(np.concatenate([x / x.mean() for _, x in fits]))
    shrunk = [p["shape_xi"] for p in GpdTail(pooling="shrunk", shape_prior=40).fit(imp).parameters()]
    for (fit, _), xi in zip(fits, shrunk):
        w = fit.k / (fit.k + 40)
        assert xi == pytest.approx(w * fit.xi + (1 - w) * shared, rel=1e-12)
    assert np.ptp(shrunk) < np.ptp([f.xi for f, _ in fits])


def test_gpd_thresholds_nonnegative_monotone_and_continuous_at_the_tail_threshold():
    rng = np.random.default_rng(6)
    imp = impostors({"a": rng.uniform(0, 1, 300), "b": rng.exponential(1.0, 300)})
    model = GpdTail().fit(imp)
    grid = np.geomspace(1e-7, 0.5, 400)
    tau = model.thresholds(grid).values
    assert np.all(tau >= 0) and np.all(np.diff(tau, axis=1) >= -1e-12)
    p_u = model.parameters()[0]["tail_probability"]
    below, above = model.thresholds([p_u * (1 - 1e-9), p_u]).values[0]
    assert below == pytest.approx(above, rel=1e-6)


def test_gpd_errors_name_the_class_and_the_fix():
    with pytest.raises(DataError, match="class 'tiny'.*pooling"):
        GpdTail().fit(impostors({"tiny": [0.1, 0.2, 0.3], "ok": np.linspace(0.1, 1, 50)}))
    with pytest.raises(DataError, match="class 'tied'.*tail_fraction"):
        GpdTail().fit(impostors({"tied": [0.5] * 30 + [0.7] * 10, "ok": np.linspace(0.1, 1, 50)}))
    for bad in ({"tail_fraction": 1.5}, {"min_exceedances": 2}, {"shape_bounds": [-2, 0.5]}, {"pooling": "all"}):
        with pytest.raises(ParameterError):
            GpdTail(**bad)


# ---- znorm ----------------------------------------------------------------------------------

def test_per_class_znorm_against_scipy_quantiles():
    rng = np.random.default_rng(7)
    rows = {"a": rng.normal(5, 1, 40), "b": rng.normal(8, 2, 25)}
    imp = impostors(rows)
    e = np.array(TARGETS)
    for predictive in (True, False):
        tau = Znorm(predictive=predictive).fit(imp).thresholds(TARGETS).values
        for i, d in enumerate(rows.values()):
            n = d.size
            q = stats.t.ppf(e, n - 1) * math.sqrt(1 + 1 / n) if predictive else stats.norm.ppf(e)
            assert tau[i] == pytest.approx(np.maximum(d.mean() + d.std(ddof=1) * q, 0), rel=1e-10)
    logn = Znorm(family="lognormal", predictive=False).fit(imp).thresholds(TARGETS).values
    for i, d in enumerate(rows.values()):
        y = np.log(d)
        assert logn[i] == pytest.approx(np.exp(y.mean() + y.std(ddof=1) * stats.norm.ppf(e)), rel=1e-10)


def test_predictive_quantile_keeps_its_promise_on_small_normal_classes():
    # 400 classes of 20 normal distances; fresh impostors from the same normals
    rng = np.random.default_rng(8)
    mu, sd = rng.uniform(5, 10, 400), rng.uniform(0.5, 1.5, 400)
    imp = impostors({f"c{i}": rng.normal(mu[i], sd[i], 20) for i in range(400)})
    test = [rng.normal(mu[i], sd[i], 500) for i in range(400)]
    predictive = achieved_ratio(Znorm(predictive=True).fit(imp), test, [0.01])[0]
    plug_in = achieved_ratio(Znorm(predictive=False).fit(imp), test, [0.01])[0]
    assert 0.85 < predictive < 1.15 and plug_in > 1.3


@pytest.mark.parametrize("robust", [False, True])
@pytest.mark.parametrize("n", [5, 8, 31])
def test_leave_one_out_statistics_against_brute_force(robust, n):
    y = np.random.default_rng(n).gamma(2.0, 1.0, n)
    y[2] = y[1]  # a tie
    m, s = loo_location_scale(y, robust)
    for i in range(n):
        rest = np.delete(y, i)
        if robust:
            q1, q2, q3 = np.quantile(rest, [0.25, 0.5, 0.75])
            ref_m, ref_s = q2, ((q3 - q1) / 1.3489795003921634 if q3 > q1 else rest.std(ddof=1))
        else:
            ref_m, ref_s = rest.mean(), rest.std(ddof=1)
        assert (m[i], s[i]) == pytest.approx((ref_m, ref_s), rel=1e-10)
    assert location_scale(y, robust) == pytest.approx(
        (np.median(y), np.subtract(*np.quantile(y, [0.75, 0.25])) / 1.3489795003921634) if robust else
        (y.mean(), y.std(ddof=1)), rel=1e-12)


@pytest.mark.parametrize("jackknife", [0.0, 0.5, 1.0])
def test_pooled_shape_threshold_is_the_pooled_quantile_mapped_back(jackknife):
    rng = np.random.default_rng(9)
    rows = {f"c{i}": rng.gamma(3 + i, 1 + 0.2 * i, 60) for i in range(5)}
    model = Znorm(pooled_shape=True, robust=True, jackknife=jackknife).fit(impostors(rows))
    zs, stats_ = [], []
    for d in rows.values():  # brute force: statistics with each point left out, mixed with the full ones
        m, s = location_scale(d, True)
        for i in range(d.size):
            lm, ls = location_scale(np.delete(d, i), True)
            zs.append((d[i] - ((1 - jackknife) * m + jackknife * lm)) / max((1 - jackknife) * s + jackknife * ls, 0.5 * s))
        stats_.append((m, s))
    z = np.sort(zs)
    targets = [0.1, 0.05, 1 / 30]  # e N = 30, 15, 10 >= min_tail_count: the empirical quantile
    for e, col in zip(targets, model.thresholds(targets).values.T):
        k = e * z.size
        lo, hi = int(math.floor(k)), int(math.ceil(k))
        zq = z[lo - 1] + (k - lo) * (z[hi - 1] - z[lo - 1])
        assert col == pytest.approx([max(m + s * zq, 0) for m, s in stats_], rel=1e-9)


def test_lognormal_family_handles_zero_distances():
    imp = impostors({"a": [0.0, 0.0, 1.0, 2.0, 3.0, 4.0], "b": [0.5, 1.0, 2.0, 4.0, 8.0]})
    model = Znorm(family="lognormal", pooled_shape=True).fit(imp)
    assert model.offset == 0.25  # half the smallest positive distance
    tau = model.thresholds(TARGETS).values
    assert np.all(np.isfinite(tau)) and np.all(tau >= 0)


def test_znorm_errors():
    with pytest.raises(DataError, match="class 'x' has 2 training distance"):
        Znorm().fit(impostors({"x": [0.1, 0.2], "y": [0.1, 0.2, 0.3]}))
    with pytest.raises(DataError, match="class 'flat'.*equal"):
        Znorm().fit(impostors({"flat": [1.0] * 10, "y": [0.1, 0.2, 0.3]}))
    with pytest.raises(ParameterError):
        Znorm(jackknife=2.0)


# ---- shrinkage ------------------------------------------------------------------------------

def test_interp_rows_is_the_paper_formula_row_by_row():
    rows = np.sort(np.random.default_rng(10).uniform(0, 1, (4, 37)), axis=1)
    t = np.array([0.5, 0.1, 1 / 37, 0.01, 0.001])
    assert interp_rows(rows, t) == pytest.approx(np.stack([interp_threshold(r, t) for r in rows]), rel=1e-14)


def test_count_shrinkage_combines_class_and_pooled_thresholds():
    rng = np.random.default_rng(11)
    rows = {"small": rng.uniform(0, 1, 20), "large": rng.uniform(0.5, 2, 2000)}
    model = Shrinkage(prior_count=5, reference_target=0.001).fit(impostors(rows))
    pooled = np.sort(np.concatenate(list(rows.values())))
    for i, d in enumerate(rows.values()):
        w = d.size / (d.size + 5 / 0.001)
        expected = w * interp_threshold(np.sort(d), np.array(TARGETS)) + (1 - w) * interp_threshold(pooled, np.array(TARGETS))
        assert model.thresholds(TARGETS).values[i] == pytest.approx(expected, rel=1e-12)


def test_empirical_bayes_weights_follow_the_between_class_spread():
    rng = np.random.default_rng(12)
    same = {f"c{i}": rng.uniform(0, 1, 200) for i in range(6)}  # one distribution: nothing to learn per class
    far = {f"c{i}": 10 * i + rng.uniform(0, 1, 200) for i in range(6)}  # very different classes
    w_same = [p["class_weight"] for p in Shrinkage(weight="empirical-bayes", reference_target=0.05).fit(impostors(same)).parameters()]
    w_far = [p["class_weight"] for p in Shrinkage(weight="empirical-bayes", reference_target=0.05).fit(impostors(far)).parameters()]
    assert max(w_same) < 0.5 and min(w_far) > 0.99


# ---- ncx2 variants --------------------------------------------------------------------------

def test_tail_loglik_against_a_direct_censored_likelihood():
    d = np.sort(np.sqrt(stats.ncx2.rvs(6, 4.0, size=80, random_state=np.random.default_rng(13))) * 0.5)
    sigmas = np.array([0.3, 0.5, 0.8])
    ll, lam = tail_loglik(d, 6, sigmas, 0.2)
    k = 16
    for j, s in enumerate(sigmas):
        mean_x = np.mean((d / s) ** 2)
        assert lam[j] == pytest.approx(max(mean_x - 6, mean_x / 7))
        dens = stats.ncx2.pdf((d[:k] / s) ** 2, 6, lam[j]) * 2 * d[:k] / s**2
        surv = stats.ncx2.sf((d[k - 1] / s) ** 2, 6, lam[j])
        assert ll[j] == pytest.approx(np.sum(np.log(dens)) + (d.size - k) * np.log(surv), rel=1e-8)


def test_fit_class_tail_is_the_argmax_over_the_grid():
    d = np.sqrt(stats.ncx2.rvs(8, 10.0, size=120, random_state=np.random.default_rng(14)))
    dims, sigmas = range(5, 11), np.geomspace(0.5, 2.0, 12)
    dim, sigma, lam, score = fit_class_tail(d, dims, sigmas, 0.25)
    grid = {(k, s): tail_loglik(d, k, np.array([s]), 0.25)[0][0] for k in dims for s in sigmas}
    best = max(grid, key=grid.get)
    assert (dim, sigma) == best and score == pytest.approx(grid[best])


def test_ncx2_tail_estimator_gives_the_paper_model():
    rng = np.random.default_rng(15)
    imp = impostors({f"c{i}": np.sqrt(rng.noncentral_chisquare(16, 20.0, 200)) for i in range(3)})
    model = Ncx2Tail(dim=[14, 18], sigma={"steps": 20}).fit(imp)
    rows = model.parameters()
    assert all(14 <= r["dim"] <= 18 for r in rows)
    r = rows[0]
    expected = r["sigma"] * math.sqrt(stats.ncx2.ppf(0.001, r["dim"], r["lambda"]))
    assert model.threshold("c0", 0.001) == pytest.approx(expected, rel=1e-6)


def test_ncx2_cv_picks_the_window_holding_the_true_dim():
    rng = np.random.default_rng(16)
    imp = impostors({f"c{i}": 0.3 * np.sqrt(rng.noncentral_chisquare(3, rng.uniform(0, 2), 400)) for i in range(30)})
    est = Ncx2Cv(windows=[[1, 1], [3, 4], [30, 40]], sigma_steps=15, cv_sigma_steps=12, cv_dims=2)
    best, scores, targets = est.cross_validate(imp, RunContext(seed=0))
    assert best == 1, scores
    assert targets and min(targets) * 200 * 30 >= 10


# ---- auto -----------------------------------------------------------------------------------

def test_auto_keeps_its_promise_on_class_varying_lognormal_data():
    imp, test = lognormal_classes(seed=17, n_classes=150, n=300)
    ratio = achieved_ratio(Auto().fit(imp), test, [0.01, 0.005, 0.001])
    assert np.all((ratio > 0.67) & (ratio < 1.5)), ratio


def test_auto_extrapolates_with_the_gpd_tail_below_ten_pooled_points():
    imp, _ = lognormal_classes(seed=18, n_classes=20, n=19)  # N = 380: e N < 10 below e = 2.6%
    model = Auto().fit(imp)
    assert isinstance(model, ZnormModel) and model.tail is not None
    switch = 10 / model.sorted_z.size
    at_switch = model.z_quantiles(np.array([switch]))[0]
    z = model.z_quantiles(np.array([0.0005, 0.001, 0.01]))
    assert z[0] < z[1] < z[2] <= at_switch
    assert z == pytest.approx(np.minimum(model.tail.quantile(np.array([0.0005, 0.001, 0.01])), at_switch), rel=1e-12)
    # above the switch: the pooled empirical quantile, no tail
    k = 0.05 * model.sorted_z.size
    lo = int(k)
    assert model.z_quantiles(np.array([0.05]))[0] == pytest.approx(
        model.sorted_z[lo - 1] + (k - lo) * (model.sorted_z[lo] - model.sorted_z[lo - 1]))


def test_registered_and_usable_from_a_recipe(tmp_path):
    from calibrate.api import run

    registry = build_registry()
    for name in ("gpd-tail", "znorm", "shrinkage", "ncx2-tail", "ncx2-cv", "auto"):
        assert registry.get("estimators", name)
    recipe = {"version": 1, "data": {"plugin": "synthetic-patterns", "classes": 12, "sets": 3, "samples": 4, "dim": 5},
              "distance": {"plugin": "euclidean"},
              "estimators": [{"plugin": "auto"}, {"plugin": "gpd-tail", "pooling": "shrunk"}, {"plugin": "znorm"},
                             {"plugin": "shrinkage"}],
              "evaluation": {"targets": [0.05, 0.01]}, "output": {"dir": str(tmp_path / "out"), "plots": False}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    result = run(path)
    assert set(result.results) == {"auto", "gpd-tail", "znorm", "shrinkage"}
    bad = dict(recipe, estimators=[{"plugin": "gpd-tail", "pooling": "everything"}])
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(RecipeError, match="pooling"):
        run(path)
