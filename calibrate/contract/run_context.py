"""What a run lends a component while it works: the :class:`RunContext` its methods receive (progress
stages, notes for the report, the seed, the executor its ``map`` goes through), :func:`map_reporting`
(an executor's map that reports items as they complete) and the :class:`Executor` base class (where
independent pieces of work run).

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, final

from calibrate.contract.progress import NULL_TASK, Task
from calibrate.contract.component import Component, optional


T = TypeVar("T")


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
    #: how :meth:`map` shares ``spread=True`` items with the machine's other core: ``spreader(function, items,
    #: on_done) -> results`` (calibrate.running.beside.spread_map), set by a run whose recipe names no executor
    spreader: Any = None
    _stages: list = field(default_factory=list, init=False, repr=False, compare=False)
    #: the run's work in progress beside it (calibrate.running.predict_stage.PendingPredictions), oldest first
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
            sizes: Sequence[float] | None = None, unit: str = "", spread: bool = False) -> list:
        """``[function(item) for item in items]``, through the executor when one is configured.

        Progress is reported as items (or the executor's chunks) complete: in a stage of its own
        when ``description`` is given, else to the innermost open stage. Item i counts ``sizes[i]``
        (e.g. the classes in a chunk of classes), 1 by default.

        ``spread``: where the run gives a :attr:`spreader` (a recipe without ``executor:``), the items may be shared
        with a process forked beside the run on the machine's other core, for heavy work whose ``function`` is
        pure: its result depends only on its item, and nothing it does besides returning it counts. Results are
        the same.
        """
        if self.reporter is None and self.progress is None:
            if spread and self.spreader is not None:
                return self.spreader(function, list(items), None)
            if self.executor is None:
                return [function(item) for item in items]
            return self.executor.map(function, items)
        items = list(items)
        weights = [1] * len(items) if sizes is None else list(sizes)
        if len(weights) != len(items):
            raise ValueError(f"map: {len(weights)} sizes for {len(items)} items")
        if description is None:
            return self._map_reporting(function, items, weights, self.advance, spread)
        with self.stage(description, sum(weights), unit) as task:
            return self._map_reporting(function, items, weights, task.advance, spread)

    def _map_reporting(self, function: Callable, items: list, weights: list, advance: Callable, spread: bool) -> list:
        def done(indices) -> None:
            advance(sum(weights[i] for i in indices))

        if spread and self.spreader is not None:
            return self.spreader(function, items, done)
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
