"""auto in a sharded run as in memory: the structure chosen from the training genuine comparisons, then fitted shard
by shard (calibrate.contract.sharded; partitioned.py fits ``one`` and ``bulk``, this module ``anchored`` and the
``-matched`` structures, and makes the choice).

The choice (choose.py) is judged, in memory, on at most a million training impostor distances (every k-th class
beyond, judged_rows). A sharded run judges the very same classes: each shard writes its part of them (impostor and
genuine distances, groups) to a scratch file, and one task reads them all and runs choose.py's ``judge`` and
``choose``, the in-memory code on the in-memory data, so the structure chosen and the note are the in-memory run's.
The chosen structure is then fitted on every class shard by shard:

* ``anchored``: each shard's anchors and their sampling variances are gathered (two floats a class) and the
  shrinkage's constants (the anchors' mean and spread between classes) computed from them in the gallery's class
  order, by the in-memory function; the shifted distances' pooled lower tail is selected exactly
  (calibrate.contract.sharded.lowest_moments), as auto's;
* ``anchored-matched``, ``bulk-matched``: the groups' shifts by group_shift.sharded_group_shifts (the in-memory
  quantiles, each order statistic selected exactly over the shards), then the shifted scores' pooled tail.

So the thresholds equal the in-memory run's within rounding (the tail's moments are sums in another order):
tests/test_sharded_choice.py compares them (relative 1e-9).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np

from calibrate.contract.sharded import lowest_moments
from calibrate.contract.types import GenuineDistances, ImpostorDistances, TrainingGroups
from calibrate.statistics.standardise import (anchor_terms, anchored_classes, shrink_anchors, standardise_classes,
                                              to_working)

from .choose import MATCHED, STRUCTURES, judged_rows, subset_words, why_not_choose
from .partitioned import AutoPartitioned, _auto_tail, _save_pooled, pooled_offset
from .znorm import PooledZnormModel, check_class_sizes

# ---- the choice -----------------------------------------------------------------------------------------------


def _judged_part(training, arg, index: int) -> str | None:
    """A shard's classes of the judged subset (global rows from a scratch file, ``starts``: each shard's first row),
    written to a scratch file: their names, impostor and genuine distances and group codes."""
    rows_path, starts, prefix = arg
    rows = np.load(rows_path)
    lo, hi = int(starts[index]), int(starts[index + 1])
    local = rows[(rows >= lo) & (rows < hi)] - lo
    if not local.size:
        return None
    imp, gen, groups = training.impostors, training.genuine, training.groups
    if gen is None:
        gen = GenuineDistances(imp.classes, np.zeros(0), np.zeros(len(imp) + 1, dtype=np.int64))

    def picked(flat):
        index = np.concatenate([np.arange(flat.offsets[i], flat.offsets[i + 1]) for i in local.tolist()])
        return index, flat.counts()[local]

    at, counts = picked(imp)
    g_at, g_counts = picked(gen)
    arrays = (np.asarray([imp.classes[i] for i in local.tolist()], dtype=str), counts, imp.values[at], g_counts,
              gen.values[g_at], np.zeros(0, np.int64) if groups is None else groups.of_class[local],
              np.zeros(0, np.int64) if groups is None else groups.of_impostor[at])
    path = f"{prefix}-{index:05d}.npy"
    with open(path, "wb") as fh:
        for array in arrays:
            np.save(fh, array, allow_pickle=False)
    return path


def _judge_task(arg) -> tuple[str, str, int]:
    """choose.py's judgment of the gathered subset, in one task: (the structure chosen, why, the distances judged)."""
    from .choose import choose, judge

    paths, structures, names, fit = arg
    parts = []
    for path in paths:
        with open(path, "rb") as fh:
            parts.append([np.load(fh, allow_pickle=False) for _ in range(7)])
    classes = tuple(c for p in parts for c in p[0].tolist())
    sub = ImpostorDistances(classes, np.concatenate([p[2] for p in parts]),
                            np.concatenate([[0], np.cumsum(np.concatenate([p[1] for p in parts]))]).astype(np.int64))
    genuine = GenuineDistances(classes, np.concatenate([p[4] for p in parts]),
                               np.concatenate([[0], np.cumsum(np.concatenate([p[3] for p in parts]))]).astype(np.int64))
    groups = (TrainingGroups(names, np.concatenate([p[5] for p in parts]), np.concatenate([p[6] for p in parts]))
              if names else None)
    judged = judge(fit, sub, genuine, structures, groups)
    chosen, why = choose(judged)
    return chosen, why, int(sub.values.size)


def choose_sharded(runner, auto) -> tuple[str, str]:
    """(the structure auto chooses for the gallery the runner's shards hold, the run's note), as an Auto (``auto``)
    chooses and says it in memory: Auto._fit without a genuine comparison or groups, else Auto._fit_genuine."""
    infos = runner.classes or []
    counts = np.concatenate([c.counts for c in infos]) if infos else np.zeros(0, np.int64)
    genuine = int(sum(int(c.genuine.sum()) for c in infos))
    if not genuine and not runner.names:
        return "one", auto.NO_GENUINE
    why_not = why_not_choose(counts, genuine) if counts.size else why_not_choose(np.zeros(1, np.int64), genuine)
    if why_not is not None:
        return "one", f"auto: one pooled threshold for every class: no choice can be made, {why_not}"
    names = runner.names
    of_class = np.concatenate([c.groups for c in infos]) if names and infos[0].groups is not None else None
    labelled = of_class is not None and np.unique(of_class[of_class < len(names)]).size > 1
    structures = (*STRUCTURES, *MATCHED) if labelled else tuple(s for s in STRUCTURES if s != "one")
    rows, step, kept_whole = judged_rows(counts, of_class if labelled else None, len(names) if labelled else 0)
    prefix = str(runner.scratch / f".judged-{uuid.uuid4().hex[:8]}")
    rows_path = f"{prefix}-rows.npy"
    np.save(rows_path, rows)
    starts = np.concatenate([[0], np.cumsum([c.counts.size for c in infos])]).astype(np.int64)
    written = []
    try:
        with runner.context.timed("auto: its choice judged"):
            written = runner.map_training(_judged_part, (rows_path, starts, prefix),
                                          description="auto: the classes its choice is judged on")
            chosen, why, judged = runner.one(_judge_task, ([p for p in written if p], structures,
                                                           tuple(names) if labelled else (), auto._structure_fit))
    finally:
        for path in [rows_path, *(p for p in written if p)]:
            Path(path).unlink(missing_ok=True)
    subset = subset_words(rows, step, kept_whole, counts.size, judged)
    return chosen, f"auto chose {auto._words(chosen)}: {why}" + (f"; {subset}" if subset else "")


class AutoChoosing:
    """auto with ``structure: choose`` in a sharded run (``auto``: an Auto): :func:`choose_sharded`, then the chosen
    structure's partitioned fit (``make(structure)``, auto.structure_fitter). The first pass (pass 0's reading of each
    shard) begins ``one``'s tail, the structure chosen where no choice can be made or none beats it."""

    model_class = PooledZnormModel

    def __init__(self, make, auto):
        self.make, self.auto = make, auto
        self.inner, self.chosen = None, None

    @property
    def files(self) -> tuple:
        return () if self.inner is None else self.inner.files

    def first_pass(self, shards: int, prefix: str, targets):
        return self.make("one").first_pass(shards, prefix, targets)

    def reduce(self, runner, targets, label: str) -> None:
        self.chosen, note = choose_sharded(runner, self.auto)
        runner.note(note)
        if self.chosen != "one":
            runner.take_first(label)  # begun for `one`: not this structure's
        self.inner = self.make(self.chosen)
        self.inner.reduce(runner, targets, label)

    def fit_part(self, impostors: ImpostorDistances) -> PooledZnormModel:
        return self.inner.fit_part(impostors)

    def sample_params(self) -> dict:
        """A sample of the classes is fitted with the structure chosen for the whole gallery."""
        return {} if self.chosen is None else {"structure": self.chosen}

    def fit_training(self, training) -> PooledZnormModel:
        fit = getattr(self.inner, "fit_training", None)
        return fit(training) if fit is not None else self.inner.fit_part(training.impostors)


# ---- anchored ---------------------------------------------------------------------------------------------------

def _anchor_part(impostors: ImpostorDistances, arg, index: int) -> tuple[np.ndarray, np.ndarray]:
    offset, cfg, who = arg
    check_class_sizes(impostors, 3, who)
    return anchor_terms(impostors, cfg["family"], cfg["max_rank"], f"estimator {who}", offset)


def anchor_prior(runner, offset: float, cfg: dict, who: str) -> tuple[float, float]:
    """The anchors' mean and spread between classes over every shard (anchored.py's shrinkage constants): each
    shard's anchors and their variances gathered in the gallery's class order, then the in-memory function."""
    parts = runner.map(_anchor_part, (offset, cfg, who), description=f"{who}: the classes' anchors")
    a = np.concatenate([p[0] for p in parts])
    variance = np.concatenate([p[1] for p in parts])
    _, mean, tau2 = shrink_anchors(a, variance)
    return float(mean[0]), float(tau2[0])


def _anchored_z(impostors: ImpostorDistances, arg) -> np.ndarray:
    offset, prior, cfg, who = arg
    if not len(impostors):
        return np.zeros(0)
    check_class_sizes(impostors, 3, who)
    return anchored_classes(impostors, cfg["family"], cfg["jackknife"], cfg["max_rank"], f"estimator {who}", offset,
                            prior)[2]


class _Pooled:
    """What the pooled structures share: the tail's counts, and the kept pooled sample saved beside the parts."""

    model_class = PooledZnormModel

    def __init__(self, cfg: dict):
        self.cfg = dict(cfg)
        self.offset, self.n_pooled, self.tail, self.files, self._pooled_path = 0.0, 0, None, (), None

    def _tail(self, runner, targets, label: str, values_fn, arg, training: bool = False) -> None:
        counts = AutoPartitioned(self.cfg)._counts(targets)
        moments = lowest_moments(runner, values_fn, arg, *counts, name=label, training=training)
        self.tail, self.n_pooled = _auto_tail(moments, self.cfg), moments.n_total
        name = f"pooled-{label}.npy"
        self.files = (_save_pooled(str(runner.scratch), name, moments.kept),)
        self._pooled_path = str(runner.scratch / name)

    def _model(self, impostors, loc, scale, anchor) -> PooledZnormModel:
        return PooledZnormModel(impostors.classes, loc, scale, impostors.counts(), self.cfg["family"], self.offset,
                                np.load(self._pooled_path, mmap_mode="r"), self.n_pooled, self.tail,
                                self.cfg["min_tail_count"], Path(self._pooled_path).name, anchor=anchor)


class AnchoredPartitioned(_Pooled):
    """anchored (the estimator, or auto's structure), shard by shard: the shrinkage's constants from every shard's
    anchors, then the shifted distances' pooled lower tail by exact selection."""

    def __init__(self, cfg: dict, who: str = "anchored"):
        super().__init__(cfg)
        self.who, self.prior = who, (0.0, 0.0)

    def reduce(self, runner, targets, label: str) -> None:
        self.offset = pooled_offset(runner)
        self.prior = anchor_prior(runner, self.offset, self.cfg, self.who)
        self._tail(runner, targets, label, _anchored_z, (self.offset, self.prior, self.cfg, self.who))

    def fit_part(self, impostors: ImpostorDistances) -> PooledZnormModel:
        check_class_sizes(impostors, 3, self.who)
        cfg = self.cfg
        _, m, _, anchor = anchored_classes(impostors, cfg["family"], cfg["jackknife"], cfg["max_rank"],
                                           f"estimator {self.who}", self.offset, self.prior)
        return self._model(impostors, m, np.ones(len(impostors)), {"structure": "anchored", **anchor})


# ---- each group held where one pooled threshold puts it (group_shift.py) ---------------------------------------

def _base_scores(impostors: ImpostorDistances, base: str, offset: float, prior, cfg: dict, pooled: bool = True
                 ) -> tuple:
    """(locations, scales, the jackknifed pooled scores (None unless ``pooled``), the anchor entry) of auto's ``base``
    structure (configured by ``cfg``: AUTO_CONFIG for bulk, ANCHORED_CONFIG for anchored) on a shard's classes, with
    the gallery's offset (and, anchored, its shrinkage constants): Auto._structure_fit's parts. A class's location and
    scale are its full sample's whatever the jackknife, so without ``pooled`` bulk skips the leave-one-out ones."""
    check_class_sizes(impostors, 3, "auto")
    if base == "bulk":
        _, locs, scales, zs = standardise_classes(impostors, cfg["family"], cfg["robust"],
                                                  cfg["jackknife"] if pooled else 0.0, "estimator auto", offset=offset)
        return (np.asarray(locs), np.asarray(scales), (np.concatenate(zs) if zs else np.zeros(0)) if pooled else None,
                None)
    _, m, z, anchor = anchored_classes(impostors, cfg["family"], cfg["jackknife"], cfg["max_rank"], "estimator auto",
                                       offset, prior)
    return m, np.ones(len(impostors)), z, {"structure": "anchored", **anchor}


def _matched_scores(training, arg) -> tuple[np.ndarray, np.ndarray]:
    """A shard's (full-sample standardised score, working-scale value) of every training distance in its value
    order: what group_shift.group_shifts reads. With a scratch-file ``prefix``, the classes' locations and scales are
    computed in the first pass and read in the later ones (the standardisation sorts every class's distances)."""
    base, offset, prior, cfg, prefix = arg
    imp = training.impostors
    path = None if prefix is None or training.index is None else Path(f"{prefix}-{training.index:05d}.npy")
    if path is not None and path.exists():
        with open(path, "rb") as fh:
            loc, scale = np.load(fh), np.load(fh)
    else:
        loc, scale, _, _ = _base_scores(imp, base, offset, prior, cfg, pooled=False)
        if path is not None:  # whole or not at all: a task run again (a lost worker) writes it again
            temp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
            with open(temp, "wb") as fh:
                np.save(fh, loc)
                np.save(fh, scale)
            os.replace(temp, path)
    y = to_working(imp.values, cfg["family"], offset)
    seg = np.repeat(np.arange(len(imp)), imp.counts())
    return (y - loc[seg]) / scale[seg], y


def _shifted(training, arg) -> np.ndarray:
    """A shard's pooled scores less its classes' group shifts (group_shift.shifted_model's pooled shape)."""
    base, offset, prior, cfg, shifts = arg
    imp = training.impostors
    pooled = _base_scores(imp, base, offset, prior, cfg)[2]
    return pooled - np.repeat(_class_shift(training, shifts), imp.counts())


def _class_shift(training, shifts: np.ndarray | None) -> np.ndarray:
    if shifts is None or training.groups is None:
        return np.zeros(len(training.impostors))
    return shifts[training.groups.of_class]


class MatchedPartitioned(_Pooled):
    """auto's ``anchored-matched`` and ``bulk-matched``, shard by shard: the base structure's constants, the groups'
    shifts (group_shift.sharded_group_shifts; none without two labelled groups, as in memory), then the shifted
    scores' pooled tail; each class's location moved by its group's shift. ``cfg``: the base structure's
    configuration; ``tail``: the pooled tail's (ANCHORED_CONFIG, as group_shift.shifted_model's)."""

    def __init__(self, base: str, cfg: dict, tail: dict):
        super().__init__(tail)
        self.base, self.base_cfg, self.prior, self.shifts = base, dict(cfg), None, None

    def reduce(self, runner, targets, label: str) -> None:
        from .group_shift import sharded_group_shifts

        self.offset = pooled_offset(runner)
        if self.base == "anchored":
            self.prior = anchor_prior(runner, self.offset, self.base_cfg, "auto")
        infos = runner.classes or []
        if runner.names and infos and infos[0].groups is not None:
            prefix = str(runner.scratch / f".matched-{uuid.uuid4().hex[:8]}")
            try:
                with runner.context.timed("auto: the groups' shifts"):
                    self.shifts = sharded_group_shifts(runner, _matched_scores,
                                                       (self.base, self.offset, self.prior, self.base_cfg, prefix),
                                                       len(runner.names))
            finally:
                for path in Path(prefix).parent.glob(f"{Path(prefix).name}*"):
                    path.unlink(missing_ok=True)
        self._tail(runner, targets, label, _shifted, (self.base, self.offset, self.prior, self.base_cfg, self.shifts),
                   training=True)

    def fit_part(self, impostors: ImpostorDistances) -> PooledZnormModel:
        from calibrate.contract.sharded import ShardTraining

        return self.fit_training(ShardTraining(impostors))

    def fit_training(self, training) -> PooledZnormModel:
        imp = training.impostors
        loc, scale, _, anchor = _base_scores(imp, self.base, self.offset, self.prior, self.base_cfg, pooled=False)
        shift = _class_shift(training, self.shifts)
        return self._model(imp, loc + scale * shift, scale, anchor)
