"""Damaged or hostile saved calibrations and partitioned heads (issue 19, items 4, 6, 8, 9, 10): each
is refused as a whole on load with a CalibrationError naming the field, and through the CLI
(`threshold`, `accept`) with exit 2 and one line; nothing reads outside the calibration's folder or
blocks on a FIFO. The sharded run's calibration answers `calibrate threshold`."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import calibrate
from calibrate.cli import app
from calibrate.errors import CalibrationError

from test_partitioned import make_shards

runner = CliRunner()


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    """A saved calibration with auto (predicted interval included) and class-interp."""
    tmp = tmp_path_factory.mktemp("schema")
    rng = np.random.default_rng(4)
    scores = {f"c{i}": rng.beta(2, 5, 150) for i in range(8)}
    a = calibrate.fit(scores, predict=True, targets=(0.05, 0.01))
    b = calibrate.fit(scores, estimator="class-interp", targets=(0.05, 0.01))
    doc = json.loads(Path(a.save(tmp / "a.json")).read_text())
    doc["estimators"]["class-interp"] = json.loads(Path(b.save(tmp / "b.json")).read_text())["estimators"]["class-interp"]
    return doc


def _mutate(doc: dict, how) -> dict:
    doc = copy.deepcopy(doc)
    how(doc)
    return doc


def _auto(doc):
    return doc["estimators"]["auto"]


CASES = {
    "transform is not a mapping": (lambda d: d.update(transform="identity"), "transform must be a mapping"),
    "estimator entry is a list": (lambda d: d["estimators"].update(auto=[1]), "estimators['auto'] must be a mapping"),
    "state is missing": (lambda d: _auto(d).pop("state"), "state is missing"),
    "kind is unknown": (lambda d: d.update(kind="weird"), "kind is 'weird'"),
    "targets are not rates": (lambda d: d.update(targets=["x"]), "targets must be a list of target FPRs"),
    "family names a module": (lambda d: _auto(d)["state"].update(family="os.system"),
                              "state.family is 'os.system': must be one of"),
    "scale is zero": (lambda d: _auto(d)["state"]["scale"].__setitem__(0, 0.0), "state.scale[0] is 0.0"),
    # audit S3: damaged model and transform states that loaded and answered
    "offset of 1e30": (lambda d: _auto(d)["state"].update(offset=1e30), "state.offset is 1e+30"),
    "a location of -1e30": (lambda d: _auto(d)["state"]["loc"].__setitem__(0, -1e30), "state.loc[0] is -1e+30"),
    "a location as a string": (lambda d: _auto(d)["state"].update(loc=[str(x) for x in _auto(d)["state"]["loc"]]),
                               "state.loc must hold numbers only"),
    "tail shape 1e10": (lambda d: _auto(d)["state"]["tail"].update(xi=1e10), "state.tail.xi is 10000000000.0"),
    "tail scale 0": (lambda d: _auto(d)["state"]["tail"].update(beta=0), "state.tail.beta is 0"),
    "tail probability 2": (lambda d: _auto(d)["state"]["tail"].update(p_u=2), "state.tail.p_u is 2"),
    "tail without a threshold": (lambda d: _auto(d)["state"]["tail"].pop("u"), "state.tail.u is missing"),
    "pooled_shape as a string": (lambda d: _auto(d)["state"].update(pooled_shape="yes"), "state.pooled_shape is 'yes'"),
    "transform upper as a string": (lambda d: d["transform"]["state"].update(upper="1"),
                                    "transform 'similarity-to-distance' cannot be rebuilt from the file (state.upper is '1'"),
    "transform method not declared": (lambda d: d["transform"]["params"].update(method="cube"),
                                      "method must be flip or neg-log, got 'cube'"),
    "class-interp distance below 0": (lambda d: d["estimators"]["class-interp"]["state"]["values"].__setitem__(0, -1),
                                      "state.values[0] is -1.0"),
    "class-interp shared as a string": (lambda d: d["estimators"]["class-interp"]["state"].update(shared="no"),
                                        "state.shared is 'no'"),
    # audit T5, T6, T7: fields of the wrong type or size
    "kind is a list": (lambda d: d.update(kind=["similarity"]), "kind is \"['similarity']\", not similarity"),
    "training impostors beyond a float": (lambda d: d.update(training={"impostors": 10**400}),
                                          "training.impostors must be the positive number"),
    "versions is a list": (lambda d: d.update(versions=[1]), "versions must map package names"),
    "a class twice": (lambda d: _auto(d)["state"]["classes"].__setitem__(1, "c0"), "names class 'c0' twice"),
    "NUL in a label": (lambda d: _auto(d)["state"]["classes"].__setitem__(0, "c\x000"), "without NUL"),
    "a class is a number": (lambda d: _auto(d)["state"]["classes"].__setitem__(0, 7), "state.classes[0] is 7"),
    "a huge label": (lambda d: _auto(d)["state"]["classes"].__setitem__(0, "x" * 5000), "at most 1024 characters"),
    "offsets of 1e30": (lambda d: d["estimators"]["class-interp"]["state"].update(offsets=[0, 1e30]),
                        "cannot be rebuilt"),
    "prediction without targets": (lambda d: _auto(d).update(prediction={"level": 0.9}), "prediction.targets"),
    "prediction of the wrong length": (lambda d: _auto(d)["prediction"]["predicted_fpr_low"].pop(),
                                       "prediction.predicted_fpr_low must be 2 rates"),
    "prediction level out of range": (lambda d: _auto(d)["prediction"].update(level=3), "prediction.level"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_calibration_is_refused_naming_the_field(plain, tmp_path, case):
    how, words = CASES[case]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_mutate(plain, how)))
    estimator = "class-interp" if case.startswith(("offsets of 1e30", "class-interp")) else "auto"
    with pytest.raises(CalibrationError) as err:
        calibrate.load(path, estimator)
    assert words in str(err.value) and str(path) in str(err.value)
    for args in (["threshold", str(path), "--class", "c1", "--fpr", "0.01", "--estimator", estimator],
                 ["accept", str(path), str(path), "--fpr", "0.01", "--estimator", estimator, "--out", str(tmp_path / "d")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (case, result.output)
        assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def compacted() -> dict:
    """A saved calibration of a gallery of 110,000 training distances: auto and generic-interp keep only
    their pooled sample's lowest 100,000 values and its size (FittedModel.compact)."""
    rng = np.random.default_rng(5)
    scores = {f"c{i}": rng.gamma(4.0, 1.0, 500) + rng.uniform(0, 1) for i in range(220)}
    doc = calibrate.fit(scores, kind="distance", predict=False, targets=(0.01,)).to_dict()
    doc["estimators"].update(calibrate.fit(scores, kind="distance", estimator="generic-interp", predict=False,
                                           targets=(0.01,)).to_dict()["estimators"])
    assert len(doc["estimators"]["auto"]["state"]["pooled"]) == 100_000 == len(
        doc["estimators"]["generic-interp"]["state"]["pooled"])
    return json.loads(json.dumps(doc))


POOLED_CASES = {
    "pooled size as a string": (lambda s: s.update(n_pooled="yes"), "state.n_pooled is 'yes'"),
    "pooled size below the values kept": (lambda s: s.update(n_pooled=3), "state.n_pooled is 3"),
    "pooled values not ascending": (lambda s: s["pooled"].reverse(), "ascending"),
    "pooled values missing": (lambda s: s.pop("pooled"), "state.pooled is missing"),
    "a pooled value is NaN": (lambda s: s["pooled"].__setitem__(5, float("nan")), "finite"),
    "pooled file outside the folder": (lambda s: s.update(pooled={"file": "../x.npy"}), "not a plain .npy name"),
}


@pytest.mark.parametrize("estimator", ["auto", "generic-interp"])
@pytest.mark.parametrize("case", sorted(POOLED_CASES))
def test_a_damaged_saved_pooled_sample_is_refused_naming_the_field(compacted, tmp_path, case, estimator):
    how, words = POOLED_CASES[case]
    doc = copy.deepcopy(compacted)
    how(doc["estimators"][estimator]["state"])
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError) as err:
        calibrate.load(path, estimator)
    assert words in str(err.value) and str(path) in str(err.value)


def test_a_deeply_nested_file_is_refused_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CalibrationError, match="nested too deeply"):
        calibrate.load(path)
    result = runner.invoke(app, ["threshold", str(path), "--class", "x", "--fpr", "0.01"])
    assert result.exit_code == 2 and "nested too deeply" in result.stderr


def test_an_untouched_calibration_still_loads(plain, tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(plain))
    assert calibrate.load(path, "auto").threshold("c1", 0.01) > 0


# ---- sharded runs ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sharded")
    folder = make_shards(tmp / "shards", shards=2, classes=5)
    recipe = {"version": 1, "data": {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
              "estimators": [{"plugin": "auto"}, {"plugin": "class-interp"}], "evaluation": {"targets": [0.01]},
              "output": {"dir": str(tmp / "out"), "plots": False}}
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(tmp / "r.yaml")
    return tmp / "out"


def test_threshold_answers_on_a_sharded_runs_calibration(sharded):
    """The audit's traceback: 'PartitionedCalibration' object has no attribute 'prediction'."""
    for target in (sharded / "calibration.json", sharded):  # the head, or the run's folder
        result = runner.invoke(app, ["threshold", str(target), "--class", "c0_1", "--fpr", "0.01", "--estimator", "auto"])
        assert result.exit_code == 0, result.output
        assert "c0_1 at FPR 0.01 (auto): accept if score <=" in result.stdout
    assert calibrate.load(sharded, "auto").prediction is None


def _copy(sharded: Path, tmp: Path) -> Path:
    out = tmp / "copy"
    shutil.copytree(sharded, out)
    return out


@pytest.mark.parametrize("field, value, words", [
    ("parts", "many", "parts must be a whole number"),
    ("classes", "ten", "classes must be a whole number"),
    ("parts", 10**9, "parts must be a whole number from 1 to"),
    ("transform", [], "transform must be a mapping"),
    ("kind", "both", "kind is 'both'"),
    ("kind", ["distance"], "kind is \"['distance']\""),  # audit T5 in a head
    ("version", 99, "partitioned calibration version 99 is not the one this calibrate reads"),  # audit S4
    ("version", True, "partitioned calibration version True"),
    ("versions", "x", "versions must map package names"),  # audit T10
    ("estimators", [], "estimators must name at least one estimator"),  # audit T8
    ("estimators", "auto", "estimators must name at least one estimator"),
    ("estimators", 3, "estimators must name at least one estimator"),
    ("estimators", {"auto": {"plugin": "auto", "params": {"bogus": 1}}},  # audit T9
     "estimator 'auto' cannot be rebuilt from the file (TypeError"),
    ("training", {"impostors": 10**400}, "training.impostors must be"),
])
def test_a_damaged_head_is_refused(sharded, tmp_path, field, value, words):
    out = _copy(sharded, tmp_path)
    head = json.loads((out / "calibration.json").read_text())
    head[field] = value
    (out / "calibration.json").write_text(json.dumps(head))
    with pytest.raises(CalibrationError, match=re.escape(words)):
        calibrate.load(out, "auto")


def test_a_head_with_nothing_but_its_format_is_one_line(tmp_path):
    """Audit T8: the head's estimators were read before the head was checked (KeyError, TypeError)."""
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"format": "calibrate-partitioned"}))
    with pytest.raises(CalibrationError, match="h.json: partitioned calibration version None"):
        calibrate.load(path)
    result = runner.invoke(app, ["threshold", str(path), "--class", "a", "--fpr", "0.05"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output


def _part_auto(part: dict) -> dict:
    return part["estimators"]["auto"]


@pytest.mark.parametrize("damage, words", [
    (lambda part: part.pop("transform"), "calibration-part00000.json: the part holds no transform"),  # audit T11
    (lambda part: part.update(kind="similarity"), "the part's kind 'similarity' contradicts the head's 'distance'"),  # S4
    (lambda part: part["transform"].update(plugin="neg-log-complement"), "the part's transform contradicts the head's"),
    (lambda part: _part_auto(part)["state"]["classes"].__setitem__(0, "not-listed"),  # audit S4
     "the part's classes contradict classes-part00000.json"),
    (lambda part: _part_auto(part)["state"]["tail"].update(beta=-1), "state.tail.beta is -1"),  # audit S3 in a part
], ids=["no transform", "kind", "transform", "classes", "tail scale"])
def test_a_part_that_contradicts_its_head_is_refused(sharded, tmp_path, damage, words):
    out = _copy(sharded, tmp_path)
    path = out / "calibration-part00000.json"
    part = json.loads(path.read_text())
    damage(part)
    path.write_text(json.dumps(part))
    with pytest.raises(CalibrationError, match=words):
        calibrate.load(out, "auto").thresholds(0.01)
    cls = json.loads((out / "classes-part00000.json").read_text())[1]
    result = runner.invoke(app, ["threshold", str(out), "--class", cls, "--fpr", "0.01", "--estimator", "auto"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output


def test_a_class_list_of_numbers_is_refused(sharded, tmp_path):
    out = _copy(sharded, tmp_path)
    (out / "classes-part00000.json").write_text(json.dumps([1, 2, 3]))
    with pytest.raises(CalibrationError, match=r"classes-part00000.json: the class list\[0\] is 1"):
        calibrate.load(out, "auto").threshold("c0_1", 0.01)


def test_the_pooled_file_cannot_name_a_file_outside_the_folder(sharded, tmp_path):
    out = _copy(sharded, tmp_path)
    np.save(tmp_path / "secret.npy", np.arange(5.0))
    part = json.loads((out / "calibration-part00000.json").read_text())
    part["estimators"]["auto"]["state"]["pooled"] = {"file": "../secret.npy"}
    (out / "calibration-part00000.json").write_text(json.dumps(part))
    with pytest.raises(CalibrationError, match="not a plain .npy name"):
        calibrate.load(out, "auto").threshold("c0_1", 0.01)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_never_blocks_a_load(sharded, tmp_path):
    out = _copy(sharded, tmp_path)
    (out / "pooled-auto.npy").unlink()
    os.mkfifo(out / "pooled-auto.npy")
    os.mkfifo(tmp_path / "head.json")
    signal.alarm(20)  # a regression hangs: fail instead
    try:
        with pytest.raises(CalibrationError, match="is a FIFO, not a regular file"):
            calibrate.load(out, "auto").threshold("c0_1", 0.01)
        with pytest.raises(CalibrationError, match="is a FIFO, not a regular file"):
            calibrate.load(tmp_path / "head.json")
    finally:
        signal.alarm(0)


def test_a_pooled_file_whose_header_lies_is_refused(sharded, tmp_path):
    out = _copy(sharded, tmp_path)
    raw = (out / "pooled-auto.npy").read_bytes()
    header_end = raw.index(b"\n") + 1
    header = raw[:header_end].decode("latin1")
    shape = header[header.index("'shape': (") + 10:header.index(")", header.index("'shape': ("))]
    lying = header.replace(f"'shape': ({shape})", "'shape': (400000000,)")
    lying = lying[:-1].ljust(len(header) - 1) + "\n" if len(lying) <= len(header) else lying
    (out / "pooled-auto.npy").write_bytes(lying.encode("latin1") + raw[header_end:header_end + 64])
    with pytest.raises(CalibrationError, match="header claims shape"):
        calibrate.load(out, "auto").threshold("c0_1", 0.01)


# ---- every built-in model's state, checked in its from_state (audit S3) ---------------------------

def _fits(state: dict) -> dict:
    return state["fits"][0]


@pytest.mark.parametrize("estimator, params, damage, words", [
    ("gpd-tail", {}, lambda s: _fits(s).update(xi=1e10), "state.fits[0].xi is 10000000000.0"),
    ("gpd-tail", {}, lambda s: _fits(s).update(beta=0), "state.fits[0].beta is 0"),
    ("gpd-tail", {}, lambda s: _fits(s).update(p_u=2), "state.fits[0].p_u is 2"),
    ("gpd-tail", {}, lambda s: _fits(s).update(u=1e30), "state.fits[0].u is 1e+30"),
    ("gpd-tail", {}, lambda s: _fits(s).update(k=10**400), "state.fits[0].k is"),
    ("gpd-tail", {}, lambda s: s.update(pooling="os.system"), "state.pooling is 'os.system'"),
    ("shrinkage", {}, lambda s: s["weights"].__setitem__(0, 2.0), "state.weights[0] is 2.0"),
    ("shrinkage", {}, lambda s: s["values"].__setitem__(0, "0.1"), "state.values must hold numbers only"),
    ("shrinkage", {}, lambda s: s.update(offsets=[0, 3]), "state.offsets must hold"),
    ("znorm", {"family": "gaussian"}, lambda s: s["loc"].__setitem__(0, -1e30), "state.loc[0] is -1e+30"),
    ("znorm", {"family": "gaussian"}, lambda s: s.update(offset=0.5), "state.offset is 0.5"),
    ("znorm", {}, lambda s: s["n"].__setitem__(0, 2.5), "state.n must hold whole numbers only"),
    ("znorm", {}, lambda s: s["n"].__setitem__(0, True), "state.n must hold whole numbers only"),  # found by test_fuzz
    ("ncx2-grid", {"dim": [4, 5], "sigma": {"steps": 5}}, lambda s: s["sigma"].__setitem__(0, 0), "state.sigma[0] is 0.0"),
    ("ncx2-grid", {"dim": [4, 5], "sigma": {"steps": 5}}, lambda s: s["dim"].__setitem__(0, "4"),
     "state.dim must hold whole numbers only"),
])
def test_a_builtin_models_damaged_state_is_refused_naming_the_field(estimator, params, damage, words):
    from calibrate.errors import DataError

    rng = np.random.default_rng(3)
    cal = calibrate.fit({f"c{i}": rng.beta(2, 5, 120) for i in range(4)}, kind="similarity", estimator=estimator,
                        **params)
    state = json.loads(json.dumps(cal.model.to_state()))
    type(cal.model).from_state(copy.deepcopy(state))  # the undamaged state loads
    damage(state)
    with pytest.raises(DataError, match=re.escape(words)):
        type(cal.model).from_state(state)


@pytest.mark.parametrize("path, words", [
    (5, "must be a file or folder name (str or pathlib.Path), got int"),
    (b"cal.json", "got bytes"),
    (None, "got NoneType"),
    ("out/c\0.json", "holds a NUL character"),
    ("a" * 300 + ".json", "cannot read the calibration"),
])
def test_load_of_what_cannot_name_a_file_is_a_calibration_error(path, words):
    """Audit T18 (its load part): TypeError, ValueError or OSError escaped calibrate.load."""
    with pytest.raises(CalibrationError, match=re.escape(words)):
        calibrate.load(path)
    if not isinstance(path, str) or "\0" in path:
        with pytest.raises(CalibrationError, match=re.escape(words)):
            calibrate.load_calibration(path)


@pytest.fixture(scope="module")
def confident_doc(tmp_path_factory) -> dict:
    rng = np.random.default_rng(2)
    cal = calibrate.fit({f"c{i}": rng.beta(2, 5, 200) for i in range(5)}, kind="similarity", estimator="generic-interp",
                        confidence=0.9, replicates=30, targets=(0.05, 0.01))
    return cal.to_dict()


@pytest.mark.parametrize("damage, words", [
    (lambda c: c.update(confidence="0.9"), "confidence must be a probability in [0.5, 1)"),
    (lambda c: c.update(grid=["x"]), "confidence.grid must hold numbers only"),
    (lambda c: c.update(independent=-3), "confidence.independent is -3"),
    (lambda c: c["upper"].reverse(), "confidence.upper must not decrease"),
    (lambda c: c["upper"].pop(), "confidence.upper must hold"),
], ids=["confidence a string", "grid of strings", "independent negative", "upper decreasing", "upper short"])
def test_a_damaged_confidence_entry_is_refused(confident_doc, tmp_path, damage, words):
    """Audit S3: the confidence entry (the bound around the estimator's model) was used unchecked."""
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(confident_doc))
    assert calibrate.load(path).threshold("c1", 0.05) > 0
    doc = copy.deepcopy(confident_doc)
    damage(next(iter(doc["estimators"].values()))["confidence"])
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=re.escape(words)):
        calibrate.load(path)
