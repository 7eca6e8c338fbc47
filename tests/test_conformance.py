"""The plugin-author conformance kit (calibrate.testing) run over EVERY built-in component.

Components are read from the registry, so a new built-in is covered automatically. One that
needs parameters (a dataset needs a small sample input; a component with required parameters
needs values), options or an opt-out gets an entry in SPECIAL below; a missing entry fails
``test_every_builtin_has_what_it_needs`` with a message saying what to add.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calibrate.contract.manager import OWN_DISTRIBUTION, build_registry
from calibrate.testing import ComponentCase, parametrize_with_checks


# ---- sample inputs for the datasets (small, written under the test's tmp_path) ---------------

def _npz(tmp: Path) -> dict:
    rng = np.random.default_rng(1)
    labels = np.repeat(["a", "b", "c"], 4)
    sets = np.tile(["s0", "s0", "s1", "s1"], 3)
    path = tmp / "patterns.npz"
    np.savez(path, X=rng.normal(size=(12, 3)), labels=labels, sets=sets)
    return {"path": path}


def _score_csv(tmp: Path) -> dict:
    rng = np.random.default_rng(2)
    gallery = ["g1", "g2", "g3", "g4"]
    lines = ["," + ",".join(gallery)]
    for probe in ["g1", "g2", "g3", "g4", "g1", "g2", "g3", "g4", "x9", "x9"]:
        lines.append(probe + "," + ",".join(f"{v:.4f}" for v in rng.random(4)))
    path = tmp / "scores.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"path": path, "kind": "similarity"}


def _score_list(tmp: Path) -> dict:
    rng = np.random.default_rng(3)
    lines = [f"{claimed} {probe[:2]} {probe} {rng.random():.4f}"
             for probe in ["g1a", "g2a", "g3a", "g1b", "g2b", "g3b", "x9a", "x9b"] for claimed in ["g1", "g2", "g3"]]
    path = tmp / "scores-dev"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"path": path, "kind": "similarity"}


def _score_shards(tmp: Path) -> dict:
    rng = np.random.default_rng(4)
    folder = tmp / "shards"
    folder.mkdir()
    for k, classes in enumerate((["g1", "g2", "g3"], ["g4", "g5"])):
        lines = [f"{claimed} {probe[:2]} {probe} {rng.random():.4f}"
                 for probe in [c + s for c in classes for s in "ab"] + ["x9a", "x9b"] for claimed in classes]
        (folder / f"shard{k}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"path": folder, "kind": "similarity"}


def _genuine_impostor(tmp: Path) -> dict:
    rng = np.random.default_rng(5)
    (tmp / "true.txt").write_text("\n".join(f"{v:.4f}" for v in rng.normal(0.8, 0.1, 12)) + "\n", encoding="utf-8")
    (tmp / "false.txt").write_text("\n".join(f"{v:.4f}" for v in rng.normal(0.3, 0.1, 60)) + "\n", encoding="utf-8")
    return {"genuine": tmp / "true.txt", "impostor": tmp / "false.txt", "kind": "similarity"}


def _gray(path: Path, seed: int, size=(6, 5)) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, size=(size[1], size[0]), dtype=np.uint8), mode="L").save(path)


def _image_tree(tmp: Path) -> dict:
    root = tmp / "images"
    for c in ("alice", "bob", "carol"):
        for s in ("s1", "s2"):
            d = root / c / s
            d.mkdir(parents=True)
            for k in range(2):
                _gray(d / f"{k}.png", hash((c, s, k)) % 1000)
    return {"path": root}


def _yale_tree(tmp: Path) -> dict:
    root = tmp / "CroppedYale"
    lights = ["P00A-035E+15", "P00A+000E+00", "P00A+035E+15", "P00A+060E-20"]
    for i, subject in enumerate(("yaleB01", "yaleB02", "yaleB03")):
        d = root / subject
        d.mkdir(parents=True)
        for k, light in enumerate(lights):
            _gray(d / f"{subject}_{light}.pgm", 10 * i + k)
    return {"path": root, "resize": None, "sets": 2}


#: (kind, name) -> what the conformance checks need for that built-in: ComponentCase keyword
#: arguments (params, make_params, skip, options). Add an entry when a built-in has required
#: parameters or is a dataset; say why when skipping a check.
SPECIAL: dict[tuple[str, str], dict] = {
    ("datasets", "npz-patterns"): {"make_params": _npz},
    ("datasets", "score-matrix"): {"make_params": _score_csv},
    ("datasets", "score-list"): {"make_params": _score_list},
    ("datasets", "score-shards"): {"make_params": _score_shards},
    ("datasets", "genuine-impostor"): {"make_params": _genuine_impostor},
    ("datasets", "synthetic-patterns"): {"params": {"classes": 4, "sets": 2, "samples": 2, "dim": 3},
                                         "make_params": lambda tmp: {}},
    ("datasets", "synthetic-impostors"): {"params": {"classes": 6, "train": 20, "test": 10},
                                          "make_params": lambda tmp: {}},
    ("datasets", "synthetic-groups"): {"params": {"classes": 8, "group_shares": [0.5, 0.5]},
                                       "make_params": lambda tmp: {}},
    ("datasets", "image-sets"): {"make_params": _image_tree},
    ("datasets", "extended-yale-b"): {"make_params": _yale_tree},
    ("executors", "processes"): {"params": {"workers": 1}},
    ("executors", "dask"): {"params": {"workers": 1}},
}


def _builtins():
    return [info for info in build_registry().all() if info.distribution == OWN_DISTRIBUTION]


def _needs_entry(info) -> str | None:
    if info.kind == "datasets":
        return "a dataset needs a sample input: add make_params=lambda tmp_path: {...} writing one under tmp_path"
    required = [p.name for p in info.params if p.required]
    if required:
        return f"required parameter(s) {', '.join(required)}: add params={{...}}"
    return None


def _cases() -> list[ComponentCase]:
    cases = []
    for info in _builtins():
        extra = dict(SPECIAL.get((info.kind, info.name), {}))
        cases.append(ComponentCase(info.kind, info.factory, name=info.name, **extra))
    return cases


def test_every_builtin_has_what_it_needs():
    missing = []
    for info in _builtins():
        reason = _needs_entry(info)
        if reason and (info.kind, info.name) not in SPECIAL:
            missing.append(f"{info.kind[:-1]} {info.name!r}: {reason} in SPECIAL in tests/test_conformance.py")
    assert not missing, "built-ins without conformance parameters:\n" + "\n".join(missing)


def test_special_table_names_only_existing_builtins():
    names = {(info.kind, info.name) for info in _builtins()}
    stale = [key for key in SPECIAL if key not in names]
    assert not stale, f"SPECIAL in tests/test_conformance.py lists components that are not registered: {stale}"


def test_kit_covers_every_kind():
    from calibrate.contract.kinds import NAMES
    from calibrate.testing import KIND_CHECKS

    assert set(KIND_CHECKS) == set(NAMES), \
        "add calibrate/testing/<kind>.py ending with CHECKS = (...) and list it in KIND_CHECKS (calibrate/testing/__init__.py)"


@parametrize_with_checks(_cases())
def test_builtin_conformance(component, check, tmp_path):
    if component.kind == "executors" and component.name == "dask":
        pytest.importorskip("distributed", reason="the dask executor is an optional extra")
    check(component, tmp_path)


# ---- the kit itself: each broken component below must be caught by the named check ----------

from calibrate.contract.base import Distance, Estimator, Evaluator, Transform  # noqa: E402
from calibrate.errors import DataError  # noqa: E402
from calibrate.testing import check_component  # noqa: E402
from calibrate.testing import checks as kit  # noqa: E402
from calibrate.contract.types import EvaluationResult, TargetResult  # noqa: E402

_interp = pytest.importorskip("calibrate_builtins.estimators.interp")


class _Decreasing(_interp._SortedModel):
    def _thresholds(self, targets, rows=None):
        return -super()._thresholds(targets, rows)


class DecreasingEstimator(Estimator):
    """Thresholds that fall as the target FPR grows."""

    model_class = _Decreasing

    def __init__(self):
        pass

    def _fit(self, impostors, context):
        v = _interp.ClassInterp()._fit(impostors, context)
        return _Decreasing(v.classes, v._values, v._offsets, False)


class _Dip(_interp._SortedModel):
    """class-interp's thresholds, halved for targets in (1.2e-3, 2e-3): between the kit's sparse TARGETS
    (1e-3, 2.5e-3), so only a dense grid sees the dip."""

    def _thresholds(self, targets, rows=None):
        out = super()._thresholds(targets, rows)
        return out * np.where((targets > 1.2e-3) & (targets < 2e-3), 0.5, 1.0)[None, :]


class _DipHiddenInOneCall(_Dip):
    """The dip made non-decreasing within each call (a running maximum over the targets asked, as a
    within-array guard would): every array is monotone, yet threshold(c, 1.5e-3) < threshold(c, 1e-3)."""

    def _thresholds(self, targets, rows=None):
        from calibrate.statistics.gpd import monotone

        return monotone(super()._thresholds(targets, rows), targets)


class DipEstimator(Estimator):
    """Non-monotone between the kit's sparse targets."""

    model_class = _Dip

    def __init__(self):
        pass

    def _fit(self, impostors, context):
        v = _interp.ClassInterp()._fit(impostors, context)
        return self.model_class(v.classes, v._values, v._offsets, False)


class DipAcrossCallsEstimator(DipEstimator):
    """Monotone within every call, not between separate calls."""

    model_class = _DipHiddenInOneCall


class LeakyEstimator(Estimator):
    """Keeps the fitted state on the estimator: refitting changes earlier models."""

    model_class = _interp._SortedModel

    def __init__(self):
        self._buffer = None

    def _fit(self, impostors, context):
        values = np.concatenate([np.sort(impostors.of(i)) for i in range(len(impostors))])
        if self._buffer is None or self._buffer.size < values.size:
            self._buffer = np.zeros(1000)
        self._buffer[:values.size] = values
        model = _interp._SortedModel(impostors.classes, self._buffer[:values.size], impostors.offsets, False)
        model._values = self._buffer[:values.size]  # shares the estimator's buffer
        return model


class PositionalEstimator(Estimator):
    """Takes a positional parameter and stores it under another name."""

    model_class = _interp._SortedModel

    def __init__(self, margin: float = 0.0):
        self._margin = margin

    def _fit(self, impostors, context):
        return _interp.ClassInterp()._fit(impostors, context)


class HalfDistance(Distance):
    """Asymmetric (uses only the probe's first feature), NaN-blind, and not zero on the diagonal."""

    def __init__(self):
        pass

    def _pairwise(self, probes, gallery, context):
        a = np.stack([s.mean(axis=0)[0] for s in probes.samples])
        b = np.stack([s.mean(axis=0)[1] for s in gallery.samples])
        return np.abs(a[:, None] - b[None, :]) + 0.5


class Wiggle(Transform):
    """Not monotone."""

    def __init__(self):
        pass

    def _apply(self, values, kind):
        if kind != "distance":
            raise DataError("distances only")
        return values + 0.3 * np.abs(np.sin(40 * values))


class Forgetful(Transform):
    """Learns the largest training score in _fit and has an inverse, but no fitted_state: its saved
    calibration could not be loaded (the issue-21 reproduction)."""

    accepts = ("similarity",)

    def __init__(self):
        self._top = None

    def _fit(self, train):
        self._top = float(train.values[train.valid].max())

    def _apply(self, values, kind):
        return np.maximum(self._top - values, 0.0)

    def _inverse(self, distances, kind):
        return self._top - np.asarray(distances, dtype=np.float64)


class StrictLess(Evaluator):
    """Counts distance < threshold (the contract is <=) and reports a wrong ratio."""

    def __init__(self):
        pass

    def _evaluate(self, data, context):
        out = {}
        for label in data.labels:
            rows = []
            for k, t in enumerate(data.targets):
                fa = n = 0
                for fold in data.folds:
                    table, test = fold.tables[label], fold.test
                    tau = table.values[[table.classes.index(c) for c in test.gallery_classes], k]
                    imp = test.impostor_mask()
                    fa += int(((test.values < tau[None, :]) & imp).sum())
                    n += int(imp.sum())
                rows.append(TargetResult(t, fa / n, fa / n / t, fa, n, None))
            out[label] = rows
        return EvaluationResult("strict", out)


@pytest.mark.parametrize("kind, factory, failing", [
    ("estimator", DecreasingEstimator, "check_estimator_monotone"),
    ("estimator", DecreasingEstimator, "check_estimator_monotone_dense"),
    ("estimator", DipEstimator, "check_estimator_monotone_dense"),
    ("estimator", DipAcrossCallsEstimator, "check_estimator_monotone_dense"),
    ("estimator", LeakyEstimator, "check_estimator_no_shared_state"),
    ("estimator", PositionalEstimator, "check_signature"),
    ("transform", Forgetful, "check_transform_state_round_trip"),
    ("distance", HalfDistance, "check_distance_symmetric"),
    ("distance", HalfDistance, "check_distance_self_zero"),
    ("transform", Wiggle, "check_transform_monotone"),
    ("evaluator", StrictLess, "check_evaluator_results"),
])
def test_kit_catches_broken_components(kind, factory, failing, tmp_path):
    with pytest.raises(AssertionError) as err:
        check_component(kind, factory, {} if factory is not PositionalEstimator else {"margin": 0.5}, tmp_path=tmp_path)
    assert f"  {failing}:" in str(err.value)


@pytest.mark.parametrize("factory", [DipEstimator, DipAcrossCallsEstimator])
def test_dense_monotone_check_catches_what_the_sparse_targets_miss(factory, tmp_path):
    case = ComponentCase("estimator", factory)
    kit.check_estimator_monotone(case, tmp_path)  # the 11 sparse targets straddle the dip
    with pytest.raises(AssertionError, match="a looser target must never give a stricter threshold") as err:
        kit.check_estimator_monotone_dense(case, tmp_path)
    if factory is DipAcrossCallsEstimator:  # every array is monotone: only separate calls show it
        assert "asked one target per call" in str(err.value)


def test_dense_monotone_check_tolerates_rounding_only():
    from calibrate.testing.estimators import MONOTONE_RTOL, _first_fall

    t = np.array([1.0, 1.0 - 0.5 * MONOTONE_RTOL, 2.0])
    assert _first_fall(t) is None
    assert _first_fall(np.array([1.0, 1.0 - 2 * MONOTONE_RTOL, 2.0])) == 0
    assert _first_fall(np.zeros(3)) is None


def test_kit_passes_on_sound_component_and_skips_are_strict_expected_failures(tmp_path):
    outcome = check_component("estimator", _interp.ClassInterp, tmp_path=tmp_path)
    assert all(v == "passed" for v in outcome.values()), outcome
    assert set(outcome) == {f.__name__ for f in kit.checks_for("estimators")}
    # a check listed in skip= that passes is reported: the entry must go once the component is fixed
    with pytest.raises(AssertionError, match=r"check_model_parameters: AssertionError: passes, but skip= lists it"):
        check_component("estimator", _interp.ClassInterp, tmp_path=tmp_path / "again",
                        skip={"check_model_parameters": "not relevant here"})


def test_a_known_failure_listed_in_skip_is_an_expected_failure(tmp_path):
    with pytest.raises(AssertionError) as unlisted:
        check_component("distance", HalfDistance, tmp_path=tmp_path / "a")
    assert "check_distance_self_zero" in str(unlisted.value)
    with pytest.raises(AssertionError) as listed:  # HalfDistance fails other checks too (asymmetric, NaN-blind)
        check_component("distance", HalfDistance, tmp_path=tmp_path / "b",
                        skip={"check_distance_self_zero": "d(A, A) is not 0 by design"})
    assert "check_distance_self_zero" not in str(listed.value)


def test_a_bad_signature_is_one_failure_not_one_per_check(tmp_path):
    class Swallowing(_interp.ClassInterp):
        """Swallows every keyword (the mistake the signature check is for)."""

        def __init__(self, **kwargs):
            super().__init__()

    with pytest.raises(AssertionError) as err:
        check_component("estimator", Swallowing, tmp_path=tmp_path)
    assert "fails 1 conformance check(s)" in str(err.value) and "check_signature" in str(err.value)


def test_nan_input_rejected_by_every_distance_even_when_the_plugin_ignores_it(tmp_path):
    # HalfDistance never looks at NaN; calibrate.contract.base.Distance.pairwise refuses it first
    kit.check_distance_rejects_bad_input(ComponentCase("distance", HalfDistance), tmp_path)


def test_dataset_without_sample_input_is_skipped_with_a_reason():
    from calibrate_builtins.datasets.npz_patterns import NpzPatterns

    outcome = check_component("dataset", NpzPatterns)
    assert outcome.pop("check_signature") == "passed"  # needs no instance
    assert outcome.pop("check_params_have_defaults") == "passed"  # likewise (its input file, path, may be required)
    assert outcome.pop("check_contract") == "passed"  # checked on the class when there is no instance
    assert outcome and all(v.startswith("skipped: ") and "make_params" in v for v in outcome.values())


def test_parametrize_accepts_names_tuples_and_component_infos():
    info = build_registry().get("estimators", "class-interp")
    mark = parametrize_with_checks([("estimator", "class-interp", {}), ("estimators", _interp.GenericInterp), info])
    ids = [p.id for p in mark.args[1]]
    n = len(kit.checks_for("estimators"))
    assert len(ids) == 3 * n
    assert ids[0] == "estimator:class-interp-check_signature"
    assert "estimator:GenericInterp-check_model_parameters" in ids


def test_every_check_is_documented():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text(encoding="utf-8")
    undocumented = [f.__name__ for kind in kit.KIND_CHECKS for f in kit.checks_for(kind) if f"`{f.__name__}`" not in doc]
    assert not undocumented, f"add these checks to the table in docs/plugins.md (Testing your plugin): {undocumented}"


def test_bad_files_are_checked_for_a_path_given_as_a_plain_string(tmp_path):
    """A dataset whose `path: str` reads a file with open(): the kit used to skip the bad-files check
    (no Path annotation); now a missing file's FileNotFoundError is reported."""
    from calibrate.contract.base import Dataset, ScoreSplit
    from calibrate.contract.types import DistanceMatrix

    class CsvByString(Dataset):
        """Reads a matrix of distances with open(), unchecked."""

        produces = "scores"

        def __init__(self, *, path: str):
            self.path = path

        def _load(self, context):
            rows = [line.split(",") for line in open(self.path, encoding="utf-8")]  # noqa: SIM115
            values = np.array(rows, dtype=float)
            m = DistanceMatrix(values, np.array([f"p{i}" for i in range(len(values))]),
                               np.array([f"g{j}" for j in range(values.shape[1])]), kind="distance", source=self.path)
            return ScoreSplit(m, m)

    def sample(tmp):
        (tmp / "m.csv").write_text("1,2\n3,4\n", encoding="utf-8")
        return {"path": str(tmp / "m.csv")}

    with pytest.raises(AssertionError, match=r"check_dataset_bad_files: AssertionError: .*path= a missing file raised"):
        check_component("dataset", CsvByString, make_params=sample, tmp_path=tmp_path)
