"""Damaged or hostile saved calibrations and partitioned heads (issue 19, items 4, 6, 8, 9, 10): each
is refused as a whole on load with a CalibrationError naming the field, and through the CLI
(`threshold`, `accept`) with exit 2 and one line; nothing reads outside the calibration's folder or
blocks on a FIFO. The sharded run's calibration answers `calibrate threshold`."""

from __future__ import annotations

import base64
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
from calibrate.contract import statecheck
from calibrate.saved.json_format import dumps_artifact
from calibrate.contract.base import Estimator, FittedModel
from calibrate.cli.commands import app
from calibrate.errors import CalibrationError, DataError
from calibrate.contract.hookspecs import hookimpl
from calibrate.contract.packed import packed, unpacked

from test_partitioned import make_shards

runner = CliRunner()


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    """A saved calibration with auto (predicted interval included) and class-interp."""
    tmp = tmp_path_factory.mktemp("schema")
    rng = np.random.default_rng(4)
    scores = {f"c{i}": rng.beta(2, 5, 150) for i in range(8)}
    a = calibrate.fit(scores, predict=True, targets=(0.05, 0.01), impostors_only=True)
    b = calibrate.fit(scores, estimator="class-interp", targets=(0.05, 0.01), impostors_only=True)
    doc = json.loads(Path(a.save(tmp / "a.json")).read_text())
    doc["estimators"]["class-interp"] = json.loads(Path(b.save(tmp / "b.json")).read_text())["estimators"]["class-interp"]
    return json.loads(dumps_artifact(doc))  # sealed again: a file as calibrate writes it


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
    "kept pooled sample as a string": (lambda d: _auto(d)["state"].update(pooled="yes"),
                                       "state.pooled must be a list of numbers, got str"),
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
    """A saved calibration of a gallery of 30,000 training distances fitted at 1%: auto and generic-interp keep only
    their pooled sample's lowest ceil(10% N) + 1 values (packed: calibrate.contract.packed) and its size (FittedModel.compact)."""
    rng = np.random.default_rng(5)
    scores = {f"c{i}": rng.gamma(4.0, 1.0, 300) + rng.uniform(0, 1) for i in range(100)}
    doc = calibrate.fit(scores, kind="distance", predict=False, targets=(0.01,), impostors_only=True).to_dict()
    doc["estimators"].update(calibrate.fit(scores, kind="distance", estimator="generic-interp", predict=False,
                                           targets=(0.01,), impostors_only=True).to_dict()["estimators"])
    for label in ("auto", "generic-interp"):
        assert doc["estimators"][label]["state"]["pooled"]["count"] == 3001
    return json.loads(json.dumps(doc))


def _listed(state: dict) -> dict:
    """The pooled sample as a JSON list (as a file of issue 22 holds it, which still loads)."""
    state["pooled"] = unpacked(state["pooled"], "state.pooled").tolist()
    return state


def _packed_data(state: dict, change) -> None:
    raw = bytearray(base64.b64decode(state["pooled"]["data"]))
    state["pooled"]["data"] = base64.b64encode(bytes(change(raw))).decode("ascii")


POOLED_CASES = {
    "pooled size as a string": (lambda s: s.update(n_pooled="yes"), "state.n_pooled is 'yes'"),
    "pooled size below the values kept": (lambda s: s.update(n_pooled=3), "state.n_pooled is 3"),
    "pooled values not ascending": (lambda s: _listed(s)["pooled"].reverse(), "ascending"),
    "pooled values missing": (lambda s: s.pop("pooled"), "state.pooled is missing"),
    "a pooled value is NaN": (lambda s: _listed(s)["pooled"].__setitem__(5, float("nan")), "finite"),
    "pooled file outside the folder": (lambda s: s.update(pooled={"file": "../x.npy"}), "not a plain .npy name"),
    # issue 32: a packed array (calibrate.contract.packed), damaged
    "packed values: another encoding": (lambda s: s["pooled"].update(encoding="pickle"),
                                        "state.pooled names encoding 'pickle'"),
    "packed values: a count too large": (lambda s: s["pooled"].update(count=10**12), "state.pooled has count"),
    "packed values: fewer than counted": (lambda s: s["pooled"].update(count=s["pooled"]["count"] + 1),
                                          "state.pooled data does not hold the 3002 values"),
    "packed values: not base64": (lambda s: s["pooled"].update(data="**" + s["pooled"]["data"]),
                                  "state.pooled data cannot be decoded"),
    "packed values: cut short": (lambda s: _packed_data(s, lambda raw: raw[:len(raw) // 2]),
                                 "state.pooled data does not hold the 3001 values"),
    "packed values: a NaN among them": (lambda s: s.update(pooled=packed(np.r_[np.nan, unpacked(s["pooled"], "")])),
                                        "finite"),
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
    result = runner.invoke(app, ["threshold", str(path), "--class", "c1", "--fpr", "0.01", "--estimator", estimator])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


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


# ---- a third-party model: what docs/plugins.md says from_state may raise is what the loader reports ----------

class _OneThreshold(FittedModel):
    """One threshold per class at every target; from_state checks its fields with calibrate.contract.statecheck."""

    def __init__(self, classes, tau):
        super().__init__(classes)
        self._tau = np.array(tau, dtype=np.float64)

    def _thresholds(self, targets, rows):
        return np.repeat(self._tau[rows][:, None], targets.size, axis=1)

    def to_state(self):
        return {"classes": list(self.classes), "tau": self._tau.tolist()}

    @classmethod
    def from_state(cls, state):
        classes = statecheck.field(state, "classes")
        return cls(classes, statecheck.numbers(statecheck.field(state, "tau"), "tau", 0.0, size=len(classes)))


class _OneThresholdCalibrationError(_OneThreshold):
    @classmethod
    def from_state(cls, state):  # a CalibrationError of its own, naming the field in the same words
        try:
            return super().from_state(state)
        except DataError as exc:
            raise CalibrationError(str(exc)) from None


class _Lowest(Estimator):
    """Each class's lowest training distance."""

    model_class = _OneThreshold

    def _fit(self, impostors, context):
        return self.model_class(impostors.classes, [impostors.of(i).min() for i in range(len(impostors))])


class _LowestCalibrationError(_Lowest):
    model_class = _OneThresholdCalibrationError


class _Plugin:
    @hookimpl
    def calibrate_register_estimators(self, register):
        register("lowest", _Lowest)
        register("lowest-own-error", _LowestCalibrationError)


@pytest.mark.parametrize("estimator", ["lowest", "lowest-own-error"])
def test_a_third_party_from_state_refusal_is_one_calibration_error_naming_file_and_field(estimator, tmp_path):
    """from_state raises the statecheck helpers' DataError or a CalibrationError (docs/plugins.md, the estimators'
    hook): either way the loader reports one CalibrationError naming the file, the estimator and the field."""
    scores = {"a": [0.3, 0.5, 0.9], "b": [0.2, 0.4, 0.8]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(calibrate.fit(scores, estimator=estimator, targets=(0.1,), extra_plugins=(_Plugin(),),
                                  impostors_only=True)
                    .save(tmp_path / "cal.json"))
    doc = json.loads(path.read_text())
    doc["estimators"][estimator]["state"]["tau"][1] = -1.0
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError) as err:
        calibrate.load(path, extra_plugins=(_Plugin(),))
    assert str(err.value) == (f"{path}: estimator {estimator!r} cannot be rebuilt from the file (state.tau[1] is -1.0: "
                              "must be a finite number in [0, inf]); the file is damaged: run the recipe (or "
                              "Calibration.save) again")


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
    (lambda part: part.update(kind="similarity", accept_if="score >= t"),  # S4
     "the part's kind 'similarity' contradicts the head's 'distance'"),
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
                        **params, impostors_only=True)
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
                        confidence=0.9, replicates=30, targets=(0.05, 0.01), impostors_only=True)
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


# ---- what calibrate wrote, and nothing else (issue 31, item 4) -----------------------------------

def _one_line(result, *words: str) -> None:
    """Exit 2 and exactly one `error:` line on stderr holding every one of ``words``."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert all(w in lines[0] for w in words), lines[0]


def _reseal(folder: Path, name: str) -> None:
    """Record ``name``'s present bytes in the folder's manifest, as if the run had written it so."""
    import hashlib

    manifest = json.loads((folder / "manifest.json").read_text())
    data = (folder / name).read_bytes()
    manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """A run's output folder (distance scores, identity transform) and a score list of its classes (`attempts`)."""
    tmp = tmp_path_factory.mktemp("small")
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "version": 1, "data": {"plugin": "synthetic-impostors", "classes": 12, "train": 60, "test": 30, "seed": 3},
        "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.05], "prediction": False},
        "output": {"dir": str(tmp / "out"), "plots": False}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(tmp / "r.yaml")
    rng = np.random.default_rng(8)
    (tmp / "attempts").write_text("".join(f"c{k % 12:02d} x{k} x{k}/p {rng.uniform(0, 2)!r}\n" for k in range(60)))
    return tmp


def _run_copy(small_run: Path, tmp: Path) -> Path:
    shutil.copytree(small_run / "out", tmp / "out")
    return tmp / "out"


def _commands(target: Path, attempts: Path, tmp: Path) -> list:
    return [runner.invoke(app, args) for args in (
        ["threshold", str(target), "--class", "c01", "--fpr", "0.05"],
        ["accept", str(target), str(attempts), "--fpr", "0.05", "--out", str(tmp / "d.csv")],
        ["evaluate", str(target), str(attempts)])]


@pytest.mark.parametrize("edit, words", [
    ("kind flipped", "calibration.json: kind is 'similarity', but transform 'identity' takes distance scores"),
    ("a threshold moved", "calibration.json: changed since the run wrote it"),
    ("reformatted", "calibration.json: changed since the run wrote it")])
def test_a_run_folders_calibration_changed_since_the_run_is_refused(small_run, tmp_path, edit, words):
    """The audit's repro: `kind` flipped in a run folder's calibration.json inverted every decision (95% FPR),
    silently. Now the score direction must be one the transform takes, and whatever a valid document may still
    say differently, the folder's manifest records what the run wrote."""
    out = _run_copy(small_run, tmp_path)
    doc = json.loads((out / "calibration.json").read_text())
    doc.pop("digest")  # as a hand edit that also drops the digest would leave it
    if edit == "kind flipped":
        doc.update(kind="similarity", accept_if="score >= t")
    elif edit == "a threshold moved":
        doc["estimators"]["class-interp"]["state"]["values"][0] /= 2
    (out / "calibration.json").write_text(json.dumps(doc, indent=1))
    with pytest.raises(CalibrationError, match=re.escape(f"{out}/{words}")):
        calibrate.load(out)
    for result in _commands(out, small_run / "attempts", tmp_path):
        _one_line(result, words)
    assert not (tmp_path / "d.csv").exists()


def test_a_run_folder_without_its_manifest_or_with_a_damaged_one_is_refused(small_run, tmp_path):
    out = _run_copy(small_run, tmp_path)
    assert calibrate.load(out).threshold("c01", 0.05) > 0
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(CalibrationError, match="manifest.json: the run's manifest is damaged"):
        calibrate.load(out)
    (out / "manifest.json").unlink()
    with pytest.raises(CalibrationError, match="the folder holds no manifest.json"):
        calibrate.load(out)
    _one_line(runner.invoke(app, ["threshold", str(out), "--class", "c01", "--fpr", "0.05"]), "holds no manifest.json")


def test_a_saved_file_carries_a_digest_of_its_content(small_run, tmp_path):
    """A calibration file is checked by the digest saved in it: a copy re-indented by another tool loads, an edit
    is refused, a file without one (older, or written by hand) loads with a note saying it could not be checked."""
    path = tmp_path / "cal.json"
    calibrate.load(small_run / "out").save(path)
    doc = json.loads(path.read_text())
    assert doc["digest"].startswith("sha256:") and path.read_text().endswith(f'"digest":"{doc["digest"]}"}}\n')
    path.write_text(json.dumps(doc, indent=2, sort_keys=False))
    want = calibrate.load(path).threshold("c01", 0.05)
    values = doc["estimators"]["class-interp"]["state"]["values"]
    values[0] /= 2  # still a valid document, with other thresholds
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=r"cal.json: the calibration was changed after calibrate wrote it"):
        calibrate.load(path)
    _one_line(runner.invoke(app, ["threshold", str(path), "--class", "c01", "--fpr", "0.05"]),
              "cal.json: the calibration was changed after calibrate wrote it")
    values[0] *= 2
    del doc["digest"]
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="cal.json holds no content digest"):
        assert calibrate.load(path).threshold("c01", 0.05) == want
    done = runner.invoke(app, ["threshold", str(path), "--class", "c01", "--fpr", "0.05"])
    assert done.exit_code == 0 and "note: " in done.stderr and "holds no content digest" in done.stderr


@pytest.fixture(scope="module")
def normalised_run(tmp_path_factory) -> Path:
    return snorm_run(tmp_path_factory.mktemp("snorm"))


def snorm_run(tmp: Path) -> Path:
    """``tmp``, holding a run normalised with S-norm (class-interp) in ``out`` and the bob score lists and cohort
    files it read."""
    bob = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"
    for name in ("scores-dev", "scores-eval", "cohort-znorm", "cohort-tnorm"):
        shutil.copy(bob / name, tmp / name)
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                               "kind": "similarity", "missing": -1, "cohort_enrolled": "cohort-znorm",
                               "cohort_probes": "cohort-tnorm"},
        "normalizer": {"plugin": "snorm"}, "estimators": [{"plugin": "class-interp"}],
        "evaluation": {"targets": [0.05], "prediction": False}, "output": {"dir": str(tmp / "out"), "plots": False}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(tmp / "r.yaml")
    return tmp


@pytest.mark.parametrize("edit", ["std 1e-300", "std 1e308", "std negative", "normalizer removed"])
def test_a_changed_normaliser_is_refused_in_the_folder_and_in_the_file(normalised_run, tmp_path, edit):
    """The audit's repros: a normaliser's std set to 1e-300 or 1e308, or negative, or the normaliser removed (z
    thresholds applied to raw scores): each was used silently."""
    out = tmp_path / "out"
    shutil.copytree(normalised_run / "out", out)
    doc = json.loads((out / "calibration.json").read_text())
    stats = doc["normalizer"]["statistics"]
    if edit == "normalizer removed":
        del doc["normalizer"]
    else:
        stats["std"] = {"std 1e-300": [1e-300] * len(stats["std"]), "std 1e308": [1e308] * len(stats["std"]),
                        "std negative": [-s for s in stats["std"]]}[edit]
    (out / "calibration.json").write_text(json.dumps(doc))
    # a spread no normaliser makes is named as such (the fields are checked first); the others by the digest, or
    # (normalizer removed: z values read as distances) by their range, when one lies beyond the training distances
    named = {"std 1e-300": "rounding, not spread", "std negative": r"\(negative\)",
             "normalizer removed": r"changed after calibrate wrote it|state\.values\[\d+\] is .*: outside \["
             }.get(edit, "changed after calibrate wrote it")
    with pytest.raises(CalibrationError, match=named):
        calibrate.load(out / "calibration.json")
    args = [str(normalised_run / "scores-eval"), "--missing", "-1", "--cohort", str(normalised_run / "cohort-tnorm")]
    for target in (out, out / "calibration.json"):
        _one_line(runner.invoke(app, ["accept", str(target), *args, "--fpr", "0.05", "--out", str(tmp_path / "d.csv")]),
                  "calibration.json: ")
        _one_line(runner.invoke(app, ["evaluate", str(target), *args]), "calibration.json: ")
    assert not (tmp_path / "d.csv").exists()


def test_a_normaliser_without_a_statistic_it_computes_is_refused_naming_it(normalised_run, tmp_path):
    """The audit's repro: `normalizer.statistics` without `std` loaded, then failed at the first decision with a
    KeyError (exit 1)."""
    doc = json.loads((normalised_run / "out" / "calibration.json").read_text())
    del doc["normalizer"]["statistics"]["std"], doc["digest"]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match="normalizer.statistics holds mean, but it computes mean, std"):
        calibrate.load(path)
    _one_line(runner.invoke(app, ["accept", str(path), str(normalised_run / "scores-eval"), "--missing", "-1",
                                  "--cohort", str(normalised_run / "cohort-tnorm"), "--fpr", "0.05", "--out",
                                  str(tmp_path / "d.csv")]), "normalizer.statistics holds mean")


@pytest.fixture(scope="module")
def predicted(tmp_path_factory) -> tuple[Path, dict]:
    """`calibrate fit`'s file (class-interp, with its predicted intervals, per class too) and a score list."""
    tmp = tmp_path_factory.mktemp("predicted")
    bob = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"
    result = runner.invoke(app, ["fit", str(bob / "scores-dev"), "--missing", "-1", "--estimator", "class-interp",
                                 "--fpr", "0.05", "--fpr", "0.01", "--out", str(tmp / "cal.json")])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp / "cal.json").read_text())
    del doc["digest"]  # each case below is a hand edit: the fields' own checks must refuse it
    return bob / "scores-eval", doc


def _prediction_of(doc: dict) -> dict:
    return doc["estimators"]["class-interp"]["prediction"]


@pytest.mark.parametrize("damage, words", [
    (lambda p: p.pop("replicates"), "prediction.replicates must hold one or more lists of 2 rates"),
    (lambda p: p.update(replicates="x"), "prediction.replicates must hold one or more lists of 2 rates"),
    (lambda p: p["replicates"][3].pop(), "prediction.replicates must hold one or more lists of 2 rates"),
    (lambda p: p.update(replicates=[]), "prediction.replicates must hold one or more lists of 2 rates"),
    (lambda p: p.update(replicates=None), "prediction.replicates must hold one or more lists of 2 rates"),
    (lambda p: p["replicates"][0].__setitem__(1, float("nan")), "prediction.replicates[0][1] is nan"),
    (lambda p: p["per_class"]["low"][1].__setitem__(0, None), "prediction.per_class[1][0] has a low end without"),
    (lambda p: p["per_class"]["low"][1].__setitem__(0, -1), "prediction.per_class.low[1][0] is -1"),
    (lambda p: p["per_class"]["high"].pop(), "prediction.per_class.high must hold 30 lists of 2 rates"),
    (lambda p: p.update(predicted_fpr_low=[0.9, 0.001], predicted_fpr_high=[0.01, 0.02]),
     "prediction.predicted_fpr[0] has a low end 0.9 above its high end 0.01"),
    (lambda p: p["predicted_fpr_high"].__setitem__(0, float("nan")), "prediction.predicted_fpr_high[0] is nan"),
    (lambda p: p["predicted_fpr_low"].__setitem__(0, 1.5), "prediction.predicted_fpr_low[0] is 1.5"),
    (lambda p: p.update(level=float("nan")), "prediction.level must be a coverage in (0, 1)"),
], ids=["replicates missing", "replicates a string", "replicates ragged", "replicates empty", "replicates null",
        "a replicate NaN", "a class low null", "a class low of -1", "per-class rows short", "gallery 0.9-0.01",
        "gallery high NaN", "gallery low 1.5", "level NaN"])
def test_a_damaged_predicted_interval_is_one_line_in_every_command(predicted, tmp_path, damage, words):
    """The audit's repros: `evaluate` on damaged replicates and `threshold` on a class low of null were tracebacks
    (exit 1); out-of-range values were printed as they were ("gallery 0.9-0.01", "nan-nan%", a class low of -1)."""
    evaluation, good = predicted
    doc = copy.deepcopy(good)
    damage(_prediction_of(doc))
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=re.escape(words)):
        calibrate.load(path)
    for args in (["threshold", str(path), "--class", "subj01", "--fpr", "0.05"],
                 ["evaluate", str(path), str(evaluation), "--missing", "-1"],
                 ["accept", str(path), str(evaluation), "--missing", "-1", "--fpr", "0.05", "--out", str(tmp_path / "d")]):
        _one_line(runner.invoke(app, args), "cal.json: ", words)


def test_a_class_without_its_own_interval_is_said_not_a_traceback(predicted, tmp_path):
    """Where a class's interval is null at a target (low and high together), `threshold` prints the gallery's."""
    _, good = predicted
    doc = copy.deepcopy(good)
    per = _prediction_of(doc)["per_class"]
    i = per["classes"].index("subj01")
    per["low"][i][0] = per["high"][i][0] = None
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="no content digest"):
        cal = calibrate.load(path)
    with pytest.raises(CalibrationError, match="class 'subj01' has no predicted interval of its own at target 0.05"):
        cal.predicted_fpr(0.05, cls="subj01")
    done = runner.invoke(app, ["threshold", str(path), "--class", "subj01", "--fpr", "0.05"])
    assert done.exit_code == 0 and "predicted long-run FPR (90%, from training data): gallery " in done.stdout
    assert "this class" not in done.stdout


def test_a_sharded_runs_files_are_checked_against_its_manifest(sharded, tmp_path):
    """Every file a sharded run's calibration reads (head, parts, class lists, pooled sample) must be as the run
    wrote it: a part edited consistently, a pooled value moved, class lists swapped are each refused."""
    out = _copy(sharded, tmp_path)
    assert calibrate.load(out, "auto").threshold("c0_1", 0.01) > 0

    def refused(words: str, cls: str = "c0_1") -> None:
        with pytest.raises(CalibrationError, match=words):
            calibrate.load(out, "auto").threshold(cls, 0.01)
        _one_line(runner.invoke(app, ["threshold", str(out), "--class", cls, "--fpr", "0.01", "--estimator", "auto"]),
                  words)

    part = json.loads((out / "calibration-part00000.json").read_text())
    part["estimators"]["class-interp"]["state"]["values"][0] *= 0.5
    del part["digest"]
    (out / "calibration-part00000.json").write_text(json.dumps(part))
    refused("calibration-part00000.json: changed since the run wrote it")
    shutil.copy(sharded / "calibration-part00000.json", out / "calibration-part00000.json")
    pooled = np.load(out / "pooled-auto.npy")
    pooled[0] *= 0.5
    np.save(out / "pooled-auto.npy", pooled)
    refused("pooled-auto.npy: changed since the run wrote it")
    shutil.copy(sharded / "pooled-auto.npy", out / "pooled-auto.npy")
    first, second = (out / "classes-part00000.json").read_bytes(), (out / "classes-part00001.json").read_bytes()
    (out / "classes-part00000.json").write_bytes(second)
    (out / "classes-part00001.json").write_bytes(first)
    refused("classes-part00000.json: changed since the run wrote it")
    shutil.copy(sharded / "classes-part00000.json", out / "classes-part00000.json")
    shutil.copy(sharded / "classes-part00001.json", out / "classes-part00001.json")
    head = json.loads((out / "calibration.json").read_text())
    head["targets"] = [0.02]
    (out / "calibration.json").write_text(json.dumps(head))
    refused("calibration.json: changed since the run wrote it")
    _reseal(out, "calibration.json")  # the checks stand without the manifest's help too
    assert calibrate.load(out, "auto").threshold("c0_1", 0.01) > 0
    (out / "manifest.json").unlink()
    refused("holds no manifest.json")
    refused("holds no manifest.json")  # through the head's own path as well
    with pytest.raises(CalibrationError, match="holds no manifest.json"):
        calibrate.load(out / "calibration.json", "auto")


def test_a_recipe_naming_a_symbolic_link_loop_is_one_line(tmp_path):
    """The audit's repro: a data path that is a symbolic-link loop was a RuntimeError (exit 1) in `run` and
    `validate`."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "version": 1, "data": {"plugin": "score-list", "train": "loop", "kind": "similarity"},
        "estimators": [{"plugin": "class-interp"}], "output": {"dir": str(tmp_path / "out")}}))
    for command in ("validate", "run"):
        _one_line(runner.invoke(app, [command, str(tmp_path / "r.yaml")]), "data.train in ", "a symbolic-link loop")
    with pytest.raises(calibrate.errors.RecipeError, match="a symbolic-link loop"):
        calibrate.validate(tmp_path / "r.yaml")
