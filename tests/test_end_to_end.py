"""End to end: recipes on a tiny generated .npz (euclidean, enrollment protocol) and on a generated
score CSV, checked against an independent computation; and BSSR1 face-C when the data exist."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app

from calibrate_test_helpers import DATA, documented_order, make_scores, score_recipe, write_recipe, write_scores
from test_interp import brute_tau


def _patterns(tmp: Path) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(21)
    X, labels, sets = [], [], []
    for c in range(6):
        centre = rng.normal(0, 1.0, 4)
        for s in ("s0", "s1", "s2"):
            shift = rng.normal(0, 0.4, 4)
            for _ in range(2):
                X.append(centre + shift + rng.normal(0, 0.3, 4))
                labels.append(f"k{c}")
                sets.append(s)
    X, labels, sets = np.array(X), np.array(labels), np.array(sets)
    path = tmp / "patterns.npz"
    np.savez(path, X=X, labels=labels, sets=sets)
    return path, X, labels, sets


def _expected_counts(X, labels, sets, enrolled_set: str, targets, estimator: str):
    """Independent reference: set means, enrollment-vs-enrollment impostor distances, thresholds by
    the paper's formula, then false accepts / attempts and genuine rejections over the query sets."""
    classes = sorted(set(labels))
    mean = {(c, s): X[(labels == c) & (sets == s)].mean(axis=0) for c in classes for s in sorted(set(sets))}
    enrolled = {c: mean[(c, enrolled_set)] for c in classes}
    train = {c: [float(np.linalg.norm(enrolled[o] - enrolled[c])) for o in classes if o != c] for c in classes}
    pooled = [d for c in classes for d in train[c]]
    tau = {c: [brute_tau(pooled if estimator == "generic-interp" else train[c], t) for t in targets] for c in classes}
    out = []
    for k in range(len(targets)):
        fa = attempts = rejected = genuine = 0
        for (qc, qs), q in mean.items():
            if qs == enrolled_set:
                continue
            for c in classes:
                d = float(np.linalg.norm(q - enrolled[c]))
                if qc == c:
                    genuine += 1
                    rejected += d > tau[c][k]
                else:
                    attempts += 1
                    fa += d <= tau[c][k]
        out.append((fa, attempts, rejected / genuine, tau))
    return out


def test_npz_euclidean_enrollment_protocol(tmp_path):
    path, X, labels, sets = _patterns(tmp_path)
    targets = [0.5, 0.2, 0.1]  # N = 5 per class: both sides of 1/N for class-interp
    recipe = {"version": 1, "data": {"plugin": "npz-patterns", "path": "patterns.npz"},
              "distance": {"plugin": "euclidean"},
              "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}],
              "evaluation": {"targets": targets, "enrollment": "s1"},
              "output": {"dir": "out", "plots": False}}
    result = calibrate.run(write_recipe(tmp_path / "recipe.yaml", recipe))
    assert result.out_dir == (tmp_path / "out").resolve()
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    with open(tmp_path / "out" / "thresholds.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for label in ("generic-interp", "class-interp"):
        expected = _expected_counts(X, labels, sets, "s1", targets, label)
        for k, (fa, attempts, fnr, tau) in enumerate(expected):
            got = doc["estimators"][label]["targets"][k]
            assert (got["false_accepts"], got["impostor_attempts"]) == (fa, attempts)
            assert got["impostor_attempts"] == 12 * 5  # 12 query sets x 5 other enrolled classes
            assert got["fnr"] == pytest.approx(fnr)
            for r in rows:
                if r["estimator"] == label and float(r["target_fpr"]) == targets[k]:
                    assert float(r["threshold"]) == pytest.approx(tau[r["class"]][k], rel=1e-12)


def test_npz_rotating_enrollment_sums_over_folds(tmp_path):
    path, X, labels, sets = _patterns(tmp_path)
    recipe = {"data": {"plugin": "npz-patterns", "path": str(path)}, "distance": {"plugin": "euclidean"},
              "estimators": ["class-interp"], "evaluation": {"targets": [0.2], "enrollment": 0, "rotate": True},
              "output": {"dir": str(tmp_path / "out"), "plots": False}}
    calibrate.run(write_recipe(tmp_path / "recipe.yaml", recipe))
    out = tmp_path / "out"
    assert (out / "thresholds-fold1.csv").exists() and (out / "thresholds-fold2.csv").exists()
    got = json.loads((out / "results.json").read_text())["estimators"]["class-interp"]["targets"][0]
    fa = attempts = 0
    for s in ("s0", "s1", "s2"):
        f, a, _, _ = _expected_counts(X, labels, sets, s, [0.2], "class-interp")[0]
        fa, attempts = fa + f, attempts + a
    assert (got["false_accepts"], got["impostor_attempts"]) == (fa, attempts)


def test_staggered_enrollment_gives_each_class_a_different_set_position(tmp_path):
    path, X, labels, sets = _patterns(tmp_path)
    recipe = {"data": {"plugin": "npz-patterns", "path": str(path)}, "distance": {"plugin": "euclidean"},
              "estimators": ["class-interp"], "evaluation": {"targets": [0.2], "enrollment": "staggered", "rotate": True},
              "output": {"dir": str(tmp_path / "out"), "plots": False}}
    result = calibrate.run(write_recipe(tmp_path / "recipe.yaml", recipe))
    assert len(result.folds) == 3
    for k, fold in enumerate(result.folds):
        # class number i enrolls set position (i + k) mod 3; query sets are all the others
        expected = [f"k{i}/s{(i + k) % 3}" for i in range(6)]
        assert fold.train.gallery_ids.tolist() == expected
        assert set(fold.test.probe_ids.tolist()).isdisjoint(expected)
        assert len(fold.test.probe_ids) == 12
        # enrollment-vs-enrollment distances are exactly those between the enrolled set means
        means = {f"{c}/{s}": X[(labels == c) & (sets == s)].mean(axis=0) for c, s in
                 {(c, s) for c, s in zip(labels, sets)}}
        ref = np.array([[np.linalg.norm(means[a] - means[b]) for b in expected] for a in expected])
        np.testing.assert_allclose(fold.train.values, ref, rtol=1e-12, atol=1e-12)


def test_score_csv_from_the_command_line(tmp_path):
    values, probes, gallery = make_scores(seed=8, n_classes=10, probes_per_class=12, impostor_probes=5)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    targets = (0.05, 0.02)
    path = write_recipe(tmp_path / "recipe.yaml", score_recipe(csv_path, tmp_path / "out", targets=targets,
                                                                  estimators=({"plugin": "class-interp"},)))
    result = CliRunner().invoke(app, ["run", str(path), "-q"])
    assert result.exit_code == 0, result.output
    # independent reference: the documented split (seed 0, fit_fraction 0.5), d = 1 - s
    p, g = np.array(probes), np.array(gallery)
    got = json.loads((tmp_path / "out" / "results.json").read_text())["estimators"]["class-interp"]["targets"]
    for k, t in enumerate(targets):
        fa = attempts = 0
        for j in range(len(g)):
            rows = np.array(documented_order(np.flatnonzero(p != g[j]), j))
            n_fit = int(round(0.5 * rows.size))
            fit, evaluate = rows[:n_fit], rows[n_fit:]
            tau = brute_tau((1.0 - values[fit, j]).tolist(), t)
            fa += int(np.sum(1.0 - values[evaluate, j] <= tau))
            attempts += evaluate.size
        assert (got[k]["false_accepts"], got[k]["impostor_attempts"]) == (fa, attempts)


FACE_C = DATA / "bssr1-set1" / "face-C.csv"


@pytest.mark.skipif(not FACE_C.exists(), reason=f"real data not available at {FACE_C}")
def test_bssr1_face_c_with_both_interpolation_estimators(tmp_path):
    recipe = {"version": 1,
              "data": {"plugin": "score-matrix", "path": str(FACE_C), "kind": "similarity", "missing": -1},
              "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
              "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}],
              "evaluation": {"targets": [0.005, 0.0025, 0.001, 0.0005]},
              "output": {"dir": str(tmp_path / "out"), "plots": False}}
    result = CliRunner().invoke(app, ["run", str(write_recipe(tmp_path / "face-c.yaml", recipe)), "-q"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    with open(out / "thresholds.csv", newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["estimator", "class", "target_fpr", "threshold", "score_threshold", "accept_if", "class_long_run_fpr_low", "class_long_run_fpr_high", "prediction_status"]
        rows = list(reader)
    # score units: the similarity threshold is 1 - the distance threshold (upper: 1), compared with >=
    assert all(r[5] == "score >= t" and float(r[4]) == pytest.approx(1.0 - float(r[3]), abs=1e-12) for r in rows)
    classes = {r[1] for r in rows}
    assert len(classes) > 500  # one column of the 517 failed entirely and is dropped with a note
    assert len(rows) == 2 * len(classes) * 4
    assert all(0.0 <= float(r[3]) <= 1.0 for r in rows)
    doc = json.loads((out / "results.json").read_text())
    assert set(doc) >= {"estimators", "recipe", "versions"}
    for label in ("generic-interp", "class-interp"):
        targets = doc["estimators"][label]["targets"]
        assert [t["target_fpr"] for t in targets] == [0.005, 0.0025, 0.001, 0.0005]
        for t in targets:
            assert t["impostor_attempts"] > 100_000
            assert t["ratio"] == pytest.approx(t["fpr"] / t["target_fpr"])
    # the generic threshold achieves roughly its target on unseen impostors (paper, Table 1)
    assert 0.5 < doc["estimators"]["generic-interp"]["targets"][0]["ratio"] < 2.0
    report = (out / "report.md").read_text()
    table = [l for l in report.splitlines() if l.startswith("| ") and l.split("|")[1].strip().endswith("%")]
    assert [l.split("|")[1].strip() for l in table[:4]] == ["0.5%", "0.25%", "0.1%", "0.05%"]
    assert "failed comparisons" in report


def test_default_enrollment_copes_with_classes_of_one_set(tmp_path):
    path, X, labels, sets = _patterns(tmp_path)
    keep = ~((labels == "k0") & (sets != "s0")) & ~((labels == "k1") & (sets == "s2"))  # k0: 1 set, k1: 2 sets
    np.savez(path, X=X[keep], labels=labels[keep], sets=sets[keep])
    recipe = {"data": {"plugin": "npz-patterns", "path": str(path)}, "distance": {"plugin": "euclidean"},
              "estimators": ["class-interp"], "evaluation": {"targets": [0.2]}, "output": {"dir": str(tmp_path / "out")}}
    (fold,) = calibrate.run(write_recipe(tmp_path / "recipe.yaml", recipe)).folds
    # class number i enrolls set i mod (its number of sets): k0 its only set, k1 s1, k2 s2, k3 s0, ...
    assert fold.train.gallery_ids.tolist() == ["k0/s0", "k1/s1", "k2/s2", "k3/s0", "k4/s1", "k5/s2"]
    assert not any(p.startswith("k0/") for p in fold.test.probe_ids)  # a one-set class gives no queries
