"""`calibrate validate` reads the head of every data file with the run's own parser, so that it
rejects a wrong format with exactly the message `calibrate run` would give."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate_test_helpers import make_scores, invoke_cli, score_recipe, write_recipe, write_scores


def validate_and_run(tmp_path, recipe: dict) -> tuple[str, str]:
    path = write_recipe(tmp_path / "r.yaml", recipe)
    checked = invoke_cli("validate", str(path))
    ran = invoke_cli("run", str(path), "--quiet")
    assert checked.returncode == 2 and ran.returncode == 2, (checked.stdout, checked.stderr, ran.stderr)
    assert checked.stderr.count("\n") == 1, checked.stderr
    assert checked.stderr == ran.stderr
    assert not (tmp_path / "out").exists()
    return checked.stderr


@pytest.mark.parametrize("columns", [4, 5])
def test_a_bob_score_list_given_to_score_matrix(tmp_path, columns):
    line = "id01 id02 p7 0.25" if columns == 4 else "id01 m1 id02 p7 0.25"
    lines = [line] * 3
    (tmp_path / "dev.txt").write_text("\n".join(lines) + "\n")
    err = validate_and_run(tmp_path, score_recipe(tmp_path / "dev.txt", tmp_path / "out"))
    assert f"dev.txt, line 1: {columns} whitespace-separated columns" in err and "score-matrix reads a probe x gallery" in err


def test_a_ragged_row_and_a_non_numeric_cell(tmp_path):
    values, probes, gallery = make_scores(seed=1, n_classes=5, probes_per_class=4)
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    lines = path.read_text().splitlines()
    lines[6] = lines[6].rsplit(",", 1)[0]  # one score short
    path.write_text("\n".join(lines) + "\n")
    err = validate_and_run(tmp_path, score_recipe(path, tmp_path / "out"))
    assert "s.csv, line 7: 4 scores but the header has 5 gallery labels" in err
    lines = path.read_text().splitlines()
    lines[6] = lines[7].replace(lines[7].split(",")[2], "n/a", 1)
    path.write_text("\n".join(lines) + "\n")
    err = validate_and_run(tmp_path, score_recipe(path, tmp_path / "out"))
    assert "s.csv, line 7, column 3 (id01): 'n/a' is not a number" in err


def test_an_npz_without_the_arrays_it_needs(tmp_path):
    np.savez(tmp_path / "p.npz", X=np.zeros((4, 2)), labels=np.array(["a", "a", "b", "b"]))
    recipe = {"version": 1, "data": {"plugin": "npz-patterns", "path": str(tmp_path / "p.npz")},
              "distance": {"plugin": "euclidean"}, "output": str(tmp_path / "out")}
    err = validate_and_run(tmp_path, recipe)
    assert "p.npz: missing array(s) sets" in err
    (tmp_path / "p.npz").write_bytes(b"PK\x03\x04 truncated")
    assert "p.npz: the patterns file is not a readable .npz file" in validate_and_run(tmp_path, recipe)


def test_validate_reads_only_the_head_of_a_large_file(tmp_path, monkeypatch):
    import calibrate
    import calibrate_builtins.datasets.score_matrix as sm

    values, probes, gallery = make_scores(seed=2, n_classes=4, probes_per_class=100)
    path = write_scores(tmp_path / "big.csv", values, probes, gallery)
    seen = []
    real = sm.read_score_csv

    def spy(p, missing, max_rows=None):
        out = real(p, missing, max_rows)
        seen.append(out[0].shape[0])
        return out

    monkeypatch.setattr(sm, "read_score_csv", spy)
    calibrate.validate(write_recipe(tmp_path / "r.yaml", score_recipe(path, tmp_path / "out")))
    assert seen == [sm.CHECK_ROWS]
