"""The sharded run's streamed GPD tail (calibrate.contract.sharded.lowest_moments, gpd.fit_lower_tail_moments) against
the in-memory fit (gpd.fit_lower_tail) on the same pooled values, seeded: the threshold, count and kept values
exactly, the shape and scale within a relative 1e-10 (the same probability-weighted moments, summed bucket by
bucket in another order)."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.errors import DataError
from calibrate.statistics.gpd import exceedance_count, fit_lower_tail, fit_lower_tail_moments
from calibrate.contract.sharded import lowest_moments

#: relative difference allowed between the streamed and the in-memory shape and scale
RTOL = 1e-10


class _Context:
    @staticmethod
    def map(function, items, **_):
        return [function(item) for item in items]


class _Runner:
    """What lowest_moments uses of a ShardRunner: the shards' values mapped in this process, a scratch folder."""

    def __init__(self, shards, scratch, n_train=0):
        self.shards, self.scratch, self.context, self.n_train = shards, scratch, _Context(), n_train
        self.reads = 0

    def map(self, function, arg=None, description=None, only=None):
        indices = range(len(self.shards)) if only is None else only
        self.reads += len(indices)
        return [function(self.shards[i], arg, i) for i in indices]


def _values(shard, arg):
    return shard


def _moments(shards, tmp_path, bucket_values, keep=50, n_train=0):
    runner = _Runner(shards, tmp_path, n_train)
    m = lowest_moments(runner, _values, None, lambda n: exceedance_count(n, 0.1, 30), lambda n: keep, "t",
                       bucket_values=bucket_values)
    return m, runner.reads


@pytest.mark.parametrize("case", ["normal", "ties", "uniform", "one-value shards", "one low shard"])
@pytest.mark.parametrize("bucket_values", [97, 1 << 22])
@pytest.mark.parametrize("saved", ["all", "share"])
def test_the_streamed_tail_is_the_in_memory_fit(tmp_path, case, bucket_values, saved):
    rng = np.random.default_rng(3)
    shards = [rng.standard_normal(n) for n in (4000, 2500, 6100)]
    if case == "ties":
        shards = [np.round(s, 1) for s in shards]
    elif case == "uniform":  # a short lower tail: the shape is clipped and the scale guarded
        shards = [rng.uniform(2.0, 3.0, s.size) for s in shards]
    elif case == "one-value shards":
        shards += [np.array([-0.5]), np.array([4.0])]
    elif case == "one low shard":  # the pooled cut lies above what that shard saved in the first pass: read again
        shards[1] = shards[1] - 3.0
    pooled = np.sort(np.concatenate(shards))
    ref, _ = fit_lower_tail(pooled, tail_fraction=0.1, min_exceedances=30)
    # "all": each shard saves every value in the first pass; "share": about twice the tail's share (as a run does)
    m, reads = _moments(shards, tmp_path, bucket_values, n_train=0 if saved == "all" else pooled.size)
    if saved == "all" or case in ("normal", "ties", "uniform"):
        assert reads == len(shards)  # one reading of every shard
    elif case == "one low shard":
        assert reads == len(shards) + 1  # and the low shard's second
    got = fit_lower_tail_moments(m.n_total, m.k, m.u, m.lowest, m.sum_low, m.sum_ranked)
    assert (got.u, got.p_u, got.k) == (ref.u, ref.p_u, ref.k)
    assert got.xi == pytest.approx(ref.xi, rel=RTOL, abs=1e-14)
    assert got.beta == pytest.approx(ref.beta, rel=RTOL)
    assert m.kept.tobytes() == pooled[:50].tobytes()
    assert not list(tmp_path.iterdir())  # scratch files removed


def test_a_tail_of_ties_is_refused_as_in_memory(tmp_path):
    shards = [np.r_[np.zeros(200), np.arange(1.0, 101.0)], np.zeros(100)]
    with pytest.raises(DataError) as ref:
        fit_lower_tail(np.sort(np.concatenate(shards)), tail_fraction=0.1, min_exceedances=30)
    m, _ = _moments(shards, tmp_path, 50)
    with pytest.raises(DataError) as got:
        fit_lower_tail_moments(m.n_total, m.k, m.u, m.lowest, m.sum_low, m.sum_ranked)
    assert str(got.value) == str(ref.value)
