"""Distance mutual-subspace against independent references (scipy.linalg.subspace_angles on
bases from a D x D covariance eigendecomposition, closed forms) on seeded random sets."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from scipy.stats import ortho_group

import calibrate_builtins.distances.mutual_subspace as ms
from calibrate.contract.base import RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.manager import build_registry
from calibrate.contract.types import SetCollection
from calibrate_builtins.distances.mutual_subspace import MutualSubspace


def collection(sets: list[np.ndarray], prefix: str = "s") -> SetCollection:
    return SetCollection(tuple(sets), np.array([f"c{i}" for i in range(len(sets))]),
                         np.array([f"{prefix}{i}" for i in range(len(sets))]))


def reference_basis(X: np.ndarray, k: int, center: bool, normalize: bool) -> np.ndarray:
    """Top-k eigenvectors of the D x D scatter matrix (the textbook PCA, independent of the SVD route)."""
    X = np.asarray(X, float)
    if normalize:
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    if center:
        X = X - X.mean(axis=0)
    w, v = np.linalg.eigh(X.T @ X)
    return v[:, np.argsort(w)[::-1][:k]]


def reference_distance(A, B, k, center=True, normalize=True) -> float:
    angles = subspace_angles(reference_basis(A, k, center, normalize), reference_basis(B, k, center, normalize))
    return 1.0 - np.cos(angles.min())


def random_sets(rng, count, dim=12, lo=10, hi=20):
    # anisotropic clouds with a random mean, so PCA directions are well separated
    scales = np.linspace(3.0, 0.2, dim)
    return [rng.normal(size=dim) * 2 + rng.normal(size=(rng.integers(lo, hi), dim)) * scales[rng.permutation(dim)]
            for _ in range(count)]


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_scipy_subspace_angles(center, normalize):
    rng = np.random.default_rng(0)
    probes, gallery = random_sets(rng, 7), random_sets(rng, 5)
    k = 3
    got = MutualSubspace(components=k, center=center, normalize=normalize).pairwise(
        collection(probes), collection(gallery, "g"))
    want = np.array([[reference_distance(a, b, k, center, normalize) for b in gallery] for a in probes])
    np.testing.assert_allclose(got, want, atol=1e-10)
    assert np.all((got >= 0) & (got <= 1))


def test_known_angle_between_lines():
    # sets spanning one line each (uncentred): distance is exactly 1 - cos(angle)
    theta = 0.7
    a = np.outer([1.0, -2.0, 3.0], [1.0, 0.0, 0.0])
    b = np.outer([0.5, 2.0], [np.cos(theta), np.sin(theta), 0.0])
    d = MutualSubspace(components=1, center=False, normalize=False).pairwise(collection([a]), collection([b]))
    assert d[0, 0] == pytest.approx(1 - np.cos(theta), abs=1e-14)


def test_self_distance_zero_and_symmetric():
    rng = np.random.default_rng(1)
    sets = random_sets(rng, 9, dim=30)
    dist = MutualSubspace()
    same = dist.pairwise(collection(sets), collection(sets))
    assert np.abs(np.diag(same)).max() <= 1e-12
    assert np.abs(same - same.T).max() <= 1e-12
    # equal data in different array objects (no basis shared through the cache)
    copies = dist.pairwise(collection(sets), collection([s.copy() for s in sets]))
    assert np.abs(np.diag(copies)).max() <= 1e-12
    np.testing.assert_allclose(copies, same, atol=1e-12)
    assert np.all(same[~np.eye(len(sets), dtype=bool)] > 1e-3)


def test_depends_only_on_the_subspace():
    rng = np.random.default_rng(2)
    dim, k = 20, 3
    Q = np.linalg.qr(rng.normal(size=(dim, k)))[0]
    R = ortho_group.rvs(k, random_state=3)
    first = rng.normal(size=(10, k)) @ Q.T
    # another basis of the same subspace, other coefficients and another sample count
    second = rng.normal(size=(14, k)) @ (Q @ R).T
    others = random_sets(rng, 4, dim=dim)
    for center in (True, False):
        dist = MutualSubspace(components=k, center=center, normalize=False)
        d = dist.pairwise(collection([first, second]), collection(others, "g"))
        np.testing.assert_allclose(d[0], d[1], atol=1e-10)
        assert dist.pairwise(collection([first]), collection([second]))[0, 0] <= 1e-12


def test_invariant_to_sample_order_and_scale():
    rng = np.random.default_rng(4)
    sets = random_sets(rng, 5, dim=15)
    shuffled = [s[rng.permutation(len(s))] * rng.uniform(0.1, 10.0, size=(len(s), 1)) for s in sets]
    dist = MutualSubspace(components=4, normalize=True)
    np.testing.assert_allclose(dist.pairwise(collection(shuffled), collection(sets)),
                               dist.pairwise(collection(sets), collection(sets)), atol=1e-10)


def test_blocks_give_the_same_matrix(monkeypatch):
    rng = np.random.default_rng(5)
    probes, gallery = random_sets(rng, 11), random_sets(rng, 7)
    dist = MutualSubspace(components=3)
    whole = dist.pairwise(collection(probes), collection(gallery, "g"))
    # 25 pairs per batch: all 11 probes x 2 gallery sets; 3 pairs (< 11 probes): 3 probes x 1 gallery set
    for budget in (4 * 9 * 8 * 25, 4 * 9 * 8 * 3):
        monkeypatch.setattr(ms, "_BLOCK_BYTES", budget)
        # Different block shapes send different batch shapes to BLAS, whose kernels may round the last
        # bit differently (1.1e-16 seen with OpenBLAS 0.3.31): equal to rounding, not bit for bit.
        np.testing.assert_allclose(dist.pairwise(collection(probes), collection(gallery, "g")), whole,
                                   rtol=0, atol=1e-12)


def test_few_samples_use_available_rank_and_warn_once():
    rng = np.random.default_rng(6)
    dim = 10
    single_a, single_b = rng.normal(size=(1, dim)), rng.normal(size=(1, dim))
    pair = rng.normal(size=(2, dim))
    full = rng.normal(size=(12, dim))
    sets = [single_a, single_b, pair, full]
    context = RunContext()
    with pytest.warns(UserWarning, match=r"3 of 4 sets have fewer than components=6"):
        d = MutualSubspace(components=6).pairwise(collection(sets), collection(sets), context)
    assert len(context.notes) == 1
    assert "2 set(s) had no direction left after centring" in context.notes[0]
    assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 1))
    assert np.abs(np.diag(d)).max() <= 1e-12
    # single samples fall back to their own direction: 1 - |cos| between the two samples
    cos = abs(single_a[0] @ single_b[0]) / np.linalg.norm(single_a) / np.linalg.norm(single_b)
    assert d[0, 1] == pytest.approx(1 - cos, abs=1e-12)
    # two centred (unit-norm) samples span their difference only
    u = pair / np.linalg.norm(pair, axis=1, keepdims=True)
    u = (u[1] - u[0]) / np.linalg.norm(u[1] - u[0])
    assert d[2, 3] == pytest.approx(1 - np.linalg.norm(reference_basis(full, 6, True, True).T @ u), abs=1e-10)


def test_identical_samples_fall_back_like_a_single_sample():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(1, 7)) * 0.3
    triple = np.repeat(x, 3, axis=0)  # centring leaves only rounding noise, which must not become a direction
    other = rng.normal(size=(1, 7))
    context = RunContext()
    with pytest.warns(UserWarning, match="3 set\\(s\\) had no direction left after centring .*: s0, g0, g1"):
        d = MutualSubspace(components=2).pairwise(collection([triple]), collection([x, other], "g"), context)
    cos = abs(x[0] @ other[0]) / np.linalg.norm(x) / np.linalg.norm(other)
    np.testing.assert_allclose(d[0], [0.0, 1 - cos], atol=1e-12)


def test_no_note_when_every_set_has_enough_directions():
    rng = np.random.default_rng(7)
    context = RunContext()
    MutualSubspace(components=3).pairwise(collection(random_sets(rng, 3)), collection(random_sets(rng, 2)), context)
    assert context.notes == []


def test_bad_input_is_a_clear_error():
    rng = np.random.default_rng(8)
    with pytest.raises(DataError, match="different feature dimensions"):
        MutualSubspace().pairwise(collection([rng.normal(size=(5, 4)), rng.normal(size=(5, 3))]),
                                  collection([rng.normal(size=(5, 4))]))
    with pytest.raises(DataError, match="probe sets have 4 features, gallery sets 3"):
        MutualSubspace().pairwise(collection([rng.normal(size=(5, 4))]), collection([rng.normal(size=(5, 3))]))
    with pytest.raises(DataError, match=r"set s1: all samples are zero vectors"):
        MutualSubspace().pairwise(collection([rng.normal(size=(5, 4)), np.zeros((3, 4))]),
                                  collection([rng.normal(size=(5, 4))]))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ParameterError, match="components"):
            MutualSubspace(components=bad)


def test_registered():
    assert build_registry().get("distances", "mutual-subspace").factory is MutualSubspace
