"""What a saved calibration keeps of a pooled sample (FittedModel.compact, issue 22): auto and generic-interp
save only their pooled sample's lowest ceil(max(1%, largest target) N) + 1 values, at least 100,000, and N.
A loaded calibration answers every target up to that reach as the fitted one did (the same arithmetic on
the same leading values: equal to the bit by construction), refuses a larger target naming its reach, and
enrolls a class as before saving. Smaller galleries are saved whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli import app
from calibrate.errors import ParameterError

CLASSES, PER_CLASS = 400, 500  # 200,000 training distances: twice what a saved pooled sample keeps at least


@pytest.fixture(scope="module")
def gallery() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(22)
    return {f"c{i}": rng.gamma(4.0, 1.0, PER_CLASS) * rng.uniform(0.8, 1.2) for i in range(CLASSES)}


@pytest.mark.parametrize("estimator", ["auto", "generic-interp"])
def test_a_saved_pooled_model_answers_up_to_its_reach_and_names_it_beyond(gallery, estimator, tmp_path):
    fitted = calibrate.fit(gallery, kind="distance", estimator=estimator, predict=False, targets=(0.001, 0.01))
    path = fitted.save(tmp_path / "cal.json")
    state = json.loads(path.read_text())["estimators"][estimator]["state"]
    assert len(state["pooled"]) == 100_000 and state["n_pooled"] == CLASSES * PER_CLASS
    loaded = calibrate.load(path)
    classes = ["c0", "c17", "c399"]
    targets = [1e-5, 1e-4, 0.001, 0.0037, 0.01, 0.2, 0.49]  # reach: (100,000 - 1) / 200,000 = 0.499995
    for c in classes:
        for t in targets:
            assert loaded.threshold(c, t) == fitted.threshold(c, t), (c, t)
    with pytest.raises(ParameterError, match="lowest 100000 of 200000 values, enough for target FPRs up to 0.5"):
        loaded.threshold("c0", 0.6)
    assert fitted.threshold("c0", 0.6) > fitted.threshold("c0", 0.49)  # the fitted one still answers
    refused = CliRunner().invoke(app, ["threshold", str(path), "--class", "c0", "--fpr", "0.6"])
    assert refused.exit_code == 2 and "up to 0.5" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    new = np.random.default_rng(3).gamma(4.0, 1.0, PER_CLASS)
    before, after = fitted.enroll("newcomer", new), loaded.enroll("newcomer", new)
    for t in targets:
        assert after.threshold("newcomer", t) == before.threshold("newcomer", t)
        assert after.threshold("c17", t) == before.threshold("c17", t)


def test_a_larger_target_extends_what_is_kept(gallery, tmp_path):
    fitted = calibrate.fit(gallery, kind="distance", predict=False, targets=(0.001, 0.7))
    loaded = calibrate.load(fitted.save(tmp_path / "cal.json"))
    assert loaded.threshold("c5", 0.7) == fitted.threshold("c5", 0.7)
    with pytest.raises(ParameterError, match="up to 0.7"):
        loaded.threshold("c5", 0.75)


def test_a_small_gallery_is_saved_whole(tmp_path):
    rng = np.random.default_rng(1)
    scores = {f"c{i}": rng.gamma(4.0, 1.0, 300) for i in range(30)}
    fitted = calibrate.fit(scores, kind="distance", predict=False, targets=(0.001,))
    loaded = calibrate.load(fitted.save(tmp_path / "cal.json"))
    assert loaded.threshold("c3", 0.9) == fitted.threshold("c3", 0.9)


def test_a_run_saves_the_kept_values_and_its_thresholds_load_back(tmp_path):
    """A recipe run's calibration.json keeps the reach of its own targets; thresholds.csv is read back."""
    import csv

    rng = np.random.default_rng(7)
    gallery, probes = [f"g{j}" for j in range(140)], np.array([f"p{i}" for i in range(1_600)])
    path = tmp_path / "m.csv"  # every probe an impostor: half of them (112,000 distances) train
    np.savetxt(path, np.column_stack([probes, np.char.mod("%.6f", rng.gamma(4.0, 1.0, (probes.size, len(gallery))))]),
               fmt="%s", delimiter=",", header="probe," + ",".join(gallery), comments="")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"version: 1\ndata: {{plugin: score-matrix, path: {path}, kind: distance}}\n"
                      "evaluation: {targets: [0.01, 0.001], prediction: false}\n"
                      f"output: {{dir: {tmp_path / 'out'}, plots: false}}\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "-q", str(recipe)])
    assert result.exit_code == 0, result.output
    state = json.loads((out / "calibration.json").read_text())["estimators"]["auto"]["state"]
    n = state["n_pooled"]
    assert n > 100_000 and len(state["pooled"]) == 100_000
    loaded = calibrate.load(out)
    for row in csv.DictReader((out / "thresholds.csv").open()):
        assert loaded.threshold(row["class"], float(row["target_fpr"])) == float(row["score_threshold"])
