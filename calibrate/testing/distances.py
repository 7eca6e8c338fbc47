"""Conformance checks for distances."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calibrate.contract.base import RunContext
from calibrate.errors import DataError
from calibrate.contract.types import SetCollection
from calibrate.testing.common import ComponentCase, _build, _close, _fmt_bad, _params, _tmpdir
from calibrate.testing.samples import SEED, make_sets


def _sets(case: ComponentCase, seed: int = SEED, n_classes: int = 4, sets_per_class: int = 2) -> SetCollection:
    return make_sets(seed, n_classes, sets_per_class, int(case.options.get("samples_per_set", 8)),
                     int(case.options.get("n_features", 10)))


def _subset(sets: SetCollection, idx) -> SetCollection:
    idx = list(idx)
    return SetCollection(tuple(sets.samples[i] for i in idx), sets.classes[idx], sets.ids[idx])


def _pairwise(case, params, probes, gallery) -> np.ndarray:
    dist = _build(case, params)
    out = dist.pairwise(probes, gallery, RunContext(seed=0))
    assert isinstance(out, np.ndarray) and out.shape == (len(probes), len(gallery)), \
        f"{case.id}: pairwise returned shape {getattr(out, 'shape', None)}, expected {(len(probes), len(gallery))}"
    return out


def _dtol(d: np.ndarray) -> float:
    return 1e-7 * max(1.0, float(np.abs(d).max()))


def check_distance_output(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``pairwise(probes, gallery)`` has shape (probes, gallery) and finite, non-negative entries."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1, n_classes=3, sets_per_class=1)
    d = _pairwise(case, params, probes, gallery)
    assert np.all(np.isfinite(d)), f"{case.id}: non-finite distances at {_fmt_bad(~np.isfinite(d))}"
    assert np.all(d >= 0), f"{case.id}: negative distances at {_fmt_bad(d < 0)} (min {d.min()!r}); clip rounding errors at 0"


def check_distance_symmetric(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Comparing a collection with itself gives a symmetric matrix."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    sets = _sets(case)
    d = _pairwise(case, params, sets, sets)
    assert _close(d, d.T, rtol=1e-7, atol=_dtol(d)), \
        f"{case.id}: pairwise(A, A) is not symmetric (max |d - d.T| = {np.abs(d - d.T).max():.3g})"


def check_distance_self_zero(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """d(A, A) is about 0 (opt out with skip={'check_distance_self_zero': reason})."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    sets = _sets(case)
    d = _pairwise(case, params, sets, sets)
    diag = np.diag(d)
    assert np.all(np.abs(diag) <= 1e-6 * max(1.0, float(d.max()))), \
        f"{case.id}: d(A, A) is not ~0 (largest {np.abs(diag).max():.3g}); if that is by design, skip this check"


def check_distance_order_independent(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Each entry depends only on its two sets: permuting or sub-selecting the gallery moves columns only."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 2)
    d = _pairwise(case, params, probes, gallery)
    perm = np.random.default_rng(SEED).permutation(len(gallery))
    dp = _pairwise(case, params, probes, _subset(gallery, perm))
    assert _close(dp, d[:, perm], rtol=1e-7, atol=_dtol(d)), f"{case.id}: permuting the gallery changed the distances"
    sub = [1, len(gallery) - 1]
    ds = _pairwise(case, params, _subset(probes, [0, 2]), _subset(gallery, sub))
    assert _close(ds, d[np.ix_([0, 2], sub)], rtol=1e-7, atol=_dtol(d)), \
        f"{case.id}: distances between two sets change with the other sets in the collections"


def check_distance_no_mutation(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``pairwise`` leaves its input arrays unchanged and gives the same result twice."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1)
    copies = [s.copy() for s in probes.samples + gallery.samples]
    dist = _build(case, params)
    a = dist.pairwise(probes, gallery, RunContext(seed=0))
    for orig, now in zip(copies, probes.samples + gallery.samples):
        assert np.array_equal(orig, now), f"{case.id}: pairwise modified its input arrays"
    b = dist.pairwise(probes, gallery, RunContext(seed=0))
    c = _pairwise(case, params, probes, gallery)
    assert _close(a, b, rtol=1e-12) and _close(a, c, rtol=1e-12), \
        f"{case.id}: pairwise gives different results on the same input (hidden state or unseeded randomness)"


def check_distance_rejects_bad_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A set containing NaN, and an empty collection, are refused with DataError."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1)
    samples = [s.copy() for s in probes.samples]
    samples[1][0, 0] = np.nan
    nan_probes = SetCollection(tuple(samples), probes.classes, probes.ids)
    empty = SetCollection((), np.array([], dtype=str), np.array([], dtype=str))
    for what, (p, g) in {"a probe set containing NaN": (nan_probes, gallery),
                         "a gallery set containing NaN": (gallery, nan_probes),
                         "an empty probe collection": (empty, gallery)}.items():
        try:
            _build(case, params).pairwise(p, g, RunContext(seed=0))
        except DataError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: {what} raised {type(exc).__name__}: {exc}; raise DataError") from exc
        raise AssertionError(f"{case.id}: {what} was accepted; it must raise calibrate.errors.DataError")


CHECKS = (check_distance_output, check_distance_symmetric, check_distance_self_zero,
          check_distance_order_independent, check_distance_no_mutation, check_distance_rejects_bad_input)
