"""Small generators shared by the core tests (not collected by pytest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

#: where the tests that need real data find it (each skips, saying so, when its files are absent): the folder
#: CALIBRATE_SHARED_DATA names, else shared/data one folder above the clone
DATA_ENV = "CALIBRATE_SHARED_DATA"
DATA = Path(os.environ.get(DATA_ENV) or Path(__file__).resolve().parents[2] / "shared" / "data")
CALIBRATE = Path(sys.executable).with_name("calibrate")


def make_scores(seed: int = 0, n_classes: int = 8, probes_per_class: int = 6, kind: str = "similarity",
                impostor_probes: int = 0) -> tuple[np.ndarray, list[str], list[str]]:
    """A probe x gallery score matrix: genuine pairs score high (similarity) or low (distance).
    ``impostor_probes`` extra rows of a class that is not enrolled."""
    rng = np.random.default_rng(seed)
    gallery = [f"id{c:02d}" for c in range(n_classes)]
    probes = [g for g in gallery for _ in range(probes_per_class)] + ["outsider"] * impostor_probes
    genuine = np.array(probes)[:, None] == np.array(gallery)[None, :]
    sim = np.where(genuine, rng.beta(6, 2, genuine.shape), rng.beta(2, 6, genuine.shape))
    values = np.round(sim if kind == "similarity" else 1.0 - sim, 6)
    return values, probes, gallery


def write_scores(path: Path, values: np.ndarray, probes: list[str], gallery: list[str], fmt=repr) -> Path:
    lines = ["," + ",".join(gallery)]
    for p, row in zip(probes, values):
        lines.append(p + "," + ",".join(fmt(float(v)) for v in row))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Path(path)


def write_recipe(path: Path, recipe: dict | str) -> Path:
    text = recipe if isinstance(recipe, str) else yaml.safe_dump(recipe, sort_keys=False)
    Path(path).write_text(text, encoding="utf-8")
    return Path(path)


def score_recipe(csv: Path, out: Path, estimators=({"plugin": "generic-interp"}, {"plugin": "class-interp"}),
                 targets=(0.05, 0.02, 0.01), **data) -> dict:
    return {"version": 1,
            "data": {"plugin": "score-matrix", "path": str(csv), "kind": "similarity", **data},
            "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
            "estimators": [dict(e) for e in estimators],
            "evaluation": {"targets": list(targets)},
            "output": {"dir": str(out), "plots": False}}


def quiet_run(recipe: Path, **kwargs):
    """``calibrate.run(recipe, **kwargs)`` with its warnings (the run's notes) silenced, for tests about its results."""
    import warnings

    import calibrate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate.run(recipe, **kwargs)


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed `calibrate` script in a subprocess (third-party plugin autoload as in the environment)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(CALIBRATE), *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=300)


def invoke_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The same command line in this process (typer's CliRunner), for tests about what a command answers,
    not about the process (signals, lost stdout, environment at start-up, the console script): no interpreter
    start-up and no second import of numpy/scipy. Warnings are filtered as in a fresh interpreter (not by the
    suite's `error::RuntimeWarning` filter), and the CLI's warning hook is undone afterwards."""
    import traceback
    import warnings

    from typer.testing import CliRunner

    from calibrate.cli.commands import app

    previous_dir = os.getcwd()
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        try:
            if cwd is not None:
                os.chdir(cwd)
            result = CliRunner().invoke(app, [str(a) for a in args], env=env)
        finally:
            os.chdir(previous_dir)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))  # as the interpreter would print it
    return subprocess.CompletedProcess(["calibrate", *args], result.exit_code, result.stdout, stderr)


def mix64_reference(x: int) -> int:
    """SplitMix64's finaliser on Python integers (an independent reference for split_per_class)."""
    m = 2**64 - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & m
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def documented_genuine_fit(rows, column_seed: int, fit_fraction: float) -> list:
    """A column's genuine rows (in file order) that the documented split gives to the fit: the k-th has the key
    mix64(mix64(seed + j + GENUINE_SALT) + k) and fits when key / 2^64 < fit_fraction (score-matrix's docstring)."""
    from calibrate_builtins.datasets.score_matrix import GENUINE_SALT

    base = mix64_reference((column_seed + GENUINE_SALT) % 2**64)
    cut = min(int(fit_fraction * 2.0 ** 64), 2 ** 64 - 1)
    return [r for k, r in enumerate(rows) if mix64_reference((base + k) % 2**64) < cut]


def documented_order(rows, column_seed: int) -> list:
    """A column's impostor rows (in file order) in the order the documented split takes them: by the key
    mix64(mix64(seed + j) + k) of the k-th row, smallest first (score-matrix's docstring)."""
    rows = list(rows)
    base = mix64_reference(column_seed % 2**64)
    keys = [mix64_reference((base + k) % 2**64) for k in range(len(rows))]
    return [rows[k] for k in sorted(range(len(rows)), key=lambda k: (keys[k], k))]
