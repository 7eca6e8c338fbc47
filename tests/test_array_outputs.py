"""Whole-run outputs computed in array operations (issue 22) give what the plain per-class code gave:
each check compares with a reference written here, on seeded data, exactly (the same bytes or values)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from calibrate.contract.types import ImpostorDistances


def _impostors(seed: int, counts, zeros: bool = True) -> ImpostorDistances:
    rng = np.random.default_rng(seed)
    counts = np.asarray(counts)
    values = np.round(rng.gamma(2.0, 1.0, int(counts.sum())), 1)  # rounded: many ties
    if zeros:
        values[rng.random(values.size) < 0.05] = 0.0
        values[rng.random(values.size) < 0.05] = -0.0
    return ImpostorDistances(tuple(f"c{i}" for i in range(counts.size)), values, np.r_[0, np.cumsum(counts)])


@pytest.mark.parametrize("counts, zeros", [([5] * 40, True), ([5] * 40, False), (list(range(1, 60)) * 3, True),
                                           ([1, 2000, 3, 3, 7], False)])
def test_sorted_within_is_the_sort_by_class_then_value_bit_for_bit(counts, zeros):
    imp = _impostors(1, counts, zeros)
    seg = np.repeat(np.arange(len(counts)), counts)
    reference = imp.values[np.lexsort((imp.values, seg))]  # stable: 0.0 and -0.0 keep their order
    assert imp.sorted_within().tobytes() == reference.tobytes()


def test_threshold_positions_equal_a_search_class_by_class():
    from calibrate.predicted.world import threshold_positions

    imp = _impostors(2, [7, 30, 1, 12, 50], zeros=True)
    rng = np.random.default_rng(3)
    tau = rng.uniform(-0.5, 6.0, (5, 4))
    tau[0, 0], tau[1, 1], tau[2, 2], tau[3, 3] = np.nan, np.inf, imp.of(2)[0], np.sort(imp.of(3))[4]  # ties, NaN, inf
    expected = np.zeros_like(tau)
    for i in range(5):  # the code this replaced: a search over each class's sorted distances
        d = np.sort(imp.of(i))
        for k, t in enumerate(tau[i]):
            j = int(np.searchsorted(d, t, side="right"))
            nxt, prev = d[min(j, d.size - 1)], d[max(j - 1, 0)]
            gap = nxt - prev
            frac = (t - prev) / gap if 0 < j < d.size and gap > 0 else 0.0
            expected[i, k] = 0.0 if j == 0 else j + frac
    np.testing.assert_array_equal(threshold_positions(imp, tau), expected)


needs_pyarrow = pytest.mark.skipif(not __import__("calibrate.files.score_lists", fromlist=["x"]).pyarrow_available(),
                                   reason="pyarrow (extra fast-io) not installed")


def _awkward_floats(seed: int, n: int) -> list[float]:
    """Floats over every magnitude json writes differently: tiny, huge, integers, zeros, NaN, infinities."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 24, n)
    x[::7] = np.round(x[::7], 2)
    x[::11] = rng.integers(-10**6, 10**6, x[::11].size)
    special = [0.0, -0.0, 5e-324, 1e-4, 9.999999999999999e-05, 1e9, 999999999.9999999, 1e16, 1e300, 1.7976931348623157e308,
               float("nan"), float("inf"), float("-inf"), 0.1, 1 / 3, 2.5]
    return x.tolist() + special * 3


@needs_pyarrow
def test_long_float_lists_are_written_as_json_writes_them():
    from calibrate.saved.json_format import FAST_FLOATS, pyarrow_float_json

    values = _awkward_floats(5, 3 * FAST_FLOATS)
    calm = np.random.default_rng(6).standard_normal(FAST_FLOATS).tolist()  # auto's pooled scores: the usual case
    for floats in (values, calm):
        assert pyarrow_float_json(floats) == json.dumps(floats, separators=(",", ":"))  # not None: no fallback


def test_a_saved_calibration_is_the_bytes_json_writes():
    from calibrate.saved.json_format import FAST_FLOATS, dumps_artifact

    big = _awkward_floats(7, FAST_FLOATS)
    doc = {"estimators": {"a": {"state": {"sorted_z": big, "n": list(range(FAST_FLOATS)), "pair": (1.5, 2.5),
                                          "mixed": big[:-1] + [1], "nested": [[0.5] * 3, big]}}},
           "name": "\0calibrate-floats-0", "targets": [0.001, 0.0005], "k": 3}
    text = json.dumps(doc, separators=(",", ":"))  # then the digest of those bytes, as the last entry
    assert dumps_artifact(doc) == f'{text[:-1]},"digest":"sha256:{hashlib.sha256(text.encode()).hexdigest()}"}}\n'


def _standardise_each(impostors, family, robust, jackknife):
    """The per-class loop standardise_classes was: the reference."""
    from calibrate.statistics.standardise import standardise, to_working, working_offset

    offset = working_offset(impostors.pooled(), family)
    out = [standardise(to_working(impostors.of(i), family, offset), robust, jackknife) for i in range(len(impostors))]
    return offset, [float(m) for _, m, _ in out], [float(s) for _, _, s in out], [z for z, _, _ in out]


@pytest.mark.parametrize("family, jackknife", [("lognormal", 0.5), ("lognormal", 0.0), ("gaussian", 0.5), ("gaussian", 1.0)])
def test_classes_standardised_together_equal_each_standardised_alone(family, jackknife):
    from calibrate.statistics.standardise import standardise_classes

    imp = _impostors(4, [3, 3, 4, 9, 9, 9, 40, 40, 120, 7, 3], zeros=family == "gaussian")
    per = {c: imp.of(i) for i, c in enumerate(imp.classes)}
    per["c3"] = np.r_[np.full(7, 2.5), [1.0, 3.0]]  # a zero robust scale: the sd takes over
    per["c6"] = np.r_[np.full(30, 1.5), np.arange(1.0, 11.0)]  # leave-one-out scales of 0
    per["c8"] = np.repeat([1.0, 2.0, 3.0, 4.0, 5.0], [2, 5, 6, 3, 4])  # ties across every quartile's neighbours
    per["c9"] = np.random.default_rng(5).permutation(np.repeat([1.0, 2.0, 3.0, 4.0, 5.0], [2, 5, 6, 3, 4]))
    imp = ImpostorDistances.from_lists(per)
    offset, locs, scales, zs = standardise_classes(imp, family, True, jackknife, "here")
    ref = _standardise_each(imp, family, True, jackknife)
    assert (offset, locs, scales) == ref[:3]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(zs, ref[3]))


def test_a_class_of_equal_distances_is_named_as_before():
    from calibrate.errors import DataError
    from calibrate.statistics.standardise import standardise_classes

    imp = ImpostorDistances.from_lists({"a": [1.0, 2.0, 3.0, 4.0], "b": [2.0] * 4, "c": [1.0, 5.0, 2.0, 3.0]})
    with pytest.raises(DataError, match=r"^here, class 'b': all 4 training distances are equal"):
        standardise_classes(imp, "lognormal", True, 0.5, "here")
