"""Where a run's comparisons come from: the :class:`Dataset` base class (patterns, or ready-made comparison
scores), the :class:`ScoreSplit` a score dataset loads (training and evaluation matrices, cohort scores,
groups), and the :class:`Distance` base class that compares a pattern dataset's sets.

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, final

import numpy as np

from calibrate.errors import DataError
from calibrate.contract.component import Component, optional, progress_name
from calibrate.contract.run_context import RunContext
from calibrate.contract.comparisons import CohortScores, DistanceMatrix, PatternSet, SetCollection
from calibrate.contract.labels import GroupLabels


class Dataset(Component, ABC):
    """Produces either patterns (to be compared by a distance) or ready-made comparisons.

    A score dataset that knows before loading whether it gives similarities or distances says
    so in ``output_kind()``; recipes are then checked against the transform's ``accepts``.
    """

    #: what ``load`` returns: "patterns" (a PatternSet, compared by a distance) or "scores" (a ScoreSplit or
    #: ShardedScores: ready-made comparisons). Recipes are checked against it before any work (``distance:``
    #: and ``rotate:`` only for patterns). Default: None, only loading tells
    produces: Literal["patterns", "scores"] | None = None
    #: the distance plugin (a registered name) a recipe without ``distance:`` uses for this dataset's
    #: patterns. Default: None, such a recipe is refused
    default_distance: str | None = None
    #: True when ``load`` returns shards read on the workers (:class:`calibrate.contract.sharded.ShardedScores`):
    #: the transform is then fitted per shard, so a recipe must fix whatever it would fit to the data.
    #: Default: False
    sharded: bool = False
    #: the value that marks a failed comparison in the data (a parameter of score datasets, e.g. ``missing:
    #: -1``); a finite number (``.nan`` or ``.inf`` can equal no score: refused). Default: None (none marked); the run then points out scores repeated often enough to be an
    #: unmarked failure value
    missing: float | None = None
    #: sharded datasets: whether ``read_shard`` needs the column offset (the claimed classes of the shards
    #: before it), so that the run counts every shard's classes first. Default: True
    offsets_matter: bool = True

    @optional
    def output_kind(self) -> Literal["distance", "similarity"] | None:
        """Called when a recipe is validated, before anything is loaded: the kind of the scores ``load`` will
        give, when the parameters tell it, so that a transform that does not accept that kind is refused at
        validation. Must agree with the loaded matrices' ``kind``. Default: None (only loading tells)."""
        return None

    @optional
    def check(self) -> None:
        """Called by ``calibrate validate`` and before a run: read just enough of the data files to reject a
        wrong format, raising the same :class:`~calibrate.errors.DataError` a full ``load`` would, so that
        both say the same thing about the same file. Default: nothing is read."""
        return None

    @optional
    def class_names(self) -> tuple[list[str], list[str]] | None:
        """Called by ``calibrate validate`` for a recipe with ``data: {groups: FILE}``: (the enrolled classes, the probes'
        real classes) that ``load`` will give, named as the loaded matrices name them, when they can be read without
        loading the comparisons (a matrix's labels, a score list's id columns), so that a groups file naming none of
        them is refused before a run. Default: None (only loading tells; the run checks them)."""
        return None

    @optional
    def cohort_sides(self) -> tuple[Literal["enrolled", "probe"], ...] | None:
        """Called when a recipe is validated, before anything is loaded: the cohort sides this dataset reads from
        cohort files (``"enrolled"``, ``"probe"``), so that the recipe's normaliser is checked against them (and
        cohort files without a normaliser are refused); a dataset that returns sides gives their scores in its
        ScoreSplit's ``train_cohort`` and ``test_cohort``. Default: None, no cohort files (the rest of the gallery
        serves as the cohort)."""
        return None

    @final
    def load(self, context: RunContext | None = None) -> PatternSet | "ScoreSplit":
        """The data: the private ``_load`` with a context (a fresh one when none is given)."""
        return self._load(context or RunContext())

    @abstractmethod
    def _load(self, context: RunContext) -> PatternSet | "ScoreSplit":
        """Called once per run: a :class:`~calibrate.contract.types.PatternSet` (samples with class and set labels,
        compared by a distance), a :class:`ScoreSplit` (training and evaluation comparison matrices with the
        same gallery columns) or, for a sharded dataset, :class:`calibrate.contract.sharded.ShardedScores`. Bad files:
        a DataError naming the file (line, column) and the fix; what was passed over: ``context.note``."""

    @optional
    def read_shard(self, shard: tuple[str, ...], column_offset: int) -> tuple["ScoreSplit", int, int, list[str]]:
        """Sharded datasets (``sharded = True``): called on the workers, once per shard and pass, with a shard
        ``load`` listed and the claimed classes of the shards before it; returns (the shard's ScoreSplit, its
        claimed classes before any was dropped, probe x class pairs never compared, notes). Must be picklable
        and give the same split whichever process reads it. Default: refused (a dataset that is not sharded)."""
        raise NotImplementedError(f"{type(self).__name__} is not a sharded dataset (it has no read_shard)")

    @optional
    def shard_columns(self, shard: tuple[str, ...]) -> int:
        """Sharded datasets whose ``offsets_matter``: called on the workers before the first pass; the number of
        claimed classes in ``shard`` (the column offsets of the shards after it). Default: read the whole shard
        with ``read_shard`` and count."""
        return int(self.read_shard(shard, 0)[1])


@dataclass(frozen=True)
class ScoreSplit:
    """Comparisons a score dataset provides: training (fit) and evaluation matrices."""

    train: DistanceMatrix
    test: DistanceMatrix
    missing: int = 0
    description: str = ""
    #: failed comparisons per data file (a file read for both train and test counted once)
    missing_by_file: tuple[tuple[str, int], ...] = ()
    #: the cohort scores of the training and of the evaluation attempts (rows of ``train`` and ``test``),
    #: for datasets that read cohort files (``Dataset.cohort_sides``); None: the rest of the gallery serves
    train_cohort: CohortScores | None = None
    test_cohort: CohortScores | None = None
    #: the demographic group of the classes, when the dataset knows it (a recipe's ``data: {groups: FILE}``
    #: replaces it); None: no groups unless the recipe names a file
    groups: GroupLabels | None = None


class Distance(Component, ABC):
    """Pairwise distances between pattern sets."""

    @final
    def pairwise(self, probes: SetCollection, gallery: SetCollection,
                 context: RunContext | None = None) -> np.ndarray:
        if len(probes) == 0 or len(gallery) == 0:
            raise DataError(f"{type(self).__name__}: nothing to compare ({len(probes)} probe sets, {len(gallery)} gallery sets)")
        for role, sets in (("probe", probes), ("gallery", gallery)):
            for samples, set_id in zip(sets.samples, sets.ids):
                if not np.all(np.isfinite(samples)):
                    raise DataError(f"{type(self).__name__}: {role} set {set_id} contains NaN or infinite values; "
                                    "clean or drop those samples")
        context = context or RunContext()
        with context.stage(f"{progress_name(self)}: {len(probes)} x {len(gallery)} set distances"):
            out = np.asarray(self._pairwise(probes, gallery, context), dtype=np.float64)
        if out.shape != (len(probes), len(gallery)):
            raise DataError(f"{type(self).__name__} returned shape {out.shape}, expected {(len(probes), len(gallery))}")
        return out

    @abstractmethod
    def _pairwise(self, probes: SetCollection, gallery: SetCollection, context: RunContext) -> np.ndarray:
        """Called once per fold (through ``pairwise``, which has refused empty collections and non-finite
        samples): a ``(len(probes), len(gallery))`` array of finite, non-negative distances, each depending
        only on its two sets (not on the order or presence of the others)."""
