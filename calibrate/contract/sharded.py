"""Sharded data, the side plugins see: what a sharded dataset returns and how an estimator fits shard by shard.

A dataset whose ``load`` returns :class:`ShardedScores` (e.g. ``score-shards``) hands the run a list of
shards and a picklable reader instead of matrices; an estimator whose thresholds depend on every class
together provides ``partitioned()``, a :class:`PartitionedFitter` whose ``reduce`` may pool values over
all shards with :func:`lowest_sorted` (an exact two-pass selection of the pooled lower tail) on a
:class:`ShardRunner`, and write files beside the result with :func:`write_staged`. The run that drives
them (passes over the shards, outputs, the partitioned calibration's head) is
:mod:`calibrate.running.sharded`, which is internal; this module imports nothing above calibrate.contract.types,
so plugins may import it (calibrate.PUBLIC_MODULES).
"""

from __future__ import annotations

import hashlib
import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from calibrate.errors import DataError, RecipeError
from calibrate.contract.types import ImpostorDistances
from calibrate.contract.packed import _key_values, order_keys  # noqa: F401  (order_keys re-exported: public API)
from calibrate.contract.shard_ranks import (_BIN_SHIFT, at_ranks, bins_of, gather_bins,  # noqa: F401  (public API)
                                           histogram, named_histograms, select_ranks, shifted_ranks)
from calibrate.contract.shard_data import (ShardClasses, ShardGroups, ShardTraining, read_split,  # noqa: F401
                                          save_shard_data, shard_data, shard_training, training_of)  # (public API)

PART = "part{:05d}"
HEAD_FORMAT = "calibrate-partitioned"
#: the head's format version this calibrate writes and reads
HEAD_VERSION = 1


@dataclass(frozen=True)
class ShardedScores:
    """What a sharded dataset's ``load`` returns: shards, and the dataset that reads one of them.

    ``dataset.read_shard(shard, column_offset)`` returns ``(ScoreSplit, columns, absent, notes)``: the
    shard's training and evaluation matrices, its claimed classes before any was dropped (the
    per-class split's seeds continue across shards by that count), probe x class pairs never
    compared, and notes. It runs on the workers, so the dataset must be picklable.
    """

    dataset: Any
    shards: tuple[tuple[str, ...], ...]
    kind: str


class PartitionedFitter(Protocol):
    """How an estimator fits shard by shard (``Estimator.partitioned()`` returns one).

    ``reduce`` runs in the main process before the parts are fitted and may call ``runner.map`` and
    :func:`lowest_sorted`; afterwards the fitter is sent to the workers (pickled), where ``fit_part`` fits
    one shard's classes. ``model_class`` rebuilds a part's model from its saved state.
    """

    #: the FittedModel subclass ``fit_part`` returns; a saved part is loaded with its ``from_state``
    model_class: type
    #: files ``reduce`` wrote beside the result (into ``runner.scratch``, the run's staging folder, with
    #: :func:`write_staged`), as (name, size, SHA-256); the run adopts them into its output folder. Default: none
    files: tuple[tuple[str, int, str], ...] = ()
    #: ``first_pass(shards, prefix, targets)``, a method called in the main process before the run's first pass over
    #: the shards (the one that reads them), with the number of shards, a scratch-file prefix and the run's targets:
    #: a module-level ``function`` and a picklable ``arg``, or None. Each shard's task then also returns
    #: ``function(impostors, arg, index)`` (its training impostor distances, transformed by the transform fitted on
    #: that shard, which the run checks is every shard's), and ``reduce`` finds the results in shard order with
    #: ``runner.take_first(label)``, e.g. the histograms its selection starts with (:func:`moments_first_pass`,
    #: :func:`histogram_first_pass`), a pass saved. A result may be None (the function saw that its work is not the
    #: one ``reduce`` will need: ``take_first`` then gives None). Scratch files must be named ``prefix*``: the run
    #: removes every such file after the reductions, used or not. Default: none (no first pass)
    first_pass: Callable[[int, str, tuple[float, ...]], tuple[Callable, Any] | None] | None = None
    #: ``fit_training(training)``, a method called on a worker instead of ``fit_part`` with the shard's whole
    #: :class:`ShardTraining` (its training genuine distances and its classes' groups too), for a fit that reads a
    #: class's group (auto's matched structures, a calibration group by group). Default: ``fit_part(impostors)``
    fit_training: Callable[[ShardTraining], Any] | None = None
    #: ``sample_params()``, a method called in the main process after ``reduce``: the estimator's parameters to
    #: change so that an in-memory fit of a sample of the classes is made as this fit was (auto: the structure it
    #: chose for the whole gallery), for the run's predicted intervals. Default: none changed
    sample_params: Callable[[], dict] | None = None

    def reduce(self, runner: "ShardRunner", targets: tuple[float, ...], label: str) -> None:
        """Called once in the main process, before any part is fitted, with a :class:`ShardRunner` over every
        shard's training impostor distances, the run's targets and the estimator's label: compute what the parts
        share (e.g. a pooled quantile with :func:`lowest_sorted`) and keep it on the fitter."""

    def fit_part(self, impostors: ImpostorDistances) -> Any:
        """Called on a worker for each shard, with its classes' training impostor distances: a ``model_class``
        instance whose thresholds equal those an in-memory fit on every shard gives these classes."""


class PerClassFitter:
    """An estimator whose classes are fitted independently (``enroll_mode == "per-class"``): a shard's
    classes fitted alone get exactly the thresholds of a fit on all classes."""

    def __init__(self, estimator):
        self.estimator = estimator
        self.model_class = estimator.model_class

    def reduce(self, runner: "ShardRunner", targets: tuple[float, ...], label: str) -> None:
        return None

    def fit_part(self, impostors: ImpostorDistances):
        return self.estimator.fit(impostors)


def fitter_for(estimator, label: str) -> PartitionedFitter:
    fitter = estimator.partitioned()
    if fitter is not None:
        return fitter
    if estimator.enroll_mode == "per-class":
        return PerClassFitter(estimator)
    raise RecipeError(f"estimator {label!r} cannot fit sharded data: its thresholds depend on every class together "
                      "and it has no partitioned fit; use auto, anchored, generic-interp, class-interp, ncx2-grid, or "
                      "another per-class estimator", where="estimators")


# ---- running work on the shards --------------------------------------------------------------

@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to rebuild one shard's distances."""

    dataset: Any
    shard: tuple[str, ...]
    offset: int
    index: int
    transform: Any  # an unfitted transform (pass 0) or one with the run's fitted state
    #: a scratch file (in the run's staging folder) that pass 0 writes with the shard's transformed distances
    #: (:func:`save_shard_data`) and the later passes read instead of the shard; None: read the shard every pass
    cache: str | None = None
    #: the run's demographic groups (None without ``groups:``)
    groups: ShardGroups | None = None
    #: keep each training impostor distance's probe identity (ShardTraining.probes): the run predicts intervals
    units: bool = False


def _on_shard(item):
    job, function, arg, stratum, training = item
    if stratum is None and not training:
        return function(shard_data(job, evaluation=False)[0], arg, job.index)
    data = shard_training(job)[0]
    if stratum is not None:
        data = data.stratum(stratum)
    return function(data if training else data.impostors, arg, job.index)


class ShardRunner:
    """Maps a function over every shard's training impostor distances (or, :meth:`map_training`, its whole training
    side), on the run's executor.

    ``minimum`` and ``min_positive``: the smallest and the smallest positive training distance of all
    shards, ``n_train`` their number (from the first pass); ``scratch``: a folder the workers share for
    temporary files; ``classes``: each shard's :class:`ShardClasses` (None when the run did not say), ``names``:
    the groups' names. A runner :meth:`restricted` to one group sees only that group's classes, and no groups."""

    def __init__(self, context, jobs: list[ShardJob], scratch: Path, minimum: float = np.inf,
                 min_positive: float = np.inf, n_train: int = 0, first: dict[str, list] | None = None,
                 classes: list[ShardClasses] | None = None, names: tuple[str, ...] = (),
                 strata: dict[int, tuple[float, float, int]] | None = None):
        self.context, self.jobs, self.scratch = context, jobs, scratch
        self.minimum, self.min_positive, self.n_train = minimum, min_positive, n_train
        #: per estimator label, what its ``first_pass`` function returned for each shard (PartitionedFitter)
        self.first = dict(first or {})
        self.classes, self.names = classes, tuple(names)
        #: per group code, (minimum, smallest positive, count) of its classes' training distances
        self.strata = dict(strata or {})
        #: the group code this runner is restricted to (None: every class), and what its notes begin with
        self.stratum: int | None = None
        self.prefix = ""

    def restricted(self, code: int, name: str) -> "ShardRunner":
        """A runner over the classes of group ``code`` (named ``name``) alone, without groups, whose notes say the
        group's name (calibrate.saved.grouped.fit_by_group's)."""
        minimum, positive, n = self.strata.get(code, (np.inf, np.inf, 0))
        classes = None if self.classes is None else [
            ShardClasses(c.counts[c.groups == code], c.genuine[c.groups == code]) for c in self.classes]
        out = ShardRunner(self.context, self.jobs, self.scratch, minimum, positive, n, classes=classes)
        out.stratum, out.prefix = code, f"group {name}: "
        return out

    def note(self, text: str) -> None:
        """A note for the run's report (said with the group's name on a restricted runner)."""
        self.context.note(self.prefix + text)

    def take_first(self, label: str) -> list | None:
        """The first pass's results of estimator ``label``, one per shard, handed over (the runner forgets them, so
        that the caller can free them as it goes); None when it has none or any is None."""
        got = self.first.pop(label, None)
        if got is None or len(got) != len(self.jobs) or any(r is None for r in got):
            return None
        return got

    def map(self, function: Callable, arg: Any = None, description: str | None = None,
            only: list[int] | None = None) -> list:
        """``[function(impostors_of_shard, arg, shard_index) for each shard]`` (function module-level); ``only``:
        those shards' indices instead of every shard."""
        return self._map(function, arg, description, only, False)

    def map_training(self, function: Callable, arg: Any = None, description: str | None = None,
                     only: list[int] | None = None) -> list:
        """:meth:`map` with each shard's :class:`ShardTraining` (impostors, training genuine distances, groups)."""
        return self._map(function, arg, description, only, True)

    def _map(self, function, arg, description, only, training: bool) -> list:
        jobs = self.jobs if only is None else [self.jobs[i] for i in only]
        return self.context.map(_on_shard, [(job, function, arg, self.stratum, training) for job in jobs],
                                description=description, unit="shards")

    def one(self, function: Callable, arg: Any) -> Any:
        """``function(arg)`` as one task on the executor (a worker, not this process)."""
        return self.context.map(function, [arg])[0]


def _histogram(impostors, arg, index):
    values_fn, values_arg = arg
    bins = order_keys(values_fn(impostors, values_arg)) >> np.uint64(_BIN_SHIFT)
    uniq, counts = np.unique(bins, return_counts=True)
    return uniq.astype(np.int64), counts.astype(np.int64)


def _below_cut(impostors, arg, index):
    values_fn, values_arg, cut, prefix = arg
    values = np.asarray(values_fn(impostors, values_arg), dtype=np.float64)
    kept = values[(order_keys(values) >> np.uint64(_BIN_SHIFT)) <= np.uint64(cut)]
    path = Path(f"{prefix}-{index:05d}.npy")
    np.save(path, kept)
    return str(path), int(kept.size)


def _gather_sorted(arg):
    paths, size, k, n_total, finish, finish_arg = arg
    out = np.empty(size, dtype=np.float64)
    at = 0
    for path in paths:
        part = np.load(path)
        out[at:at + part.size] = part
        at += part.size
    out.sort(kind="quicksort")
    return finish(out[:k], n_total, finish_arg)


def histogram_first_pass(values_fn: Callable, values_arg: Any) -> tuple[Callable, Any]:
    """A ``first_pass`` for :func:`lowest_sorted` (its ``first``): the shards' histograms made as they are read."""
    return _histogram, (values_fn, values_arg)


def lowest_sorted(runner: ShardRunner, values_fn: Callable, values_arg: Any, k: Callable[[int], int],
                  finish: Callable, finish_arg: Any, name: str, first: list | None = None) -> Any:
    """Exact selection of the pooled lower tail: ``finish(lowest, n_total, finish_arg)`` in one task,
    with ``lowest`` the ``k(n_total)`` smallest of every shard's ``values_fn(impostors, values_arg)``
    pooled, ascending (the same floats as ``np.sort(all values)[:k]``). Two passes over the shards:
    histograms of the values' order keys, then only the values in the bins up to the one holding
    rank k, written to scratch files that the finishing task reads. ``first``: the histograms already made
    (the run's first pass, :func:`histogram_first_pass` with the same values), saving the first of the two."""
    hists = first if first is not None else runner.map(_histogram, (values_fn, values_arg))
    first = None  # freed below with hists
    n_total = int(sum(int(c.sum()) for _, c in hists))
    if n_total == 0:
        raise DataError("no training impostor distances in any shard")
    want = int(min(max(k(n_total), 1), n_total))
    counts = np.zeros(1 << (64 - _BIN_SHIFT), dtype=np.int64)
    for bins, c in hists:
        np.add.at(counts, bins, c)
    del hists
    cut = int(np.searchsorted(np.cumsum(counts), want))  # the first bin where the cumulative count reaches want
    size = int(counts[:cut + 1].sum())
    prefix = str(runner.scratch / f".lowest-{name}-{uuid.uuid4().hex[:8]}")
    written = runner.map(_below_cut, (values_fn, values_arg, cut, prefix))
    try:
        paths = [p for p, n in written]
        if sum(n for _, n in written) != size:
            raise DataError("the shards changed between two passes of the run (the lower-tail counts differ); "
                            "do not write into the shards while a run reads them")
        return runner.one(_gather_sorted, (paths, size, want, n_total, finish, finish_arg))
    finally:
        for path, _ in written:
            Path(path).unlink(missing_ok=True)


#: values one task of :func:`lowest_moments` holds at once (32 MB of float64; a single histogram bin may add more)
BUCKET_VALUES = 1 << 22


@dataclass(frozen=True)
class TailMoments:
    """The pooled values' lower tail as a probability-weighted-moment GPD fit needs it (gpd.fit_lower_tail_moments),
    without all of it in one place: with d_(0) <= d_(1) <= ... the ``n_total`` pooled values, ``u`` = d_(k),
    ``lowest`` = d_(0), ``sum_low`` = the sum of d_(j) and ``sum_ranked`` = the sum of j d_(j) over j < k;
    and the ``keep`` smallest values themselves (``kept``, ascending)."""

    n_total: int
    k: int
    u: float
    lowest: float
    sum_low: float
    sum_ranked: float
    kept: np.ndarray


#: pass 1 of :func:`lowest_moments` keeps each shard's lowest ``SAVE_MARGIN`` times the share of values the tail
#: needs (completed to whole bins); a shard whose kept part ends below the pooled cut is read again (exact either way)
SAVE_MARGIN = 2.0


def _save_keys(path: Path, keys: np.ndarray) -> None:
    """np.save through a temporary name: a task run again (a lost worker) replaces the file whole."""
    temp = path.with_name(f"{path.stem}.{uuid.uuid4().hex[:8]}.tmp.npy")
    np.save(temp, keys)
    os.replace(temp, path)


def _tail_share(n: int, k: Callable[[int], int], keep: Callable[[int], int]) -> float:
    """The share of ``n`` pooled values that :func:`lowest_moments` needs: ranks up to k(n), and keep(n)."""
    return min(1.0, max(int(k(n)) + 1, int(keep(n))) / n) if n > 0 else 1.0


def _histogram_saved(impostors, arg, index):
    """Pass 1 of :func:`lowest_moments` on one shard: see :func:`_save_lowest`."""
    values_fn, values_arg, share, prefix = arg
    return _save_lowest(np.asarray(values_fn(impostors, values_arg), dtype=np.float64), share,
                        Path(f"{prefix}-{index:05d}.npy"))


def _histogram_saved_first(impostors, arg, index):
    """:func:`_histogram_saved` in the run's first pass, where the pooled count is not known yet: the share is
    guessed from this shard's count times the number of shards (a guess that only decides how often a shard is
    read twice, never the result)."""
    values_fn, values_arg, k, keep, shards, prefix = arg
    values = np.asarray(values_fn(impostors, values_arg), dtype=np.float64)
    return _save_lowest(values, _tail_share(values.size * shards, k, keep), Path(f"{prefix}-{index:05d}.npy"))


def moments_first_pass(values_fn: Callable, values_arg: Any, k: Callable[[int], int], keep: Callable[[int], int],
                       shards: int, prefix: str) -> tuple[Callable, Any]:
    """A ``first_pass`` for :func:`lowest_moments` (its ``first``): each shard's histogram and its lowest values
    saved as it is read. ``k`` and ``keep`` travel to the workers: module-level functions or ``functools.partial``
    of them."""
    return _histogram_saved_first, (values_fn, values_arg, k, keep, shards, prefix)


def _save_lowest(values: np.ndarray, share: float, path: Path):
    """One shard's part of :func:`lowest_moments`' first pass: the histogram of its values' order keys (bins,
    counts), and its lowest ``SAVE_MARGIN`` x ``share`` of them as sorted order keys in the scratch file ``path``,
    completed to whole bins; returns (bins, counts, path, the last bin saved whole)."""
    keys = np.sort(order_keys(values))
    bins = keys >> np.uint64(_BIN_SHIFT)
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]]) if keys.size else np.zeros(0, np.int64)
    uniq, counts = bins[starts].astype(np.int64), np.diff(np.r_[starts, keys.size]).astype(np.int64)
    through, end = (1 << (64 - _BIN_SHIFT)) - 1, keys.size
    if keys.size:
        n_save = int(min(keys.size, max(1, math.ceil(SAVE_MARGIN * share * keys.size))))
        if n_save < keys.size:
            through = int(bins[n_save - 1])
            end = int(np.searchsorted(bins, np.uint64(through), side="right"))
    _save_keys(path, keys[:end])
    return uniq, counts, str(path), through


def _below_cut_sorted(impostors, arg, index):
    """The second reading of :func:`lowest_moments` on a shard whose saved keys (pass 1) end below the cut: its
    values in the bins up to the cut, as order keys sorted, replacing its scratch file (``paths[index]``)."""
    values_fn, values_arg, cut, paths = arg
    keys = order_keys(np.asarray(values_fn(impostors, values_arg), dtype=np.float64))
    keys = np.sort(keys[(keys >> np.uint64(_BIN_SHIFT)) <= np.uint64(cut)])
    path = Path(paths[index])
    _save_keys(path, keys)
    return str(path), int(keys.size)


def _read_keys(path: str, a: int, b: int) -> np.ndarray:
    """Elements ``a:b`` of a 1-D .npy file, read (not memory-mapped: a mapping's touched pages, and the kernel's
    fault-around of each, count in the worker's resident memory, and a bucket reads a little of every shard)."""
    from numpy.lib import format as npformat

    with open(path, "rb") as fh:
        version = npformat.read_magic(fh)
        header = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        _, _, dtype = header(fh)
        fh.seek(a * dtype.itemsize, os.SEEK_CUR)
        keys = np.fromfile(fh, dtype=dtype, count=b - a)
    if keys.size != b - a:
        raise DataError(f"{path}: a scratch file of the run is shorter than its first pass wrote it; do not touch the "
                        "run's staging folder while it runs")
    return keys


def _bucket(arg):
    """One bucket of the pooled lowest values (ranks ``first`` on), from every shard's sorted keys: its share of
    the sums below rank k, d_(k) and d_(0) when it holds them, and its part of the ``keep`` smallest (a file)."""
    pieces, first, k, keep, path = arg
    keys = np.sort(np.concatenate([_read_keys(p, a, b) for p, a, b in pieces]))
    d = _key_values(keys)
    ranks = first + np.arange(d.size)
    low = ranks < k
    out = {"sum_low": float(np.sum(d[low])), "sum_ranked": float(np.sum(ranks[low] * d[low])),
           "u": float(d[k - first]) if first <= k < first + d.size else None,
           "lowest": float(d[0]) if first == 0 and d.size else None, "kept": None}
    if first < keep:
        np.save(path, d[:keep - first])
        out["kept"] = path
    return out


def _bucket_bins(counts: np.ndarray, cut: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(first bin, first rank) of each bucket: bins 0..cut grouped in order, a new bucket where the count before a
    bin reaches the next multiple of ``size``."""
    before = np.cumsum(counts[:cut + 1]) - counts[:cut + 1]
    group = before // size
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return first, before[first]


def lowest_moments(runner: ShardRunner, values_fn: Callable, values_arg: Any, k: Callable[[int], int],
                   keep: Callable[[int], int], name: str, bucket_values: int = BUCKET_VALUES,
                   first: list | None = None, training: bool = False) -> TailMoments:
    """:class:`TailMoments` of every shard's ``values_fn(impostors, values_arg)`` pooled: ``k(n_total)`` exceedances,
    the ``keep(n_total)`` smallest kept. One pass over the shards: each computes its values once, returns their
    histogram (of order keys, as :func:`lowest_sorted`) and writes its lowest ones, sorted, to a scratch file
    (about twice the share the tail needs; a shard whose file ends below the pooled cut is read again for the
    rest). Tasks of about ``bucket_values`` values each (consecutive bins) then take their bins from every file,
    sort them and sum them: no task holds the whole tail, and no shard is read twice unless it must be.
    ``first``: that pass's results already made (the run's first pass, :func:`moments_first_pass` with the same
    values), so that this reads no shard unless it must. ``training``: ``values_fn`` takes each shard's
    :class:`ShardTraining` (its groups too) instead of its impostor distances."""
    prefix = str(runner.scratch / f".moments-{name}-{uuid.uuid4().hex[:8]}")
    shard_map = runner.map_training if training else runner.map
    if first is not None:
        hists, first = list(first), None  # freed below with hists
    else:
        # the share of its values each shard saves, from the run's count of training distances (the survey's, when
        # the runner has it): a guess that only decides how often a shard is read twice, never the result
        share = _tail_share(int(getattr(runner, "n_train", 0) or 0), k, keep)
        hists = shard_map(_histogram_saved, (values_fn, values_arg, share, prefix))
    paths = [p for _, _, p, _ in hists]
    kept_paths: list[str] = []
    try:
        n_total = int(sum(int(c.sum()) for _, c, _, _ in hists))
        if n_total == 0:
            raise DataError("no training impostor distances in any shard")
        k_n, keep_n = int(k(n_total)), int(min(max(keep(n_total), 1), n_total))
        counts = np.zeros(1 << (64 - _BIN_SHIFT), dtype=np.int64)
        for bins, c, _, _ in hists:
            np.add.at(counts, bins, c)
        cut = int(np.searchsorted(np.cumsum(counts), min(max(k_n + 1, keep_n), n_total)))
        first_bins, first_ranks = _bucket_bins(counts, cut, bucket_values)
        # where each bucket begins in each shard's sorted keys (and where bins up to the cut end): its keys of lower
        # bins come first, whether its file holds more (pass 1) or exactly those up to the cut (read again)
        bounds = np.r_[first_bins, cut + 1]
        offsets = [np.r_[0, np.cumsum(c)][np.searchsorted(b, bounds)] for b, c, _, _ in hists]
        short = [i for i, (_, _, _, through) in enumerate(hists) if through < cut]
        del hists
        if short:
            again = shard_map(_below_cut_sorted, (values_fn, values_arg, cut, paths), only=short)
            if any(n != int(offsets[i][-1]) for i, (_, n) in zip(short, again)):
                raise DataError("the shards changed between two passes of the run (the lower-tail counts differ); "
                                "do not write into the shards while a run reads them")
        kept_paths = [f"{prefix}-kept-{b:05d}.npy" for b in range(first_bins.size)]
        tasks = [([(p, int(o[b]), int(o[b + 1])) for p, o in zip(paths, offsets) if o[b + 1] > o[b]],
                  int(first_ranks[b]), k_n, keep_n, kept_paths[b]) for b in range(first_bins.size)]
        del offsets
        parts = runner.context.map(_bucket, tasks, description=f"{name}: pooled lower tail", unit="buckets")
        u = next(p["u"] for p in parts if p["u"] is not None)
        kept = np.concatenate([np.load(p["kept"]) for p in parts if p["kept"] is not None])
        return TailMoments(n_total, k_n, u, parts[0]["lowest"], float(sum(p["sum_low"] for p in parts)),
                           float(sum(p["sum_ranked"] for p in parts)), kept)
    finally:
        for path in paths + kept_paths:
            Path(path).unlink(missing_ok=True)


def write_staged(folder: str | Path, name: str, data: bytes | str) -> tuple[str, int, str]:
    """Write one output file from a worker into the staging folder (durably, replaced whole); returns
    ``(name, size, SHA-256)`` for :meth:`~calibrate.files.commit.StagedOutput.adopt`."""
    folder = Path(folder)
    if isinstance(data, str):
        data = data.encode("utf-8")
    from calibrate.files.user_output import write_temp_beside

    os.replace(write_temp_beside(folder, name, data), folder / name)  # exclusive, random name (D4)
    return name, len(data), hashlib.sha256(data).hexdigest()
