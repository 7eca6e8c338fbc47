"""Normalised runs end to end: S-norm and AS-norm on a probe x gallery matrix and on bob score lists with
cohort files; a saved calibration decides every evaluation attempt exactly as the run did (API after
save/load, and the CLI with a cohort file); enroll computes a class's cohort statistics as the run did;
bad cohort files are one line naming the file and the fix."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate_test_helpers import invoke_cli, quiet_run, write_recipe
from cohort_lists import tnorm_rows

BOB = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"
TARGETS = [0.05, 0.02, 0.01]


def _matrix_csv(path: Path, seed: int = 11, n_classes: int = 40, per_class: int = 3) -> Path:
    """Similarity scores with a per-class and a per-probe offset; genuine scores high."""
    rng = np.random.default_rng(seed)
    gallery = [f"g{j:02d}" for j in range(n_classes)]
    probes = [g for g in gallery for _ in range(per_class)] + ["stranger"] * 6
    genuine = np.array(probes)[:, None] == np.array(gallery)[None, :]
    s = 0.35 + rng.normal(0, 0.05, n_classes)[None, :] + rng.normal(0, 0.05, len(probes))[:, None] \
        + rng.normal(0, 0.06, genuine.shape)
    s = np.clip(np.where(genuine, s + 0.35, s), 0.0, 1.0)
    lines = ["," + ",".join(gallery)] + [p + "," + ",".join(f"{v:.6f}" for v in row) for p, row in zip(probes, s)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run_decisions(result, label: str, target: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, accepted) of every evaluation attempt, as the run's evaluator decided them."""
    fold = result.folds[0]
    table = fold.tables[label]
    rows, cols = np.nonzero(fold.test.valid)
    k = list(table.targets).index(target)
    return rows, cols, fold.test.values[rows, cols] <= table.values[cols, k]


def _matrix_lists(folder: Path, test, whole_valid: np.ndarray, rows, cols) -> tuple[Path, Path]:
    """(attempts, tnorm) written in ``folder`` from the evaluation matrix ``test``: its attempts (rows[a], cols[a]) as a
    4-column score list (probe i named p<i>), and the gallery as the probes' T-norm cohort (every ``whole_valid`` cell)."""
    raw = test.values
    attempts = folder / "attempts"
    attempts.write_text("".join(f"{test.gallery_classes[j]} {test.probe_classes[i]} p{i} {float(raw[i, j])!r}\n"
                                for i, j in zip(rows, cols)), encoding="utf-8")
    cohort = folder / "tnorm"
    cohort.write_text("".join(f"{test.gallery_classes[k]} {test.probe_classes[i]} p{i} {float(raw[i, k])!r}\n"
                              for i, k in zip(*np.nonzero(whole_valid))), encoding="utf-8")
    return attempts, cohort


def _matrix_recipe(tmp_path: Path, normalizer: dict) -> Path:
    csv_path = _matrix_csv(tmp_path / "scores.csv")
    return write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-matrix", "path": str(csv_path), "kind": "similarity"},
        "transform": {"plugin": "similarity-to-distance", "upper": 1.0}, "normalizer": normalizer,
        "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}],
        "evaluation": {"targets": TARGETS, "prediction": False}, "output": {"dir": str(tmp_path / "out"), "plots": False}})


@pytest.mark.parametrize("normalizer", [{"plugin": "snorm"}, {"plugin": "asnorm", "top_k": 12}])
def test_a_matrix_run_is_reproduced_by_accept_after_save_and_load(tmp_path, normalizer):
    result = quiet_run(_matrix_recipe(tmp_path, normalizer))
    from calibrate.contract.manager import build_registry
    from calibrate.recipe.validation import load_recipe

    split = load_recipe(tmp_path / "r.yaml", build_registry()).data.build().load()
    train, test = split.train, split.test
    whole_valid, raw = train.valid | test.valid, test.values  # one file split per class: one matrix
    for label in ("generic-interp", "class-interp"):
        cal = calibrate.load(tmp_path / "out", label)
        cal.save(tmp_path / f"{label}.json")
        cal = calibrate.load(tmp_path / f"{label}.json")
        for target in TARGETS:
            rows, cols, want = _run_decisions(result, label, target)
            cohorts = [raw[i, whole_valid[i] & (test.gallery_classes != test.probe_classes[i])
                           & (np.arange(raw.shape[1]) != j)] for i, j in zip(rows, cols)]
            got = cal.accept(test.gallery_classes[cols], raw[rows, cols], target, probe_cohort_scores=cohorts)
            assert np.array_equal(got, want), (label, target, int((got != want).sum()))
            assert 0 < want.sum() < want.size
    # the CLI, from score lists written from the matrix: attempts, and the gallery as the T-norm cohort
    rows, cols, want = _run_decisions(result, "class-interp", 0.02)
    attempts, cohort = _matrix_lists(tmp_path, test, whole_valid, rows, cols)
    out = invoke_cli("accept", str(tmp_path / "out"), str(attempts), "--fpr", "0.02", "--estimator", "class-interp",
                  "--out", str(tmp_path / "d.csv"), "--cohort", str(cohort))
    assert out.returncode == 0, out.stderr
    decided = np.array([row["accept"] == "1" for row in csv.DictReader(open(tmp_path / "d.csv"))])
    assert np.array_equal(decided, want)


def _bob_recipe(tmp_path: Path, normalizer: dict, predict: bool = True) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("scores-dev", "scores-eval", "cohort-znorm", "cohort-tnorm"):
        shutil.copy(BOB / name, tmp_path / name)
    return write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                               "kind": "similarity", "missing": -1, "cohort_enrolled": "cohort-znorm",
                               "cohort_probes": "cohort-tnorm"},
        "normalizer": normalizer, "estimators": [{"plugin": "class-interp"}, {"plugin": "auto"}],
        "evaluation": {"targets": TARGETS, "prediction": predict}, "output": {"dir": str(tmp_path / "out"), "plots": False}})


@pytest.mark.parametrize("normalizer", [{"plugin": "snorm"}, {"plugin": "asnorm", "top_k": 10}])
def test_bob_score_lists_with_cohort_files_are_reproduced_by_the_api_and_the_cli(tmp_path, normalizer):
    on_cli = normalizer["plugin"] == "snorm"  # the command line (and the predicted interval) once
    result = quiet_run(_bob_recipe(tmp_path, normalizer, predict=on_cli))
    fold = result.folds[0]
    assert not on_cli or "auto" in fold.predictions  # the predicted interval models the normalised distances
    tnorm = tnorm_rows(tmp_path / "cohort-tnorm")
    eval_lines = [line.split() for line in (tmp_path / "scores-eval").read_text().splitlines()]
    for label in ("class-interp", "auto"):
        cal = calibrate.load(tmp_path / "out", label)
        cal.save(tmp_path / "cal.json")
        cal = calibrate.load(tmp_path / "cal.json")
        for target in TARGETS:
            rows, cols, want = _run_decisions(result, label, target)
            probe = fold.test.probe_ids[rows]
            claimed = fold.test.gallery_classes[cols]
            score = {(c, p): float(s) for c, _, p, s in eval_lines}
            cohorts = [[s for m, s in tnorm[p] if m != c] for p, c in zip(probe, claimed)]
            got = cal.accept(claimed, [score[(c, p)] for c, p in zip(claimed, probe)], target, probe_cohort_scores=cohorts)
            assert np.array_equal(got, want), (label, target)
        if not on_cli or label != "auto":
            continue
        out = invoke_cli("evaluate", str(tmp_path / "cal.json"), str(tmp_path / "scores-eval"), "--missing", "-1",
                      "--cohort", str(tmp_path / "cohort-tnorm"), "--json")
        assert out.returncode == 0, out.stderr
        measured = json.loads(out.stdout)["targets"]
        ran = {r.target_fpr: r for r in result.results[label]}
        assert [m["false_accepts"] for m in measured] == [ran[t].false_accepts for t in TARGETS]
        out = invoke_cli("threshold", str(tmp_path / "cal.json"), "--class", "subj03", "--fpr", "0.01")
        assert out.returncode == 0 and f"accept if the {normalizer['plugin']}-normalised score z <=" in out.stdout
        out = invoke_cli("accept", str(tmp_path / "cal.json"), str(tmp_path / "scores-eval"), "--fpr", "0.01",
                      "--missing", "-1", "--out", str(tmp_path / "d.csv"))
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
        assert "probe_cohort_scores is needed" in out.stderr and "--cohort FILE" in out.stderr
        # the same false rejects; the FNR is worked out as rejects / attempts there, 1 - accepts / attempts here
        assert [m["fnr"] for m in measured] == pytest.approx([ran[t].fnr for t in TARGETS], rel=1e-12)


def test_enroll_gives_a_class_the_statistics_and_thresholds_of_the_run(tmp_path):
    """class-interp is per class: enrolling a class again from the run's own data reproduces its thresholds."""
    result = quiet_run(_matrix_recipe(tmp_path, {"plugin": "snorm"}))
    from calibrate.contract.manager import build_registry
    from calibrate.recipe.validation import load_recipe

    split = load_recipe(tmp_path / "r.yaml", build_registry()).data.build().load()
    train, test = split.train, split.test
    whole = train.valid | test.valid
    cal = calibrate.load(tmp_path / "out", "class-interp")
    j = 7
    cls = str(train.gallery_classes[j])
    before = {t: cal.distance_threshold(cls, t) for t in TARGETS}
    stats = {k: float(v[j]) for k, v in cal.normalization.statistics.items()}
    rows = np.flatnonzero(train.impostor_mask()[:, j])
    own = train.gallery_classes[None, :] != train.probe_classes[rows][:, None]
    cohorts = [train.values[i, whole[i] & own[n] & (np.arange(train.shape[1]) != j)] for n, i in enumerate(rows)]
    cal.enroll(cls, train.values[rows, j], impostor_cohort_scores=cohorts)
    for t in TARGETS:
        assert cal.distance_threshold(cls, t) == pytest.approx(before[t], rel=1e-12)
    j_now = cal.normalization.classes.index(cls)
    for k, v in stats.items():
        assert cal.normalization.statistics[k][j_now] == pytest.approx(v, rel=1e-12)
    assert result.folds[0].normalization.enrolled_cohort == "training impostors"


def _bad(tmp_path: Path, edit) -> str:
    """The one-line message of a run whose cohort files ``edit`` damaged."""
    from calibrate.errors import CalibrateError

    recipe = _bob_recipe(tmp_path, {"plugin": "snorm"}, predict=False)
    edit(tmp_path)
    with pytest.raises(CalibrateError) as err:
        quiet_run(recipe)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_bad_cohort_files_are_one_line_naming_the_file_and_the_fix(tmp_path):
    def drop(name: str, word: str):
        def edit(tmp: Path) -> None:
            path = tmp / name
            path.write_text("".join(l + "\n" for l in path.read_text().splitlines() if word not in l.split()))
        return edit

    message = _bad(tmp_path / "a", lambda tmp: (tmp / "cohort-tnorm").unlink())
    assert "cohort-tnorm" in message and "does not exist" in message
    message = _bad(tmp_path / "b", drop("cohort-znorm", "subj04"))
    assert "cohort-znorm: class 'subj04' has no comparison with the cohort" in message
    message = _bad(tmp_path / "c", drop("cohort-tnorm", "subj02/eval_1"))
    assert "cohort-tnorm: probe 'subj02/eval_1'" in message and "needs every probe" in message

    def nan(tmp: Path) -> None:
        path = tmp / "cohort-znorm"
        lines = path.read_text().splitlines()
        lines[5] = lines[5].rsplit(" ", 1)[0] + " nan"
        path.write_text("\n".join(lines) + "\n")

    message = _bad(tmp_path / "d", nan)
    assert "cohort-znorm, line 6" in message and ("NaN" in message or "not a number" in message)
    # on the command line: exit 2, one line
    recipe = _bob_recipe(tmp_path / "e", {"plugin": "asnorm", "top_k": 30}, predict=False)
    out = invoke_cli("run", str(recipe), "-q")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "cohort-tnorm: probe" in out.stderr and "asnorm needs at least 30" in out.stderr and "top_k" in out.stderr
