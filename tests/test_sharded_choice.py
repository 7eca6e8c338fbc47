"""auto's choice and demographic groups in a sharded run (issue 43, parts 1 and 2): score lists in shards with training
genuine comparisons and a groups file give the in-memory run's structure, thresholds and figures per group."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import calibrate

from test_partitioned import run as partitioned_run
from test_partitioned import thresholds

#: thresholds against the in-memory run: relative difference (the same floats but for the GPD tail's moments, sums
#: taken in another order, and the anchors' shrinkage constants, which are bit for bit the in-memory ones)
RTOL = 1e-9


def make_scores(folder: Path, *, shards: int = 4, classes: int = 30, probes: int = 80, genuine: int = 4,
                seed: int = 0, groups: bool = True, every: int = 3) -> Path:
    """Shards of bob 4-column distances, each class with its own scale (its genuine scores scaled alike: class-specific
    thresholds save genuine users here), ``genuine`` genuine probes a class; beside them all.txt (the same lines, shards
    in order) and groups.csv (classes in two groups by a fixed random draw, every ``every``-th impostor probe in the
    smaller one)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines, members = [], {}
    for s in range(shards):
        text = []
        for j in range(classes):
            c, scale = f"c{s}_{j}", rng.uniform(0.4, 2.5)
            members[c] = "F" if rng.random() < 0.35 else "M"
            for q in range(probes):
                real = f"r{s}_{q}"
                members.setdefault(real, "F" if q % every == 0 else "M")
                # a probe of the class's own group is closer: the look-alikes that decide a low FPR
                near = 0.8 if members[real] == members[c] else 1.0
                text.append(f"{c} {real} p{s}_{q} {rng.gamma(5, scale * near)!r}")
            for q in range(genuine):
                text.append(f"{c} {c} g{s}_{j}_{q} {rng.gamma(2, 0.35 * scale)!r}")
        (folder / f"shard{s:03d}.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
        lines += text
    (folder.parent / "all.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if groups:
        (folder.parent / "groups.csv").write_text("class,group\n" + "".join(f"{c},{g}\n" for c, g in members.items()),
                                                  encoding="utf-8")
    return folder


def run(tmp: Path, data: dict, name: str, estimators, targets=(0.01, 0.003), executor=None, plots: bool = False):
    return partitioned_run(tmp, data, name, targets, estimators, executor, prediction=False, plots=plots)


def both(tmp: Path, estimators, groups: bool = False, same_group: bool = False, name: str = "", **kw):
    extra = {"kind": "distance"}
    if groups:
        extra["groups"] = str(tmp / "groups.csv")
    if same_group:
        extra["impostors"] = "same-group"
    sharded = run(tmp, {"plugin": "score-shards", "path": str(tmp / "shards"), **extra}, f"sharded{name}", estimators,
                  **kw)
    memory = run(tmp, {"plugin": "score-list", "path": str(tmp / "all.txt"), **extra}, f"memory{name}", estimators, **kw)
    return sharded, memory


def assert_same_thresholds(sharded, memory) -> None:
    a = thresholds(sorted(sharded.out_dir.glob("thresholds-part*.csv")))
    b = thresholds([memory.out_dir / "thresholds.csv"])
    assert set(a) == set(b)
    for key in b:
        assert a[key] == pytest.approx(b[key], rel=RTOL, abs=0), key


def chose(result) -> list[str]:
    return [n for n in result.notes if "auto chose" in n or "no choice can be made" in n]


GROUP_KEYS = ("fmr_same_group", "fmr_same_group_ci_low", "fmr_same_group_ci_high", "false_accepts_same_group",
              "impostor_attempts_same_group", "fmr", "false_accepts", "impostor_attempts", "fnmr", "fnmr_ci_low",
              "fnmr_ci_high", "false_rejects", "genuine_attempts", "classes", "fnmr_own_threshold",
              "fnmr_paired_own_threshold")


def close(x, y) -> bool:
    """Numbers within a relative 1e-12, anything else (counts, flags, None, mappings of them) equal."""
    if isinstance(y, dict):
        return isinstance(x, dict) and set(x) == set(y) and all(close(x[k], y[k]) for k in y)
    if isinstance(y, float) and not isinstance(x, bool):
        return x == pytest.approx(y, rel=1e-12)
    return x == y


def assert_same_group_figures(sharded, memory) -> None:
    """Every estimator's figures per group at every target, its own and one pooled threshold's, and results.json's
    run-wide ``groups``, as the in-memory run has them (counts exact, rates relative 1e-12)."""
    a = json.loads((sharded.out_dir / "results.json").read_text())
    b = json.loads((memory.out_dir / "results.json").read_text())
    assert a["groups"] == b["groups"]
    for label, est in b["estimators"].items():
        for x, y in zip(a["estimators"][label]["targets"], est["targets"]):
            for side in (lambda r: r, lambda r: r["one_threshold"]):
                gx, gy = side(x), side(y)
                for key in ("fmr_same_group_max_over_min", "fnmr_max_over_min"):
                    assert close(gx[key], gy[key]), (label, key)
                assert set(gx["groups"]) == set(gy["groups"])
                for name, row in gy["groups"].items():
                    for key in GROUP_KEYS:
                        assert close(gx["groups"][name].get(key), row.get(key)), (label, name, key)
    said = [n for n in memory.notes if n.startswith("WARNING") and "widens" in n]
    assert [n for n in sharded.notes if n.startswith("WARNING") and "widens" in n] == said


def test_auto_chooses_a_structure_in_a_sharded_run_as_in_memory(tmp_path):
    make_scores(tmp_path / "shards", groups=False)
    sharded, memory = both(tmp_path, [{"plugin": "auto"}])
    said = chose(memory)
    assert said and "auto chose" in said[0] and "one pooled threshold (" not in said[0].split(":")[0], said
    assert chose(sharded) == said  # the same structure, for the same reasons, in the same words
    assert_same_thresholds(sharded, memory)


@pytest.mark.parametrize("groups", [False, True], ids=["alone", "with-groups"])
def test_without_training_genuine_comparisons_one_pooled_threshold_said_as_in_memory(tmp_path, groups):
    make_scores(tmp_path / "shards", shards=2, classes=10, probes=30, genuine=0)
    sharded, memory = both(tmp_path, [{"plugin": "auto"}], groups=groups)
    assert [n for n in sharded.notes if n.startswith("auto")] == [n for n in memory.notes if n.startswith("auto")]
    assert any("genuine comparison" in n for n in sharded.notes if n.startswith("auto"))
    assert_same_thresholds(sharded, memory)


def test_with_groups_the_same_choice_thresholds_and_figures_per_group(tmp_path):
    make_scores(tmp_path / "shards", seed=1)
    sharded, memory = both(tmp_path, [{"plugin": "auto"}, {"plugin": "generic-interp"}], groups=True)
    assert chose(sharded) == chose(memory) and chose(memory)
    assert_same_thresholds(sharded, memory)
    assert_same_group_figures(sharded, memory)
    left_out = json.loads((sharded.out_dir / "results.json").read_text())["partitions"]["left_out"]
    assert "figures per group" not in left_out and not any(x.startswith("auto's choice") for x in left_out)


@pytest.mark.parametrize("structure", ["anchored", "anchored-matched", "bulk-matched", "one", "bulk"])
def test_every_structure_fitted_shard_by_shard_as_in_memory(tmp_path, structure):
    make_scores(tmp_path / "shards", seed=2, shards=3)
    sharded, memory = both(tmp_path, [{"plugin": "auto", "structure": structure}], groups=True)
    assert_same_thresholds(sharded, memory)
    if structure.endswith("-matched"):  # the groups' shifts are in the locations: not those of the plain structure
        plain, _ = both(tmp_path, [{"plugin": "auto", "structure": structure.removesuffix("-matched")}], groups=True,
                        name="plain")
        a = thresholds(sorted(sharded.out_dir.glob("thresholds-part*.csv")))
        b = thresholds(sorted(plain.out_dir.glob("thresholds-part*.csv")))
        assert any(a[(lab, c, t)] != b[(lab, c, t)] for lab, c, t in b)


def test_the_anchored_estimator_is_fitted_shard_by_shard(tmp_path):
    make_scores(tmp_path / "shards", seed=3, shards=3, groups=False)
    sharded, memory = both(tmp_path, [{"plugin": "anchored", "max_rank": 12}])
    assert_same_thresholds(sharded, memory)


def test_beyond_the_cap_both_judge_the_same_classes(tmp_path, monkeypatch):
    from calibrate_builtins.estimators import choose

    monkeypatch.setattr(choose, "MAX_JUDGED", 4000)  # a serial run: the one process reads it
    make_scores(tmp_path / "shards", seed=4, groups=False)
    sharded, memory = both(tmp_path, [{"plugin": "auto"}])
    said = chose(memory)
    assert "judged on one class in" in said[0] and chose(sharded) == said
    assert_same_thresholds(sharded, memory)


def test_same_group_calibration_in_a_sharded_run(tmp_path):
    # enough same-group impostors in each group for its own choice to be made
    make_scores(tmp_path / "shards", seed=5, classes=40, probes=300, every=2)
    estimators = [{"plugin": "auto"}, {"plugin": "generic-interp"}, {"plugin": "class-interp"}]
    sharded, memory = both(tmp_path, estimators, groups=True, same_group=True)
    assert_same_thresholds(sharded, memory)
    assert_same_group_figures(sharded, memory)
    notes = [n for n in memory.notes if n.startswith("group ") or "same-group impostors (" in n]
    assert sum("auto chose" in n for n in notes) == 2
    assert [n for n in sharded.notes if n.startswith("group ") or "same-group impostors (" in n] == notes
    for label in ("auto", "generic-interp"):
        part = calibrate.load(sharded.out_dir / "calibration.json", label)
        same = calibrate.load(memory.out_dir / "calibration.json", label)
        for c in ("c0_0", "c1_3", "c3_29"):
            assert part.threshold(c, 0.01) == pytest.approx(same.threshold(c, 0.01), rel=RTOL)


def test_the_executor_does_not_change_the_parts(tmp_path):
    make_scores(tmp_path / "shards", seed=6, shards=3)
    data = {"plugin": "score-shards", "path": str(tmp_path / "shards"), "kind": "distance",
            "groups": str(tmp_path / "groups.csv")}
    serial = run(tmp_path, data, "serial", [{"plugin": "auto"}])
    spread = run(tmp_path, data, "spread", [{"plugin": "auto"}], executor={"plugin": "processes", "workers": 2})
    for a in sorted(serial.out_dir.glob("*-part*")):
        assert a.read_bytes() == (spread.out_dir / a.name).read_bytes(), a.name
    assert chose(serial) == chose(spread)


def _named(training, arg):
    """Two value sets of a shard: its distances and their logs less 1 (negative values among them)."""
    d = training.impostors.values
    return {"d": d, "y": np.log(d) - 1.0}


def test_select_ranks_gives_the_order_statistics_np_sort_gives(tmp_path):
    from calibrate.contract.base import RunContext
    from calibrate.contract.sharded import ShardJob, ShardRunner, select_ranks
    from calibrate.contract.types import ImpostorDistances
    from calibrate.testing.piecewise import _Identity, _ImpostorShards

    rng = np.random.default_rng(7)
    per = {f"c{i}": np.round(rng.gamma(3, 1.0 + i, 400 + 37 * i), 2) for i in range(5)}  # rounded: ties
    imp = ImpostorDistances.from_lists(per)
    data = _ImpostorShards(imp)
    runner = ShardRunner(RunContext(seed=0), [ShardJob(data, (str(k),), 0, k, _Identity()) for k in range(2)], tmp_path)
    pooled = {"d": np.sort(imp.values), "y": np.sort(np.log(imp.values) - 1.0)}
    wanted = {"d": [0, 1, 57, 999, imp.values.size - 1], "y": [3, 444, imp.values.size - 2]}
    n, got = select_ranks(runner, _named, None, lambda n: wanted)
    assert n == {"d": imp.values.size, "y": imp.values.size}
    for name, ranks in wanted.items():
        assert got[name] == {r: float(pooled[name][r]) for r in ranks}  # the very floats


def _two_sets(training, arg):
    d = training.impostors.values
    even = np.rint(d * 1000) % 2 == 0  # a rule of the value, not of its place in a shard
    return {"a": d[even] * arg, "b": np.log(d[~even]) * arg}


@pytest.mark.parametrize("scale, shifts, miss", [(1.0, (0.3, -0.2), False), (1e-290, (1.0, 0.0), False),
                                                 (1.0, (0.3, -0.2), True)], ids=["plain", "near-zero", "missed"])
def test_shifted_ranks_give_the_order_statistics_of_the_shifted_union(tmp_path, monkeypatch, scale, shifts, miss):
    # where a bracket misses its rank (bins finer than the subtraction's rounding), the exact selection is made
    # again (two passes more): "missed" makes every bracket miss (a serial run: this process runs the tasks)
    import calibrate.contract.shard_ranks as shard_ranks
    from calibrate.contract.base import RunContext

    if miss:
        monkeypatch.setattr(shard_ranks, "_shifted_in_range",
                            lambda training, arg, index: [(0, np.zeros(0))] * len(arg[3]))
    from calibrate.contract.sharded import ShardJob, ShardRunner, named_histograms, shifted_ranks
    from calibrate.contract.types import ImpostorDistances
    from calibrate.testing.piecewise import _Identity, _ImpostorShards

    rng = np.random.default_rng(8)
    imp = ImpostorDistances.from_lists({f"c{i}": np.round(rng.gamma(3, 1.0 + i, 300 + 41 * i), 3) + 0.001
                                        for i in range(5)})
    runner = ShardRunner(RunContext(seed=0), [ShardJob(_ImpostorShards(imp), (str(k),), 0, k, _Identity())
                                              for k in range(2)], tmp_path)
    hists = named_histograms(runner, _two_sets, scale)
    given = {"a": shifts[0], "b": shifts[1]}
    sets = [_two_sets(type("T", (), {"impostors": imp})(), scale)]  # the pooled sets, computed as a shard would
    union = np.sort(np.concatenate([sets[0]["a"] - given["a"], sets[0]["b"] - given["b"]]))
    ranks = [0, 5, 333, union.size // 2, union.size - 1]
    assert shifted_ranks(runner, _two_sets, scale, hists, given, ranks) == {r: float(union[r]) for r in ranks}


@pytest.mark.parametrize("same_group", [False, True], ids=["groups", "same-group"])
def test_cdf_fits_shows_the_thresholds_the_sharded_run_wrote(tmp_path, monkeypatch, same_group):
    # the classes cdf-fits.png draws are fitted as the last pass fits a shard (with their groups: a matched structure's
    # shift, a calibration group by group), so the picture's thresholds are the run's
    import calibrate.running.sharded_eval as sharded_eval

    folds = []
    original = sharded_eval.sample_fold
    monkeypatch.setattr(sharded_eval, "sample_fold", lambda *a, **k: folds.append(original(*a, **k)) or folds[-1])
    make_scores(tmp_path / "shards", shards=3, classes=20, probes=60)
    auto = {"plugin": "auto"} if same_group else {"plugin": "auto", "structure": "anchored-matched"}
    data = {"plugin": "score-shards", "path": str(tmp_path / "shards"), "kind": "distance",
            "groups": str(tmp_path / "groups.csv"), **({"impostors": "same-group"} if same_group else {})}
    result = run(tmp_path, data, "sharded", [auto], plots=True)
    assert (result.out_dir / "cdf-fits.png").exists() and folds and folds[0] is not None
    written = thresholds(sorted(result.out_dir.glob("thresholds-part*.csv")))
    table = folds[0].tables["auto"]
    for i, c in enumerate(table.classes):
        for k, e in enumerate((0.01, 0.003)):
            assert table.values[i, k] == pytest.approx(written[("auto", c, e)], rel=RTOL), (c, e)


def test_without_evaluation_genuine_attempts_one_pooled_threshold_is_still_reported(tmp_path):
    make_scores(tmp_path / "shards", shards=3, classes=10, probes=30, genuine=0)
    sharded, memory = both(tmp_path, [{"plugin": "auto"}, {"plugin": "generic-interp"}], groups=True)
    a = json.loads((sharded.out_dir / "results.json").read_text())
    b = json.loads((memory.out_dir / "results.json").read_text())
    for label, est in b["estimators"].items():
        for x, y in zip(a["estimators"][label]["targets"], est["targets"]):
            assert "one_threshold" in y and "fnr_paired" not in y
            assert "fnr_paired" not in x
            for key in ("score_threshold", "false_accepts", "fpr", "fnr"):
                assert close(x["one_threshold"][key], y["one_threshold"][key]), (label, key)
