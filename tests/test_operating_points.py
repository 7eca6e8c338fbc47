"""The operating points bob.measure and pyeer users expect (issue 41): FMR at fixed FNMRs, the EER's interval and
pyeer's eer_low/eer_high, HTER at each estimator's thresholds; checked on generated score lists against independent
numpy computations from the raw evaluation scores (a recipe run's results.json and `calibrate evaluate --json`).

bob.measure 6.1 pins numpy ~= 1.26 (this project runs numpy 2), so its definitions are written out here from its
documentation (https://pythonhosted.org/bob/temp/bob.measure/doc/guide.html: HTER(t) = (FAR(t) + FRR(t)) / 2;
``bob.measure.farfrr``: negatives >= t are false accepts, positives < t false rejects; ``frr_threshold``: the
threshold whose FRR is at most the value asked). Similarity scores: accept ``s >= t``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from calibrate_test_helpers import invoke_cli, write_recipe

TARGETS = (0.05, 0.01)


def clustered_list(path: Path, seed: int, n_classes: int = 60, probes: int = 4) -> Path:
    """A CSV score list of similarities in which each enrolled class has a quality of its own that moves its genuine
    and its impostor scores together (a poor template: genuine lower, impostors higher), so that attempts cluster by
    class; outsider probes are impostors only; scores rounded to 3 decimals (ties)."""
    rng = np.random.default_rng(seed)
    classes = [f"c{k:02d}" for k in range(n_classes)]
    quality = {c: rng.normal(0, 0.12) for c in classes}
    rows = ["claimed_id,real_id,test_label,score"]
    for real in classes + ["outsider"]:
        for p in range(probes):
            for claimed in classes:
                q = quality[claimed]
                s = rng.normal(0.62 + q, 0.08) if claimed == real else rng.normal(0.35 - q, 0.06)
                rows.append(f"{claimed},{real},{real}/{p},{round(s, 3)}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def read_list(path: Path):
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return (np.array([r["claimed_id"] for r in rows]), np.array([r["real_id"] for r in rows]),
            np.array([float(r["score"]) for r in rows]))


def weighted_rates(imp, gen, wi, wg):
    """FMR and FNMR at every candidate similarity threshold (accept s >= t), strict to loose, with attempt weights."""
    grid = np.concatenate([[np.inf], np.unique(np.concatenate([imp, gen]))[::-1]])
    oi, og = np.argsort(-imp), np.argsort(-gen)
    ci = np.concatenate([[0.0], np.cumsum(wi[oi])])
    cg = np.concatenate([[0.0], np.cumsum(wg[og])])
    accepted_i = ci[np.searchsorted(-imp[oi], -grid, side="right")]
    accepted_g = cg[np.searchsorted(-gen[og], -grid, side="right")]
    return grid, accepted_i / wi.sum(), 1.0 - accepted_g / wg.sum()


def eer_point(imp, gen, wi=None, wg=None):
    """(EER, FMR, FNMR) at the threshold where FMR and FNMR are closest (the stricter on a tie)."""
    wi = np.ones(imp.size) if wi is None else wi
    wg = np.ones(gen.size) if wg is None else wg
    _, fmr, fnmr = weighted_rates(imp, gen, wi, wg)
    k = int(np.argmin(np.abs(fmr - fnmr)))
    return (fmr[k] + fnmr[k]) / 2, fmr[k], fnmr[k]


def class_bootstrap(claimed, genuine, scores, replicates=400, seed=123):
    """The EER's 95% percentile interval, enrolled classes resampled with their attempts (exact EER per replicate)."""
    classes, code = np.unique(claimed, return_inverse=True)
    rng = np.random.default_rng(seed)
    imp, gen = scores[~genuine], scores[genuine]
    eers = []
    for _ in range(replicates):
        w = np.bincount(rng.integers(0, classes.size, classes.size), minlength=classes.size).astype(float)
        eers.append(eer_point(imp, gen, w[code[~genuine]], w[code[genuine]])[0])
    return np.quantile(eers, 0.025), np.quantile(eers, 0.975)


def attempt_bootstrap(genuine, scores, replicates=400, seed=321):
    """The same with every attempt its own unit (genuine and impostor ones resampled apart)."""
    rng = np.random.default_rng(seed)
    imp, gen = scores[~genuine], scores[genuine]
    eers = [eer_point(rng.choice(imp, imp.size), rng.choice(gen, gen.size))[0] for _ in range(replicates)]
    return np.quantile(eers, 0.025), np.quantile(eers, 0.975)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("points")
    dev, ev = clustered_list(tmp / "dev.csv", 1), clustered_list(tmp / "eval.csv", 2)
    recipe = {"version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev)},
              "estimators": [{"plugin": "class-interp"}, {"plugin": "generic-interp"}],
              "evaluation": {"targets": list(TARGETS), "prediction": False},
              "output": {"dir": str(tmp / "out"), "plots": False}}
    done = invoke_cli("run", str(write_recipe(tmp / "r.yaml", recipe)), "-q")
    assert done.returncode == 0, done.stderr
    claimed, real, scores = read_list(ev)
    return tmp, json.loads((tmp / "out" / "results.json").read_text(encoding="utf-8")), (claimed, claimed == real, scores)


def test_fmr_at_fnmr_and_pyeers_eer_range_agree_with_numpy(run):
    _, doc, (_, genuine, scores) = run
    imp, gen = scores[~genuine], scores[genuine]
    v = doc["verification"]
    for key, fnmr in (("0.01", 0.01), ("0.001", 0.001), ("0.0001", 0.0001)):
        if fnmr * gen.size < 1:
            assert v["fmr_at_fnmr"][key] is None, key  # fewer than 1 / FNMR genuine attempts
            continue
        # bob.measure's frr_threshold: the strictest (largest) threshold whose FRR is at most the value
        candidates = [t for t in np.unique(gen) if np.mean(gen < t) <= fnmr]
        t = max(candidates)
        assert v["fmr_at_fnmr"][key] == pytest.approx(float(np.mean(imp >= t)), abs=1e-12), key
    eer, fmr, fnmr = eer_point(imp, gen)
    assert v["eer"] == pytest.approx(eer, abs=1e-12)
    # pyeer's eer_low/eer_high (Maio et al. 2002): the lower and the higher rate at the EER's threshold
    assert (v["eer_low"], v["eer_high"]) == pytest.approx((min(fmr, fnmr), max(fmr, fnmr)), abs=1e-12)
    assert v["eer_low"] <= v["eer"] <= v["eer_high"]


def test_the_eer_interval_is_a_bootstrap_over_classes_as_numpy_computes_it(run):
    _, doc, (claimed, genuine, scores) = run
    v = doc["verification"]
    assert (v["eer_ci_level"], v["eer_ci_units"]) == (0.95, "enrolled classes")
    low, high = class_bootstrap(claimed, genuine, scores)
    a_low, a_high = attempt_bootstrap(genuine, scores)
    width = high - low
    # the data cluster by class: resampling attempts would be far narrower, so the comparison below can tell them apart
    assert a_high - a_low < 0.6 * width
    # Monte Carlo noise of 2.5% and 97.5% percentiles over 400 and 1,000 replicates, and the 2% grid: a fifth of the width
    assert v["eer_ci_low"] == pytest.approx(low, abs=0.2 * width)
    assert v["eer_ci_high"] == pytest.approx(high, abs=0.2 * width)
    assert v["eer_ci_low"] < v["eer"] < v["eer_ci_high"]


def test_hter_is_bobs_at_each_estimators_thresholds(run):
    tmp, doc, (claimed, genuine, scores) = run
    with open(tmp / "out" / "thresholds.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for label in ("class-interp", "generic-interp"):
        for row in doc["estimators"][label]["targets"]:
            t = {r["class"]: float(r["score_threshold"]) for r in rows
                 if r["estimator"] == label and float(r["target_fpr"]) == row["target_fpr"]}
            per_attempt = np.array([t[c] for c in claimed])
            far = np.mean(scores[~genuine] >= per_attempt[~genuine])  # bob.measure.farfrr, class by class
            frr = np.mean(scores[genuine] < per_attempt[genuine])
            assert row["hter"] == pytest.approx((far + frr) / 2, abs=1e-12), (label, row["target_fpr"])


def test_evaluate_reports_the_same_operating_points_as_the_run(run):
    tmp, doc, _ = run
    fitted = invoke_cli("fit", str(tmp / "dev.csv"), "--estimator", "class-interp", "--out", str(tmp / "cal.json"),
                        "--no-predict", *[a for t in TARGETS for a in ("--fpr", str(t))])
    assert fitted.returncode == 0, fitted.stderr
    judged = invoke_cli("evaluate", str(tmp / "cal.json"), str(tmp / "eval.csv"), "--json")
    assert judged.returncode == 0, judged.stderr
    got = json.loads(judged.stdout)
    for key in ("eer", "eer_low", "eer_high", "eer_ci_low", "eer_ci_high", "eer_ci_level", "eer_ci_units",
                "fmr_at_fnmr"):
        assert got["verification"][key] == pytest.approx(doc["verification"][key], abs=1e-12), key
    for g, w in zip(got["targets"], doc["estimators"]["class-interp"]["targets"], strict=True):
        assert g["hter"] == pytest.approx(w["hter"], abs=1e-12)
    text = invoke_cli("evaluate", str(tmp / "cal.json"), str(tmp / "eval.csv"))
    assert "95% interval" in text.stdout and "FMR at FNMR 1%:" in text.stdout and "| HTER |" in text.stdout
