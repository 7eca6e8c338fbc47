"""Files written by `fit`, `accept`, `Calibration.save` and a run (issue 31, item 8) get the user's umask,
not 0600; a file replaced keeps its own permission bits. Checked in a subprocess started with umask 027."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path


_MODES_SCRIPT = textwrap.dedent("""
    import shutil, sys, warnings
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    warnings.simplefilter("ignore")
    import calibrate
    from calibrate_test_helpers import invoke_cli, write_recipe
    import numpy as np

    bob = Path(sys.argv[1]).parent / "examples" / "bob-scores"
    for name in ("scores-dev", "scores-eval"):
        shutil.copy(bob / name, name)
    for args in (["fit", "scores-dev", "--estimator", "class-interp", "--no-predict", "--fpr", "0.05", "--missing",
                  "-1", "--out", "fit.json"],
                 ["accept", "fit.json", "scores-eval", "--fpr", "0.05", "--missing", "-1", "--out", "decisions.csv"],
                 ["accept", "fit.json", "scores-eval", "--fpr", "0.05", "--missing", "-1", "--out", "private.csv"],
                 ["evaluate", "fit.json", "scores-eval", "--missing", "-1", "--det", "det.csv"]):
        done = invoke_cli(*args)
        assert done.returncode == 0, done.stderr
    calibrate.load("fit.json").save("saved.json")
    write_recipe(Path("r.yaml"), {"version": 1, "data": {"plugin": "score-list", "train": "scores-dev",
                 "test": "scores-eval", "kind": "similarity", "missing": -1},
                 "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.05], "prediction": False},
                 "output": {"dir": "run", "plots": False}})
    calibrate.run("r.yaml")
    rng = np.random.default_rng(0)
    Path("shards").mkdir()
    for k in range(2):  # two shards of distances (bob 4-column), six classes each, one genuine line per class
        Path(f"shards/shard{k}.txt").write_text("".join(
            f"c{k}_{j} {f'c{k}_{j}' if q == 0 else f'r{k}_{q}'} p{k}_{j}_{q} {rng.gamma(5, 0.2 if q == 0 else 1)!r}\\n"
            for j in range(6) for q in range(21)))
    write_recipe(Path("s.yaml"), {"version": 1, "data": {"plugin": "score-shards", "path": "shards", "kind": "distance"},
                 "estimators": [{"plugin": "auto"}], "evaluation": {"targets": [0.05]},
                 "output": {"dir": "sharded", "plots": False}})
    calibrate.run("s.yaml")
""")


def test_written_files_get_the_users_umask_and_a_replaced_file_keeps_its_mode(tmp_path):
    """fit, accept, evaluate --det, save and a run (plain and sharded: manifest.json and every part too) under
    umask 027: every new file is 0640 (0600 before); a file replaced keeps its 0600."""
    private = tmp_path / "private.csv"
    private.write_text("old\n")
    private.chmod(0o600)
    tests = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", _MODES_SCRIPT, str(tests)], cwd=tmp_path, umask=0o027,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = [tmp_path / n for n in ("fit.json", "decisions.csv", "saved.json", "det.csv")]
    written += [p for folder in ("run", "sharded") for p in (tmp_path / folder).iterdir()]
    assert {"manifest.json", "calibration.json", "thresholds.csv"} <= {p.name for p in written}
    assert {"calibration-part00001.json", "pooled-auto.npy"} <= {p.name for p in written}
    modes = {p.name: oct(stat.S_IMODE(os.stat(p).st_mode)) for p in written}
    assert set(modes.values()) == {"0o640"}, modes
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600 and private.read_text().startswith("claimed,")
