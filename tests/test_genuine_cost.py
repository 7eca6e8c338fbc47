"""What thresholds cost genuine users and how they treat groups (issue 29), checked on generated score lists against
an independent numpy computation from the raw evaluation scores: a recipe run (results.json, det.csv, report.md)
and `calibrate evaluate`. Ties are counted as the accept rule says (``score >= t`` accepts a tie)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from calibrate_test_helpers import invoke_cli, write_recipe

TARGETS = (0.05, 0.02, 0.01)
ESTIMATORS = ("generic-interp", "class-interp", "auto")


def score_list(path: Path, seed: int, n_classes: int = 24, probes: int = 5, decimals: int = 3) -> Path:
    """A CSV score list (claimed_id, real_id, test_label, score) of similarities: classes c00.. in two groups of unequal
    size (F: the first third), same-group impostors closer, a per-class location, scores rounded (ties)."""
    rng = np.random.default_rng(seed)
    classes = [f"c{k:02d}" for k in range(n_classes)]
    female = {c: k < n_classes // 3 for k, c in enumerate(classes)}
    location = {c: rng.normal(0, 0.05) for c in classes}
    rows = ["claimed_id,real_id,test_label,score"]
    for real in classes + ["outsider"]:
        for p in range(probes):
            label = f"{real}/{seed}-{p}"
            shift = rng.normal(0, 0.03)
            for claimed in classes:
                if claimed == real:
                    s = rng.normal(0.75, 0.08) + shift
                else:
                    same = real != "outsider" and female[real] == female[claimed]
                    s = rng.normal(0.3, 0.07) + location[claimed] + shift + (0.1 if same else 0.0)
                rows.append(f"{claimed},{real},{label},{round(s, decimals)}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def groups_file(path: Path, n_classes: int = 24, leave_out: int = 2) -> Path:
    """class,group for every class but the last ``leave_out`` (unlabelled); the outsider probe has no group either."""
    lines = ["class,group"] + [f"c{k:02d},{'F' if k < n_classes // 3 else 'M'}" for k in range(n_classes - leave_out)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_list(path: Path):
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return (np.array([r["claimed_id"] for r in rows]), np.array([r["real_id"] for r in rows]),
            np.array([float(r["score"]) for r in rows]))


def one_threshold_fnr(imp: np.ndarray, gen: np.ndarray, false_accepts: int) -> tuple[float, float, float]:
    """Brute force over every candidate similarity threshold t (accept s >= t): the lowest FNR among those admitting at
    most ``false_accepts`` impostors; returns (fnr, its fpr, t)."""
    grid = np.concatenate([np.unique(np.concatenate([imp, gen])), [np.inf]])
    best = None
    for t in grid:
        fa = int(np.sum(imp >= t))
        if fa <= false_accepts:
            fnr = float(np.mean(gen < t))
            if best is None or fnr < best[0]:
                best = (fnr, fa / imp.size, t)
    return best


def brute_eer(imp: np.ndarray, gen: np.ndarray) -> float:
    grid = np.concatenate([np.unique(np.concatenate([imp, gen])), [np.inf]])[::-1]  # strict to loose in distance terms
    pairs = [(float(np.mean(imp >= t)), float(np.mean(gen < t))) for t in grid]
    gaps = [abs(a - b) for a, b in pairs]
    k = int(np.argmin(gaps))
    return sum(pairs[k]) / 2


def decisions(thresholds: Path, label: str, target: float, claimed: np.ndarray, scores: np.ndarray) -> np.ndarray:
    with open(thresholds, encoding="utf-8") as fh:
        t = {r["class"]: float(r["score_threshold"]) for r in csv.DictReader(fh)
             if r["estimator"] == label and float(r["target_fpr"]) == target}
    return np.array([s >= t[c] for c, s in zip(claimed, scores)])


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grouped")
    dev, ev = score_list(tmp / "dev.csv", 1), score_list(tmp / "eval.csv", 2)
    groups = groups_file(tmp / "groups.csv")
    recipe = {"version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev), "groups": str(groups)},
              "estimators": [{"plugin": e} for e in ESTIMATORS], "evaluation": {"targets": list(TARGETS)},
              "output": {"dir": str(tmp / "out"), "plots": True}}
    done = invoke_cli("run", str(write_recipe(tmp / "r.yaml", recipe)), "-q")
    assert done.returncode == 0, done.stderr
    return tmp, json.loads((tmp / "out" / "results.json").read_text(encoding="utf-8")), done


def test_fnr_one_threshold_and_the_paired_counts_agree_with_a_brute_force_on_the_raw_scores(grouped_run):
    tmp, doc, _ = grouped_run
    claimed, real, scores = read_list(tmp / "eval.csv")
    genuine = claimed == real
    imp, gen = scores[~genuine], scores[genuine]
    for label in ESTIMATORS:
        for row in doc["estimators"][label]["targets"]:
            accepted = decisions(tmp / "out" / "thresholds.csv", label, row["target_fpr"], claimed, scores)
            assert row["false_accepts"] == int(accepted[~genuine].sum())
            fnr, fpr, t = one_threshold_fnr(imp, gen, row["false_accepts"])
            assert row["fnr_one_threshold"] == pytest.approx(fnr, abs=1e-12), (label, row["target_fpr"])
            assert row["one_threshold"]["fpr"] == pytest.approx(fpr, abs=1e-12)
            assert row["one_threshold"]["fpr"] <= row["fpr"] + 1e-15  # never more impostors than the estimator
            assert row["one_threshold"]["score_threshold"] <= t  # the loosest such threshold: at or below the grid's
            if fnr > 0:
                assert row["fnr_cost"] == pytest.approx(row["fnr"] / fnr, rel=1e-12)
            ref = gen >= t
            mine = accepted[genuine]
            assert row["fnr_paired"]["rejected_only_by_estimator"] == int(np.sum(~mine & ref))
            assert row["fnr_paired"]["rejected_only_by_one_threshold"] == int(np.sum(mine & ~ref))


def test_verification_metrics_agree_with_a_brute_force_over_every_threshold(grouped_run):
    tmp, doc, _ = grouped_run
    claimed, real, scores = read_list(tmp / "eval.csv")
    genuine = claimed == real
    imp, gen = scores[~genuine], scores[genuine]
    v = doc["verification"]
    assert v["eer"] == pytest.approx(brute_eer(imp, gen), abs=1e-12)
    auc = (np.sum(gen[:, None] > imp[None, :]) + 0.5 * np.sum(gen[:, None] == imp[None, :])) / (gen.size * imp.size)
    assert v["auc"] == pytest.approx(auc, abs=1e-12)
    assert v["d_prime"] == pytest.approx(abs(gen.mean() - imp.mean()) / np.sqrt((gen.var() + imp.var()) / 2), rel=1e-6)
    for key, fmr in (("0.01", 0.01), ("0.05", 0.05)):
        fnr, _, _ = one_threshold_fnr(imp, gen, int(np.floor(fmr * imp.size + 1e-9)))
        assert v["fnmr_at_fmr"][key] == pytest.approx(fnr, abs=1e-12)
    assert v["fnmr_at_fmr"]["0.0001"] is None  # fewer than 10,000 impostor attempts
    assert (v["impostor_attempts"], v["genuine_attempts"]) == (imp.size, gen.size)


def test_det_csv_is_monotone_and_reaches_every_operating_point(grouped_run):
    tmp, doc, _ = grouped_run
    with open(tmp / "out" / "det.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["fpr", "fnr", "score_threshold"] and 2 < len(rows) <= 10_000
    fpr = np.array([float(r["fpr"]) for r in rows])
    fnr = np.array([float(r["fnr"]) for r in rows])
    t = np.array([float(r["score_threshold"]) for r in rows])
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(fnr) <= 0) and np.all(np.diff(t) < 0)
    assert (fpr[0], fnr[-1]) == (0.0, 0.0)
    claimed, real, scores = read_list(tmp / "eval.csv")
    genuine = claimed == real
    for k in np.random.default_rng(0).choice(len(rows), 25, replace=False):  # each row as the accept rule says
        assert fpr[k] == pytest.approx(np.mean(scores[~genuine] >= t[k]), abs=1e-12)
        assert fnr[k] == pytest.approx(np.mean(scores[genuine] < t[k]), abs=1e-12)
    points = set(zip(fpr.round(12), fnr.round(12)))
    for label in ESTIMATORS:
        for row in doc["estimators"][label]["targets"]:
            assert (round(row["one_threshold"]["fpr"], 12), round(row["fnr_one_threshold"], 12)) in points


def test_group_figures_agree_with_a_direct_count(grouped_run):
    tmp, doc, _ = grouped_run
    claimed, real, scores = read_list(tmp / "eval.csv")
    genuine = claimed == real
    group = {f"c{k:02d}": ("F" if k < 8 else "M") for k in range(22)}
    g_claimed = np.array([group.get(c, "unlabelled") for c in claimed])
    g_real = np.array([group.get(c, "unlabelled") for c in real])
    assert doc["groups"]["classes"] == {"F": 8, "M": 14, "unlabelled": 2}
    for label in ESTIMATORS:
        for row in doc["estimators"][label]["targets"]:
            accepted = decisions(tmp / "out" / "thresholds.csv", label, row["target_fpr"], claimed, scores)
            _, _, t = one_threshold_fnr(scores[~genuine], scores[genuine], row["false_accepts"])
            reference = scores >= t
            rates = {}
            for name, decided, got in (("est", accepted, row["groups"]), ("one", reference, row["one_threshold"]["groups"])):
                for g in ("F", "M"):
                    same = ~genuine & (g_claimed == g) & (g_real == g)
                    assert got[g]["impostor_attempts_same_group"] == int(same.sum())
                    assert got[g]["false_accepts_same_group"] == int(decided[same].sum())
                    mine = genuine & (g_claimed == g)
                    assert got[g]["fnmr"] == pytest.approx(np.mean(~decided[mine]), abs=1e-12)
                    assert got[g]["fmr"] == pytest.approx(np.mean(decided[~genuine & (g_claimed == g)]), abs=1e-12)
                    rates[name, g] = (decided[same].mean(), np.mean(~decided[mine]))
                assert "fmr_same_group" not in got["unlabelled"] and got["unlabelled"]["classes"] == 2
            for name, got in (("est", row), ("one", row["one_threshold"])):
                same = [rates[name, g][0] for g in ("F", "M")]
                if min(same) > 0:
                    assert got["fmr_same_group_max_over_min"] == pytest.approx(max(same) / min(same), rel=1e-12)
                else:
                    assert got["fmr_same_group_max_over_min"] is None


def test_the_report_says_who_costs_genuine_users_and_draws_the_groups(grouped_run):
    tmp, doc, done = grouped_run
    report = (tmp / "out" / "report.md").read_text(encoding="utf-8")
    assert "## What the thresholds cost genuine users" in report and "## The matcher on the evaluation data" in report
    assert "## Demographic groups" in report and (tmp / "out" / "groups.png").stat().st_size > 1000
    manifest = json.loads((tmp / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert {"det.csv", "groups.png"} <= set(manifest["files"])
    # every estimator whose paired comparison is beyond noise is named in words, with its count per 1,000
    for label in ESTIMATORS:
        for row in doc["estimators"][label]["targets"]:
            paired = row["fnr_paired"]
            if paired["beyond_noise"] and paired["extra_rejects_per_1000"] > 0:
                assert f"**{label} costs genuine users** beyond counting noise" in report
                assert f"{paired['extra_rejects_per_1000']:.3g} more per 1,000" in report
    # the groups file named 22 of the 24 enrolled classes and no outsider: said in the notes
    assert any("2 of the 24 enrolled classes have no group" in n for n in doc["notes"])
    assert doc["timings"]["within"] == {"fpr: genuine cost and groups": "evaluate fpr"}


def test_evaluate_reports_the_same_figures_as_the_run(grouped_run):
    tmp, doc, _ = grouped_run
    fitted = invoke_cli("fit", str(tmp / "dev.csv"), "--estimator", "class-interp", "--out", str(tmp / "cal.json"),
                        "--groups", str(tmp / "groups.csv"), *[a for t in TARGETS for a in ("--fpr", str(t))])
    assert fitted.returncode == 0, fitted.stderr
    assert "groups from" in fitted.stdout and "same-group FMR max/min" in fitted.stdout
    judged = invoke_cli("evaluate", str(tmp / "cal.json"), str(tmp / "eval.csv"), "--groups", str(tmp / "groups.csv"),
                        "--det", str(tmp / "det-eval.csv"), "--json")
    assert judged.returncode == 0, judged.stderr
    got = json.loads(judged.stdout)
    want = doc["estimators"]["class-interp"]["targets"]
    for g, w in zip(got["targets"], want, strict=True):
        assert g["false_accepts"] == w["false_accepts"]
        for key in ("fnr", "fnr_one_threshold", "fnr_cost", "fmr_same_group_max_over_min", "fnmr_max_over_min"):
            assert g[key] == pytest.approx(w[key], abs=1e-12), key
        assert g["fnr_paired"] == w["fnr_paired"]
        mine, theirs = dict(g["groups"]["F"]), dict(w["groups"]["F"])
        assert mine.pop("fnmr_paired_own_threshold") == theirs.pop("fnmr_paired_own_threshold")
        assert mine == pytest.approx(theirs, abs=1e-12)
        assert g["one_threshold"]["score_threshold"] == pytest.approx(w["one_threshold"]["score_threshold"], abs=1e-12)
    for key in ("eer", "auc", "fnmr_at_zero_fmr", "fmr_at_zero_fnmr"):
        assert got["verification"][key] == pytest.approx(doc["verification"][key], abs=1e-12), key
    assert got["verification"]["fnmr_at_fmr"]["0.01"] == pytest.approx(doc["verification"]["fnmr_at_fmr"]["0.01"])
    assert (tmp / "det-eval.csv").read_text(encoding="utf-8").splitlines()[0] == "fpr,fnr,score_threshold"
    text = invoke_cli("evaluate", str(tmp / "cal.json"), str(tmp / "eval.csv"), "--groups", str(tmp / "groups.csv"))
    assert text.returncode == 0, text.stderr
    assert "one pooled threshold's FNR at the same FPR (FNR cost)" in text.stdout
    assert "verification (one pooled threshold on" in text.stdout and "groups from" in text.stdout


def test_accept_writes_each_attempts_group(grouped_run):
    tmp, _, _ = grouped_run
    done = invoke_cli("accept", str(tmp / "out"), str(tmp / "eval.csv"), "--fpr", "0.05", "--estimator",
                      "generic-interp", "--groups", str(tmp / "groups.csv"), "--out", str(tmp / "decisions.csv"))
    assert done.returncode == 0, done.stderr
    with open(tmp / "decisions.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0].keys() >= {"claimed", "group", "accept"}
    assert {r["group"] for r in rows if r["claimed"] == "c00"} == {"F"}
    assert {r["group"] for r in rows if r["claimed"] == "c23"} == {"unlabelled"}
    assert "group F:" in done.stdout and "group unlabelled:" in done.stdout
    # an output that is one of the inputs is refused before anything is written
    same = invoke_cli("accept", str(tmp / "out"), str(tmp / "eval.csv"), "--fpr", "0.05", "--groups",
                      str(tmp / "groups.csv"), "--out", str(tmp / "groups.csv"), "--estimator", "generic-interp")
    assert same.returncode == 2 and "groups.csv" in same.stderr


@pytest.mark.parametrize("text, match", [
    ("klass,group\nc00,F\n", r"does not name a `class` and a `group` column"),
    ("class,group\nc00,F\nc00,M\n", r"class 'c00' is in group 'F' on line 2 and in 'M' on line 3"),
    ("class,group\nc00,unlabelled\n", r"`unlabelled` is the name given to classes without a group"),
    ("class,group\nc00,\n", r"line 2: class 'c00' has no group"),
    ("class,group\nnobody,F\n", r"none of its 1 classes .* is a class of the data"),
    ("", r"the groups file is empty"),
    (b"class,group\n\xff\xfe,F\n", r"not UTF-8"),
    ("class,group\n" + "".join(f"x{k},g{k}\n" for k in range(101)), r"101 distinct groups; at most 100"),
    ("class,group\nc00,F\nc01\n", r"line 3 has 1 field\(s\) but the header names 2"),
    ('class,group\nc00,"F\nM"\n', r"holds a control character"),
])
def test_a_bad_groups_file_is_one_clear_error_naming_the_place(tmp_path, text, match):
    dev, ev = score_list(tmp_path / "dev.csv", 1, n_classes=6, probes=2), score_list(tmp_path / "ev.csv", 2, n_classes=6,
                                                                                     probes=2)
    groups = tmp_path / "groups.csv"
    groups.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-list", "train": str(dev),
                                                                       "test": str(ev), "groups": "groups.csv"},
                                                "estimators": [{"plugin": "generic-interp"}],
                                                "output": {"dir": str(tmp_path / "out"), "plots": False}})
    done = invoke_cli("run", str(recipe), "-q")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and __import__("re").search(match, done.stderr), done.stderr
    assert not (tmp_path / "out").exists()
    judged = invoke_cli("evaluate", str(tmp_path / "nowhere.json"), str(ev), "--groups", str(groups))
    assert judged.returncode == 2 and judged.stderr.count("\n") == 1


def test_a_missing_groups_file_is_refused_at_validation(tmp_path):
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "synthetic-groups", "classes": 20,
                                                                       "groups": "absent.csv"}})
    done = invoke_cli("validate", str(recipe))
    assert done.returncode == 2 and done.stderr.startswith("error: data.groups in ") and "does not exist" in done.stderr


def test_a_sharded_recipe_with_groups_validates(tmp_path):
    # issue 43: a sharded run computes the figures per group and calibrates against same-group impostors
    # (tests/test_sharded_choice.py runs them against the in-memory run)
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.txt").write_text("c0 c0 p 0.9\nc1 c0 p 0.1\n", encoding="utf-8")
    groups_file(tmp_path / "g.csv")
    for impostors in ("all", "same-group"):
        recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {
            "plugin": "score-shards", "path": "shards", "groups": "g.csv", "kind": "distance", "impostors": impostors}})
        done = invoke_cli("validate", str(recipe))
        assert done.returncode == 0, done.stderr


def test_folds_are_pooled_for_the_one_threshold_on_the_raw_scores():
    """Rotating enrollment: one threshold over every fold's attempts, read at the estimator's summed false accepts."""
    from calibrate.contract.base import EvaluationInput, Fold
    from calibrate.contract.types import DistanceMatrix, ImpostorDistances, ThresholdTable
    from calibrate_builtins.estimators.interp import GenericInterp
    from calibrate_builtins.evaluators.fpr import FprEvaluator

    folds = []
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        classes = [f"c{i}" for i in range(12)]
        probes = np.repeat(classes, 4)
        values = np.round(rng.gamma(4.0, 1.0, (probes.size, 12)), 1)
        values[probes[:, None] == np.array(classes)[None, :]] = np.round(rng.gamma(1.5, 0.6, probes.size), 1)
        test = DistanceMatrix(values, probes, np.array(classes), source="test")
        train = DistanceMatrix(rng.gamma(4.0, 1.0, (12, 12)), np.array(classes), np.array(classes), source="train")
        taus = np.sort(rng.uniform(0.5, 2.0, (12, 2)), axis=1)[:, ::-1]
        model = GenericInterp().fit(ImpostorDistances.from_matrix(train))
        folds.append(Fold(f"f{seed}", train, test, {"est": model}, {"est": ThresholdTable("est", tuple(classes),
                                                                                          (0.05, 0.01), taus)}))
    result = FprEvaluator(plots=False).evaluate(EvaluationInput(tuple(folds), (0.05, 0.01), plots=False))
    imp = np.concatenate([f.test.values[f.test.impostor_mask()] for f in folds])
    gen = np.concatenate([f.test.values[f.test.genuine_mask()] for f in folds])
    for row in result.estimators["est"]:
        # brute force on distances (accept d <= t): negate to reuse the similarity helper
        fnr, _, _ = one_threshold_fnr(-imp, -gen, row.false_accepts)
        assert row.fnr_one_threshold == pytest.approx(fnr, abs=1e-12)
    assert result.summary["verification"]["impostor_attempts"] == imp.size


def test_a_normalised_run_is_judged_against_one_threshold_on_the_raw_scores(tmp_path):
    dev, ev = score_list(tmp_path / "dev.csv", 3), score_list(tmp_path / "eval.csv", 4)
    recipe = {"version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev)},
              "normalizer": {"plugin": "znorm"}, "estimators": [{"plugin": "generic-interp"}],
              "evaluation": {"targets": [0.05, 0.02], "prediction": False}, "output": {"dir": str(tmp_path / "out"),
                                                                                       "plots": False}}
    done = invoke_cli("run", str(write_recipe(tmp_path / "r.yaml", recipe)), "-q")
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    claimed, real, scores = read_list(ev)
    genuine = claimed == real
    for row in doc["estimators"]["generic-interp"]["targets"]:
        fnr, _, t = one_threshold_fnr(scores[~genuine], scores[genuine], row["false_accepts"])
        assert row["fnr_one_threshold"] == pytest.approx(fnr, abs=1e-12)
        assert row["one_threshold"]["score_threshold"] <= t
    assert doc["verification"]["eer"] == pytest.approx(brute_eer(scores[~genuine], scores[genuine]), abs=1e-12)


def test_the_synthetic_groups_family_has_the_structure_it_promises():
    from calibrate.contract.base import RunContext
    from calibrate_builtins.datasets.synthetic_groups import SyntheticGroups

    for genuine in ("follows", "fixed"):
        split = SyntheticGroups(classes=120, group_shares=[0.7, 0.3], train_probes=2, test_probes=2, class_spread=1.0,
                                genuine=genuine, seed=3).load(RunContext())
        test, labels = split.test, split.groups
        assert labels.names == ("g1", "g2") and labels.groups.count("g2") == 36
        g_probe, g_class = labels.codes(test.probe_classes), labels.codes(test.gallery_classes)
        imp = test.impostor_mask()
        same = imp & (g_probe[:, None] == g_class[None, :])
        # same-group impostors score closer (higher) than other-group ones, by within_group (1.5 sd of 0.1)
        gap = test.values[same].mean() - test.values[imp & ~same].mean()
        assert gap == pytest.approx(0.15, abs=0.02)
        # a class's genuine scores follow its impostor location, or do not
        location = np.array([test.values[imp[:, j], j].mean() for j in range(test.shape[1])])
        gen = test.genuine_mask()
        genuine_mean = np.array([test.values[gen[:, j], j].mean() for j in range(test.shape[1])])
        r = np.corrcoef(location, genuine_mean)[0, 1]
        assert (r > 0.5) if genuine == "follows" else (abs(r) < 0.3), (genuine, r)


def test_a_groups_file_with_a_bom_crlf_quotes_and_extra_columns_reads_as_meant(tmp_path):
    from calibrate.recipe.groups import read_groups

    path = tmp_path / "g.csv"
    path.write_bytes('\ufeffid,group,class\r\n1,F,"Doe, Jane"\r\n2,M,c01\r\n\r\n3,M,c01\r\n'.encode("utf-8"))
    labels = read_groups(path)
    assert dict(zip(labels.classes, labels.groups)) == {"Doe, Jane": "F", "c01": "M"}
    assert labels.names == ("F", "M")
    assert labels.codes(["c01", "Doe, Jane", "nobody"]).tolist() == [1, 0, 2]
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(Exception, match="not a regular file"):
        read_groups(tmp_path / "folder.csv")


def test_validate_names_the_groups_it_read(tmp_path):
    groups_file(tmp_path / "g.csv")
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "synthetic-groups", "classes": 24,
                                                                       "groups": "g.csv"}})
    done = invoke_cli("validate", str(recipe))
    assert done.returncode == 0, done.stderr
    assert "groups F, M for 22 classes from" in done.stdout


def test_look_alikes_score_near_whatever_the_class_location():
    """With look-alikes the bulk of a class's impostors follows its location but its nearest impostors do not."""
    from calibrate.contract.base import RunContext
    from calibrate_builtins.datasets.synthetic_groups import SyntheticGroups

    split = SyntheticGroups(classes=200, group_shares=[1.0], train_probes=4, test_probes=1, class_spread=1.0,
                            look_alikes=0.05, look_alike_level=2.5, genuine="fixed", seed=5).load(RunContext())
    train = split.train
    imp = train.impostor_mask()
    columns = [train.values[imp[:, j], j] for j in range(train.shape[1])]
    median = np.array([np.median(c) for c in columns])
    top = np.array([np.quantile(c, 0.99) for c in columns])
    # the bulk moves by the class location (sd 1.0 in units of 0.1); the top 1% moves less than half as much
    assert np.std(median) / 0.1 == pytest.approx(1.0, abs=0.2)
    assert np.std(top) < 0.5 * np.std(median)


def test_many_groups_and_names_matplotlib_would_read_as_formulas_draw_and_report(tmp_path):
    """Up to the 100 groups a file may name, and names with `$`, `_`, `^` or `|`: a picture and readable tables."""
    names = [f"${k}_x^$" if k % 3 == 0 else f"g|{k}" for k in range(36)]
    lines = ["class,group"] + [f'c{k:03d},"{names[k % 36]}"' for k in range(144)]
    (tmp_path / "g.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe = write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "synthetic-groups", "classes": 144, "groups": "g.csv"},
        "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}],
        "evaluation": {"targets": [0.05, 0.01], "prediction": False}, "output": {"dir": str(tmp_path / "out")}})
    done = invoke_cli("run", str(recipe), "-q")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "groups.png").stat().st_size > 1000
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "g\\|1: same-group FMR / target" in report


def test_evaluate_det_to_standard_output_moves_the_table_to_standard_error(grouped_run):
    tmp, _, _ = grouped_run
    done = invoke_cli("evaluate", str(tmp / "out"), str(tmp / "eval.csv"), "--estimator", "generic-interp",
                      "--det", "-")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()
    assert rows[0] == "fpr,fnr,score_threshold" and all(len(r.split(",")) == 3 for r in rows)
    assert "one pooled threshold's FNR at the same FPR" in done.stderr


def test_each_group_is_compared_with_one_threshold_of_its_own_by_a_brute_force_on_the_raw_scores(grouped_run):
    """Per group: the FNMR of the best single threshold set on the group's own same-group impostor attempts that
    admits no more of them than the estimator did, and the paired counts, as a brute force over every threshold."""
    tmp, doc, _ = grouped_run
    claimed, real, scores = read_list(tmp / "eval.csv")
    group = {line.split(",")[0]: line.split(",")[1] for line in (tmp / "groups.csv").read_text().split()[1:]}
    of_claimed = np.array([group.get(c, "") for c in claimed])
    of_real = np.array([group.get(r, "") for r in real])
    genuine = claimed == real
    checked = 0
    for label in ESTIMATORS:
        for row in doc["estimators"][label]["targets"]:
            accepted = decisions(tmp / "out" / "thresholds.csv", label, row["target_fpr"], claimed, scores)
            for name in ("F", "M"):
                same = ~genuine & (of_claimed == name) & (of_real == name)
                mine = genuine & (of_claimed == name)
                fa = int(accepted[same].sum())
                fnr, _, t = one_threshold_fnr(scores[same], scores[mine], fa)
                got = row["groups"][name]
                assert got["fnmr_own_threshold"] == pytest.approx(fnr, abs=1e-12), (label, name)
                ref = scores[mine] >= t
                est = accepted[mine]
                paired = got["fnmr_paired_own_threshold"]
                assert paired["rejected_only_by_estimator"] == int(np.sum(~est & ref))
                assert paired["rejected_only_by_one_threshold"] == int(np.sum(est & ~ref))
                checked += 1
    assert checked == 2 * len(ESTIMATORS) * len(TARGETS)
