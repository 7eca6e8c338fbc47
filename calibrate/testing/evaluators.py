"""Conformance checks for evaluators, run on :func:`~calibrate.testing.samples.make_evaluation_input`."""

from __future__ import annotations

import json
import math
from pathlib import Path

from calibrate.contract.base import EvaluationInput, Fold, RunContext
from calibrate.errors import DataError
from calibrate.contract.types import EvaluationResult, TargetResult
from calibrate.testing.common import ComponentCase, _build, _params, _tmpdir
from calibrate.testing.samples import make_evaluation_input

#: names the pipeline itself writes; evaluators must not overwrite them
RESERVED_FILES = ("thresholds.csv", "results.json", "report.md", "calibration.json", "models.csv")


def _brute_counts(data: EvaluationInput, label: str, k: int) -> tuple[int, int]:
    fa = attempts = 0
    for fold in data.folds:
        table, test = fold.tables[label], fold.test
        for j, cls in enumerate(test.gallery_classes):
            tau = table.values[table.classes.index(cls), k]
            for i in range(test.shape[0]):
                if test.valid[i, j] and test.probe_classes[i] != cls:
                    attempts += 1
                    fa += bool(test.values[i, j] <= tau)
    return fa, attempts


def _evaluate(case, params, data) -> EvaluationResult:
    res = _build(case, params).evaluate(data, RunContext(seed=0))
    assert isinstance(res, EvaluationResult), f"{case.id}: evaluate() returned {type(res).__name__}, not EvaluationResult"
    return res


def check_evaluator_results(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Results (if any) cover every estimator and target, in order, with ratio = fpr / target and the
    false accepts (distance <= threshold) and impostor attempts of the evaluation data, summed over folds."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    res = _evaluate(case, params, data)
    if not res.estimators:
        return  # an evaluator that only adds report sections or files
    assert set(res.estimators) == set(data.labels), \
        f"{case.id}: results for {sorted(res.estimators)}, expected every estimator {sorted(data.labels)}"
    for label, rows in res.estimators.items():
        assert [r.target_fpr for r in rows] == list(data.targets), \
            f"{case.id}: {label}: results for targets {[r.target_fpr for r in rows]}, expected {list(data.targets)}"
        for k, r in enumerate(rows):
            assert isinstance(r, TargetResult), f"{case.id}: results must be TargetResult, got {type(r).__name__}"
            fa, attempts = _brute_counts(data, label, k)
            assert (r.false_accepts, r.impostor_attempts) == (fa, attempts), \
                f"{case.id}: {label} at {r.target_fpr}: {r.false_accepts}/{r.impostor_attempts} false accepts/attempts, " \
                f"expected {fa}/{attempts} (accept when distance <= threshold, summed over folds)"
            assert math.isclose(r.fpr, fa / attempts, rel_tol=1e-12), f"{case.id}: fpr {r.fpr} != {fa}/{attempts}"
            assert math.isclose(r.ratio, r.fpr / r.target_fpr, rel_tol=1e-12), \
                f"{case.id}: ratio {r.ratio} != fpr / target = {r.fpr / r.target_fpr}"
            assert r.fnr is None or 0.0 <= r.fnr <= 1.0, f"{case.id}: fnr {r.fnr} is not in [0, 1]"
            json.dumps(r.as_dict(), default=str)


def check_evaluator_outputs(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Report sections are markdown strings; files are bytes under plain names that do not overwrite
    the pipeline's own outputs; with plots off, no pictures are made."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for plots in (True, False):
        res = _evaluate(case, params, make_evaluation_input(plots=plots))
        assert all(isinstance(s, str) for s in res.sections), f"{case.id}: report sections must be strings"
        for name, content in res.files.items():
            assert isinstance(name, str) and name and "/" not in name and "\\" not in name and not name.startswith("."), \
                f"{case.id}: output file name {name!r} must be a plain file name"
            assert name not in RESERVED_FILES, f"{case.id}: must not overwrite the pipeline's {name}"
            assert isinstance(content, bytes), f"{case.id}: file {name!r} content must be bytes"
        if not plots:
            pictures = [n for n in res.files if n.lower().endswith((".png", ".svg", ".pdf"))]
            assert not pictures, f"{case.id}: wrote pictures {pictures} although plots are off"


def check_evaluator_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Evaluating the same input twice gives the same results."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    a, b = _evaluate(case, params, data), _evaluate(case, params, data)
    da = {k: [r.as_dict() for r in v] for k, v in a.estimators.items()}
    db = {k: [r.as_dict() for r in v] for k, v in b.estimators.items()}
    assert json.dumps(da, sort_keys=True, default=str) == json.dumps(db, sort_keys=True, default=str), \
        f"{case.id}: two evaluations of the same input differ"


def check_evaluator_rejects_bad_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Negative evaluation distances, or similarities, are refused with DataError."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    fold = data.folds[0]
    for what, test in (("negative distances", fold.test.with_values(fold.test.values - 10.0)),
                       ("similarity scores", fold.test.with_values(fold.test.values, kind="similarity"))):
        bad = EvaluationInput((Fold(fold.name, fold.train, test, fold.models, fold.tables),), data.targets, False)
        try:
            _evaluate(case, params, bad)
        except DataError:
            continue
        raise AssertionError(f"{case.id}: evaluation data with {what} was accepted; it must raise DataError")


CHECKS = (check_evaluator_results, check_evaluator_outputs, check_evaluator_deterministic,
          check_evaluator_rejects_bad_input)
