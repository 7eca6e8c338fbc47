"""Decisions on class codes (calibrate.saved.decisions, Calibration.codes and .decider): the very decisions of
Calibration.accept, and of a comparison per attempt with Calibration.threshold; bad input is one clear error."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import calibrate
from calibrate.contract.types import CodedLabels
from calibrate.errors import CalibrationError
from calibrate.saved.decisions import BLOCK

TARGETS = (0.05, 0.01, 0.003)


def _calibration(kind: str, estimator: str, seed: int = 0, n_classes: int = 30, n: int = 400):
    rng = np.random.default_rng(seed)
    if kind == "similarity":
        per_class = {f"c{i:02d}": rng.beta(2, 6, n) * 100 for i in range(n_classes)}
    else:  # distances, a scale per class so that per-class thresholds differ
        per_class = {f"c{i:02d}": rng.gamma(5, rng.uniform(0.5, 2.0), n) for i in range(n_classes)}
    return calibrate.fit(per_class, kind=kind, estimator=estimator, impostors_only=True)


def _attempts(cal, target: float, n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """n attempts on random classes: random scores over the training range, and every class's threshold with the
    floats next to it (where a decision turns), shuffled."""
    rng = np.random.default_rng(seed)
    t = np.array([cal.threshold(c, target) for c in cal.classes])
    edge = np.concatenate([np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf)])
    edge_codes = np.tile(np.arange(len(cal)), 3)
    low, high = cal.training_scores[:2]
    codes = np.concatenate([rng.integers(0, len(cal), n), edge_codes])
    scores = np.concatenate([rng.uniform(low, high, n), edge])
    order = rng.permutation(codes.size)
    return codes[order], scores[order]


@pytest.mark.parametrize("kind", ["similarity", "distance"])
@pytest.mark.parametrize("estimator", ["auto", "class-interp"])
def test_coded_decisions_are_accepts_and_a_comparison_per_attempt(kind, estimator, tmp_path):
    fitted = _calibration(kind, estimator)
    fitted.targets = (0.01,)
    loaded = calibrate.load(fitted.save(tmp_path / "cal.json"))  # a saved calibration: reach 0.1
    names = np.array(fitted.classes)
    for cal in (fitted, loaded):
        for target in TARGETS:
            codes, scores = _attempts(cal, target, 3 * BLOCK + 17)  # several blocks and a part of one
            decide = cal.decider(target)
            assert decide.accept_if == cal.accept_if and decide.kind == kind and decide.classes == cal.classes
            assert decide.thresholds.tolist() == [cal.threshold(c, target) for c in cal.classes]
            got = decide(codes, scores)
            assert got.dtype == bool and np.array_equal(got, cal.accept(names[codes], scores, target))
            # independent of the arrays: Python's comparison of each attempt with its class's threshold
            some = np.random.default_rng(2).choice(codes.size, 3000, replace=False)
            by_hand = [(s >= cal.threshold(names[c], target)) if kind == "similarity"
                       else (s <= cal.threshold(names[c], target)) for c, s in zip(codes[some], scores[some])]
            assert got[some].tolist() == by_hand
            assert 0 < got.mean() < 1  # both decisions occur
    # the loaded calibration decides as the fitted one
    codes, scores = _attempts(fitted, 0.01, 10_000)
    assert np.array_equal(loaded.decider(0.01)(codes, scores), fitted.decider(0.01)(codes, scores))


def test_codes_are_positions_in_classes_and_any_integer_array_is_taken():
    cal = _calibration("similarity", "class-interp")
    names = np.array(cal.classes)
    codes, scores = _attempts(cal, 0.01, 50_000)
    assert np.array_equal(cal.codes(names[codes]), codes) and cal.codes(names[codes]).dtype == np.int64
    assert np.array_equal(cal.codes(names[codes].tolist()), codes)
    assert np.array_equal(cal.codes(CodedLabels.of(codes, names)), codes)
    assert cal.codes("c03").tolist() == [3] and cal.codes([]).size == 0
    decide = cal.decider(0.01)
    want = cal.accept(names[codes], scores, 0.01)
    for dtype in (np.int8, np.int32, np.int64, np.uint16, np.uint64):
        assert np.array_equal(decide(codes.astype(dtype), scores), want), dtype
    assert np.array_equal(decide(codes.tolist(), scores.tolist()), want)
    assert np.array_equal(decide(codes[::2], scores[::2]), want[::2])  # views with a stride
    low = scores.astype(np.float32)  # converted to float64, as accept converts
    assert np.array_equal(decide(codes, low), cal.accept(names[codes], low, 0.01))
    out = np.zeros(codes.size, bool)
    assert decide(codes, scores, out=out) is out and np.array_equal(out, want)
    assert decide(np.zeros(0, np.int64), np.zeros(0)).shape == (0,)
    big = np.array([1e308, 1e308, -1e308])  # finite scores whose sum overflows: decided, not refused
    assert decide(np.array([0, 1, 2]), big).tolist() == [True, True, False]


def test_bad_input_is_one_clear_error():
    cal = _calibration("similarity", "auto")
    decide = cal.decider(0.01)
    n, m = len(cal), 2 * BLOCK + 10
    codes, scores = np.zeros(m, np.int64), np.full(m, 50.0)

    def refused(message: str, c, s, **kw) -> None:
        with pytest.raises(CalibrationError, match=re.escape(message)):
            decide(c, s, **kw)

    for bad, at in ((-1, 0), (n, BLOCK + 5), (10**12, m - 1)):
        c = codes.copy()
        c[at] = bad
        refused(f"class code number {at + 1} is {bad}, not a code of this calibration's {n} classes (0..{n - 1}); "
                "get the codes from Calibration.codes(names)", c, scores)
    for bad in (np.nan, np.inf, -np.inf):
        s = scores.copy()
        s[BLOCK + 7] = bad
        refused(f"score number {BLOCK + 8} is {bad}; every score must be a finite number", codes, s)
    refused("class codes must be integers (positions in the calibration's classes), got float64", codes * 1.0, scores)
    refused("class codes must be integers", codes.astype(bool), scores)
    refused("class codes must be integers", np.array(cal.classes[:3]), scores[:3])
    refused("scores must be real numbers (one per attempt, in score units), got <U4", codes[:2], ["50.0", "1"])
    refused("codes and scores must be one-dimensional, got shapes (2, 3) and (6,)", np.zeros((2, 3), int), scores[:6])
    refused(f"{m} codes but {m - 1} scores; give one class code per score", codes, scores[1:])
    refused(f"out must be a boolean array of shape ({m},), got float64 of shape ({m},)", codes, scores,
            out=np.zeros(m))
    refused(f"out must be a boolean array of shape ({m},), got bool of shape (3,)", codes, scores,
            out=np.zeros(3, bool))
    with pytest.raises(CalibrationError, match=re.escape("class 'nobody' is not enrolled in this calibration")):
        cal.codes(["c01", "nobody"])
    for target in (0, 1.5, "often"):
        with pytest.raises(CalibrationError, match=re.escape("is not in (0, 1)")):
            cal.decider(target)


def test_a_saved_calibration_refuses_beyond_its_reach_and_a_low_target_warns(tmp_path):
    cal = _calibration("distance", "class-interp")
    cal.targets = (0.001,)
    loaded = calibrate.load(cal.save(tmp_path / "cal.json"))
    with pytest.raises(CalibrationError, match=re.escape("target FPR 0.2 is beyond this saved calibration's reach")):
        loaded.decider(0.2)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cal.decider(1e-5)  # 30 x 400 training impostors: below 1/N
    assert any("below 1/N" in str(w.message) for w in said)
