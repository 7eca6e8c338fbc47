"""From the matcher's scores to the distances estimators fit: the :class:`Transform` base class (raw scores
to distances in [0, inf), and back to the matcher's units for thresholds) and the :class:`Normalizer` base
class (each attempt's distance normalised by cohort statistics: Z-, T-, S-, AS-norm).

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal, final

import numpy as np

from calibrate.errors import DataError
from calibrate.contract.component import Component, optional, progress_name
from calibrate.contract.comparisons import DistanceMatrix


class Transform(Component, ABC):
    """Maps raw comparison scores to distances in [0, inf).

    ``fit`` sees the training matrix only; ``apply`` is then used on training and evaluation
    matrices alike, so nothing from evaluation data leaks into calibration.

    ``accepts`` names the kinds of input (``distance``, ``similarity``) the transform takes, so
    that a recipe pairing it with a dataset of the other kind fails at validation, not mid-run.
    """

    #: the kinds of raw score the transform takes; a recipe pairing it with a dataset whose ``output_kind``
    #: is another is refused at validation. Default: both
    accepts: tuple[Literal["distance", "similarity"], ...] = ("distance", "similarity")

    @final
    def fit(self, train: DistanceMatrix) -> "Transform":
        """Learn from the training matrix (``_fit``); returns self."""
        self._fit(train)
        return self

    @optional
    def _fit(self, train: DistanceMatrix) -> None:
        """Called once per fold with the training matrix's impostor comparisons only (``impostors_only()``;
        in a sharded run each shard's, which must all give one state): learn constants, e.g. the largest
        score. Whatever it learns must also come back from ``fitted_state``. Default: learns nothing."""
        return None

    @final
    def apply(self, matrix: DistanceMatrix) -> DistanceMatrix:
        """The matrix with its valid entries mapped by ``_apply``, as kind ``distance``."""
        used = matrix.valid
        if used.all():  # every entry: one pass, no gather and scatter
            out = np.asarray(self._apply(matrix.values.reshape(-1), matrix.kind), dtype=np.float64)
            if np.may_share_memory(out, matrix.values) or not out.flags.owndata:
                out = out.copy()
        else:
            out = np.array(matrix.values, dtype=np.float64)
            out[used] = self._apply(matrix.values[used], matrix.kind)
        out.setflags(write=False)  # a new array nobody else holds: the matrix keeps it without a copy
        return matrix.with_values(out.reshape(matrix.shape), kind="distance")

    @abstractmethod
    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        """Called on training and evaluation matrices, and on the scores ``accept`` decides: the valid
        entries as a 1-D array (no positions, no probe or class labels) and their kind (``distance`` or
        ``similarity``); returns distances in ``[0, inf)``, element-wise and non-decreasing in dissimilarity.
        A kind or a value outside the domain: a DataError."""

    # ---- back to the matcher's own units (for thresholds users can compare scores with) ----

    @optional
    def _inverse(self, distances: np.ndarray, kind: str) -> np.ndarray | None:
        """Called when thresholds are written (thresholds.csv, ``calibrate threshold``, ``Calibration.threshold``):
        the raw scores whose transformed value is each distance (the inverse of ``_apply``; ``score_thresholds``
        refines it to the last float step). Default: None, no inverse (thresholds in distance units only)."""
        return None

    @optional
    def depends_on_data(self) -> bool:
        """Called when a sharded recipe is validated: whether ``_fit`` learns anything from the data with these
        parameters (a sharded run, fitting shard by shard, refuses a transform that does). Default: whether
        the class overrides ``_fit``."""
        return type(self)._fit is not Transform._fit

    @optional
    def out_of_range(self, values: np.ndarray, kind: str) -> int:
        """Called by ``Calibration.enroll`` on a new class's impostor scores: how many raw ``values`` lie beyond
        what ``_fit`` saw, where the transform clips them (calibrating with them gives other thresholds than a
        fit on them would; the caller warns). Default: 0."""
        return 0

    @optional
    def fitted_state(self) -> dict[str, Any]:
        """Called when a calibration is saved and when a sharded run sends the transform to its workers:
        all that ``_fit`` learned, JSON-serialisable (plain numbers, strings, lists, dicts). Default: {} (nothing
        learned). A transform that learns in ``_fit`` must override it (and ``set_fitted_state``)."""
        return {}

    @optional
    def set_fitted_state(self, state: dict[str, Any]) -> "Transform":
        """Called when a calibration is loaded: restore what ``fitted_state`` returned, instead of fitting;
        returns self. Default: ignores ``state``."""
        return self

    @final
    def score_thresholds(self, distances: np.ndarray, kind: str) -> np.ndarray | None:
        """For each distance threshold tau, the score threshold t in the data's own units such that
        ``score >= t`` (similarity) or ``score <= t`` (distance) accepts exactly the scores whose
        transformed distance is ``<= tau``. The inverse is refined to the last floating-point step
        against ``_apply``, so both decisions agree on every score. None without an inverse."""
        tau = np.asarray(distances, dtype=np.float64)
        guess = self._inverse(tau.ravel(), kind)
        if guess is None:
            return None
        t = tau.ravel()
        s = np.asarray(guess, dtype=np.float64).ravel().copy()

        def forward(values: np.ndarray) -> np.ndarray:
            """_apply, with a score outside the transform's domain counted as never accepted."""
            try:
                return np.asarray(self._apply(values, kind), dtype=np.float64)
            except DataError:
                out = np.full(values.shape, np.inf)
                for k, v in enumerate(values):
                    try:
                        out[k] = float(self._apply(np.array([v]), kind)[0])
                    except DataError:
                        pass
                return out

        more = np.inf if kind == "similarity" else -np.inf  # the direction in which scores are more alike
        todo = np.isfinite(t) & np.isfinite(s)
        # vectorised over every threshold, at most 64 float steps each way (the inverse is a few ulps off)
        for _ in range(64):  # the threshold score itself must be accepted ...
            idx = np.flatnonzero(todo)
            rejected = idx[forward(s[idx]) > t[idx]] if idx.size else idx
            if not rejected.size:
                break
            s[rejected] = np.nextafter(s[rejected], more)
        for _ in range(64):  # ... and the next less alike score must not be
            idx = np.flatnonzero(todo)
            less = np.nextafter(s[idx], -more)
            still = forward(less) <= t[idx] if idx.size else np.zeros(0, bool)
            if not still.any():
                break
            s[idx[still]] = less[still]
        return s.reshape(tau.shape)


class Normalizer(Component, ABC):
    """Normalises each attempt's distance by cohort statistics (Z-, T-, S-, AS-norm), between the
    transform and the estimators.

    For an attempt (probe i claims class j, distance d after the transform) a normaliser combines d with
    statistics of class j's distances to an impostor cohort (the *enrolled* side, bob's Z-norm) and of
    probe i's distances to a cohort (the *probe* side, T-norm) into a normalised score z: any real number,
    lower = more alike. The core maps z to the distance ``exp(z)`` that the estimators fit, so thresholds
    of a normalised run are in normalised units, and a decision depends on the probe's cohort scores.

    What the core guarantees ``_statistics``: one row per class (enrolled side) or per attempt's probe
    (probe side), holding that one's usable cohort distances sorted ascending, every row of one call of
    the same length n >= :meth:`min_members` (a top-K cohort is the first K columns). Its result must
    depend on the row's values only, so that the same cohort gives the same statistics in a run and in
    ``Calibration.accept`` (bit for bit: the decisions agree). The enrolled side's statistics of every
    class are saved with a calibration; ``Calibration.enroll`` computes a new class's.
    """

    #: the cohort sides it reads: ``"enrolled"`` (Z-norm), ``"probe"`` (T-norm), or both (S-norm); a recipe
    #: is checked against the dataset's ``cohort_sides``, and ``_normalize`` gets exactly these sides'
    #: statistics. Default: both
    sides: tuple[Literal["enrolled", "probe"], ...] = ("enrolled", "probe")

    #: the statistics that are spreads (a scale in distance units that ``_normalize`` divides by): where they are
    #: computed (every class's and probe's cohort row, in a run, ``accept`` and ``enroll``) and where a saved
    #: calibration is loaded, the core refuses a spread that is not finite, not positive, or at most 1e-9 times the
    #: row's smallest distance or the row's other statistics (a cohort whose distances are all equal, up to
    #: rounding), naming the class or probe; every statistic must be finite. A name not among the statistics
    #: returned is not checked. Default: ``("std",)``
    spreads: tuple[str, ...] = ("std",)

    @optional
    def min_members(self) -> int:
        """Called before the statistics are computed: the fewest cohort distances one row needs (a class or
        probe with fewer is a DataError naming it and the cohort's source). Default: 2 (a spread needs two
        values)."""
        return 2

    @final
    def statistics(self, cohort: np.ndarray) -> dict[str, np.ndarray]:
        """Per row of ``cohort`` (finite distances sorted ascending per row, see the class: the core sorts
        them, and does not check again here, where it would cost as much as the statistics), the statistics
        ``_normalize`` reads: a mapping of names to float arrays with one value per row."""
        rows = np.ascontiguousarray(cohort, dtype=np.float64)
        if rows.ndim != 2:
            raise DataError(f"{type(self).__name__}.statistics expects a 2-D array of cohort rows, got shape {rows.shape}")
        if rows.shape[1] < self.min_members():
            raise DataError(f"{progress_name(self)}: cohort rows of {rows.shape[1]} distances; it needs at least "
                            f"{self.min_members()}")
        out = self._statistics(rows)
        if not isinstance(out, Mapping) or not out:
            raise DataError(f"{progress_name(self)}: _statistics must return a mapping of names to arrays, got {out!r}")
        checked = {}
        for name, values in out.items():
            arr = np.asarray(values, dtype=np.float64)
            if not isinstance(name, str) or arr.shape != (rows.shape[0],):
                raise DataError(f"{progress_name(self)}: statistic {name!r} has shape {arr.shape}; expected one value "
                                f"per cohort row ({rows.shape[0]},)")
            checked[name] = arr
        return checked

    @optional
    def _statistics_left_out(self, cohort: np.ndarray, usable: np.ndarray, rows: np.ndarray,
                             left_out: np.ndarray) -> dict[str, np.ndarray]:
        """Called by the core, when the normaliser overrides it, in place of ``_statistics`` wherever attempts
        share cohort rows and each may leave one member out (a run's training attempts and a probe's row without
        the claimed class; ``accept`` and ``enroll`` likewise): ``cohort`` holds rows of distances in no
        particular order, used where ``usable``; attempt a reads row ``rows[a]`` without column ``left_out[a]``
        (-1: none; never an unused one), and keeps at least ``min_members()`` distances. Return ``{name: one
        value per attempt}``: what ``_statistics`` gives that attempt's distances sorted (the same names;
        equal within a relative 1e-9, the kit checks it), computed from per-row sums, a partial sort, ...
        rather than a row per attempt. An attempt's values must depend on its row's usable distances as a
        multiset and on the one left out only, bit for bit (not on their order, nor on the other rows and
        attempts computed with it): a run and a calibration's ``accept`` then agree exactly. Default: the
        core gathers each attempt's row, sorts it and calls ``_statistics``, O(attempts x cohort size)."""
        raise NotImplementedError

    @final
    def statistics_left_out(self, cohort: np.ndarray, usable: np.ndarray, rows: np.ndarray,
                            left_out: np.ndarray) -> dict[str, np.ndarray]:
        """Per attempt, the statistics of its cohort row without the member left out (see
        ``_statistics_left_out``, which a normaliser that overrides it computes this with), checked: a
        mapping of names to float arrays with one value per attempt."""
        values = np.asarray(cohort, dtype=np.float64)
        mask = np.asarray(usable, dtype=bool)
        rows = np.asarray(rows, dtype=np.int64)
        left_out = np.asarray(left_out, dtype=np.int64)
        if values.ndim != 2 or mask.shape != values.shape or rows.shape != left_out.shape or rows.ndim != 1:
            raise DataError(f"{type(self).__name__}.statistics_left_out expects 2-D cohort rows with a mask of their "
                            f"shape and one row and column per attempt, got {values.shape}, {mask.shape}, "
                            f"{rows.shape}, {left_out.shape}")
        out = self._statistics_left_out(values, mask, rows, left_out)
        if not isinstance(out, Mapping) or not out:
            raise DataError(f"{progress_name(self)}: _statistics_left_out must return a mapping of names to arrays, "
                            f"got {out!r}")
        checked = {}
        for name, v in out.items():
            arr = np.asarray(v, dtype=np.float64)
            if not isinstance(name, str) or arr.shape != rows.shape:
                raise DataError(f"{progress_name(self)}: statistic {name!r} has shape {arr.shape}; expected one value "
                                f"per attempt {rows.shape}")
            checked[name] = arr
        return checked

    @final
    def normalize(self, distances: np.ndarray, enrolled: Mapping[str, np.ndarray] | None,
                  probe: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """Normalised scores z of ``distances`` (one per attempt) given, per attempt, its class's statistics
        (``enrolled``, None unless ``sides`` has it) and its probe's (``probe``, likewise). A z that is not finite
        is refused by the core, naming the attempt, its distance and statistics (calibrate.normalisation.cohort.normalising_refusal)."""
        d = np.asarray(distances, dtype=np.float64)
        if d.ndim != 1:
            raise DataError(f"{type(self).__name__}.normalize expects one distance per attempt, got shape {d.shape}")
        for side, stats in (("enrolled", enrolled), ("probe", probe)):
            if (side in self.sides) != (stats is not None):
                raise DataError(f"{progress_name(self)} reads the sides {', '.join(self.sides)}; the {side} side's "
                                f"statistics were {'not ' if stats is None else ''}given")
            for name, values in (stats or {}).items():
                if np.shape(values) != d.shape:
                    raise DataError(f"{progress_name(self)}: {side} statistic {name!r} has shape {np.shape(values)}, "
                                    f"expected one value per attempt {d.shape}")
        z = np.asarray(self._normalize(d, enrolled, probe), dtype=np.float64)
        if z.shape != d.shape:
            raise DataError(f"{progress_name(self)}: _normalize returned shape {z.shape}, expected {d.shape}")
        return z

    @abstractmethod
    def _statistics(self, cohort: np.ndarray) -> dict[str, np.ndarray]:
        """Called by ``statistics`` in a run (each class's and each probe's cohort), by ``Calibration.accept`` (the
        probes') and ``enroll`` (a new class's): rows of cohort distances sorted ascending, all of one length
        n >= ``min_members()``; returns ``{name: array of len(cohort)}``, each row's values depending on that row
        only (bit for bit the same alone or in a block, so that a run and ``accept`` decide alike)."""

    @abstractmethod
    def _normalize(self, distances: np.ndarray, enrolled: Mapping[str, np.ndarray] | None,
                   probe: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """Called by ``normalize`` for training and evaluation attempts and for the scores ``accept`` decides: z per
        attempt from its distance and its sides' statistics (``None`` for a side not in ``sides``), element-wise
        over attempts and non-decreasing in the distance; lower z = more alike."""
