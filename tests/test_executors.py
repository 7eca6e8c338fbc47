"""Executors serial, processes and dask give identical results on a small recipe.

The recipe runs both stages that use the executor: mutual-subspace distances (one task per row
block of the distance matrix) and ncx2-grid fits in exact and fast mode (one task per chunk of
classes). Chunks and blocks are made small here so that every executor really gets several tasks. The refits'
time budget is fixed below what any refit takes, so that no compared output depends on the wall clock (a budget
that is a share of the run's time gave ncx2-grid a predicted interval in one run and none in the other on a loaded
machine); class-interp's vectorised prediction, which no budget limits, is compared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import calibrate_builtins.distances.mutual_subspace as ms
import calibrate_builtins.estimators.ncx2.grid as ng
from calibrate.api import run
from calibrate.contract.base import RunContext
from calibrate.contract.types import SetCollection
from calibrate.running import beside
from calibrate_builtins.executors.local import Processes, Serial

RECIPE = """
version: 1
data: {{plugin: synthetic-patterns, classes: 24, sets: 3, samples: 6, dim: 12, seed: 3}}
distance: {{plugin: mutual-subspace, components: 3}}
estimators:
  - {{plugin: ncx2-grid, name: exact, mode: exact, sigma: {{steps: 30}}}}
  - {{plugin: ncx2-grid, name: fast, mode: fast, sigma: {{steps: 30}}}}
  - {{plugin: class-interp}}
evaluation: {{targets: [0.05, 0.01], prediction: {{budget_s: 0.001}}}}
output: {{dir: {out}, plots: false}}
executor: {executor}
"""

EXECUTORS = ["{plugin: serial}", "{plugin: processes, workers: 2}", "{plugin: dask, workers: 2}"]


@pytest.fixture
def small_tasks(monkeypatch):
    monkeypatch.setattr(ng, "_CHUNK", {"exact": 5, "fast": 5})
    monkeypatch.setattr(ms, "_BLOCK_BYTES", 3 * 9 * 8 * 40)  # blocks of about 40 pairs


def run_with(tmp_path: Path, executor: str) -> tuple[str, str]:
    name = executor.split()[1].rstrip(",}")
    path = tmp_path / f"{name}.yaml"
    out = tmp_path / f"out-{name}"
    path.write_text(RECIPE.format(out=out, executor=executor))
    run(path)
    return (out / "thresholds.csv").read_text(), (out / "models.csv").read_text()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("executor", EXECUTORS[1:])
def test_recipe_results_identical_across_executors(tmp_path, small_tasks, executor):
    if "dask" in executor and importlib.util.find_spec("distributed") is None:
        pytest.skip("the dask executor is an optional extra (pip install 'calibrate-thresholds[dask]')")
    serial = run_with(tmp_path, EXECUTORS[0])
    other = run_with(tmp_path, executor)
    assert other[0] == serial[0], f"{executor}: thresholds.csv differs from the serial run"
    assert other[1] == serial[1], f"{executor}: models.csv differs from the serial run"
    assert serial[0].count("\n") == 1 + 3 * 24 * 2 and "\nexact," in serial[0] and "\nfast," in serial[0]


@pytest.mark.filterwarnings("ignore")
def test_a_run_without_executor_spreads_the_fits_and_gives_the_serial_bytes(tmp_path, small_tasks, monkeypatch):
    spread, spread_map = [], beside.spread_map

    def counting(function, items, on_done):
        spread.append(len(items))
        return spread_map(function, items, on_done)

    monkeypatch.setattr(beside, "spread_map", counting)
    serial = run_with(tmp_path, EXECUTORS[0])
    assert spread == []  # `executor: serial` asked for one process
    path, out = tmp_path / "default.yaml", tmp_path / "out-default"
    path.write_text("\n".join(line for line in RECIPE.format(out=out, executor="").splitlines()
                               if not line.startswith("executor:")))
    run(path)
    assert spread == [5, 5]  # the exact and the fast fit: 24 classes in chunks of 5
    assert ((out / "thresholds.csv").read_text(), (out / "models.csv").read_text()) == serial


def test_distances_identical_through_processes_and_blocked(small_tasks):
    rng = np.random.default_rng(5)
    sets = [rng.normal(size=(8, 10)) * np.linspace(2, 0.2, 10) + rng.normal(size=10) for _ in range(14)]
    coll = SetCollection(tuple(sets), np.array([f"c{i}" for i in range(14)]), np.array([f"s{i}" for i in range(14)]))
    gallery = SetCollection(tuple(sets[:5]), coll.classes[:5], coll.ids[:5])
    dist = ms.MutualSubspace(components=3)
    with Serial() as ex:
        serial = dist.pairwise(coll, gallery, RunContext(executor=ex))
    with Processes(workers=2) as ex:
        parallel = dist.pairwise(coll, gallery, RunContext(executor=ex))
    np.testing.assert_array_equal(parallel, serial)
    # against one unblocked pass of the previous implementation (batched SVD of every block)
    bases = dist._bases(coll, {}, {"short": [], "fallback": []})
    blocks = np.einsum("iad,jbd->ijab", bases, bases[:5])
    np.testing.assert_allclose(serial, 1 - np.clip(np.linalg.svd(blocks, compute_uv=False)[..., 0], 0, 1), atol=1e-12)
