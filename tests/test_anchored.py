"""The ``anchored`` estimator (issue 30): each class located at its own nearest impostors, shrunk toward the others,
one pooled shape; checked against a plain-Python reimplementation of its definition, and its reference world."""

from __future__ import annotations

import math

import numpy as np
import pytest

import calibrate
from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.anchored import Anchored


def gallery(seed: int, classes: int = 40, sizes=(60, 400), zeros: bool = False) -> ImpostorDistances:
    """Log-normal impostor distances whose bulk location varies by class while a few near impostors do not."""
    rng = np.random.default_rng(seed)
    per = {}
    for c in range(classes):
        n = int(rng.integers(*sizes))
        d = np.exp(rng.normal(rng.normal(0.0, 0.3), 0.25, n))
        near = rng.random(n) < 0.03
        d[near] = np.exp(rng.normal(-0.6, 0.1, near.sum()))
        if zeros and c % 7 == 0:
            d[:2] = 0.0
        per[f"c{c:02d}"] = d
    return ImpostorDistances.from_lists(per)


def reference_thresholds(imp: ImpostorDistances, targets, jackknife=0.5, max_rank=20) -> np.ndarray:
    """The docstring's definition, class by class in plain Python (empirical pooled quantile only)."""
    pooled_all = imp.values
    c = 0.0 if pooled_all.min() > 0 else 0.5 * pooled_all[pooled_all > 0].min()
    ys = [np.log(np.sort(imp.of(i)) + c) for i in range(len(imp))]
    ks, anchors, nexts, variances = [], [], [], []
    for y in ys:
        n = y.size
        k = min(max(3, min(max_rank, int(round(math.sqrt(n))))), n - 1)
        j = math.ceil(math.sqrt(k))
        lo, hi = max(k - j, 1), min(k + j, n)
        slope = (y[hi - 1] - y[lo - 1]) / max(hi - lo, 1)
        ks.append(k)
        anchors.append(y[k - 1])
        nexts.append(y[k])
        variances.append(k * (1 - k / n) * slope ** 2)
    a, v = np.array(anchors), np.array(variances)
    mean = a.mean()
    tau2 = max(a.var() - v.mean(), 0.0)
    w = tau2 / (tau2 + v) if tau2 > 0 else np.zeros_like(v)
    m = w * a + (1 - w) * mean
    z = []
    for i, y in enumerate(ys):
        loo = w[i] * nexts[i] + (1 - w[i]) * mean
        low_shift = (1 - jackknife) * m[i] + jackknife * loo
        z += [y[r] - (low_shift if r < ks[i] else m[i]) for r in range(y.size)]
    z = np.sort(np.array(z))
    out = np.empty((len(ys), len(targets)))
    for t, e in enumerate(targets):
        pos = e * z.size
        lo, hi = max(int(math.floor(pos)), 1), max(int(math.ceil(pos)), 1)
        q = z[lo - 1] + ((pos - lo) if hi > lo else 0.0) * (z[hi - 1] - z[lo - 1])
        out[:, t] = np.maximum(np.exp(m + q) - c, 0.0)
    return out


@pytest.mark.parametrize("seed, zeros", [(1, False), (2, True)])
def test_thresholds_follow_the_definition(seed, zeros):
    imp = gallery(seed, zeros=zeros)
    targets = (0.05, 0.01, 0.002)  # e N >= 10 pooled values below: the empirical pooled quantile
    got = Anchored().fit(imp).thresholds(targets).values
    np.testing.assert_allclose(got, reference_thresholds(imp, targets), rtol=1e-9)


def test_a_class_with_far_bulk_but_near_look_alikes_gets_no_looser_threshold_than_its_look_alikes_allow():
    """The point of the anchor: two classes whose nearest impostors coincide get nearly the same threshold however far
    apart their bulks are; bulk standardisation (auto-bulk) gives the far class a far looser one."""
    rng = np.random.default_rng(5)
    per = {}
    for c in range(60):
        bulk = np.exp(rng.normal(0.0 if c % 2 else 1.0, 0.2, 400))
        near = np.exp(rng.normal(-0.8, 0.05, 40))
        per[f"c{c:02d}"] = np.concatenate([bulk, near])
    imp = ImpostorDistances.from_lists(per)
    near_class, far_class = 1, 0  # odd classes' bulk near, even ones' far
    anchored = Anchored().fit(imp).thresholds([0.01]).values[:, 0]
    auto = calibrate.fit(per, kind="distance", estimator="auto-bulk", targets=[0.01], predict=False,
                         impostors_only=True).model
    auto_t = auto.thresholds([0.01]).values[:, 0]
    assert anchored[far_class] / anchored[near_class] < 1.15
    assert auto_t[far_class] / auto_t[near_class] > 1.5


def test_enroll_locates_a_new_class_as_a_fit_would_and_survives_save_and_load(tmp_path):
    imp = gallery(3)
    per = {c: imp.of(i) for i, c in enumerate(imp.classes)}
    cal = calibrate.fit({k: v for k, v in per.items() if k != "c05"}, kind="distance", estimator="anchored",
                        targets=[0.01], predict=False, impostors_only=True)
    path = tmp_path / "cal.json"
    cal.save(path)
    loaded = calibrate.load(path)
    assert loaded.threshold("c07", 0.01) == pytest.approx(cal.threshold("c07", 0.01), rel=1e-12)
    enrolled = loaded.enroll("c05", per["c05"])
    model = enrolled.model
    a = model.anchor
    y = np.log(np.sort(per["c05"]) + model.offset)
    k = min(max(3, min(a["max_rank"], round(math.sqrt(y.size)))), y.size - 1)
    j = math.ceil(math.sqrt(k))
    slope = (y[min(k + j, y.size) - 1] - y[max(k - j, 1) - 1]) / max(min(k + j, y.size) - max(k - j, 1), 1)
    variance = k * (1 - k / y.size) * slope ** 2
    w = a["between_var"] / (a["between_var"] + variance)
    assert model.loc[model.classes.index("c05")] == pytest.approx(w * y[k - 1] + (1 - w) * a["mean"], rel=1e-12)


def test_each_estimator_is_predicted_in_the_world_that_fits_its_thresholds():
    """choose_world: the world that agrees with the training data at the estimator's own thresholds at more targets;
    the first (bulk) on a tie. A world made to contradict (its shape shifted down by one unit: several times the
    training FPR at every threshold) is passed over."""
    import dataclasses

    from calibrate.predicted import interval as prediction
    from calibrate_builtins.estimators.interp import GenericInterp

    imp = gallery(11, classes=200, sizes=(300, 600))
    worlds = prediction.build_worlds(imp)
    assert set(worlds) == {"bulk", "anchored"}
    model = GenericInterp().fit(imp)
    targets = (0.01, 0.005)

    def contradicting(world):
        return dataclasses.replace(world, sorted_z=world.sorted_z - 1.0,
                                   tail=dataclasses.replace(world.tail, u=world.tail.u - 1.0) if world.tail else None)

    for broken, kept in (("bulk", "anchored"), ("anchored", "bulk")):
        mixed = {k: (contradicting(w) if k == broken else w) for k, w in worlds.items()}
        assert prediction.choose_world(mixed, imp, model, targets).structure == kept
    assert prediction.choose_world(worlds, imp, model, targets).structure in ("bulk", "anchored")
    # a run records the world each estimator was predicted in
    preds = prediction.predict_in_worlds([GenericInterp()], [model], imp, targets,
                                         settings=prediction.PredictionSettings(replicates=20), seed=[0],
                                         worlds={k: (contradicting(w) if k == "bulk" else w) for k, w in worlds.items()})
    assert preds[0].world == "anchored" and preds[0].summary()["world_structure"] == "anchored"


@pytest.mark.parametrize("observed, expected, agrees", [(0, 300.0, False), (1, 2.0, True), (0, 2.0, True),
                                                       (8, 0.1, False), (3, 3.5, True), (9, 40.0, False)])
def test_the_world_check_at_low_support_is_two_sided(observed, expected, agrees):
    """A Poisson count check, both ways, at fewer than 10 training distances below the thresholds (issue 30)."""
    from scipy import stats

    from calibrate.predicted.world import CHECK_LEVEL, CHECK_RATIO, count_agrees

    assert count_agrees(observed, expected) == agrees
    alpha = (1 - CHECK_LEVEL) / 2
    reference = not (stats.poisson.cdf(observed, expected / CHECK_RATIO) < alpha
                     or (observed > 0 and stats.poisson.sf(observed - 1, expected * CHECK_RATIO) < alpha))
    assert count_agrees(observed, expected) == reference


def test_class_interp_below_every_training_distance_gets_no_interval_where_the_world_expects_hundreds():
    """The scarce regime of issue 30: class-interp's thresholds at 1/(10 n) lie below each class's smallest training
    distance (support 0), where any reasonable world expects many; the 'tail' interval it used to get is refused."""
    rng = np.random.default_rng(4)
    per = {}
    for c in range(400):  # 20 distances per class, 2% of them far nearer than the rest: pooled, a heavy lower tail
        d = np.exp(rng.normal(rng.normal(0, 0.2), 0.1, 20))
        near = rng.random(20) < 0.02
        d[near] = np.exp(rng.normal(-1.5, 0.1, near.sum()))
        per[f"c{c:03d}"] = d
    imp = ImpostorDistances.from_lists(per)
    from calibrate.predicted import interval as prediction
    from calibrate.predicted.world import training_check
    from calibrate_builtins.estimators.interp import ClassInterp

    model = ClassInterp().fit(imp)
    tau = model.thresholds([0.02]).values
    check = training_check(prediction.choose_world(prediction.build_worlds(imp), imp, model, [0.02]), imp, tau)[0]
    assert check["support"] < 1 and check["world_fpr"] * 8400 > 30  # none below, where the world expects dozens
    cal = calibrate.fit(per, kind="distance", estimator="class-interp", targets=[0.02], predict=True, replicates=20,
                        impostors_only=True)
    assert cal.prediction["prediction_status"] == ["contradicted"]


def test_a_class_enrolled_into_one_pooled_threshold_gets_that_threshold_whatever_its_distances():
    """auto without genuine comparisons chooses one pooled threshold: a new class joins it, even with two distances
    or a distance of 0 (which the anchor could not place on the log scale)."""
    rng = np.random.default_rng(5)
    scores = {f"c{i}": rng.gamma(4.0, 0.5, 300) for i in range(40)}
    cal = calibrate.fit(scores, kind="distance", estimator="auto", targets=[0.01], predict=False, impostors_only=True)
    assert cal.model.anchor["structure"] == "one"
    pooled = cal.model.threshold("c0", 0.01)
    for extra in (np.array([0.4, 1.3]), np.array([0.0, 0.5, 0.9, 1.4])):
        cal.enroll("new", extra)
        assert cal.model.threshold("new", 0.01) == pytest.approx(pooled, rel=1e-12)


def test_an_anchored_class_needs_only_the_distances_its_anchor_reads_on_the_log_scale():
    """A distance of 0 (log scale: -inf with a working offset of 0) is refused only where the anchor reads it, as
    the fit refuses it: among 200 distances the anchor reads ranks 10-18, among 9 ranks 1-6."""
    rng = np.random.default_rng(6)
    scores = {f"c{i}": rng.gamma(4.0, 0.5, 300) for i in range(40)}
    cal = calibrate.fit(scores, kind="distance", estimator="anchored", targets=[0.01], predict=False,
                        impostors_only=True)
    assert cal.model.offset == 0.0
    d = np.sort(rng.gamma(4.0, 0.5, 200))
    cal.enroll("far-from-zero", np.r_[0.0, d])
    assert np.isfinite(cal.model.threshold("far-from-zero", 0.01))
    with pytest.raises(calibrate.errors.DataError, match="include 0"):
        cal.enroll("zero-is-read", np.r_[0.0, d[:8]])
