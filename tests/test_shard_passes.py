"""Issue 32, the sharded path at scale: the estimators' first passes ride on the survey (the reading of each shard)
and give the thresholds the separate pass gave; dask's LocalCluster workers keep glibc's malloc tuning; and the
scale benchmark's own check (benchmarks/run_scale.py), now bounded in memory, still catches a wrong threshold."""

from __future__ import annotations

import csv
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

import calibrate
import calibrate.contract.sharded as partitioned
from calibrate.errors import CalibrateError

pytest.importorskip("pyarrow")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import run_scale  # noqa: E402

from test_partitioned import make_shards, run, thresholds  # noqa: E402


def _count_second_reads(monkeypatch) -> list:
    """The passes over the shards that the estimators' reductions map (ShardRunner.map), by function name."""
    calls = []
    real = partitioned.ShardRunner.map

    def spy(self, function, *args, **kwargs):
        calls.append(function.__name__)
        return real(self, function, *args, **kwargs)

    monkeypatch.setattr(partitioned.ShardRunner, "map", spy)
    return calls


@pytest.mark.parametrize("zeros", [False, True], ids=["positive", "a zero distance"])
def test_the_first_pass_replaces_a_pass_and_changes_no_threshold(tmp_path, monkeypatch, zeros):
    folder = make_shards(tmp_path / "shards", shards=3, classes=10, seed=11, zeros=zeros)
    estimators = [{"plugin": "auto"}, {"plugin": "generic-interp"}]
    data = {"plugin": "score-shards", "path": str(folder), "kind": "distance"}
    calls = _count_second_reads(monkeypatch)
    sharded = run(tmp_path, data, "sharded", estimators=estimators)
    # generic-interp's histograms always come from the first pass; auto's only when every distance is positive
    # (its working offset is then 0, the first pass's guess); with a zero it runs its own pass, as before
    # lowest_sorted's second pass (the values up to the cut) is generic-interp's either way
    assert calls == (["_histogram_saved", "_below_cut"] if zeros else ["_below_cut"])
    memory = run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt"), "kind": "distance"}, "memory",
                 estimators=estimators)
    a = thresholds(sorted(sharded.out_dir.glob("thresholds-part*.csv")))
    b = thresholds([memory.out_dir / "thresholds.csv"])
    assert set(a) == set(b) and all(a[k] == pytest.approx(b[k], rel=1e-12, abs=0) for k in b)
    assert not [p.name for p in sharded.out_dir.iterdir() if p.name.startswith(".")]  # no scratch file left


def test_a_failed_run_leaves_no_first_pass_files(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5)
    table = folder / "shard001.parquet"
    table.write_bytes(b"not parquet")  # the survey fails on the second shard, after the first wrote its files
    with pytest.raises(CalibrateError, match="shard001.parquet"):
        run(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"}, "bad",
            estimators=[{"plugin": "auto"}])
    out = tmp_path / "bad"
    assert not out.exists() or not list(out.rglob("*.npy"))


def test_local_cluster_workers_keep_glibc_malloc_tuning():
    pytest.importorskip("distributed")
    import os

    from calibrate_builtins.executors.cluster import Dask

    if "MALLOC_TRIM_THRESHOLD_" in os.environ:
        pytest.skip("this environment sets MALLOC_TRIM_THRESHOLD_ itself (kept, as the user's)")
    with Dask(workers=1) as ex:
        seen = ex._client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert list(seen.values()) == [None]  # dask's default would be "65536"


# ---- the benchmark's check ------------------------------------------------------------------------

def test_lowest_keeps_exactly_the_smallest():
    rng = np.random.default_rng(4)
    pieces = [np.round(rng.standard_normal(n), 2) for n in (5000, 1, 0, 7000, 3000)]  # ties across pieces
    chosen = run_scale._Lowest(700)
    for piece in pieces:
        chosen.add(piece)
    chosen._shrink()  # as add does past its budget
    chosen.add(rng.standard_normal(4000) + 5)
    assert chosen.sorted().tobytes() == np.sort(np.concatenate(pieces))[:700].tobytes()


def _benchmark_run(root: Path) -> None:
    """run_scale's --json layout and recipe on 3 shards of 30 classes, serially, in this process."""
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()
    for k in range(3):
        run_scale._write_shard((str(root), k, k * 30, 30, 0))
    recipe = {"version": 1, "data": {"plugin": "score-shards", "train": str(root / "train"),
                                     "test": str(root / "test"), "kind": "distance"},
              "estimators": [{"plugin": "auto"}, {"plugin": "ncx2-grid", "name": "ncx2-fast", "mode": "fast"}],
              "evaluation": {"targets": run_scale.TARGETS}, "output": {"dir": str(root / "out"), "plots": False}}
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(root / "recipe.yaml")


def _nudge_threshold(path: Path, estimator: str, factor: float) -> None:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["estimator"] == estimator)
    row["threshold"] = repr(float(row["threshold"]) * factor)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_benchmark_check_passes_and_catches_a_wrong_threshold(tmp_path):
    _benchmark_run(tmp_path)
    good = run_scale.check_in_memory(tmp_path, sample=300, auto_max=1000)
    assert good["passed"], good
    assert good["auto_streamed"] and good["auto_in_memory"] and good["saved_pooled_sample_identical"]
    assert good["max_relative_difference"] == {"ncx2-fast": 0.0, "auto": 0.0}
    assert good["max_relative_difference_auto_in_memory"] == 0.0
    assert good["sampled_classes"] == 90 and good["compared_thresholds"] == 3 * 90 * 4

    # without the in-memory fit (a run past --check-auto-max), the streamed check alone catches a wrong auto
    # threshold one part in a billion off, and a wrong ncx2 one
    _nudge_threshold(tmp_path / "out" / "thresholds-part00002.csv", "auto", 1 + 1e-9)
    _nudge_threshold(tmp_path / "out" / "thresholds-part00000.csv", "ncx2-fast", 1 - 1e-9)
    bad = run_scale.check_in_memory(tmp_path, sample=300, auto_max=0)
    assert not bad["passed"] and not bad["auto_in_memory"]
    assert bad["max_relative_difference"]["auto"] == pytest.approx(1e-9, rel=1e-3)
    assert bad["max_relative_difference"]["ncx2-fast"] == pytest.approx(1e-9, rel=1e-3)


def test_the_benchmark_check_catches_a_wrong_pooled_selection(tmp_path):
    _benchmark_run(tmp_path)
    pooled = tmp_path / "out" / "pooled-auto.npy"
    values = np.load(pooled)
    values[3] = values[4]  # one selected value replaced by its neighbour: thresholds may not move, the check must
    np.save(pooled, values)
    _, out = run_scale.streamed_auto(tmp_path, ["c0000000"])
    assert out["auto_streamed"] and not out["saved_pooled_sample_identical"]  # check_in_memory: passed is false


def test_a_first_pass_whose_guess_saved_too_little_is_completed_exactly(tmp_path):
    # lowest_moments with its first pass made beforehand (as in a run's survey): a shard far below the others holds
    # more of the tail than the share each saved, so it alone is read again; the tail is the in-memory fit's
    from functools import partial

    from calibrate.statistics.gpd import exceedance_count, fit_lower_tail, fit_lower_tail_moments
    from test_tail_moments import _Runner, _values

    rng = np.random.default_rng(3)
    shards = [rng.standard_normal(n) for n in (4000, 2500, 6100)]
    shards[1] = shards[1] - 3.0
    k, keep = partial(exceedance_count, tail_fraction=0.1, min_exceedances=30), partial(min, 50)
    function, arg = partitioned.moments_first_pass(_values, None, k, keep, len(shards), str(tmp_path / ".first-0"))
    first = [function(shard, arg, i) for i, shard in enumerate(shards)]
    runner = _Runner(shards, tmp_path)
    m = partitioned.lowest_moments(runner, _values, None, k, keep, "t", bucket_values=97, first=first)
    assert runner.reads == 1  # the low shard, once
    pooled = np.sort(np.concatenate(shards))
    ref, _ = fit_lower_tail(pooled, tail_fraction=0.1, min_exceedances=30)
    got = fit_lower_tail_moments(m.n_total, m.k, m.u, m.lowest, m.sum_low, m.sum_ranked)
    assert (got.u, got.k) == (ref.u, ref.k) and got.beta == pytest.approx(ref.beta, rel=1e-10)
    assert m.kept.tobytes() == pooled[:50].tobytes()
    assert not list(tmp_path.iterdir())  # its files and the first pass's removed
