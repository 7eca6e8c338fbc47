"""Small bob score lists with cohort files, for the cohort tests and the fuzz test (not collected by pytest).

Like examples/bob-scores (4-column lines `claimed real probe score`), but small and with a per-probe
offset shared by the probe's attempts and its T-norm lines, so that T-norm has something to remove.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibrate_test_helpers import write_recipe


def write_lists(folder: Path, seed: int = 3, n_classes: int = 10, per_class: int = 3, n_cohort: int = 12,
                outsiders: int = 4) -> Path:
    """scores-dev, scores-eval, cohort-znorm (classes x 2 Z-probes per cohort person) and cohort-tnorm (cohort
    models x every probe of both lists) in ``folder``; returns it."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    classes = [f"c{k:02d}" for k in range(n_classes)]
    cohort = [f"t{k:02d}" for k in range(n_cohort)]
    class_offset = dict(zip(classes, rng.normal(0, 0.04, n_classes)))
    tnorm = []
    for group in ("dev", "eval"):
        lines = []
        probes = [(c, f"{c}/{group}{n}") for c in classes for n in range(per_class)]
        probes += [(f"x{k}", f"x{k}/{group}") for k in range(outsiders)]
        for real, probe in probes:
            offset = rng.normal(0, 0.06)
            for claimed in classes:
                s = 0.3 + offset + class_offset[claimed] + rng.normal(0, 0.07) + (0.35 if claimed == real else 0)
                lines.append(f"{claimed} {real} {probe} {s:.4f}\n")
            tnorm += [f"{m} {real} {probe} {0.3 + offset + rng.normal(0, 0.07):.4f}\n" for m in cohort]
        (folder / f"scores-{group}").write_text("".join(lines), encoding="ascii")
    (folder / "cohort-tnorm").write_text("".join(tnorm), encoding="ascii")
    znorm = [f"{c} {m} {m}/z{n} {0.3 + class_offset[c] + rng.normal(0, 0.07):.4f}\n"
             for c in classes for m in cohort for n in range(2)]
    (folder / "cohort-znorm").write_text("".join(znorm), encoding="ascii")
    return folder


def tnorm_rows(path: Path) -> dict[str, list[tuple[str, float]]]:
    """A 4-column cohort file's rows per probe: probe -> [(cohort model, score), ...] in file order."""
    rows: dict[str, list[tuple[str, float]]] = {}
    for model, _, probe, score in (line.split() for line in path.read_text().splitlines()):
        rows.setdefault(probe, []).append((model, float(score)))
    return rows


def lists_recipe(folder: Path, normalizer: str, sides: tuple[str, ...] = ("enrolled", "probe"),
                 estimators=({"plugin": "class-interp"},), targets=(0.05,)) -> Path:
    """A recipe over :func:`write_lists`'s files with ``normalizer`` and the cohort files of ``sides``."""
    data = {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval", "kind": "similarity"}
    if "enrolled" in sides:
        data["cohort_enrolled"] = "cohort-znorm"
    if "probe" in sides:
        data["cohort_probes"] = "cohort-tnorm"
    return write_recipe(folder / "r.yaml", {
        "version": 1, "data": data, "normalizer": {"plugin": normalizer}, "estimators": list(estimators),
        "evaluation": {"targets": list(targets), "prediction": False},
        "output": {"dir": str(folder / "out"), "plots": False}})


def refused_on_load(good: dict, damages: dict, tmp_path: Path) -> dict:
    """Each ``damages[text](normalizer entry)`` applied to a copy of the calibration ``good``: loading it must be
    one CalibrationError line holding ``text``. Returns text -> message."""
    import calibrate
    from calibrate.errors import CalibrationError

    out = {}
    for text, damage in damages.items():
        doc = json.loads(json.dumps(good))
        damage(doc["normalizer"])
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(doc))
        with pytest.raises(CalibrationError) as err:
            calibrate.load(bad)
        assert text in str(err.value) and "\n" not in str(err.value), str(err.value)
        out[text] = str(err.value)
    return out
