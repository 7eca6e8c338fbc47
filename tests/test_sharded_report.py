"""The same report from a sharded run (issue 43, part 4): the fpr evaluator's verification figures, det.csv, class
bootstrap, spread of false accepts and pictures, from reductions over the shards (calibrate/running/sharded_eval.py,
calibrate/statistics/binned_scores.py), equal to the in-memory run's on the same comparisons."""

from __future__ import annotations

import csv
import io
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

import calibrate
from calibrate.contract.packed import order_keys
from calibrate.errors import DataError
from calibrate.statistics.binned_scores import BIN_SHIFT, BinnedScores
from calibrate.statistics.eer_interval import UnitBins, class_interval, grid
from calibrate.statistics.verification import PooledScores, auc, det_rows, eer, verification_metrics

#: figures that a resolved BinnedScores computes from the same values and counts as PooledScores: equal but for the
#: rounding of a sum taken in another order (d' from per-shard moments, thresholds back through the transform)
RTOL = 1e-12
ESTIMATORS = [{"plugin": "auto"}, {"plugin": "class-interp"}, {"plugin": "generic-interp"}]


class ArrayResolver:
    """The passes of a sharded run, brute force on arrays held whole (the reference for BinnedScores)."""

    def __init__(self, impostors, imp_units, genuine, gen_units, n_units, drop: int = 0):
        self.imp, self.imp_units, self.gen, self.gen_units, self.n = impostors, imp_units, genuine, gen_units, n_units
        self.drop, self.passes, self.auc_asked = drop, 0, False

    def gather(self, bins):
        self.passes += 1
        b = (order_keys(self.imp) >> np.uint64(BIN_SHIFT)).astype(np.int64)
        return self.imp[np.flatnonzero(np.isin(b, bins))[self.drop:]]

    def finish(self, thresholds, want_auc, units):
        self.passes += 1
        self.auc_asked |= bool(want_auc)
        pooled = PooledScores(np.sort(self.imp), np.sort(self.gen))
        tables = []
        for t in units:
            i, g = UnitBins(t, self.n), UnitBins(t, self.n)
            i.add(self.imp, self.imp_units)
            g.add(self.gen, self.gen_units)
            tables.append((i.table(), g.table()))
        return pooled.accepted_impostors(thresholds), pooled.auc_counts() if want_auc else None, tables


def attempts(seed: int, n_units: int = 40, per_unit: int = 300, rounded: bool = False):
    rng = np.random.default_rng(seed)
    imp = rng.gamma(5, 1.0, size=n_units * per_unit) * rng.uniform(0.6, 1.6, n_units).repeat(per_unit)
    gen = rng.gamma(1.5, 0.8, size=n_units * 2)
    if rounded:  # ties within and between the two kinds
        imp, gen = np.round(imp, 1), np.round(gen, 1)
    return imp, np.arange(n_units).repeat(per_unit), gen, np.arange(n_units).repeat(2), n_units


def binned(imp, gen, resolver, budget=None):
    bins, counts = np.unique((order_keys(imp) >> np.uint64(BIN_SHIFT)).astype(np.int64), return_counts=True)
    kw = {} if budget is None else {"gather_values": budget}
    return BinnedScores(gen, bins, counts, resolver, **kw)


def figures(p):
    metrics = verification_metrics(p, (0.01, 0.001))
    t, fmr, fnmr = det_rows(p, extra=[float(np.nextafter(p.impostor_at(5), -np.inf))])
    g = grid(p, metrics["eer"])
    tables = p.unit_bins(g) if hasattr(p, "unit_bins") else None
    return metrics, (t, fmr, fnmr), g, tables


@pytest.mark.parametrize("rounded", [False, True], ids=["continuous", "ties"])
def test_resolved_binned_scores_answer_as_the_attempts_held_whole(rounded):
    imp, iu, gen, gu, n = attempts(3, rounded=rounded)
    whole = PooledScores(np.sort(imp), np.sort(gen))
    resolver = ArrayResolver(imp, iu, gen, gu, n)
    p = binned(imp, gen, resolver)
    metrics, (t, fmr, fnmr), g, tables = p.resolve(figures)
    assert p.interpolated == 0
    ref = verification_metrics(whole, (0.01, 0.001))
    assert metrics.keys() == ref.keys()
    for key, value in ref.items():
        if isinstance(value, float) and math.isfinite(value):
            assert metrics[key] == pytest.approx(value, rel=RTOL, abs=0), key
        else:
            assert metrics[key] == value, key
    rt, rfmr, rfnmr = det_rows(whole, extra=[float(np.nextafter(whole.impostors[5], -np.inf))])
    np.testing.assert_allclose(t, rt, rtol=RTOL, atol=0)
    np.testing.assert_allclose(fmr, rfmr, rtol=RTOL, atol=0)
    np.testing.assert_allclose(fnmr, rfnmr, rtol=RTOL, atol=0)
    assert eer(p) == eer(whole) and auc(p) == pytest.approx(auc(whole), rel=RTOL)
    # the EER's class interval: the same units' tables as in memory, so the same bootstrap
    np.testing.assert_allclose(g, grid(whole, ref["eer"]), rtol=RTOL, atol=0)
    imp_t, gen_t = UnitBins(g, n), UnitBins(g, n)
    imp_t.add(imp, iu)
    gen_t.add(gen, gu)
    assert class_interval(*tables, seed=0) == class_interval(imp_t.table(), gen_t.table(), seed=0)
    assert resolver.passes <= 6  # a few gathers and one counting pass, not a pass per question
    assert not resolver.auc_asked  # the AUC from the bins gathered: no genuine attempt sent to the shards


def test_the_auc_is_counted_against_every_genuine_attempt_when_its_bins_cannot_be_gathered():
    imp, iu, gen, gu, n = attempts(9, rounded=True)
    resolver = ArrayResolver(imp, iu, gen, gu, n)
    p = binned(imp, gen, resolver, budget=0)
    assert p.resolve(auc) == pytest.approx(auc(PooledScores(np.sort(imp), np.sort(gen))), rel=RTOL)
    assert resolver.auc_asked and p.interpolated == 0


def test_a_spent_budget_leaves_thresholds_within_a_bin_and_counts_exact():
    # no value may be gathered: order statistics fall back to a bin's interpolation, counts at them stay exact
    imp, iu, gen, gu, n = attempts(5)
    whole = PooledScores(np.sort(imp), np.sort(gen))
    p = binned(imp, gen, ArrayResolver(imp, iu, gen, gu, n), budget=0)
    t, fmr, fnmr = p.resolve(lambda q: det_rows(q))
    assert np.array_equal(fmr, whole.fmr(t)) and np.array_equal(fnmr, whole.fnmr(t))  # counted exactly
    rt = det_rows(whole)[0]
    width = 2.0 ** (np.floor(np.log2(np.abs(rt[rt != 0]))) - 8)  # 1/256 of each threshold's binade
    near = np.abs(rt[rt != 0][:, None] - t[None, :]).min(axis=1)
    assert np.all(near[: t.size // 2] <= width[: t.size // 2])  # the impostor bulk's thresholds: within a bin
    # the EER read there is off by at most the mass of the bin it falls in
    e = p.resolve(lambda q: verification_metrics(q)["eer"])
    b = order_keys(np.array([verification_metrics(whole)["eer_threshold"]])) >> np.uint64(BIN_SHIFT)
    in_bin = int(np.sum((order_keys(imp) >> np.uint64(BIN_SHIFT)) == b[0]))
    assert abs(e - verification_metrics(whole)["eer"]) <= (in_bin + 1) / imp.size + 1.0 / gen.size


def test_shards_that_change_between_passes_are_refused():
    imp, iu, gen, gu, n = attempts(7)
    p = binned(imp, gen, ArrayResolver(imp, iu, gen, gu, n, drop=1))
    with pytest.raises(DataError, match="changed between two passes"):
        p.resolve(lambda q: verification_metrics(q))


def _run(tmp: Path, data: dict, name: str, kind: str, plots: bool):
    recipe = {"version": 1, "data": {**data, "kind": kind}, "estimators": ESTIMATORS,
              "evaluation": {"targets": [0.01, 0.002], "prediction": False},
              "output": {"dir": str(tmp / name), "plots": plots}}
    if kind == "similarity":
        recipe["transform"] = {"plugin": "similarity-to-distance", "upper": 100.0}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = calibrate.run(path).out_dir
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def _close(a, b, where: str, rtol: float = RTOL) -> None:
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b), where
        for key in b:
            _close(a[key], b[key], f"{where}.{key}", rtol)
    elif isinstance(b, float):
        assert a == pytest.approx(b, rel=rtol, abs=0), where
    else:
        assert a == b, where


def _det(path: Path) -> np.ndarray:
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert rows[0] == ["fpr", "fnr", "score_threshold"]
    return np.array([[float(x) for x in r] for r in rows[1:]])


def closed_set(folder: Path, kind: str, shards: int = 4, classes: int = 48, seed: int = 11) -> Path:
    """Every enrolled class compared with every probe sample of every class (2 to 4 each, so the classes' impostor
    attempts differ; bob 4-column lists), the classes dealt to the shards out of the order of their names, and
    all.txt beside the folder: the same lines in one list."""
    rng = np.random.default_rng(seed)
    names = [f"id{rng.integers(10**6):06d}x{i}" for i in range(classes)]
    scale = rng.uniform(0.5, 2.0, classes)
    folder.mkdir(parents=True)
    every = []
    for s in range(shards):
        lines = []
        for i in range(s, classes, shards):
            for j in range(classes):
                for k in range(2 + j % 3):
                    d = rng.gamma(1, 0.3) if i == j else rng.gamma(5, scale[i] * scale[j])
                    score = 60.0 - d if kind == "similarity" else d
                    lines.append(f"{names[i]} {names[j]} {names[j]}_{k} {score!r}")
        (folder / f"shard{s:03d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        every += lines
    (folder.parent / "all.txt").write_text("\n".join(every) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("kind", ["distance", "similarity"])
def test_a_sharded_run_reports_the_in_memory_figures(tmp_path, kind):
    # a probe of one class is an impostor against every other: false accepts pair classes both ways round
    folder = closed_set(tmp_path / "shards", kind)
    plots = kind == "similarity"
    s_out, sharded = _run(tmp_path, {"plugin": "score-shards", "path": str(folder)}, "sharded", kind, plots)
    m_out, memory = _run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt")}, "memory", kind, plots)

    # results.json's verification: every figure; d' from per-shard moments and, for similarities, thresholds back
    # through the transform's inverse agree to rounding
    _close(sharded["verification"], memory["verification"], "verification", rtol=1e-9)
    assert memory["verification"]["eer_ci_units"] == "enrolled classes"
    # every row's fields (class bootstrap, spread of false accepts, the one threshold's spread, false-accept pairs)
    for label, entry in memory["estimators"].items():
        for m, s in zip(entry["targets"], sharded["estimators"][label]["targets"], strict=True):
            assert set(s) == set(m), (label, set(s) ^ set(m))
            for key in ("ratio_boot_low", "ratio_boot_high", "false_accept_pairs", "share_classes_over_2x_noise",
                        "share_classes_over_10x_noise", "fa_dispersion", "fa_share_top_classes", "one_threshold",
                        "fnr_paired", "hter"):
                _close(s.get(key), m.get(key), f"{label}.{key}", rtol=1e-9)
    # the evaluator's notes on what the targets ask of the training data and per-class thresholds
    said = [n for n in memory["notes"] if "training impostor distances" in n or n.startswith("class-interp at")]
    assert len(said) >= 2 and all(n in sharded["notes"] for n in said), said
    # det.csv: the same rows, thresholds equal to rounding (in score units through the transform's inverse)
    a, b = _det(s_out / "det.csv"), _det(m_out / "det.csv")
    assert a.shape == b.shape
    assert np.array_equal(a[:, :2], b[:, :2])
    np.testing.assert_allclose(a[:, 2], b[:, 2], rtol=1e-12, atol=0)
    if plots:
        assert {"calibration.png", "cdf-fits.png", "det.png", "scores.png"} <= {p.name for p in s_out.iterdir()}


def test_without_the_saved_attempts_the_passes_read_the_shards_distances(tmp_path, monkeypatch):
    import calibrate.running.sharded_eval as sharded_eval

    folder = closed_set(tmp_path / "shards", "distance", shards=3, classes=18)
    first, saved = _run(tmp_path, {"plugin": "score-shards", "path": str(folder)}, "saved", "distance", False)
    assert not [p.name for p in first.iterdir() if p.name.startswith(".") or ".eval" in p.name]  # scratch removed
    monkeypatch.setattr(sharded_eval.ShardCounts, "save", lambda self, path: None)
    out, read = _run(tmp_path, {"plugin": "score-shards", "path": str(folder)}, "read", "distance", False)
    _close(read["verification"], saved["verification"], "verification")


def test_past_the_gathering_budget_a_sharded_run_still_counts_exactly(tmp_path, monkeypatch):
    # nothing may be gathered: order statistics are read within their bin, every count (AUC's pairs too) is exact
    import calibrate.statistics.binned_scores as binned_scores

    folder = closed_set(tmp_path / "shards", "distance", shards=3, classes=24)
    _, memory = _run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt")}, "memory", "distance", False)
    monkeypatch.setattr(binned_scores, "GATHER_VALUES", 0)
    out, sharded = _run(tmp_path, {"plugin": "score-shards", "path": str(folder)}, "sharded", "distance", False)
    v, m = sharded["verification"], memory["verification"]
    assert v["auc"] == pytest.approx(m["auc"], rel=RTOL) and v["d_prime"] == pytest.approx(m["d_prime"], rel=1e-9)
    assert v["impostor_attempts"] == m["impostor_attempts"] and v["genuine_attempts"] == m["genuine_attempts"]
    # the EER read at a threshold within a bin of the exact one (bins here hold a few attempts each): close
    assert abs(v["eer"] - m["eer"]) <= 0.02 and v["eer_ci_low"] <= v["eer"] <= v["eer_ci_high"]
    det = _det(out / "det.csv")
    assert np.all(np.diff(det[:, 0]) >= 0) and np.all(np.diff(det[:, 1]) <= 0)  # a DET curve still
