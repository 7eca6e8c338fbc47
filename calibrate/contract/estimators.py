"""Thresholds from training distances: the :class:`Estimator` base class (fit, enroll one class, vectorised
simulation for the predicted interval, sharded fits) and the :class:`FittedModel` it returns (thresholds
per class at any target FPR, its saved state); :func:`merge_class_state` adds one class to a model.

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, final

import numpy as np

from calibrate.errors import DataError, ParameterError
from calibrate.contract.component import Component, check_target, optional, overrides, progress_name
from calibrate.contract.run_context import RunContext
from calibrate.contract.comparisons import GenuineDistances, ImpostorDistances
from calibrate.contract.labels import TrainingGroups
from calibrate.contract.results import ThresholdTable

if TYPE_CHECKING:
    from calibrate.contract.sharded import PartitionedFitter


class FittedModel(ABC):
    """A calibration: per-class parameters that give a threshold at any target FPR."""

    def __init__(self, classes: Sequence[str]):
        self.classes = tuple(str(c) for c in classes)
        self._index = {c: i for i, c in enumerate(self.classes)}

    @final
    def thresholds(self, targets: Sequence[float], label: str = "") -> ThresholdTable:
        """Every class's threshold at each target FPR (checked), as a table."""
        checked = [check_target(t) for t in targets]
        values = self._thresholds(np.asarray(checked, dtype=np.float64), self.all_rows())
        return ThresholdTable(label or type(self).__name__, self.classes, tuple(checked), values)

    @final
    def threshold(self, cls: str, target: float) -> float:
        """The distance threshold for class ``cls`` at target FPR ``target`` (accept if <=)."""
        if str(cls) not in self._index:
            raise KeyError(f"class {cls!r} is not in this calibration ({len(self.classes)} classes)")
        i = self._index[str(cls)]
        return float(self._thresholds(np.asarray([check_target(target)]), np.asarray([i], dtype=np.int64))[0, 0])

    @final
    def all_rows(self) -> np.ndarray:
        """Every class's row index (int64), in the order of ``classes``."""
        return np.arange(len(self.classes), dtype=np.int64)

    @abstractmethod
    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Called by ``thresholds`` and ``threshold`` (and so by every run, ``accept`` and the evaluation):
        thresholds, shape (len(rows), len(targets)), for the classes at indices ``rows`` (an int64 array;
        every class: :meth:`all_rows`) at the checked target FPRs in (0, 1). Non-decreasing in the target; a
        column depends only on its own target; accept when ``distance <= threshold``."""

    @optional
    def parameters(self) -> list[dict[str, Any]]:
        """Called when a run writes models.csv: the fitted parameters per class, one dict each with the
        ``class`` it describes (JSON-serialisable values). Default: [] (nothing to audit)."""
        return []

    @optional
    def cdf(self, row: int, x: np.ndarray) -> np.ndarray | None:
        """Called by the ``fpr`` evaluator's cdf-fits.png: the model's impostor CDF of class ``row`` at distances
        ``x``, drawn beside the empirical one. Default: None (no model curve drawn)."""
        return None

    # ---- distribution-free confidence (calibrate.predicted.interval) ----

    @optional
    def order_statistic_pool(self) -> int | None:
        """Called for ``confidence:`` and the predicted interval: N when every class's threshold at rank k is set by
        the k-th smallest of N pooled, exchangeable training values (a pooled empirical quantile), so that a
        distribution-free order-statistic bound applies. Default: None (thresholds not set that way; the
        model-based bound is used)."""
        return None

    @optional
    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """With :meth:`order_statistic_pool`: thresholds (len(rows) x len(ranks)) at the pooled order statistics
        of 1-based ``ranks``. Default: NotImplementedError (no pooled order statistics)."""
        raise NotImplementedError(f"{type(self).__name__} has no pooled order statistics")

    @optional
    def compact(self, reach: float) -> "FittedModel":
        """Called when a calibration is saved, with ``reach``, the largest target FPR the saved model must answer
        (:func:`calibrate.statistics.order.saved_reach`: 10 times the calibration's largest target, at least 1%): a model
        with this one's thresholds at every target up to ``reach`` but less state (e.g. only the lowest
        ``ceil(reach n) + 1`` values of a sample: calibrate.statistics.order.saved_pool_count; long arrays packed with
        calibrate.contract.packed), which refuses a larger target with a ParameterError naming its reach; the file states
        ``reach``, or 1 when this returns the model itself (saved whole: every target), and a loaded calibration
        refuses targets beyond it. The run itself (thresholds, evaluation, pictures) uses the full model.
        Default: the model itself."""
        return self

    @abstractmethod
    def to_state(self) -> dict[str, Any]:
        """Called when a calibration is saved (and to compare models): a JSON-serialisable dict of plain values,
        copies rather than the model's own arrays, from which ``from_state`` rebuilds a model with equal
        thresholds."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: dict[str, Any]) -> "FittedModel":
        """Called when a calibration is loaded (``Estimator.model_class.from_state``): the model ``to_state`` gave,
        rebuilt; it keeps no reference to ``state``. A damaged state (a file the user edited): a CalibrateError
        naming the field, e.g. the DataError of the ``calibrate.contract.statecheck`` helpers, which the loader reports as
        one CalibrationError naming the file, the estimator and the field."""


class Estimator(Component, ABC):
    """Fits one model per class (or one for all) from training impostor distances."""

    #: the FittedModel subclass ``_fit`` returns; saved calibrations are loaded with its ``from_state``
    model_class: type[FittedModel]

    @final
    def fit(self, impostors: ImpostorDistances, context: RunContext | None = None,
            genuine: GenuineDistances | None = None, groups: TrainingGroups | None = None) -> FittedModel:
        """The fitted model: ``_fit_genuine`` when the training side holds more than impostor distances (genuine
        comparisons, ``genuine``, the same classes in the same order; or demographic groups, ``groups``, aligned
        with ``impostors``) and the estimator uses them, else ``_fit``."""
        if not isinstance(impostors, ImpostorDistances):
            raise DataError(f"{type(self).__name__}.fit expects ImpostorDistances, got {type(impostors).__name__}")
        if len(impostors) == 0:
            raise DataError(f"{type(self).__name__}: no classes to calibrate")
        if genuine is not None:
            if not isinstance(genuine, GenuineDistances):
                raise DataError(f"{type(self).__name__}.fit: genuine must be GenuineDistances, got {type(genuine).__name__}")
            if genuine.classes != impostors.classes:
                raise DataError(f"{type(self).__name__}.fit: the genuine distances' classes are not the impostor "
                                "distances' (the same classes, in the same order)")
        if groups is not None:
            if not isinstance(groups, TrainingGroups):
                raise DataError(f"{type(self).__name__}.fit: groups must be TrainingGroups, got {type(groups).__name__}")
            groups.check(impostors, f"{type(self).__name__}.fit")
        context = context or RunContext()
        # a stage counting classes: ``_fit`` advances it (context.advance, or context.map over classes)
        with context.stage(f"{progress_name(self)}: fitting {len(impostors)} classes", len(impostors), "classes"):
            more = (genuine is not None and genuine.values.size) or groups is not None
            if more and overrides(self, Estimator, "_fit_genuine"):
                if genuine is None:
                    genuine = GenuineDistances.from_lists({c: np.empty(0) for c in impostors.classes})
                return self._fit_genuine(impostors, genuine, context, groups)
            return self._fit(impostors, context)

    @abstractmethod
    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        """Called once per fold (and by the predicted interval, on simulated galleries): the training impostor
        distances of every enrolled class (checked: finite, non-negative, not empty) in, a ``model_class``
        instance over the same classes out. Advances the stage ``fit`` opened (``context.advance`` or
        ``context.map`` over classes); randomness from ``context.seed``; a class it cannot fit: a DataError
        naming the class and what is missing."""

    @optional
    def _fit_genuine(self, impostors: ImpostorDistances, genuine: GenuineDistances, context: RunContext,
                     groups: TrainingGroups | None = None) -> FittedModel:
        """Called by ``fit`` instead of ``_fit`` when the training side holds more than impostor distances:
        ``genuine``, each class's own training probes against its enrollment (the same classes in the same order
        as ``impostors``, checked; some classes, or all, may have none), and ``groups``, the classes' and the
        impostor probes' demographic groups (a ``TrainingGroups`` aligned with ``impostors``, checked) or None. A
        model as ``_fit`` gives, which may use them to choose how to set its thresholds (e.g. how class-specific
        to be, judged by what that costs genuine users, without widening the gap between groups). Never
        evaluation data. The prediction refits such an estimator on simulated galleries through ``_fit`` (no
        genuine comparisons there), so what it chose must be kept for those refits. Default: ``_fit``, ignoring
        them."""
        return self._fit(impostors, context)

    @optional
    def simulate(self, galleries: Any, targets: np.ndarray) -> np.ndarray | None:
        """Called by the predicted FPR interval (calibrate.predicted.interval): what ``fit`` would give on many
        simulated galleries at once, in array operations instead of one fit per gallery.

        :param galleries: a :class:`calibrate.predicted.world.Galleries`: B simulated galleries of the fitted
            classes and sizes; ``galleries.at(ranks)`` gives the (B, C, R) distances at 0-based ranks
            (C x R) within each class (sorted), at the ranks :meth:`simulation_ranks` asked for, or any
            rank when ``galleries.full``.
        :param targets: target FPRs (T values).
        :returns: thresholds of shape (B, C, T) equal, up to float rounding, to what ``fit`` gives on
            each full gallery; a gallery whose row is all NaN is seen again at more ranks, then whole, and
            refitted by the caller only if ``simulate`` still gives none (a case the vectorised form does not
            cover, e.g. a check that the drawn ranks sufficed: size the ranks so that it is rare, as refits
            are slow).
            The conformance kit (``check_estimator_simulate``) checks the equality.
            Default: None, no vectorised form; the prediction refits one gallery at a time within its
            time budget.
        """
        return None

    @optional
    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world: Any) -> list[np.ndarray] | None:
        """With :meth:`simulate`, called before the galleries are drawn: the 0-based ranks within each class (one
        sorted array per class) that ``simulate`` reads, so that only those are drawn. ``world`` is the
        :class:`calibrate.predicted.world.World` the galleries come from (e.g. to size a margin). Default: None, every
        rank (whole galleries)."""
        return None

    #: what ``enroll`` keeps fixed: "per-class" (a class's model depends on its own distances only, so
    #: enrolling class by class gives exactly a full fit's thresholds, and a sharded run fits shard by shard
    #: with ``fit``), "pooled" (quantities pooled over the fitted classes, e.g. a shared shape, stay as
    #: fitted; refit when many classes have been added). Default: None, the estimator cannot add one class
    enroll_mode: Literal["per-class", "pooled"] | None = None

    @final
    def enroll(self, model: FittedModel, cls: str, distances: np.ndarray,
               context: RunContext | None = None) -> FittedModel:
        """``model`` with class ``cls`` added (or replaced) from its training impostor distances; the
        other classes keep their thresholds. Raises a CalibrateError when the estimator cannot."""
        from calibrate.errors import CalibrateError

        refused = getattr(model, "enroll_refused", None)  # e.g. a model fitted group by group (calibrate.saved.grouped)
        if refused:
            raise ParameterError(refused)
        d = np.asarray(distances, dtype=np.float64).ravel()
        single = ImpostorDistances.from_lists({str(cls): d})  # validates: finite, non-negative, not empty
        if self.enroll_mode is None:
            raise CalibrateError(f"estimator {progress_name(self)} cannot add one class to a fitted calibration "
                                 "(its thresholds depend on every class together); fit again with the new class")
        return self._enroll(model, str(cls), single, context or RunContext())

    @optional
    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        """Called by ``enroll`` (``Calibration.enroll``) when ``enroll_mode`` is set: a new model, ``model`` with
        class ``cls`` added or, when calibrated already, replaced, from ``single``, a one-class
        ``ImpostorDistances`` (``single.classes == (cls,)``; its training impostor distances ``single.of(0)``,
        checked: finite, non-negative, not empty); the other classes keep their thresholds. "per-class": the thresholds a full fit including ``cls``
        gives; "pooled": the pooled quantities as ``model`` has them. Default: fit the class alone and put
        the per-class entries of its state (lists with one item per class) into the model's."""
        alone = self._fit(single, context)
        return merge_class_state(model, alone, cls)

    @optional
    def partitioned(self) -> "PartitionedFitter | None":
        """Called when a sharded run (``sharded`` dataset) fits this estimator: a
        :class:`calibrate.contract.sharded.PartitionedFitter`, which may pool values over every shard before fitting
        each shard's classes, and whose parts must give the thresholds of an in-memory fit. Default: None; a
        "per-class" estimator is then fitted shard by shard with ``fit``, any other is refused."""
        return None


def merge_class_state(model: FittedModel, alone: FittedModel, cls: str) -> FittedModel:
    """``model`` with the per-class entries of ``alone`` (a one-class model of the same type) added
    for ``cls``, or replacing its entries when ``cls`` is already calibrated. Per-class entries are
    the state's lists with one item per class; everything else is kept from ``model``."""
    state, one = model.to_state(), alone.to_state()
    n = len(model.classes)
    i = model.classes.index(cls) if cls in model.classes else None
    out = dict(state)
    for key, value in state.items():
        if isinstance(value, list) and len(value) == n and isinstance(one.get(key), list) and len(one[key]) == 1:
            out[key] = value[:i] + one[key] + value[i + 1:] if i is not None else value + one[key]
    return type(model).from_state(out)
