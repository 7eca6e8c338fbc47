"""Genuine and impostor score files, one score per line (pyeer's input; issue 41): the ``genuine-impostor`` dataset,
``calibrate fit``/``evaluate --genuine --impostor``, and a threshold at a target FNR (``fit --fnr``, ``threshold
--fnr``); checked against a score-list run of the same scores and against numpy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibrate.statistics.eer_interval import bin_counts, grid, replicate_eers
from calibrate.statistics.verification import PooledScores, eer
from calibrate_test_helpers import invoke_cli, write_recipe

TARGETS = (0.01, 0.002)


def score_files(folder: Path, seed: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    genuine, impostor = folder / f"true{seed}.txt", folder / f"false{seed}.txt"
    genuine.write_text("\n".join(f"{v:.4f}" for v in rng.normal(0.7, 0.1, 600)) + "\n\n", encoding="utf-8")
    impostor.write_text("\n".join(f"{v:.4f}" for v in rng.normal(0.3, 0.1, 8000)) + "\n", encoding="utf-8")
    return genuine, impostor


def as_score_list(path: Path, genuine: Path, impostor: Path) -> Path:
    """The same scores as a bob score list in which every attempt claims the one class `pooled`."""
    lines = [f"pooled pooled g{k} {v}" for k, v in enumerate(genuine.read_text().split())]
    lines += [f"pooled impostor i{k} {v}" for k, v in enumerate(impostor.read_text().split())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(tmp: Path, data: dict, name: str) -> tuple[dict, str]:
    recipe = {"version": 1, "data": data, "estimators": [{"plugin": "auto"}, {"plugin": "generic-interp"}],
              "evaluation": {"targets": list(TARGETS), "prediction": False}, "output": {"dir": str(tmp / name)}}
    done = invoke_cli("run", str(write_recipe(tmp / f"{name}.yaml", recipe)), "-q")
    assert done.returncode == 0, done.stderr
    out = tmp / name
    return json.loads((out / "results.json").read_text(encoding="utf-8")), (out / "thresholds.csv").read_text()


def test_the_dataset_is_a_score_list_of_one_pooled_class(tmp_path):
    (g1, i1), (g2, i2) = score_files(tmp_path, 1), score_files(tmp_path, 2)
    pair, pair_thresholds = run(tmp_path, {"plugin": "genuine-impostor", "genuine": str(g1), "impostor": str(i1),
                                           "test_genuine": str(g2), "test_impostor": str(i2)}, "pair")
    listed, listed_thresholds = run(tmp_path, {"plugin": "score-list", "train": str(as_score_list(tmp_path / "dev", g1, i1)),
                                               "test": str(as_score_list(tmp_path / "eval", g2, i2))}, "list")
    assert pair_thresholds == listed_thresholds
    assert pair["estimators"] == listed["estimators"]
    assert any("carry no class" in n for n in pair["notes"])
    v = pair["verification"]
    assert (v["genuine_attempts"], v["impostor_attempts"]) == (600, 8000)
    # one class: the EER's interval resamples attempts, as an independent numpy bootstrap does (genuine and impostor
    # scores each drawn with replacement, the exact EER of each replicate)
    assert v["eer_ci_units"] == "attempts"
    gen = -np.loadtxt(g2)  # as distances: accept d <= t
    imp = -np.loadtxt(i2)
    rng = np.random.default_rng(7)
    eers = [eer(PooledScores.of(rng.choice(imp, imp.size), rng.choice(gen, gen.size)))[0] for _ in range(400)]
    low, high = np.quantile(eers, [0.025, 0.975])
    assert v["eer_ci_low"] == pytest.approx(low, abs=0.2 * (high - low))
    assert v["eer_ci_high"] == pytest.approx(high, abs=0.2 * (high - low))


def test_a_single_pair_is_split_and_both_test_files_are_needed(tmp_path):
    g, i = score_files(tmp_path, 3)
    doc, _ = run(tmp_path, {"plugin": "genuine-impostor", "genuine": str(g), "impostor": str(i), "seed": 4}, "split")
    v = doc["verification"]
    assert 200 < v["genuine_attempts"] < 400 and v["impostor_attempts"] == 4000
    recipe = {"version": 1, "data": {"plugin": "genuine-impostor", "genuine": str(g), "impostor": str(i),
                                     "test_impostor": str(i)}}
    done = invoke_cli("validate", str(write_recipe(tmp_path / "bad.yaml", recipe)))
    assert done.returncode == 2 and "test_genuine" in done.stderr


def test_fit_evaluate_and_a_threshold_at_a_target_fnr(tmp_path):
    (g1, i1), (g2, i2) = score_files(tmp_path, 1), score_files(tmp_path, 2)
    cal = tmp_path / "cal.json"
    fitted = invoke_cli("fit", "--genuine", str(g1), "--impostor", str(i1), "--out", str(cal), "--fnr", "0.01",
                        "--fnr", "0.05", "--no-predict", *[a for t in TARGETS for a in ("--fpr", str(t))])
    assert fitted.returncode == 0, fitted.stderr
    assert "carry no class" in fitted.stderr and "one threshold for every class" in fitted.stdout
    gen = np.loadtxt(g1)
    for fnr in (0.01, 0.05):
        got = json.loads(invoke_cli("threshold", str(cal), "--fnr", str(fnr), "--json").stdout)
        # bob.measure's frr_threshold: the largest threshold whose FRR (scores below it) is at most the target
        want = max(t for t in np.unique(gen) if np.mean(gen < t) <= fnr)
        assert got["score_threshold"] == want and got["one_threshold_for_every_class"] is True
        assert got["training_genuine"] == 600 and got["accept_if"] == "score >= t"
    missing = invoke_cli("threshold", str(cal), "--fnr", "0.02")
    assert missing.returncode == 2 and "holds no threshold at FNR 0.02 (it holds 0.01, 0.05)" in missing.stderr
    judged = invoke_cli("evaluate", str(cal), "--genuine", str(g2), "--impostor", str(i2), "--json")
    assert judged.returncode == 0, judged.stderr
    doc = json.loads(judged.stdout)
    assert doc["verification"]["eer_ci_units"] == "attempts" and doc["enrolled_classes"] == 1
    for row in doc["targets"]:
        assert row["hter"] == pytest.approx((row["fpr"] + row["fnr"]) / 2, abs=1e-15)


@pytest.mark.parametrize("args, message", [
    (["--genuine", "G", "SCORES"], "not both"),
    ([], "give SCORES"),
    (["--genuine", "G", "--impostor", "I", "--groups", "I"], "leave out --groups"),
    (["--genuine", "G", "--impostor", "TWO"], "line 2: 2 fields"),
    (["--genuine", "G", "--impostor", "I", "--fnr", "1.5"], "--fnr 1.5: a target FNR"),
])
def test_bad_input_is_one_line_naming_the_fix(tmp_path, args, message):
    g, i = score_files(tmp_path, 1)
    (tmp_path / "two.txt").write_text("0.1\n0.2 0.3\n", encoding="utf-8")
    names = {"G": str(g), "I": str(i), "SCORES": str(g), "TWO": str(tmp_path / "two.txt")}
    done = invoke_cli("fit", *[names.get(a, a) for a in args], "--out", str(tmp_path / "cal.json"))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_damaged_fnr_threshold_is_refused_naming_the_field(tmp_path):
    import calibrate
    from calibrate.errors import CalibrationError

    g, i = score_files(tmp_path, 1)
    cal = tmp_path / "cal.json"
    assert invoke_cli("fit", "--genuine", str(g), "--impostor", str(i), "--out", str(cal), "--fnr", "0.01",
                      "--no-predict").returncode == 0
    doc = json.loads(cal.read_text())
    assert calibrate.load(cal).fnr_threshold(0.01)["genuine"] == 600
    doc.pop("digest")
    doc["fnr_thresholds"][0]["target_fnr"] = 2
    cal.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=r"fnr_thresholds\[0\]\.target_fnr must be a target FNR"):
        calibrate.load(cal)


def test_a_replicates_eer_on_the_grid_is_the_exact_weighted_eer():
    """calibrate.statistics.eer_interval reads each bootstrap replicate's EER on a grid of thresholds: within 2% of the
    exact EER of the weighted attempts (every candidate threshold, numpy)."""
    rng = np.random.default_rng(11)
    n_classes = 80
    quality = rng.normal(0, 0.5, n_classes)
    imp_units = np.repeat(np.arange(n_classes), 300)
    gen_units = np.repeat(np.arange(n_classes), 6)
    imp = rng.normal(3 - quality[imp_units], 1)
    gen = rng.normal(quality[gen_units], 1)
    pooled = PooledScores.of(imp, gen)
    thresholds = grid(pooled, eer(pooled)[0])
    weights = np.stack([np.bincount(rng.integers(0, n_classes, n_classes), minlength=n_classes)
                        for _ in range(20)]).astype(float)
    fast = replicate_eers(bin_counts(imp, imp_units, thresholds, n_classes), bin_counts(gen, gen_units, thresholds,
                                                                                       n_classes), weights)
    for w, got in zip(weights, fast):
        wi, wg = w[imp_units], w[gen_units]
        cand = np.unique(np.concatenate([imp, gen, [-np.inf]]))
        oi, og = np.argsort(imp), np.argsort(gen)
        fmr = np.concatenate([[0], np.cumsum(wi[oi])])[np.searchsorted(imp[oi], cand, side="right")] / wi.sum()
        fnmr = 1 - np.concatenate([[0], np.cumsum(wg[og])])[np.searchsorted(gen[og], cand, side="right")] / wg.sum()
        k = np.argmin(np.abs(fnmr - fmr))
        assert got == pytest.approx((fmr[k] + fnmr[k]) / 2, rel=0.02)


def test_sparse_tables_give_the_dense_tables_interval(monkeypatch):
    """Large galleries get sparse unit x bin tables (calibrate.statistics.eer_interval.UnitBins): the same interval,
    also when the attempts beyond the last threshold are counted from each unit's total."""
    import calibrate.statistics.eer_interval as ei

    rng = np.random.default_rng(5)
    units = 40
    imp_units, gen_units = rng.integers(0, units, 6000), rng.integers(0, units, 300)
    imp, gen = rng.normal(3, 1, 6000), rng.normal(0, 1, 300)
    pooled = PooledScores.of(imp, gen)
    thresholds = grid(pooled, eer(pooled)[0])

    def interval():
        i, g = ei.UnitBins(thresholds, units), ei.UnitBins(thresholds, units)
        within = imp <= thresholds[-1]
        i.add(imp[within], imp_units[within])
        i.totals(np.bincount(imp_units, minlength=units))
        g.add(gen, gen_units)
        return ei.class_interval(i.table(), g.table(), seed=3)

    dense = interval()
    monkeypatch.setattr(ei, "_DENSE", 0)
    assert interval() == pytest.approx(dense, abs=1e-15)
    assert dense[0] < eer(pooled)[0] < dense[1]
