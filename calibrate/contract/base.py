"""Base classes for the plugin kinds.

Conventions (after scikit-learn and scipy.stats):

* Components take explicit keyword parameters in ``__init__`` (no ``**kwargs``), store them
  under the same names, validate them there (raise :class:`~calibrate.errors.ParameterError`)
  and do no work. The recipe loader reads the signature to check recipes before any computation.
* Public methods validate their input and call a private ``_method`` that computes.
* Everything a stage needs from the run (progress reporting, notes for the report, random
  seeds) comes in a :class:`RunContext`.

The contract, in code: every member of a kind's base class (and of :class:`FittedModel`) is one of

* *required*: an abstract method (``@abstractmethod``) or an annotated class attribute without a
  value (``model_class``); a component must define it;
* *optional*: a method marked :func:`optional`, or an annotated class attribute with a default
  (``#:`` comment above it); a component may override it, and the docstring says when the core
  calls it, what it must return and what the default does (``Default:``);
* *provided*: a method marked ``typing.final`` (``fit``, ``load``, ``apply``, ...), which the core
  calls and a component must not override (override the private ``_method`` it calls instead).

docs/plugins.md's contract tables are generated from these declarations
(``python -m calibrate.testing.contract_docs --write docs/plugins.md``), and the conformance kit's
``check_contract`` refuses a component that overrides a provided method, misspells an optional one
or gives a declared attribute a value outside its annotation.
"""

from __future__ import annotations

import inspect
import itertools
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, TypeVar, final

import numpy as np

from calibrate.errors import DataError, ParameterError
from calibrate.contract.progress import NULL_TASK, Task
from calibrate.contract.types import (CohortScores, DistanceMatrix, EvaluationResult, GenuineDistances, GroupLabels, ImpostorDistances,
                    PatternSet, SetCollection, ThresholdTable, TrainingGroups)

if TYPE_CHECKING:
    from calibrate.contract.sharded import PartitionedFitter

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: the attribute :func:`optional` sets on a function (read by calibrate.testing.contract)
CONTRACT_MARK = "__calibrate_contract__"


def optional(function: F) -> F:
    """Marks a method of a base class as an optional part of the plugin contract: a component may
    override it; otherwise the definition on the base class (the default its docstring states) applies."""
    setattr(function, CONTRACT_MARK, "optional")
    return function


def overrides(component: Any, base: type, name: str) -> bool:
    """Whether ``component`` (an instance or a class) overrides the member ``name`` of ``base`` (an
    optional method, e.g. ``Estimator.simulate``), i.e. whether the core should use it."""
    cls = component if isinstance(component, type) else type(component)
    return getattr(cls, name, None) is not getattr(base, name)


@dataclass
class RunContext:
    """Services the pipeline offers to components while a recipe runs.

    Progress: work that takes long reports through ``stage`` (a stage with a total, advanced as
    items finish), ``advance`` (the innermost open stage), ``track`` (iterate inside a stage) or
    ``map`` (reports each item, or chunk, as it completes). The public methods of the base
    classes open a stage around the component's work (``Estimator.fit``: one counting classes;
    ``Evaluator.evaluate``: one counting estimators; ``Distance.pairwise``: one without a total),
    which the component advances, or nests its own stages under. Nothing is shown unless the
    caller gave a ``reporter`` (:mod:`calibrate.contract.progress`); ``progress`` is the older interface,
    a ``track``-like function, still honoured when there is no reporter.
    """

    progress: Callable[[Iterable[T], str, int | None], Iterator[T]] | None = None
    notes: list[str] = field(default_factory=list)
    seed: int = 0
    executor: Any = None
    reporter: Any = None
    #: the run's clock of stages (calibrate.running.result.StageTimes), set by the pipeline: :meth:`timed` adds to it
    clock: Any = None
    _stages: list = field(default_factory=list, init=False, repr=False, compare=False)
    #: the run's work in progress beside it (calibrate.running.pipeline.PendingPredictions), oldest first
    _beside: list = field(default_factory=list, init=False, repr=False, compare=False)

    @contextmanager
    def stage(self, description: str, total: float | None = None, unit: str = "") -> Iterator[Task]:
        """A stage of ``total`` items (``unit``: e.g. classes); yields a task to ``advance(n)``.

        Finished (with its duration) when the block ends; stages nest.
        """
        if self.reporter is None and self.progress is None:
            yield NULL_TASK
            return
        if self.reporter is None:
            task: Task = _TrackTask(self.progress, description, total)
        else:
            task = self.reporter.start(description, total, unit, depth=len(self._stages))
        self._stages.append(task)
        ok = False
        try:
            yield task
            ok = True
        finally:
            if task in self._stages:
                self._stages.remove(task)
            task.finish(ok)

    @contextmanager
    def timed(self, part: str) -> Iterator[None]:
        """Count the block's wall-clock seconds in the run's timings (results.json, report.md) as ``part``, a part of
        the pipeline stage that is open around it (e.g. ``fpr: genuine cost and groups`` within ``evaluate fpr``), so
        that what a component adds to a run is stated beside the run's time. Nothing when no clock is set."""
        if self.clock is None:
            yield
            return
        with self.clock.part(part):
            yield

    def advance(self, n: float = 1) -> None:
        """Advance the innermost open stage by ``n`` items (nothing when no stage is open)."""
        if self._stages:
            self._stages[-1].advance(n)

    def track(self, items: Iterable[T], description: str, total: int | None = None, unit: str = "") -> Iterator[T]:
        """Iterate inside a stage of its own (``total`` items, default ``len(items)``), advanced by one per item."""
        if self.reporter is None:
            if self.progress is None:
                return iter(items)
            return self.progress(items, description, total)
        if total is None:
            try:
                total = len(items)  # type: ignore[arg-type]
            except TypeError:
                total = None
        return self._track(items, description, total, unit)

    def _track(self, items: Iterable[T], description: str, total: int | None, unit: str) -> Iterator[T]:
        with self.stage(description, total, unit) as task:
            for item in items:
                yield item
                task.advance(1)

    def note(self, message: str) -> None:
        """Record something the user should read in report.md (and see as a warning)."""
        self.notes.append(message)
        warnings.warn(message, stacklevel=2)

    def map(self, function: Callable, items: Sequence, *, description: str | None = None,
            sizes: Sequence[float] | None = None, unit: str = "") -> list:
        """``[function(item) for item in items]``, through the executor when one is configured.

        Progress is reported as items (or the executor's chunks) complete: in a stage of its own
        when ``description`` is given, else to the innermost open stage. Item i counts ``sizes[i]``
        (e.g. the classes in a chunk of classes), 1 by default.
        """
        if self.reporter is None and self.progress is None:
            if self.executor is None:
                return [function(item) for item in items]
            return self.executor.map(function, items)
        items = list(items)
        weights = [1] * len(items) if sizes is None else list(sizes)
        if len(weights) != len(items):
            raise ValueError(f"map: {len(weights)} sizes for {len(items)} items")
        if description is None:
            return self._map_reporting(function, items, weights, self.advance)
        with self.stage(description, sum(weights), unit) as task:
            return self._map_reporting(function, items, weights, task.advance)

    def _map_reporting(self, function: Callable, items: list, weights: list, advance: Callable) -> list:
        def done(indices) -> None:
            advance(sum(weights[i] for i in indices))

        if self.executor is None:
            out = []
            for i, item in enumerate(items):
                out.append(function(item))
                done((i,))
            return out
        return map_reporting(self.executor, function, items, done)


class _TrackTask(Task):
    """A stage shown through an old-style ``progress`` function (``track(items, description, total)``):
    the iterator it returns over ``range(total)`` is pulled once per item done."""

    def __init__(self, progress: Callable, description: str, total: float | None):
        self._n = None if total is None else int(total)
        self._it = iter(progress(range(self._n) if self._n is not None else itertools.count(), description, self._n))
        self._pulled, self._done = 0, 0.0

    def advance(self, n: float = 1) -> None:
        self._done += n
        while self._pulled < int(self._done) and (self._n is None or self._pulled < self._n):
            if next(self._it, _END) is _END:
                self._n = self._pulled
                break
            self._pulled += 1

    def finish(self, ok: bool = True) -> None:
        if ok and self._n is not None:
            self.advance(self._n - self._done)
            next(self._it, None)  # lets the track function see the end
        close = getattr(self._it, "close", None)
        if close is not None:
            close()


_END = object()


def _accepts_keyword(function: Callable, name: str) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def map_reporting(executor: Any, function: Callable, items: list, on_done: Callable) -> list:
    """``executor.map`` that calls ``on_done(indices)`` as items complete; an executor whose ``map``
    takes no ``on_done`` (written before it existed) reports every item once it returns."""
    if _accepts_keyword(executor.map, "on_done"):
        return executor.map(function, items, on_done=on_done)
    out = executor.map(function, items)
    on_done(range(len(items)))
    return out


def progress_name(component: Any) -> str:
    """How progress lines name a component: its ``progress_name`` attribute, else its class name in
    kebab case (``Ncx2Grid`` -> ``ncx2-grid``, the way plugins are usually registered)."""
    name = getattr(component, "progress_name", None)
    if isinstance(name, str) and name:
        return name
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[0-9]+", type(component).__name__)
    return "-".join(w.lower() for w in words) or type(component).__name__


class Component:
    """Common behaviour: parameters introspected from ``__init__``."""

    #: how progress lines and messages name the component (a string, or a property computing one from
    #: the parameters, e.g. ``ncx2-grid (fast)``). Default: None, the class name in kebab case (``Ncx2Grid``
    #: -> ``ncx2-grid``)
    progress_name: str | None = None

    @final
    def get_params(self) -> dict[str, Any]:
        """The ``__init__`` parameters and their values, read back from the attributes of the same names."""
        init = type(self).__init__
        if init is object.__init__:  # no constructor of its own: no parameters (as scikit-learn)
            return {}
        names = [p for p in inspect.signature(init).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def check_target(target: float) -> float:
    t = float(target)
    if not (0.0 < t < 1.0) or not np.isfinite(t):
        raise ParameterError(f"target FPR {target!r} is not in (0, 1); give it as a fraction, e.g. 0.001 for 0.1%")
    return t


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
    #: -1``). Default: None (none marked); the run then points out scores repeated often enough to be an
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
            each full gallery; a gallery whose row is all NaN is drawn whole and refitted by the caller
            (a case the vectorised form does not cover, e.g. a check that the drawn ranks sufficed).
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

        refused = getattr(model, "enroll_refused", None)  # e.g. a model fitted group by group (calibrate.running.grouped)
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


@dataclass(frozen=True)
class Fold:
    """One calibration/evaluation split: thresholds fitted on ``train``, judged on ``test``."""

    name: str
    train: DistanceMatrix
    test: DistanceMatrix
    models: dict[str, FittedModel]
    tables: dict[str, ThresholdTable]
    #: the fitted transform from raw scores to these distances, and the raw scores' kind
    transform: "Transform | None" = None
    kind: str = "distance"
    #: the training impostor distances the estimators were fitted on (None: derive from ``train``)
    impostors: ImpostorDistances | None = None
    #: per estimator label, its predicted FPR (calibrate.predicted.interval.Prediction), from training data only
    predictions: dict = field(default_factory=dict)
    #: the fitted normaliser (calibrate.normalisation.cohort.FittedNormalization) when the recipe has ``normalizer:``:
    #: ``train`` and ``test`` then hold normalised distances exp(z), and thresholds are in those units
    normalization: Any = None
    #: the evaluation attempts as the dataset (or the distance stage) gave them: the matcher's own scores of kind
    #: ``kind``, before the transform and any normaliser, same entries as ``test``. One pooled threshold, the
    #: baseline every estimator is judged against, is set on them. None: ``test`` stands for them
    raw_test: DistanceMatrix | None = None
    #: (lowest, highest training comparison score on the matcher's own scale, genuine ones included; whether any
    #: was genuine), saved with the calibration for ``calibrate accept``/``evaluate`` to refuse scores on another
    #: scale; None: not known
    training_scores: tuple[float, float, bool] | None = None

    def matcher_scores(self) -> tuple[np.ndarray, float]:
        """(the evaluation attempts on the matcher's own scale, shaped as ``test``: ``raw_test``'s values, else
        ``test``'s; the sign that orients them as distances: -1 for similarity scores, whose negation is exact)."""
        raw = self.raw_test if self.raw_test is not None else self.test
        return raw.values, (-1.0 if raw.kind == "similarity" else 1.0)


@dataclass(frozen=True)
class EvaluationInput:
    """Everything an evaluator may look at: one fold, or several when enrollment rotates."""

    folds: tuple[Fold, ...]
    targets: tuple[float, ...]
    plots: bool = True
    #: the demographic group of the enrolled classes and of the probes' real classes, when the recipe or the
    #: dataset gives them (calibrate.contract.types.GroupLabels); None: no group figures
    groups: GroupLabels | None = None

    @property
    def labels(self) -> list[str]:
        return list(self.folds[0].models)


class Evaluator(Component, ABC):
    """Scores fitted estimators on evaluation data."""

    @final
    def evaluate(self, data: EvaluationInput, context: RunContext | None = None) -> EvaluationResult:
        for fold in data.folds:
            fold.test.check_distances(f"evaluation distances ({fold.name})")
        context = context or RunContext()
        # a stage counting estimators: ``_evaluate`` advances it as each estimator's results are ready
        with context.stage(f"{progress_name(self)}: evaluating {len(data.labels)} estimator(s)", len(data.labels),
                           "estimators"):
            return self._evaluate(data, context)

    @abstractmethod
    def _evaluate(self, data: EvaluationInput, context: RunContext) -> EvaluationResult:
        """Called once per run with every fold (fitted models, threshold tables, training and evaluation
        distances) and the targets: per estimator label one TargetResult per target in order (false accepts:
        evaluation impostor distances ``<= threshold``), or none; report sections; files (plain names ->
        bytes), and no pictures when ``data.plots`` is false. Advances the stage ``evaluate`` opened."""


class Executor(Component, ABC):
    """Runs independent pieces of work (per-class fits, distance blocks) somewhere.

    Used as a context manager around a run: ``__enter__`` starts workers, ``__exit__`` stops
    them. ``map`` must return results in input order, identical to a serial loop. Functions
    given to ``map`` are module-level (picklable) so that they can travel to other processes.

    Progress: ``map(..., on_done=f)`` calls ``f(indices)`` in this process with the indices of the
    items whose results are ready, as they become ready (every index exactly once). An
    executor whose ``_map`` takes an ``on_done`` keyword reports as its chunks complete; one
    whose ``_map`` does not is reported in one step when ``_map`` returns.
    """

    @optional
    def __enter__(self) -> "Executor":
        """Called when a run starts: start the workers; returns self. Default: nothing to start."""
        return self

    @optional
    def __exit__(self, *exc) -> None:
        """Called when a run ends, whether or not it failed: stop the workers. Default: nothing to stop."""
        return None

    @final
    def map(self, function: Callable, items: Sequence, *, on_done: Callable[[Sequence[int]], None] | None = None) -> list:
        items = list(items)
        if not items:
            return []
        if on_done is None:
            return list(self._map(function, items))
        if _accepts_keyword(self._map, "on_done"):
            return list(self._map(function, items, on_done=on_done))
        out = list(self._map(function, items))
        on_done(range(len(items)))
        return out

    @abstractmethod
    def _map(self, function: Callable, items: list) -> list:
        """Called by ``map`` (the distances, the fits, the shards) with a non-empty list: ``[function(item) for
        item in items]`` in input order, identical to that loop; an exception raised by the work reaches the
        caller with its type. May take ``on_done`` (a keyword) to report items as they complete."""
