"""Conformance checks for normalisers (distances normalised by cohort scores, calibrate.contract.base.Normalizer).

What docs/plugins.md ("Writing a normaliser") promises, checked on generated data:

* ``sides`` names the cohort sides read (``"enrolled"``, ``"probe"``), ``min_members()`` a count >= 1;
* ``statistics`` gives, per sorted cohort row, one finite value per statistic, the same names for
  rows of any length, and a row's values whatever other rows are computed with it (bit for bit);
* for given statistics, the normalised score does not decrease as the distance grows;
* in a run and after a saved calibration is loaded (its state through JSON, a new instance built from
  the parameters), every evaluation attempt is normalised to the same number: the decisions agree;
* two instances with the same parameters give the same numbers, and the input arrays are left alone;
* the spreads it declares (``spreads``) are among its statistics, and a cohort whose distances are all
  equal (a rounding residue for a spread) is refused by the core, or normalised to a moderate z (a
  normaliser that divides by no spread);
* a fast path (``_statistics_left_out``), where it has one, gives each attempt what ``_statistics`` gives
  its row sorted without the member left out, within :data:`LEFT_OUT_RTOL` (and :data:`LEFT_OUT_ATOL` x the
  row's largest distance), and the same bits whatever the order of the row's values and the rows and
  attempts computed with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from calibrate.contract.base import Normalizer, overrides
from calibrate.normalisation.cohort import (FittedNormalization, ProbeCohorts, attempt_statistics, class_statistics, matrix_cohorts,
                      normalise_matrix, normalising_refusal, statistics_problem, statistics_refusal)
from calibrate.errors import DataError
from calibrate.contract.types import DistanceMatrix
from calibrate.testing.common import CheckSkipped, ComponentCase, _build, _params, _tmpdir
from calibrate.testing.samples import SEED

SIDES = ("enrolled", "probe")
#: how far a fast path's statistics may stray from ``_statistics``' of the same row: relative, and absolute
#: as a share of the row's largest distance (the built-ins' are equal: both are correctly rounded)
LEFT_OUT_RTOL = 1e-9
LEFT_OUT_ATOL = 1e-12
#: how far z may stray when a calibration normalises rows given per attempt with a fast path that is not
#: exact (its statistics of a row differ from those of a longer row less one member within the above)
LEGACY_Z_ATOL = 1e-6


def make_cohort_matrix(seed: int = SEED, n_classes: int = 14, probes_per_class: int = 3,
                       outsiders: int = 4) -> tuple[DistanceMatrix, DistanceMatrix]:
    """(training, evaluation) masks over one probe x gallery distance matrix with a per-class and a per-probe
    offset (what normalisers remove); genuine distances small. Half of each class's impostors train."""
    rng = np.random.default_rng(seed)
    gallery = np.array([f"c{j:02d}" for j in range(n_classes)])
    probes = np.array([g for g in gallery for _ in range(probes_per_class)] + [f"x{k}" for k in range(outsiders)])
    genuine = probes[:, None] == gallery[None, :]
    d = 3.0 + rng.normal(0, 0.4, n_classes)[None, :] + rng.normal(0, 0.4, probes.size)[:, None] \
        + rng.gamma(3, 0.3, genuine.shape)
    values = np.where(genuine, rng.uniform(0.2, 1.5, genuine.shape), d)
    fit = ~genuine & (rng.random(values.shape) < 0.5)
    return (DistanceMatrix(values, probes, gallery, fit, source="generated (training entries)"),
            DistanceMatrix(values, probes, gallery, ~fit, source="generated (evaluation entries)"))


def _sorted_rows(seed: int, n_rows: int, length: int) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).gamma(3, 0.5, (n_rows, length)), axis=1)


def _lengths(normalizer) -> list[int]:
    need = max(int(normalizer.min_members()), 1)
    return sorted({need, need + 1, need + 7, max(need, 40)})


def check_normalizer_sides(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``sides`` is a non-empty tuple of distinct sides; ``min_members()`` is a whole number >= 1."""
    with _tmpdir(tmp_path) as tmp:
        n = _build(case, _params(case, tmp))
    sides = n.sides
    assert isinstance(sides, tuple) and sides and len(set(sides)) == len(sides) and set(sides) <= set(SIDES), \
        f"{case.id}: sides must be a tuple of distinct names from {SIDES}, got {sides!r}"
    need = n.min_members()
    assert isinstance(need, int) and not isinstance(need, bool) and need >= 1, \
        f"{case.id}: min_members() must return a whole number >= 1, got {need!r}"


def check_normalizer_statistics(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Per sorted cohort row: finite values, the same names for every row length, a row's values the same
    computed alone or in a block (bit for bit), the input left unchanged."""
    with _tmpdir(tmp_path) as tmp:
        n = _build(case, _params(case, tmp))
    names = None
    for length in _lengths(n):
        rows = _sorted_rows(SEED + length, 9, length)
        before = rows.copy()
        stats = n.statistics(rows)
        assert np.array_equal(rows, before), f"{case.id}: statistics() changed the cohort rows it was given"
        if names is None:
            names = set(stats)
        assert set(stats) == names, (f"{case.id}: statistics {sorted(stats)} for rows of {length} distances, "
                                     f"{sorted(names)} for others; return the same names for every row")
        for name, values in stats.items():
            assert np.all(np.isfinite(values)), f"{case.id}: statistic {name!r} is not finite on rows of {length}"
        for r in (0, 4, 8):
            alone = n.statistics(np.ascontiguousarray(rows[r:r + 1]))
            for name in stats:
                assert alone[name][0] == stats[name][r], \
                    (f"{case.id}: statistic {name!r} of a row differs computed alone ({alone[name][0]!r}) and with "
                     f"other rows ({stats[name][r]!r}); reduce each row on its own (numpy's axis=1 reductions do), "
                     "or a saved calibration's accept cannot repeat the run's decisions")


def check_normalizer_monotone(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """For the same statistics, a larger distance never gets a smaller normalised score."""
    with _tmpdir(tmp_path) as tmp:
        n = _build(case, _params(case, tmp))
    length = _lengths(n)[-1]
    stats = n.statistics(_sorted_rows(SEED, 1, length))
    grid = np.linspace(0.0, 6.0, 301)
    side = {k: np.repeat(v, grid.size) for k, v in stats.items()}
    z = n.normalize(grid, side if "enrolled" in n.sides else None, side if "probe" in n.sides else None)
    _assert_finite(case, n, z, grid, stats, f"a cohort row of {length} distances drawn from a gamma law")
    falls = np.flatnonzero(np.diff(z) < -1e-12 * max(1.0, float(np.abs(z).max())))
    assert not falls.size, (f"{case.id}: the normalised score falls from {z[falls[0]]!r} to {z[falls[0] + 1]!r} as the "
                            f"distance grows from {grid[falls[0]]:g} to {grid[falls[0] + 1]:g}; it must keep their order")


def _assert_finite(case: ComponentCase, n: Normalizer, z: np.ndarray, distances: np.ndarray, stats: dict, row: str) -> None:
    """Every z finite, or an AssertionError saying what was observed (calibrate.normalisation.cohort.normalising_refusal), given
    the statistics ``stats`` (one value each, for every side it reads) of ``row``."""
    bad = np.flatnonzero(~np.isfinite(z))
    if not bad.size:
        return
    one = {k: np.asarray(v, dtype=np.float64).reshape(-1)[:1] for k, v in stats.items()}
    problem = statistics_problem(n, one)
    if problem is not None:  # statistics the core would refuse before normalising
        raise AssertionError(f"{case.id}: normalize gave {z[bad[0]]!r}; {row} {statistics_refusal(n, problem)}")
    raise AssertionError(f"{case.id}: on {row}, normalize " + normalising_refusal(
        n, float(z[bad[0]]), float(distances[bad[0]]), *[{k: v[0] for k, v in one.items()} if side in n.sides else None
                                                          for side in SIDES]))


def _fold(case: ComponentCase, params: dict, seed: int):
    """(normaliser, evaluation matrix normalised, fitted normalisation, evaluation matrix, its cohort)."""
    train, test = make_cohort_matrix(seed)
    n = _build(case, params)
    train_c, test_c = matrix_cohorts(train, test)
    classes = train.gallery_classes.tolist()
    stats = class_statistics(n, train_c.enrolled, classes) if "enrolled" in n.sides else {}
    test_n = normalise_matrix(n, test, test_c, stats)
    fitted = FittedNormalization(n, case.name or "normalizer", dict(params), tuple(classes), stats,
                                 "training impostors")
    return n, test_n, fitted, test, test_c


def check_normalizer_reproducible_after_saving(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Every evaluation attempt normalised in a run is normalised to the same number (so decided the same way)
    by a calibration saved and loaded (state through JSON, a new instance from the parameters), given its probe's
    cohort scores without the claimed and its own class, as ``Calibration.accept`` is."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    _, test_n, fitted, test, cohort = _fold(case, params, SEED)
    state = json.loads(json.dumps(fitted.to_state(), allow_nan=False))
    loaded = FittedNormalization.from_state(state, _build(case, params), "saved")
    rows, cols = np.nonzero(test.valid)
    side = cohort.probes
    want = test_n.values[rows, cols]
    # each probe's row once (ProbeCohorts, as `calibrate accept --cohort` reads a T-norm file): exactly the run's
    by_probe = ProbeCohorts(np.where(side.impostor_mask(), side.values, np.nan), side.gallery_classes.tolist(), rows)
    again = loaded.normalise(test.values[rows, cols], cols, np.where(by_probe.usable(), by_probe.scores, 0.0),
                             by_probe.usable(), probe_rows=rows, left_out=by_probe.left_out(test.gallery_classes, cols))
    differ = np.flatnonzero(again != want)
    assert not differ.size, (f"{case.id}: {differ.size} of {want.size} evaluation attempts are normalised otherwise "
                             f"after saving (e.g. {want[differ[0]]!r} in the run, {again[differ[0]]!r} loaded); statistics "
                             "must depend on each row's values only, and to_state/params must hold all that is needed")
    # one row per attempt, the claimed class left out (Calibration.accept's other form): the same, or with a fast
    # path that is not exact, within LEGACY_Z_ATOL in z
    keep = side.impostor_mask()[rows] & (side.gallery_classes[None, :] != test.gallery_classes[cols][:, None])
    values = np.where(keep, side.values[rows], 0.0)
    again = loaded.normalise(test.values[rows, cols], cols, values, keep)
    off = np.abs(np.log(again) - np.log(want))
    worst = int(np.argmax(off)) if off.size else 0
    allowed = LEGACY_Z_ATOL if overrides(loaded.normalizer, Normalizer, "_statistics_left_out") else 0.0
    assert not off.size or off[worst] <= allowed, (
        f"{case.id}: with one cohort row per attempt, attempt {worst + 1} is normalised to {again[worst]!r} after saving, "
        f"{want[worst]!r} in the run (z {off[worst]:.3g} apart, at most {allowed:g} allowed); statistics must depend on "
        "each row's values only" + (", and _statistics_left_out must agree with _statistics" if allowed else ""))


def check_normalizer_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Two instances with the same parameters normalise the same data to the same numbers."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    a = _fold(case, params, SEED + 1)[1]
    b = _fold(case, params, SEED + 1)[1]
    assert np.array_equal(a.values, b.values), f"{case.id}: two instances normalise the same data differently"


def check_normalizer_refuses_constant_cohorts(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """The spreads it declares (``spreads``) are among its statistics; a cohort row whose distances are all equal
    (0.1 repeated: its std is a rounding residue, not 0) is refused by the core, or gives a moderate z."""
    with _tmpdir(tmp_path) as tmp:
        n = _build(case, _params(case, tmp))
    length = _lengths(n)[-1]
    names = set(n.statistics(_sorted_rows(SEED, 1, length)))
    if any("spreads" in vars(k) for k in type(n).__mro__ if k is not Normalizer):
        missing = sorted(set(n.spreads) - names)
        assert not missing, (f"{case.id}: spreads names {missing}, which _statistics does not return ({sorted(names)}); "
                             "name the statistics it divides by")
    row = np.full((1, length), 0.1)
    try:
        stats = attempt_statistics(n, row, np.ones(row.shape, bool), np.zeros(3, np.int64))
    except DataError:
        return
    d = np.array([0.05, 0.1, 0.2])
    z = n.normalize(d, stats if "enrolled" in n.sides else None, stats if "probe" in n.sides else None)
    _assert_finite(case, n, z, d, stats, f"a cohort row of {length} distances all 0.1")
    assert np.all(np.abs(z) <= 1e6), \
        (f"{case.id}: a cohort whose distances are all 0.1 normalises 0.05, 0.1, 0.2 to {z.tolist()} (|z| above 1e6), "
         f"from statistics {', '.join(f'{k} {float(v[0]):.4g}' for k, v in stats.items())}: it divides by a spread of "
         "rounding noise; name that statistic in `spreads` (the core then refuses such cohorts)")


def check_normalizer_left_out(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A fast path (``_statistics_left_out``, where overridden) gives each attempt what ``_statistics`` gives its
    row sorted, less the member left out (none: -1), within a relative 1e-9 (and 1e-12 x the row's largest
    distance); the same names; and the same bits with the row's values in another order, alone, or among
    other rows and attempts."""
    with _tmpdir(tmp_path) as tmp:
        n = _build(case, _params(case, tmp))
    if not overrides(n, Normalizer, "_statistics_left_out"):
        raise CheckSkipped(f"{case.id} has no fast path (_statistics_left_out): the core reduces each attempt's row")
    rng = np.random.default_rng(SEED)
    need = max(int(n.min_members()), 1)
    for width in sorted({need + 1, need + 2, need + 9, max(need + 1, 45)}):
        values = np.round(rng.gamma(3, 0.5, (6, width)), 3)  # ties, as scores of a few decimals have
        usable = rng.random(values.shape) < 0.9
        usable[:, :need + 1] = True
        rows, left = np.nonzero(usable)
        rows, left = np.concatenate([rows, np.arange(6)]), np.concatenate([left, np.full(6, -1)])
        fast = n.statistics_left_out(values, usable, rows, left)
        for a in range(rows.size):
            kept = np.flatnonzero(usable[rows[a]])
            row = np.sort(values[rows[a], kept[kept != left[a]]])[None, :]
            slow = n.statistics(row)
            assert set(slow) == set(fast), (f"{case.id}: _statistics_left_out returns {sorted(fast)}, _statistics "
                                            f"{sorted(slow)}; return the same statistics")
            for name, v in slow.items():
                tol = LEFT_OUT_RTOL * abs(v[0]) + LEFT_OUT_ATOL * float(np.abs(row).max())
                assert abs(fast[name][a] - v[0]) <= tol, (
                    f"{case.id}: statistic {name!r} of a row of {row.size} distances is {v[0]!r} from _statistics and "
                    f"{fast[name][a]!r} from _statistics_left_out (member {left[a]} of {width} left out); they must agree "
                    f"within a relative {LEFT_OUT_RTOL:g}")
        # the same bits: the row's values in another order, and one attempt alone in a row of its own
        shuffle = rng.permutation(width)
        again = n.statistics_left_out(values[:, shuffle], usable[:, shuffle], rows,
                                      np.where(left >= 0, np.argsort(shuffle)[np.maximum(left, 0)], -1))
        for a in (0, rows.size // 2, rows.size - 1):
            alone = n.statistics_left_out(values[rows[a]:rows[a] + 1], usable[rows[a]:rows[a] + 1], np.zeros(1, np.int64),
                                          left[a:a + 1])
            for name in fast:
                assert again[name][a] == fast[name][a] and alone[name][0] == fast[name][a], (
                    f"{case.id}: statistic {name!r} of an attempt differs with its row's values in another order "
                    f"({again[name][a]!r}) or computed alone ({alone[name][0]!r}) from the block's ({fast[name][a]!r}); "
                    "it must depend on the row's values as a multiset, or a run and accept decide differently")


CHECKS = (check_normalizer_sides, check_normalizer_statistics, check_normalizer_monotone,
          check_normalizer_reproducible_after_saving, check_normalizer_deterministic,
          check_normalizer_refuses_constant_cohorts, check_normalizer_left_out)
