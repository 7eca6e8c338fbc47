"""Sharded scores (dataset score-shards, calibrate/running/sharded.py): the partitioned run gives the in-memory
run's thresholds and evaluation, on small shards, with every executor; bad shards get clear errors."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

import calibrate
from calibrate.contract.hookspecs import hookimpl
from calibrate.errors import CalibrateError, DataError
from calibrate.files.manifest import read_manifest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: thresholds and evaluation fields of the partitioned run against the in-memory run: relative difference
#: (the computation is the same floats in the same order, so in practice they are equal to the bit)
RTOL = 1e-12
ESTIMATORS = [{"plugin": "auto"}, {"plugin": "generic-interp"}, {"plugin": "class-interp"},
              {"plugin": "ncx2-grid", "mode": "fast", "name": "ncx2-fast"}]


def make_shards(folder: Path, *, shards: int = 4, classes: int = 25, probes: int = 60, seed: int = 0,
                parquet: bool = True, zeros: bool = False) -> Path:
    """Shards of distances (one per group of claimed classes) and, beside them, all.txt: the same
    comparisons as one bob 4-column score list, shards concatenated in order."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for s in range(shards):
        cl, re, pr, sc = [], [], [], []
        for j in range(classes):
            c, scale = f"c{s}_{j}", rng.uniform(0.5, 2.0)
            for q in range(probes):
                cl.append(c), re.append(f"r{s}_{q}"), pr.append(f"p{s}_{q}")
                sc.append(0.0 if zeros and q == 0 else float(rng.gamma(5, scale)))
            cl.append(c), re.append(c), pr.append(f"g{s}_{j}"), sc.append(float(rng.gamma(1, 0.3)))
        if parquet:
            pq.write_table(pa.table({"claimed_id": cl, "real_id": re, "test_label": pr, "score": sc}),
                           folder / f"shard{s:03d}.parquet")
        text = [f"{a} {b} {c} {d!r}" for a, b, c, d in zip(cl, re, pr, sc)]
        if not parquet:
            (folder / f"shard{s:03d}.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
        lines += text
    (folder.parent / "all.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def run(tmp: Path, data: dict, name: str, targets=(0.01, 0.001), estimators=ESTIMATORS, executor=None,
        prediction: bool | None = None, plots: bool = False):
    evaluation = {"targets": list(targets), **({} if prediction is None else {"prediction": prediction})}
    recipe = {"version": 1, "data": data, "estimators": estimators, "evaluation": evaluation,
              "output": {"dir": str(tmp / name), "plots": plots}}
    if executor:
        recipe["executor"] = executor
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate.run(path)


def thresholds(files) -> dict:
    out = {}
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                out[(r["estimator"], r["class"], float(r["target_fpr"]))] = float(r["threshold"])
    return out


def assert_same_as_in_memory(tmp: Path, sharded, memory) -> None:
    a = thresholds(sorted((tmp / sharded.out_dir.name).glob("thresholds-part*.csv")))
    b = thresholds([memory.out_dir / "thresholds.csv"])
    assert set(a) == set(b)
    for key in b:
        assert a[key] == pytest.approx(b[key], rel=RTOL, abs=0), key
    for label, rows in memory.results.items():
        for x, y in zip(sharded.results[label], rows):
            assert (x.false_accepts, x.impostor_attempts) == (y.false_accepts, y.impostor_attempts)
            assert x.fpr == pytest.approx(y.fpr, rel=RTOL) and x.fnr == pytest.approx(y.fnr, rel=RTOL)
            for key in ("fpr_ci_low", "fpr_ci_high", "share_classes_over_2x", "share_classes_over_10x",
                        "training_support", "genuine_attempts"):
                assert x.extra[key] == pytest.approx(y.extra[key], rel=1e-9), (label, key)
            # the other side: one pooled threshold over every shard's evaluation impostors at the same share
            assert x.fnr_one_threshold == pytest.approx(y.fnr_one_threshold, rel=RTOL), label
            assert x.extra["fnr_paired"] == y.extra["fnr_paired"], label
            for key in ("false_accepts", "fpr", "fnr", "score_threshold"):
                assert x.extra["one_threshold"][key] == pytest.approx(y.extra["one_threshold"][key], rel=RTOL), key


@pytest.mark.parametrize("parquet", [True, False], ids=["parquet", "score-list"])
def test_sharded_run_equals_the_in_memory_run(tmp_path, parquet):
    # targets 1% (empirical pooled quantile) and 0.1% (3.6 pooled scores below it: auto's GPD tail)
    folder = make_shards(tmp_path / "shards", parquet=parquet)
    sharded = run(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"}, "sharded")
    memory = run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt"), "kind": "distance"}, "memory")
    assert_same_as_in_memory(tmp_path, sharded, memory)
    manifest = read_manifest(sharded.out_dir)
    assert manifest is not None
    assert {f"thresholds-part{k:05d}.csv" for k in range(4)} <= set(manifest["files"])
    assert "pooled-auto.npy" in manifest["files"] and "calibration.json" in manifest["files"]


def test_zero_distances_and_a_glob(tmp_path):
    # a distance of 0 makes auto's working scale log(d + c) take c from the smallest positive distance
    folder = make_shards(tmp_path / "shards", shards=3, classes=10, seed=2, zeros=True)
    sharded = run(tmp_path, {"plugin": "score-shards", "path": str(folder / "shard*.parquet"), "kind": "distance"},
                  "sharded", estimators=[{"plugin": "auto"}])
    memory = run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt"), "kind": "distance"}, "memory",
                 estimators=[{"plugin": "auto"}])
    assert_same_as_in_memory(tmp_path, sharded, memory)


def test_train_and_test_shards(tmp_path):
    make_shards(tmp_path / "a" / "dev", shards=2, classes=12, seed=3)
    make_shards(tmp_path / "b" / "eval", shards=2, classes=12, seed=4)
    data = {"plugin": "score-shards", "train": str(tmp_path / "a" / "dev"), "test": str(tmp_path / "b" / "eval"),
            "kind": "distance"}
    sharded = run(tmp_path, data, "sharded", estimators=[{"plugin": "auto"}, {"plugin": "generic-interp"}])
    memory = run(tmp_path, {"plugin": "score-list", "train": str(tmp_path / "a" / "all.txt"),
                            "test": str(tmp_path / "b" / "all.txt"), "kind": "distance"}, "memory",
                 estimators=[{"plugin": "auto"}, {"plugin": "generic-interp"}])
    assert_same_as_in_memory(tmp_path, sharded, memory)


@pytest.mark.parametrize("executor", [{"plugin": "processes", "workers": 2}], ids=["processes"])
def test_the_executor_does_not_change_the_result(tmp_path, executor):
    folder = make_shards(tmp_path / "shards", shards=3, classes=10, seed=5)
    data = {"plugin": "score-shards", "path": str(folder), "kind": "distance"}
    serial = run(tmp_path, data, "serial", estimators=[{"plugin": "auto"}])
    spread = run(tmp_path, data, "spread", estimators=[{"plugin": "auto"}], executor=executor)
    assert thresholds(sorted(serial.out_dir.glob("thresholds-part*.csv"))) == \
        thresholds(sorted(spread.out_dir.glob("thresholds-part*.csv")))


# ---- bad shards ---------------------------------------------------------------------------------

def _fails(tmp_path, data, match, estimators=({"plugin": "auto"},)):
    with pytest.raises(CalibrateError, match=match):
        run(tmp_path, data, "bad", estimators=list(estimators))
    assert read_manifest(tmp_path / "bad") is None


def test_an_empty_or_damaged_shard_is_named(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5)
    (folder / "shard002.parquet").write_bytes(b"not parquet at all")
    _fails(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
           r"shard002\.parquet: not a readable Parquet file")
    pq.write_table(pa.table({"claimed_id": pa.array([], pa.string()), "real_id": pa.array([], pa.string()),
                             "score": pa.array([], pa.float64())}), folder / "shard002.parquet")
    _fails(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
           r"shard002\.parquet: empty shard")


def test_no_shards_and_a_missing_column(tmp_path):
    (tmp_path / "none").mkdir()
    _fails(tmp_path, {"plugin": "score-shards", "path": str(tmp_path / "none"), "kind": "distance"},
           "matches no shard file")
    folder = tmp_path / "cols"
    folder.mkdir()
    pq.write_table(pa.table({"claimed": ["a"], "real_id": ["b"], "score": [1.0]}), folder / "s.parquet")
    _fails(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
           r"s\.parquet: no column 'claimed_id'.*columns:")


def test_a_class_in_two_shards_is_refused(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5)
    table = pq.read_table(folder / "shard001.parquet").to_pydict()
    table["claimed_id"] = [c.replace("c1_0", "c0_0") for c in table["claimed_id"]]
    pq.write_table(pa.table(table), folder / "shard001.parquet")
    _fails(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
           "a claimed class appears in more than one shard")


def test_a_transform_fitted_per_shard_is_refused_with_the_fix(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5)
    data = {"plugin": "score-shards", "path": str(folder), "kind": "similarity"}
    _fails(tmp_path, data, r"fitted to each shard's data separately.*upper: 1.0")
    # the recipe alone says so: `calibrate validate` refuses it as `run` does
    (tmp_path / "default.yaml").write_text(yaml.safe_dump({"version": 1, "data": data}), encoding="utf-8")
    with pytest.raises(CalibrateError, match=r"similarity-to-distance.*\(the default for similarity scores\)"):
        calibrate.validate(tmp_path / "default.yaml")
    recipe_ok = {"version": 1, "data": data, "transform": {"plugin": "similarity-to-distance", "upper": 100.0},
                 "estimators": [{"plugin": "generic-interp"}], "evaluation": {"targets": [0.01]},
                 "output": {"dir": str(tmp_path / "upper"), "plots": False}}
    (tmp_path / "upper.yaml").write_text(yaml.safe_dump(recipe_ok), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(tmp_path / "upper.yaml")
    assert read_manifest(tmp_path / "upper") is not None


def test_an_estimator_that_pools_without_a_partitioned_fit_is_refused(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5)
    _fails(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"},
           "cannot fit sharded data", estimators=[{"plugin": "gpd-tail", "pooling": "pooled"}])


def test_validate_reads_the_first_shard(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=2, classes=5, parquet=False)
    (folder / "shard000.txt").write_text("a b c notanumber\n", encoding="utf-8")
    recipe = {"version": 1, "data": {"plugin": "score-shards", "path": str(folder), "kind": "distance"}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(DataError, match="shard000.txt"):
        calibrate.validate(tmp_path / "r.yaml")


# ---- the saved calibration, part by part ------------------------------------------------------

def test_the_partitioned_calibration_answers_as_the_in_memory_one(tmp_path):
    folder = make_shards(tmp_path / "shards", shards=3, classes=8, seed=6)
    estimators = [{"plugin": "auto"}, {"plugin": "generic-interp"}, {"plugin": "class-interp"}]
    sharded = run(tmp_path, {"plugin": "score-shards", "path": str(folder), "kind": "distance"}, "sharded",
                  estimators=estimators)
    memory = run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt"), "kind": "distance"}, "memory",
                 estimators=estimators)
    classes = [f"c{s}_{j}" for s in range(3) for j in range(8)]
    for label in ("auto", "generic-interp", "class-interp"):
        part = calibrate.load(sharded.out_dir / "calibration.json", label)
        same = calibrate.load(memory.out_dir / "calibration.json", label)
        first = calibrate.load(sharded.out_dir / "calibration.json", label)  # accept as its first question
        scores = np.linspace(0.5, 8, len(classes))
        assert np.array_equal(first.accept(classes, scores, 0.01), same.accept(classes, scores, 0.01))
        assert len(part) == 24 and "c1_3" in part and "nobody" not in part
        assert part.training_scores is not None  # issue 31: what accept checks, the same as the in-memory run's
        assert part.training_scores == pytest.approx(same.training_scores, rel=RTOL)
        for e in (0.1, 0.01, 0.004, 0.001):  # not all recipe targets; up to the in-memory calibration's reach (10 x 1%)
            for c in classes:
                assert part.threshold(c, e) == pytest.approx(same.threshold(c, e), rel=RTOL)
        scores = np.linspace(0.5, 8, len(classes))
        assert np.array_equal(part.accept(classes, scores, 0.01), same.accept(classes, scores, 0.01))
        # decisions on class codes: the codes follow the parts' class lists, every part's thresholds read once
        codes = part.codes(classes)
        assert sorted(codes.tolist()) == list(range(24)) and np.array_equal(part.codes(classes[::-1]), codes[::-1])
        for e in (0.01, 0.004):
            decide = part.decider(e)
            assert [decide.classes[k] for k in codes] == classes
            assert decide.thresholds[codes].tolist() == [part.threshold(c, e) for c in classes]
            many = np.repeat(codes, 50)
            grid = np.tile(np.linspace(0.0, 10.0, 50), len(classes))
            names = np.array(classes)[np.repeat(np.arange(len(classes)), 50)]
            assert np.array_equal(decide(many, grid), part.accept(names, grid, e))
            assert 0 < decide(many, grid).mean() < 1
    with pytest.raises(CalibrateError, match="not enrolled"):
        part.codes(["c0_1", "nobody"])
    with pytest.raises(CalibrateError, match="not enrolled"):
        part.threshold("nobody", 0.01)


# ---- a worker killed mid-run (dask.distributed) ---------------------------------------------------
# Deterministic on a loaded machine: the estimator's fit on a worker says it started (a file naming its process) and
# waits for a "go" file; the test kills the first worker that started, waits until it is gone, then lets the rest go.

#: how long a gated fit or the test waits for the other side before giving up (never reached when things work)
GATE_TIMEOUT = 600.0


class _Gated:
    """A plugin with estimator ``gated``: class-interp whose fit, on a worker process, waits at ``gate``."""

    def __init__(self, gate: Path):
        self.gate = gate

    @hookimpl
    def calibrate_register_estimators(self, register):
        import os
        import time

        from calibrate_builtins.estimators.interp import ClassInterp

        gate, main = str(self.gate), os.getpid()

        class Gated(ClassInterp):  # a local class: cloudpickle sends it to the workers by value
            def _fit(self, impostors, context):
                if os.getpid() != main:
                    Path(gate, f"started-{os.getpid()}").touch()
                    deadline = time.monotonic() + GATE_TIMEOUT
                    while not Path(gate, "go").exists():
                        if time.monotonic() > deadline:
                            raise TimeoutError("the test never opened the gate")
                        time.sleep(0.01)
                return super()._fit(impostors, context)

        register("gated", Gated)


def _ended(process) -> bool:
    """Whether a process has exited (gone, or a zombie its parent has yet to reap: it is not reaped here, since a child
    of multiprocessing reaped behind its back stays in multiprocessing.active_children for good)."""
    import psutil

    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_the_first_to_start(gate: Path, killed: list) -> None:
    """Wait until a gated fit starts on a worker, kill (SIGKILL) that worker, wait until it is gone, open the gate."""
    import time

    import psutil

    deadline = time.monotonic() + GATE_TIMEOUT
    try:
        while not (started := sorted(gate.glob("started-*"))):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        worker = psutil.Process(int(started[0].name.split("-", 1)[1]))
        worker.kill()
        while not _ended(worker):  # not psutil's wait, which would reap the nanny's child behind its back
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        killed.append(True)
    finally:
        (gate / "go").touch()


def _run_killing(tmp_path, name: str, allowed_failures: int):
    import threading

    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    from calibrate.contract.base import RunContext
    from calibrate_builtins.executors.cluster import Dask

    folder = make_shards(tmp_path / "shards", shards=6, classes=60, probes=300, seed=8)
    data = {"plugin": "score-shards", "path": str(folder), "kind": "distance"}
    recipe = {"version": 1, "data": data, "estimators": [{"plugin": "gated"}],
              "evaluation": {"targets": [0.01]}, "output": {"dir": str(tmp_path / name), "plots": False}}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    gate = tmp_path / f"gate-{name}"
    gate.mkdir()
    killed: list = []
    killer = threading.Thread(target=_kill_the_first_to_start, args=(gate, killed), daemon=True)

    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        with Dask(workers=2) as executor:
            killer.start()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return calibrate.run(tmp_path / f"{name}.yaml", context=RunContext(executor=executor),
                                         extra_plugins=(_Gated(gate),)), killed
            except Exception as exc:  # noqa: BLE001 - the caller looks at it
                return exc, killed
            finally:
                (gate / "go").touch()
                killer.join()


def _no_processes_left(timeout: float = 120.0):
    """No worker or nanny process of ours is left once they have had time to exit (each waited for until it has ended,
    :func:`_ended`); multiprocessing's resource tracker, one per test session, is not a worker."""
    import time

    import psutil

    def command(p):
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # gone meanwhile
            return ""

    ours = [p for p in psutil.Process().children(recursive=True) if "resource_tracker" not in command(p)]
    deadline = time.monotonic() + timeout
    while not all(_ended(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in ours if not _ended(p)]
    if alive:
        print([command(p) for p in alive])
    return not alive


def test_a_killed_worker_is_retried_and_the_result_is_the_same(tmp_path):
    result, killed = _run_killing(tmp_path, "retried", allowed_failures=3)
    assert killed == [True], "no gated fit started on a worker; the test did not kill one"
    assert not isinstance(result, Exception), result
    recipe = {"version": 1, "data": {"plugin": "score-shards", "path": str(tmp_path / "shards"), "kind": "distance"},
              "estimators": [{"plugin": "gated"}], "evaluation": {"targets": [0.01]},
              "output": {"dir": str(tmp_path / "serial"), "plots": False}}
    (tmp_path / "serial.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = calibrate.run(tmp_path / "serial.yaml", extra_plugins=(_Gated(tmp_path),))  # in this process: no wait
    assert thresholds(sorted(result.out_dir.glob("thresholds-part*.csv"))) == \
        thresholds(sorted(serial.out_dir.glob("thresholds-part*.csv")))
    assert read_manifest(result.out_dir) is not None
    assert _no_processes_left()


def test_a_killed_worker_without_retries_fails_the_run_with_nothing_complete(tmp_path):
    result, killed = _run_killing(tmp_path, "failed", allowed_failures=0)
    assert killed == [True]
    assert isinstance(result, Exception) and "KilledWorker" in type(result).__name__, repr(result)
    out = tmp_path / "failed"
    assert read_manifest(out) is None
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
    assert _no_processes_left()


def test_dictionary_encoded_labels_read_as_the_general_path(tmp_path):
    # pyarrow writes repeated labels as dictionary columns; the shard reader decodes those from the dictionary
    # (not row by row): codes and labels must be the general path's, whatever the dictionaries look like
    from calibrate_builtins.datasets import score_shards as ss

    def chunked(values, dictionaries):
        chunks, at = [], 0
        for d, n in dictionaries:
            part = values[at:at + n]
            at += n
            chunks.append(pa.DictionaryArray.from_arrays(pa.array([d.index(v) for v in part], pa.int32()), pa.array(d)))
        return pa.chunked_array(chunks)

    claimed = ["b", "b", "a", "a", "c", "c"]
    real = [1, 7, 1, 7, 1, 7]
    probe = ["p1", "p2", "p1", "p2", "p1", "p2"]
    columns = {"claimed_id": chunked(claimed, [(["x", "b", "a"], 4), (["c", "unused"], 2)]),   # two dictionaries, one unused
               "real_id": pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 1, 0, 1], pa.int32()),
                                                                           pa.array([1, 7]))]),  # numbers as labels
               "test_label": chunked(probe, [(["p2", "p1"], 6)]),                                  # not in first-appearance order
               "score": pa.chunked_array([pa.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])])}
    table = pa.table(columns)
    plain = pa.table({"claimed_id": claimed, "real_id": [str(r) for r in real], "test_label": probe,
                      "score": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    pq.write_table(table, tmp_path / "dict.parquet", row_group_size=3)
    pq.write_table(plain, tmp_path / "plain.parquet")
    got = ss._parquet_rows(tmp_path / "dict.parquet", None)
    want = ss._parquet_rows(tmp_path / "plain.parquet", None)
    for name in ("claimed", "real", "probe", "scores"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    for name in ("claimed_labels", "real_labels", "probe_labels"):
        assert getattr(got, name) == getattr(want, name), name
    for col in (columns["claimed_id"], columns["real_id"], columns["test_label"]):  # several chunks and dictionaries
        codes, labels = ss._dictionary_labels(col)
        assert [labels[c] for c in codes] == [str(v) for v in col.to_pylist()]
    repeated = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["a", "a"]))])
    assert ss._dictionary_labels(repeated) is None  # the general path decides what a repeated label means
