"""The normaliser stage's arithmetic against a brute-force reference, and what it refuses.

The reference is a plain loop over attempts in numpy, written from the definitions in
docs/normalisation.md (not from calibrate.normalisation.cohort): for attempt (i, j), the enrolled side is class j's
impostor cohort (less probe i when the training impostors are the cohort), the probe side is probe i's
cohort less the claimed class, each sorted and cut to the top K for asnorm; mean and population std.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate.contract.base import RunContext
from calibrate.normalisation.cohort import attempt_statistics, matrix_cohorts, to_z
from calibrate.errors import CalibrationError, DataError, RecipeError
from calibrate.contract.manager import build_registry
from calibrate.normalisation.stage import normalise_fold
from calibrate.recipe.schema import ComponentSpec
from calibrate.recipe.validation import parse_recipe
from calibrate.contract.types import CohortScores, DistanceMatrix
from cohort_lists import refused_on_load

REGISTRY = build_registry()
TOL = 1e-9  # relative: the reference sums in another order


def _spec(name: str, **params) -> ComponentSpec:
    return ComponentSpec("normalizers", REGISTRY.get("normalizers", name), name, params, "normalizer")


def _identity():
    return REGISTRY.get("transforms", "identity").factory()


def _matrix(seed: int, n_probes: int = 30, n_classes: int = 12, outsiders: int = 3):
    """Distances with a per-class and a per-probe offset (what normalisation removes); genuine ones small."""
    rng = np.random.default_rng(seed)
    gallery = np.array([f"c{j}" for j in range(n_classes)])
    probes = np.array([gallery[i % n_classes] for i in range(n_probes)] + [f"out{k}" for k in range(outsiders)])
    genuine = probes[:, None] == gallery[None, :]
    d = 2.0 + rng.normal(0, 0.3, n_classes)[None, :] + rng.normal(0, 0.3, probes.size)[:, None] \
        + rng.gamma(4, 0.25, genuine.shape)
    return np.where(genuine, rng.uniform(0.1, 1.0, genuine.shape), d), probes, gallery


def _stats(cohort: list[float], top_k: int | None) -> tuple[float, float]:
    c = np.sort(np.asarray(cohort, dtype=float))
    if top_k is not None:
        c = c[:top_k]
    return float(np.mean(c)), float(np.std(c))


def reference_z(name: str, top_k, matrix: DistanceMatrix, enrolled: DistanceMatrix, probes: DistanceMatrix,
                leave_out: bool) -> np.ndarray:
    """z of every valid entry of ``matrix`` (row-major), one attempt at a time."""
    out = []
    k_e = k_p = top_k
    for i, j in zip(*np.nonzero(matrix.valid)):
        cls, x = matrix.gallery_classes[j], matrix.values[i, j]
        je = list(enrolled.gallery_classes).index(cls)
        e = [enrolled.values[r, je] for r in range(enrolled.shape[0])
             if enrolled.valid[r, je] and enrolled.probe_classes[r] != cls and not (leave_out and r == i)]
        p = [probes.values[i, k] for k in range(probes.shape[1])
             if probes.valid[i, k] and probes.gallery_classes[k] not in (cls, probes.probe_classes[i])]
        if name == "asnorm" and top_k is None:
            k_e, k_p = min(200, len(e)), min(200, len(p))
        me, se = _stats(e, k_e if name == "asnorm" else None)
        mp, sp = _stats(p, k_p if name == "asnorm" else None)
        ze, zp = (x - me) / se, (x - mp) / sp
        out.append({"znorm": ze, "tnorm": zp, "snorm": 0.5 * (ze + zp), "asnorm": 0.5 * (ze + zp)}[name])
    return np.array(out)


def _split(seed: int):
    """One matrix split per entry into training (half the impostor entries) and evaluation (the rest)."""
    values, probes, gallery = _matrix(seed)
    rng = np.random.default_rng(seed + 100)
    impostor = probes[:, None] != gallery[None, :]
    fit = impostor & (rng.random(values.shape) < 0.5)
    train = DistanceMatrix(values, probes, gallery, fit, "distance", source="train")
    test = DistanceMatrix(values, probes, gallery, ~fit, "distance", source="test")
    return train, test


@pytest.mark.parametrize("name,params", [("znorm", {}), ("tnorm", {}), ("snorm", {}), ("asnorm", {"top_k": 5}),
                                         ("asnorm", {})])
def test_one_matrix_split_matches_the_brute_force_reference(name, params):
    train, test = _split(3)
    t = _identity().fit(train)
    train_n, test_n, fitted = normalise_fold(_spec(name, **params), train, test, t.apply(train), t.apply(test), t,
                                             (None, None), RunContext())
    enrolled = DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, train.impostor_mask(), "distance")
    whole = DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, train.valid | test.valid, "distance")
    top_k = params.get("top_k")
    want_train = reference_z(name, top_k, train, enrolled, whole, leave_out=True)
    want_test = reference_z(name, top_k, test, enrolled, whole, leave_out=False)
    np.testing.assert_allclose(to_z(train_n.values[train_n.valid]), want_train, rtol=TOL)
    np.testing.assert_allclose(to_z(test_n.values[test_n.valid]), want_test, rtol=TOL)
    if "enrolled" in fitted.sides:  # what the calibration saves: each class's side, nothing left out
        for j, cls in enumerate(fitted.classes):
            e = train.values[train.impostor_mask()[:, j], j]
            mean, std = _stats(e, top_k if name == "asnorm" else None)
            assert fitted.statistics["mean"][j] == pytest.approx(mean, rel=TOL)
            assert fitted.statistics["std"][j] == pytest.approx(std, rel=TOL)


def test_two_matrices_and_cohort_files_match_the_reference():
    """Training and evaluation of other probes (each its own rows as probe side); then an external cohort."""
    values, probes, gallery = _matrix(5)
    other, probes2, _ = _matrix(6)
    train = DistanceMatrix(values, probes, gallery, probes[:, None] != gallery[None, :], "distance", source="train")
    test = DistanceMatrix(other, probes2, gallery, None, "distance", source="test")
    t = _identity().fit(train)
    train_n, test_n, _ = normalise_fold(_spec("snorm"), train, test, t.apply(train), t.apply(test), t, (None, None),
                                        RunContext())
    enrolled = DistanceMatrix(values, probes, gallery, train.impostor_mask(), "distance")
    np.testing.assert_allclose(to_z(train_n.values[train_n.valid]),
                               reference_z("snorm", None, train, enrolled, train, True), rtol=TOL)
    np.testing.assert_allclose(to_z(test_n.values[test_n.valid]),
                               reference_z("snorm", None, test, enrolled, test, False), rtol=TOL)
    # an external cohort: 9 Z-probes of other people, 7 T-models; nothing is left out of the enrolled side
    rng = np.random.default_rng(7)
    z_side = DistanceMatrix(rng.gamma(4, 0.5, (9, gallery.size)), [f"z{k}" for k in range(9)], gallery, source="Z")
    models = [f"t{k}" for k in range(7)]
    t_train = DistanceMatrix(rng.gamma(4, 0.5, (probes.size, 7)), probes, models, source="T")
    t_test = DistanceMatrix(rng.gamma(4, 0.5, (probes2.size, 7)), probes2, models, source="T")
    cohorts = (CohortScores(z_side, t_train), CohortScores(z_side, t_test))
    train_n, test_n, fitted = normalise_fold(_spec("asnorm", top_k=4), train, test, t.apply(train), t.apply(test), t,
                                             cohorts, RunContext())
    assert fitted.enrolled_cohort == "cohort file"
    np.testing.assert_allclose(to_z(train_n.values[train_n.valid]),
                               reference_z("asnorm", 4, train, z_side, t_train, False), rtol=TOL)
    np.testing.assert_allclose(to_z(test_n.values[test_n.valid]),
                               reference_z("asnorm", 4, test, z_side, t_test, False), rtol=TOL)


def test_statistics_of_a_row_do_not_depend_on_the_rows_computed_with_it():
    """What makes a saved calibration's accept give the run's decisions bit for bit."""
    rng = np.random.default_rng(1)
    values = rng.gamma(3, 1.0, (40, 25))
    usable = rng.random(values.shape) < 0.9
    normalizer = REGISTRY.get("normalizers", "asnorm").factory(top_k=6)
    rows = rng.integers(0, 40, 300)
    left = np.where(rng.random(300) < 0.5, rng.integers(0, 25, 300), -1)
    together = attempt_statistics(normalizer, values, usable, rows, left)
    for a in rng.choice(300, 20, replace=False):
        keep = usable[rows[a]].copy()
        if left[a] >= 0:
            keep[left[a]] = False
        alone = attempt_statistics(normalizer, values[rows[a]][keep][None, :], np.ones((1, keep.sum()), bool), [0])
        for name in together:
            assert together[name][a] == alone[name][0]  # exactly


# ---- what it refuses --------------------------------------------------------------------------------------

def _recipe(tmp_path, normalizer, **data) -> dict:
    values, probes, gallery = _matrix(2)
    lines = ["," + ",".join(gallery)] + [p + "," + ",".join(repr(float(v)) for v in row) for p, row in zip(probes, values)]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"version": 1, "data": {"plugin": "score-matrix", "path": "d.csv", "kind": "distance", **data},
            "normalizer": normalizer, "estimators": [{"plugin": "generic-interp"}], "output": str(tmp_path / "out")}


def test_an_unknown_normaliser_says_what_was_meant(tmp_path):
    with pytest.raises(RecipeError) as err:
        parse_recipe(_recipe(tmp_path, {"plugin": "snrom"}), REGISTRY, source="r.yaml", base_dir=tmp_path)
    message = str(err.value)
    assert "normalizer.plugin in r.yaml" in message and "did you mean 'snorm'?" in message
    assert "available: asnorm, snorm, tnorm, znorm" in message and "\n" not in message


def test_znorm_is_both_an_estimator_and_a_normaliser(tmp_path):
    raw = _recipe(tmp_path, {"plugin": "znorm"})
    raw["estimators"] = [{"plugin": "znorm"}]
    recipe = parse_recipe(raw, REGISTRY, source="r.yaml", base_dir=tmp_path)
    assert recipe.normalizer.info.factory.__module__.endswith("normalizers.znorm")
    assert recipe.estimators[0].info.factory.__module__.endswith("estimators.znorm")


def test_bad_parameters_and_recipe_shapes_are_one_line(tmp_path):
    with pytest.raises(RecipeError, match=r"normalizer in r.yaml: top_k must be a whole number of at least 2"):
        parse_recipe(_recipe(tmp_path, {"plugin": "asnorm", "top_k": 1}), REGISTRY, source="r.yaml", base_dir=tmp_path)
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.txt").write_text("c1 c1 p1 0.9\nc2 c1 p1 0.2\nc1 c2 p2 0.1\nc2 c2 p2 0.8\n", encoding="utf-8")
    raw = _recipe(tmp_path, {"plugin": "snorm"})
    raw["data"] = {"plugin": "score-shards", "path": "shards", "kind": "similarity"}
    raw["transform"] = {"plugin": "similarity-to-distance", "upper": 1.0}
    with pytest.raises(RecipeError, match=r"normalizer in r.yaml: .*read shard by shard.*remove `normalizer:`"):
        parse_recipe(raw, REGISTRY, source="r.yaml", base_dir=tmp_path)


def test_a_saved_normaliser_is_checked_like_the_rest_of_the_file(tmp_path):
    """Damaged normaliser entries in a calibration file: one line naming the field."""
    from calibrate.api import load
    from calibrate.running.pipeline import run_recipe

    recipe = parse_recipe(_recipe(tmp_path, {"plugin": "snorm"}, missing=None), REGISTRY, source="r.yaml",
                          base_dir=tmp_path)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_recipe(recipe)
    path = tmp_path / "out" / "calibration.json"
    good = json.loads(path.read_text())
    assert load(path).normalization.plugin == "snorm"
    damages = {
        "normalizer.statistics['mean']": lambda n: n["statistics"]["mean"].__setitem__(0, "x"),
        "normalizer.classes": lambda n: n["classes"].__setitem__(1, n["classes"][0]),
        "normalizer.sides": lambda n: n.__setitem__("sides", ["both"]),
        "normalizer.enrolled_cohort": lambda n: n.__setitem__("enrolled_cohort", "?"),
        "unknown normalizer 'snorn'": lambda n: n.__setitem__("plugin", "snorn"),
    }
    refused_on_load(good, damages, tmp_path)
    cal = load(path)
    with pytest.raises(CalibrationError, match="no single score threshold exists"):
        cal.threshold(cal.classes[0], 0.01)
    with pytest.raises(CalibrationError, match="probe_cohort_scores is needed"):
        cal.accept(cal.classes[0], 2.0, 0.01)
    with pytest.raises(CalibrationError, match="2 row.s. for 1 attempt"):
        cal.accept([cal.classes[0]], [2.0], 0.01, probe_cohort_scores=[[1.0, 2.0], [1.0, 2.0]])
    with pytest.raises(CalibrationError, match="attempt 1: value 2 is nan"):
        cal.accept(cal.classes[0], 2.0, 0.01, probe_cohort_scores=[1.0, float("nan"), 3.0])


def test_too_small_a_cohort_names_the_class_or_probe_and_the_fix():
    train, test = _split(4)
    t = _identity().fit(train)
    with pytest.raises(DataError) as err:
        normalise_fold(_spec("asnorm", top_k=40), train, test, t.apply(train), t.apply(test), t, (None, None),
                       RunContext())
    message = str(err.value)
    assert "train: training impostors as the enrolled cohort: class 'c0' has" in message
    assert "asnorm needs at least 40" in message and "smaller top_k" in message
    cohorts = matrix_cohorts(train, test)
    assert cohorts[0].leave_out and not cohorts[1].leave_out
