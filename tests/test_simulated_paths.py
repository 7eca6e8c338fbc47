"""The predicted interval's fast path holds for every structure auto can take (issue 38): a partial draw sized for
what each structure reads, and a gallery it misses seen at more ranks (the same gallery), not refitted whole."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calibrate.contract.progress import Task
from calibrate.contract.types import ImpostorDistances
from calibrate.predicted.interval import PredictionSettings, build_world, predict_together
from calibrate.predicted.simulated_galleries import DrawPlan, fill_between
from calibrate.running.beside import SharedCount
from calibrate_builtins.estimators import anchored
from calibrate_builtins.estimators.auto import Auto

TARGETS = np.array([5e-3, 1e-3])


def shifted_gallery(seed: int, classes: int = 120, n: int = 800) -> ImpostorDistances:
    """Classes whose impostor bulks sit apart (log-normal, locations spread by 0.15): under one pooled threshold
    the classes amid the crowd hold several times the target's share of their distances."""
    rng = np.random.default_rng(seed)
    loc = rng.normal(0.0, 0.15, classes)
    return ImpostorDistances.from_lists({f"c{c:03d}": np.exp(loc[c] + 0.3 * rng.standard_normal(n))
                                         for c in range(classes)})


def partial_uniforms(counts: np.ndarray, keys: np.ndarray, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted uniforms at ``keys`` drawn as World.draw_galleries draws them."""
    plan = DrawPlan.of_keys(counts, keys)
    g = np.cumsum(rng.standard_gamma(plan.shapes, size=(replicates, plan.shapes.size)), axis=1)
    before = g[:, np.maximum(plan.before_cols, 0)]
    before[:, plan.before_cols < 0] = 0.0
    below = before[:, plan.cls]
    return (g[:, plan.value_cols] - below) / (g[:, plan.total_cols] - below)


def test_a_partial_draw_seen_at_more_ranks_keeps_its_values_and_the_law_of_sorted_uniforms():
    counts = np.array([50, 7, 30])
    offsets = np.r_[0, np.cumsum(counts)]
    keys = np.array([0, 1, 2, 3, 4, 24, offsets[1] + 3, offsets[2], offsets[2] + 1])
    rng = np.random.default_rng(3)
    u = partial_uniforms(counts, keys, 20_000, rng)
    whole = fill_between(counts, keys, u, np.arange(counts.sum()), rng)
    assert np.array_equal(whole[:, keys], u)
    for c in range(3):
        assert np.all(np.diff(whole[:, offsets[c]:offsets[c + 1]], axis=1) >= 0)
    # the k-th of n sorted uniforms is Beta(k, n + 1 - k), the spacing of ranks 10 and 20 of 50 Beta(10, 41): a
    # wrong law (e.g. new values uniform on the gap without their order) fails these at 20,000 draws
    for c, k in [(0, 6), (0, 25), (0, 26), (0, 50), (1, 1), (1, 7), (2, 3), (2, 30)]:
        n = counts[c]
        assert stats.kstest(whole[:, offsets[c] + k - 1], stats.beta(k, n + 1 - k).cdf).pvalue > 1e-3, (c, k)
    assert stats.kstest(whole[:, 19] - whole[:, 9], stats.beta(10, 41).cdf).pvalue > 1e-3


def _predict(imp: ImpostorDistances, estimator, seed: int = 0):
    model = estimator.fit(imp)
    world = build_world(imp)
    return predict_together([estimator], [model], imp, TARGETS, settings=PredictionSettings(0.9, 100), seed=[seed],
                            world=world)[0]


def test_one_pooled_threshold_is_predicted_from_partial_draws_that_cover_it():
    """The regression issue 38 found: ``structure: one`` sized its draw by the target, not by each class's share below
    one pooled threshold, so most galleries were drawn again whole and refitted one at a time (130x the others)."""
    pred = _predict(shifted_gallery(1), Auto(structure="one"))
    assert pred.simulation == "vectorised" and pred.replicates.shape[0] == 100
    assert (pred.widened, pred.refitted) == (0, 0)


def test_a_gallery_the_partial_draw_missed_is_seen_at_more_ranks_not_refitted(monkeypatch):
    imp = shifted_gallery(2)
    right = _predict(imp, Auto(structure="one"))
    # the ranks as issue 38 found them (the target's share of each class): many galleries miss
    monkeypatch.setattr(anchored, "pooled_expected", lambda counts, t, world: counts * float(np.max(t)))
    missed = _predict(imp, Auto(structure="one"))
    assert missed.widened > 10 and missed.refitted == 0
    # the same galleries seen at more ranks: the interval is the right one, to Monte Carlo noise (100 galleries
    # each; the two runs draw differently, so their 5% and 95% quantiles differ by a few percent of the target)
    np.testing.assert_allclose(missed.low / TARGETS, right.low / TARGETS, atol=0.06)
    np.testing.assert_allclose(missed.high / TARGETS, right.high / TARGETS, atol=0.06)


@pytest.mark.parametrize("structure", ["one", "anchored", "bulk"])
def test_every_structure_auto_can_take_is_predicted_without_whole_refits(structure):
    pred = _predict(shifted_gallery(4, classes=80, n=600), Auto(structure=structure))
    assert pred.simulation == "vectorised" and pred.refitted == 0
    assert pred.widened <= 5  # a partial draw misses rarely (by its margin), never as a rule


class _Job:
    """A stand-in for a process beside the run: ready after ``steps`` waits, the child's counts advancing meanwhile."""

    def __init__(self, count: SharedCount, steps: int):
        self.count, self.steps, self.waits = count, steps, 0
        self.task = count.start("predicted FPR, simulated galleries", 40, "galleries")

    def wait(self, seconds: float) -> bool:
        self.waits += 1
        if self.waits > 1:  # the child works on while the run waits
            self.task.advance(10)
        return self.waits >= self.steps


class _Shown(Task):
    def __init__(self):
        self.done, self.total = 0.0, None

    def advance(self, n: float = 1) -> None:
        self.done += n

    def set_total(self, total: float | None) -> None:
        self.total = total


def test_the_run_shows_the_galleries_its_child_simulates_while_it_waits():
    count = SharedCount("galleries")
    assert count.start("auto: fitting 10 classes", 10, "classes").__class__ is Task  # other units: not counted
    job = _Job(count, steps=3)
    job.task.advance(5)  # done before the run began to wait: not in the wait's count or rate
    shown = _Shown()
    count.follow(shown, job, every=0.0)
    assert shown.total == 35 and shown.done == 20
