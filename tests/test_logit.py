"""Transforms neg-log-complement and shifted-logit against direct formulas (scipy.special.logit),
monotonicity, and their domain errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logit

from calibrate.errors import DataError, ParameterError
from calibrate.contract.manager import build_registry
from calibrate.contract.types import DistanceMatrix
from calibrate_builtins.transforms.logit import NegLogComplement, ShiftedLogit


def matrix(values, kind="distance", valid=None) -> DistanceMatrix:
    values = np.asarray(values, float)
    n = values.shape[0]
    return DistanceMatrix(values, [f"c{i}" for i in range(n)], [f"c{j}" for j in range(values.shape[1])],
                          valid=valid, kind=kind)


def sample(seed=0):
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.0, 0.999, size=(6, 6))
    d[0, 0] = 0.0
    return d


def test_neg_log_complement_formula():
    d = sample()
    out = NegLogComplement().apply(matrix(d))
    np.testing.assert_allclose(out.values, np.log(1.0 / (1.0 - d)), rtol=1e-13, atol=1e-300)
    assert out.kind == "distance" and out.values[0, 0] == 0.0
    # accurate for tiny distances where 1 - d rounds: -log(1 - d) ~ d
    assert NegLogComplement().apply(matrix([[1e-17]])).values[0, 0] == pytest.approx(1e-17, rel=1e-12)


@pytest.mark.parametrize("eps", [1e-3, 0.25, 1.0, 40.0])
def test_shifted_logit_formula(eps):
    d = sample(1)
    out = ShiftedLogit(eps=eps).apply(matrix(d)).values
    want = logit((d + eps) / (1 + eps)) - logit(eps / (1 + eps))
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
    assert out[0, 0] == 0.0


def test_shifted_logit_special_cases():
    d = np.linspace(0, 0.99, 50)[None, :]
    np.testing.assert_allclose(ShiftedLogit(eps=1.0).apply(matrix(d)).values, 2 * np.arctanh(d), rtol=1e-12, atol=1e-15)
    # large eps tends to neg-log-complement
    np.testing.assert_allclose(ShiftedLogit(eps=1e9).apply(matrix(d)).values,
                               NegLogComplement().apply(matrix(d)).values, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("transform", [NegLogComplement(), ShiftedLogit(), ShiftedLogit(eps=1e-4)])
def test_strictly_increasing_from_zero_to_infinity(transform):
    d = np.concatenate([[0.0], np.logspace(-12, -1e-9, 400), [1 - 1e-12]])[None, :]
    t = transform.apply(matrix(d)).values[0]
    assert t[0] == 0.0
    assert np.all(np.diff(t) > 0)
    assert t[-1] > 20


def test_invalid_entries_are_left_alone():
    d = np.array([[0.2, 7.0], [-3.0, 0.4]])
    valid = np.array([[True, False], [False, True]])
    out = NegLogComplement().apply(matrix(d, valid=valid))
    np.testing.assert_allclose(out.values[valid], -np.log1p(-d[valid]))
    np.testing.assert_array_equal(out.values[~valid], d[~valid])


@pytest.mark.parametrize("cls", [NegLogComplement, ShiftedLogit])
def test_domain_errors_name_count_range_and_fix(cls):
    with pytest.raises(DataError, match=r"2 of 4 distance\(s\) outside the allowed range \[0, 1\).*2 equal to 1.*clip:"):
        cls().apply(matrix([[0.1, 1.0], [1.0, 0.5]]))
    with pytest.raises(DataError, match=r"1 of 4 .*smallest -0.2.*identity"):
        cls().apply(matrix([[0.1, -0.2], [0.3, 0.5]]))
    with pytest.raises(DataError, match=r"1 of 4 .*largest 1.5"):
        cls(clip=1e-6).apply(matrix([[0.1, 1.5], [0.3, 0.5]]))


@pytest.mark.parametrize("cls", [NegLogComplement, ShiftedLogit])
def test_clip_caps_at_one_minus_clip(cls):
    out = cls(clip=1e-3).apply(matrix([[1.0, 0.9995], [0.999, 0.5]])).values
    capped = cls().apply(matrix([[0.999]])).values[0, 0]
    assert out[0, 0] == out[0, 1] == out[1, 0] == capped
    assert out[1, 1] == cls().apply(matrix([[0.5]])).values[0, 0]


@pytest.mark.parametrize("cls", [NegLogComplement, ShiftedLogit])
def test_similarities_are_rejected(cls):
    with pytest.raises(DataError, match="similarity-to-distance"):
        cls().apply(matrix([[0.2, 0.3], [0.4, 0.5]], kind="similarity"))


def test_parameters_are_validated():
    for bad in (0, 1, -0.1, float("nan"), True):
        with pytest.raises(ParameterError, match="clip"):
            NegLogComplement(clip=bad)
    for bad in (0, -1.0, float("inf"), False):
        with pytest.raises(ParameterError, match="eps"):
            ShiftedLogit(eps=bad)


def test_registered():
    registry = build_registry()
    assert registry.get("transforms", "neg-log-complement").factory is NegLogComplement
    assert registry.get("transforms", "shifted-logit").factory is ShiftedLogit
