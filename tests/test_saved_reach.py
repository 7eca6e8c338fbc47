"""What a saved calibration keeps (FittedModel.compact; issue 22, then issue 32): every built-in saves only what
targets up to its reach read, the reach being 10 times the calibration's largest target, at least 1% (1: saved
whole). Pooled samples (auto, generic-interp, pooled znorm and gpd-tail) keep their lowest ceil(reach N) + 1
values and N; class-specific models (class-interp, gpd-tail, shrinkage) each class's lowest ceil(reach n_c) + 1
and n_c; long arrays are packed exactly (calibrate.contract.packed). The file states the reach per estimator; a loaded
calibration answers every target up to it as the fitted one did (the same arithmetic on the same leading values:
equal to the bit), refuses a larger one with one line naming the reach and the fix (Python, `threshold`,
`accept`, `evaluate`), and enrolls a class as before saving. Older files (every value, or issue 22's lowest
100,000) still load."""

from __future__ import annotations

import csv
import json
import math
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.errors import CalibrationError, ParameterError
from calibrate.contract.packed import PACK_FROM, is_packed, packed, unpacked
from calibrate.statistics.order import saved_reach

pytestmark = pytest.mark.filterwarnings("ignore:target FPR 1e-05 is below 1/N")
runner = CliRunner()
CLASSES, PER_CLASS = 60, 400  # 24,000 training distances
TARGETS = (0.001, 0.005)      # reach 0.05
ASKED = (1e-5, 1e-4, 0.001, 0.0037, 0.005, 0.01, 0.02, 0.049, 0.05)


@pytest.fixture(scope="module")
def gallery() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(22)
    return {f"c{i}": rng.gamma(4.0, 1.0, PER_CLASS) * rng.uniform(0.8, 1.2) for i in range(CLASSES)}


def _fit(gallery, estimator: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # auto's note that it has no genuine comparisons to choose by
        return calibrate.fit(gallery, kind="distance", estimator=estimator, predict=False, targets=TARGETS, **kw,
                             impostors_only=True)


def _one_line(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


ESTIMATORS = [("generic-interp", {}), ("class-interp", {}), ("auto", {}), ("auto", {"structure": "anchored"}),
              ("auto-bulk", {}), ("anchored", {}), ("gpd-tail", {}), ("gpd-tail", {"pooling": "pooled"}),
              ("shrinkage", {}), ("znorm", {"pooled_shape": True})]


@pytest.mark.parametrize("estimator, params", ESTIMATORS, ids=lambda x: x if isinstance(x, str) else
                         ",".join(f"{k}={v}" for k, v in x.items()) or "-")
def test_a_saved_model_answers_as_fitted_up_to_its_reach_and_refuses_beyond(gallery, estimator, params, tmp_path):
    fitted = _fit(gallery, estimator, **params)
    path = fitted.save(tmp_path / "cal.json")
    entry = json.loads(path.read_text())["estimators"][estimator]
    assert entry["reach"] == saved_reach(TARGETS) == 0.05
    loaded = calibrate.load(path)
    assert loaded.reach == 0.05 and fitted.reach is None
    for c in ("c0", "c17", "c59"):
        for t in ASKED:
            assert loaded.threshold(c, t) == fitted.threshold(c, t), (c, t)
    assert loaded.thresholds(0.05) == fitted.thresholds(0.05)
    scores = np.linspace(0.5, 3.0, CLASSES)
    classes = list(gallery)
    assert np.array_equal(loaded.accept(classes, scores, 0.02), fitted.accept(classes, scores, 0.02))
    for ask in (lambda: loaded.threshold("c0", 0.051), lambda: loaded.thresholds(0.2),
                lambda: loaded.accept(classes, scores, 0.5), lambda: loaded.distance_threshold("c0", 0.06)):
        with pytest.raises(CalibrationError, match=r"target FPR 0\.\d+ is beyond this saved calibration's reach: it "
                                                   r"answers target FPRs up to 0\.05 .*fit again with 0\.\d+ among"):
            ask()
    assert fitted.threshold("c0", 0.5) > fitted.threshold("c0", 0.05)  # the fitted one answers every target
    # what it keeps: the lowest ceil(reach n) + 1 of each sample (each class's, the pooled one's), packed when long
    state = entry["state"]
    whole = CLASSES * PER_CLASS
    shared, kept = state.get("shared", False), {}
    if "counts" in state and not shared:  # class-interp, gpd-tail, shrinkage
        assert state["counts"] == [PER_CLASS] * CLASSES
        kept["per class"] = (state["values"], CLASSES * (math.ceil(0.05 * PER_CLASS) + 1))
    if "n_pooled" in state or shared:  # auto's structures, generic-interp, pooled znorm and gpd-tail, shrinkage
        assert state.get("n_pooled", state.get("counts", [None])[0]) == whole
        kept["pooled"] = (state.get("pooled", state.get("values")), math.ceil(0.05 * whole) + 1)
    assert kept, sorted(state)
    for held, expected in kept.values():
        values = unpacked(held, "x") if is_packed(held) else np.asarray(held)
        assert values.size == expected and is_packed(held) == (expected >= PACK_FROM)


@pytest.mark.parametrize("estimator", ["generic-interp", "class-interp", "auto", "anchored"])
def test_a_loaded_calibration_enrolls_as_the_fitted_one(gallery, estimator, tmp_path):
    fitted = _fit(gallery, estimator)
    loaded = calibrate.load(fitted.save(tmp_path / "cal.json"))
    new = np.random.default_rng(3).gamma(4.0, 1.0, 150)
    before, after = fitted.enroll("newcomer", new), loaded.enroll("newcomer", new)
    for t in ASKED:
        assert after.threshold("newcomer", t) == before.threshold("newcomer", t)
        assert after.threshold("c17", t) == before.threshold("c17", t)
    again = calibrate.load(after.save(tmp_path / "again.json"))  # re-saved: the same reach, the same answers
    assert again.reach == 0.05 and again.threshold("newcomer", 0.05) == before.threshold("newcomer", 0.05)
    with pytest.raises(CalibrationError, match="up to 0.05"):
        again.threshold("newcomer", 0.06)


def test_a_confident_calibration_answers_as_fitted_up_to_its_reach(gallery, tmp_path):
    """The confidence bound reads the pooled order statistics of the saved model too (generic-interp's
    PooledSortedModel has them since issue 32; before, a loaded one fell back to the model-based bound)."""
    for estimator in ("generic-interp", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = calibrate.fit(gallery, kind="distance", estimator=estimator, targets=TARGETS, confidence=0.9,
                                   replicates=20, impostors_only=True)
        loaded = calibrate.load(fitted.save(tmp_path / "cal.json"))
        assert loaded.model.pool_size == fitted.model.pool_size == CLASSES * PER_CLASS
        for t in ASKED:
            assert loaded.threshold("c3", t) == fitted.threshold("c3", t), (estimator, t)


def test_models_saved_whole_state_it_and_answer_every_target(gallery, tmp_path):
    """A parametric model (znorm without a pooled shape) and a largest target of 10% or more (reach 1) are saved
    whole: reach 1, every target answered."""
    for cal in (_fit(gallery, "znorm"),
                calibrate.fit(gallery, kind="distance", estimator="class-interp", predict=False, targets=(0.1,),
                              impostors_only=True)):
        path = cal.save(tmp_path / "cal.json")
        entry = next(iter(json.loads(path.read_text())["estimators"].values()))
        assert entry["reach"] == 1.0 and "counts" not in entry["state"]
        loaded = calibrate.load(path)
        assert loaded.threshold("c3", 0.9) == cal.threshold("c3", 0.9)


def test_older_files_still_load(gallery, tmp_path):
    """A file of every training value (before issue 22) answers every target; one of issue 22 (the pooled
    sample's lowest values as a JSON list, no reach) answers as far as its values go and names that reach."""
    fitted = _fit(gallery, "class-interp")
    doc = fitted.to_dict()
    entry = doc["estimators"]["class-interp"]
    entry.pop("reach")
    entry["state"] = {"classes": list(gallery), "shared": False, "values": np.concatenate(
        [np.sort(v) for v in gallery.values()]).tolist(), "offsets": list(range(0, CLASSES * PER_CLASS + 1, PER_CLASS))}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="holds no content digest"):
        old = calibrate.load(path)
    assert old.reach is None and old.threshold("c5", 0.5) == fitted.threshold("c5", 0.5)

    pooled = _fit(gallery, "generic-interp")
    doc = pooled.to_dict()
    entry = doc["estimators"]["generic-interp"]
    entry.pop("reach")
    entry["state"]["pooled"] = np.sort(np.concatenate(list(gallery.values())))[:12_001].tolist()
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="holds no content digest"):
        old = calibrate.load(path)
    assert old.threshold("c5", 0.5) == pooled.model.threshold("c5", 0.5)
    with pytest.raises(ParameterError, match="lowest 12001 of 24000 values, enough for target FPRs up to 0.5"):
        old.threshold("c5", 0.6)


def test_the_command_line_refuses_a_target_beyond_the_reach_in_one_line(gallery, tmp_path):
    fitted = _fit(gallery, "class-interp")
    path = fitted.save(tmp_path / "cal.json")
    attempts = tmp_path / "attempts.txt"
    attempts.write_text("".join(f"c{i} c{i + 1} p{i} {0.5 + i / 100}\n" for i in range(20)))
    words = ("beyond this saved calibration's reach", "up to 0.05", "fit again with 0.2")
    _one_line(runner.invoke(app, ["threshold", str(path), "--class", "c1", "--fpr", "0.2"]), *words)
    out = tmp_path / "decisions.csv"
    _one_line(runner.invoke(app, ["accept", str(path), str(attempts), "--fpr", "0.2", "--out", str(out)]), *words)
    assert not out.exists()
    _one_line(runner.invoke(app, ["evaluate", str(path), str(attempts), "--fpr", "0.01", "--fpr", "0.2"]), *words)
    done = runner.invoke(app, ["threshold", str(path), "--class", "c1", "--fpr", "0.05"])
    assert done.exit_code == 0, done.output


def test_a_packed_array_is_exact_and_covered_by_the_digest(gallery, tmp_path):
    rng = np.random.default_rng(9)
    for values in (np.sort(rng.normal(size=5000)), rng.gamma(1.0, 1.0, 3000),
                   np.array([0.0, -0.0, 5e-324, -5e-324, 1.7e308, -1.7e308, np.inf, -np.inf, np.nan] * 200)):
        back = unpacked(json.loads(json.dumps(packed(values))), "x")
        assert back.dtype == np.float64 and np.array_equal(back.view(np.uint64), values.view(np.uint64))
    assert packed(np.arange(PACK_FROM - 1.0)) == list(np.arange(PACK_FROM - 1.0))  # short: a JSON list
    path = _fit(gallery, "auto").save(tmp_path / "cal.json")
    text = path.read_text()
    data = json.loads(text)["estimators"]["auto"]["state"]["pooled"]["data"]
    k = len(data) // 2
    path.write_text(text.replace(data, data[:k] + ("A" if data[k] != "A" else "B") + data[k + 1:]))
    with pytest.raises(CalibrationError, match="changed after calibrate wrote it|state.pooled data"):
        calibrate.load(path)


def test_a_run_states_its_reach_and_its_thresholds_load_back(tmp_path):
    """A recipe run's calibration.json keeps the reach of its own targets; thresholds.csv is read back exactly."""
    rng = np.random.default_rng(7)
    gallery, probes = [f"g{j}" for j in range(40)], np.array([f"p{i}" for i in range(600)])
    path = tmp_path / "m.csv"  # every probe an impostor: half of them (12,000 distances) train
    np.savetxt(path, np.column_stack([probes, np.char.mod("%.6f", rng.gamma(4.0, 1.0, (probes.size, len(gallery))))]),
               fmt="%s", delimiter=",", header="probe," + ",".join(gallery), comments="")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"version: 1\ndata: {{plugin: score-matrix, path: {path}, kind: distance}}\n"
                      "estimators: [{plugin: auto}, {plugin: class-interp}]\n"
                      "evaluation: {targets: [0.002, 0.001], prediction: false}\n"
                      f"output: {{dir: {tmp_path / 'out'}, plots: false}}\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "-q", str(recipe)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "calibration.json").read_text())
    state = doc["estimators"]["auto"]["state"]
    assert doc["estimators"]["auto"]["reach"] == doc["estimators"]["class-interp"]["reach"] == 0.02
    assert len(state["pooled"]) == math.ceil(0.02 * state["n_pooled"]) + 1 == 241  # 12,000 x 2% + 1: a JSON list
    for label in ("auto", "class-interp"):
        loaded = calibrate.load(out, label)
        for row in csv.DictReader((out / "thresholds.csv").open()):
            if row["estimator"] == label:
                assert loaded.threshold(row["class"], float(row["target_fpr"])) == float(row["score_threshold"])
