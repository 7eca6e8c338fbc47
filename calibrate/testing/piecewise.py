"""Conformance checks for fits made in pieces: a class enrolled into a fitted model
(``Estimator.enroll``, for estimators with an ``enroll_mode``), and a fit made shard by shard
(``Estimator.partitioned``, or ``fit`` per shard for a "per-class" estimator). Both must give what the
documentation promises against an ordinary fit on every class, within the tolerances stated here."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np

from calibrate.contract.base import FittedModel, RunContext, ScoreSplit, Transform
from calibrate.errors import DataError, RecipeError
from calibrate.contract.sharded import ShardJob, ShardRunner, fitter_for, shard_data
from calibrate.contract.types import DistanceMatrix, ImpostorDistances
from calibrate.testing.common import CheckSkipped, ComponentCase, _build, _close, _params, _tmpdir
from calibrate.testing.samples import TARGETS, make_impostors

#: enroll and shard-by-shard fits repeat the in-memory fit's formulas on the same numbers, perhaps
#: summed in another order: thresholds must agree within this relative tolerance
PIECEWISE_RTOL = 1e-9
#: the sample's classes, split into shards: the second shard holds the tied class and the largest
SHARDS = ((0, 1, 3), (2, 4))


def _by_class(model: FittedModel, classes) -> np.ndarray:
    """The model's thresholds at TARGETS for ``classes``, in that order."""
    return np.stack([[model.threshold(c, t) for t in TARGETS] for c in classes])


def _subset(impostors: ImpostorDistances, rows) -> ImpostorDistances:
    return ImpostorDistances.from_lists({impostors.classes[i]: impostors.of(i) for i in rows})


def _differs(case: ComponentCase, got: np.ndarray, want: np.ndarray, classes, what: str) -> None:
    if _close(got, want, rtol=PIECEWISE_RTOL, atol=1e-300):
        return
    i, k = np.argwhere(~np.isclose(got, want, rtol=PIECEWISE_RTOL, atol=1e-300, equal_nan=True))[0]
    raise AssertionError(f"{case.id}: {what}: class {classes[i]!r} at target {TARGETS[k]} gets {got[i, k]!r}, but a fit "
                         f"on every class gives {want[i, k]!r} (relative tolerance {PIECEWISE_RTOL})")


def check_estimator_enroll(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """For an estimator with an ``enroll_mode``: "per-class", a class enrolled into a model fitted without it
    gives every class the thresholds of a fit that includes it; "pooled", the other classes keep their
    thresholds exactly and the enrolled one gets finite ones, and re-enrolling a fitted class with its own
    distances gives the full fit's thresholds (pooled quantities as fitted). Relative tolerance 1e-9."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    est = _build(case, params)
    if est.enroll_mode is None:
        raise CheckSkipped(f"{case.id} has no enroll_mode (it cannot add one class; Calibration.enroll refuses it)")
    imp = make_impostors()
    full = est.fit(imp, RunContext(seed=0))
    new = imp.classes[2]  # the class with ties, fitted last after the others
    without = est.fit(_subset(imp, [i for i in range(len(imp)) if imp.classes[i] != new]), RunContext(seed=0))
    before = _by_class(without, without.classes)
    enrolled = _build(case, params).enroll(without, new, imp.of(2).copy())
    assert isinstance(enrolled, case.factory.model_class), \
        f"{case.id}: enroll returned {type(enrolled).__name__}, not the model_class {case.factory.model_class.__name__}"
    assert set(enrolled.classes) == set(imp.classes), \
        f"{case.id}: after enrolling {new!r} the model holds {enrolled.classes}, expected {imp.classes}"
    if est.enroll_mode == "per-class":
        _differs(case, _by_class(enrolled, imp.classes), _by_class(full, imp.classes), imp.classes,
                 f"enroll_mode 'per-class', after enrolling {new!r}")
        return
    _differs(case, _by_class(enrolled, without.classes), before, without.classes,
             f"enroll_mode 'pooled': enrolling {new!r} changed another class's threshold")
    own = _by_class(enrolled, [new])
    assert np.all(np.isfinite(own)) and np.all(np.diff(own[0]) >= -1e-12 * np.abs(own[0][1:])), \
        f"{case.id}: the enrolled class {new!r} gets thresholds {own[0].tolist()}; they must be finite and non-decreasing"
    again = _build(case, params).enroll(full, new, imp.of(2).copy())
    _differs(case, _by_class(again, imp.classes), _by_class(full, imp.classes), imp.classes,
             f"enroll_mode 'pooled': re-enrolling {new!r} with its own distances")


class _Identity(Transform):
    """Distances as they are (the shards below hold distances)."""

    accepts = ("distance",)

    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        return values


class _ImpostorShards:
    """A sharded dataset holding the kit's sample, as ``read_shard`` gives it to a run: each class a gallery
    column, each of its training distances a probe of no enrolled class."""

    def __init__(self, impostors: ImpostorDistances, shards=SHARDS):
        self.parts = [{impostors.classes[i]: impostors.of(i).copy() for i in rows} for rows in shards]

    def read_shard(self, shard: tuple[str, ...], column_offset: int):
        per = self.parts[int(shard[0])]
        classes = list(per)
        n = sum(v.size for v in per.values())
        values, valid = np.zeros((n, len(classes))), np.zeros((n, len(classes)), dtype=bool)
        at = 0
        for j, c in enumerate(classes):
            values[at:at + per[c].size, j], valid[at:at + per[c].size, j] = per[c], True
            at += per[c].size
        m = DistanceMatrix(values, np.array(["impostor"] * n), np.array(classes), valid, "distance", source="kit shard")
        return ScoreSplit(m, m), len(classes), 0, []


def _adopted_files(case: ComponentCase, fitter, scratch: Path) -> None:
    """The files a fitter says ``reduce`` wrote are there, with the size and SHA-256 it gives."""
    for name, size, sha in getattr(fitter, "files", ()):
        path = scratch / name
        assert path.is_file(), f"{case.id}: the fitter's files lists {name!r}, which is not in runner.scratch"
        data = path.read_bytes()
        assert len(data) == size and hashlib.sha256(data).hexdigest() == sha, \
            f"{case.id}: the fitter's files entry for {name!r} does not match the file (use calibrate.contract.sharded.write_staged)"


def check_estimator_partitioned(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """For an estimator that can fit sharded data (``partitioned()``, or ``enroll_mode`` "per-class"): the
    kit's sample in two shards, reduced over both, the fitter pickled (it travels to the workers), then each
    shard's part fitted: every class gets the thresholds of an in-memory fit on all classes (relative 1e-9),
    and the files the fitter lists are as written."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        est = _build(case, params)
        try:
            fitter = fitter_for(est, case.name or "kit")
        except RecipeError:
            raise CheckSkipped(f"{case.id} cannot fit sharded data (partitioned() gives None and its enroll_mode is "
                               "not 'per-class'; a sharded run refuses it)") from None
        imp = make_impostors()
        full = _build(case, params).fit(imp, RunContext(seed=0))
        data = _ImpostorShards(imp)
        jobs = [ShardJob(data, (str(k),), 0, k, _Identity()) for k in range(len(SHARDS))]
        positive = imp.values[imp.values > 0]
        runner = ShardRunner(RunContext(seed=0), jobs, tmp, float(imp.values.min()),
                             float(positive.min()) if positive.size else np.inf)
        fitter.reduce(runner, TARGETS, "kit")
        _adopted_files(case, fitter, tmp)
        try:
            fitter = pickle.loads(pickle.dumps(fitter))
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: the partitioned fitter cannot be pickled ({type(exc).__name__}: {exc}); "
                                 "it is sent to the workers after reduce") from exc
        for job in jobs:
            part = fitter.fit_part(shard_data(job, evaluation=False)[0])
            assert isinstance(part, fitter.model_class), \
                f"{case.id}: fit_part returned {type(part).__name__}, not the fitter's model_class"
            classes = list(part.classes)
            try:
                got = _by_class(part, classes)
            except DataError as exc:
                raise AssertionError(f"{case.id}: the part fitted on shard {job.index} gives no thresholds: {exc}") from exc
            _differs(case, got, _by_class(full, classes), classes, f"fitted shard by shard (shard {job.index})")


CHECKS = (check_estimator_enroll, check_estimator_partitioned)
