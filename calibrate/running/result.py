"""What a run returns, the clock of its stages and the route its data take through them: below the pipeline and
the sharded run (both routes, both returning a RunResult) and the outputs (which write the timings), so that none
imports another for them."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibrate.contract.base import Fold
from calibrate.contract.types import TargetResult


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    results: dict[str, list[TargetResult]]
    folds: tuple[Fold, ...]
    notes: tuple[str, ...]
    #: seconds per stage, in the order the stages ran (summed over folds)
    timings: dict[str, float] = field(default_factory=dict)


class StageTimes:
    """Wall-clock seconds per named stage; ``with times("fit auto"): ...`` adds to that stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        #: stages that ran in a process beside the run's own (calibrate.running.beside), overlapping the stages after them
        self.beside: list[str] = []
        #: parts of a stage (RunContext.timed) -> the stage they are part of (their seconds are in its seconds too)
        self.within: dict[str, str] = {}
        self._open: list[str] = []
        self._start = time.perf_counter()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        self._open.append(stage)
        try:
            yield
        finally:
            self._open.pop()
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Seconds of ``name``, a part of the innermost open stage (counted there too; a stage of its own when none
        is open)."""
        if not self._open:
            with self(name):
                yield
            return
        self.within.setdefault(name, self._open[-1])
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def total(self) -> float:
        return time.perf_counter() - self._start

    def add_beside(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` of ``stage`` that ran beside the run (see :attr:`beside`)."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        if stage not in self.beside:
            self.beside.append(stage)

    def as_dict(self) -> dict:
        """results.json's ``timings``: seconds per stage, the total so far, and the stages run beside (if any)."""
        order = []
        for k in self.seconds:  # each part right after the stage it is part of
            if k not in self.within:
                order.append(k)
                order += [p for p, parent in self.within.items() if parent == k and p in self.seconds]
        order += [k for k in self.seconds if k not in order]
        out: dict = {"seconds": {k: round(self.seconds[k], 4) for k in order}, "total": round(self.total(), 4)}
        if self.beside:
            out["beside"] = list(self.beside)
        if self.within:
            out["within"] = dict(self.within)
        return out

    def predicting(self) -> float:
        """Seconds spent in the prediction stages so far (not counted in the base of their budget)."""
        return sum(v for k, v in self.seconds.items() if k.startswith("predict "))


class Route(ABC):
    """How a run's data are read, where its fits run and how its outputs are put together: what differs between a run
    of data in memory (calibrate.running.pipeline.InMemory) and one of scores that stay in shards, read and fitted on the
    workers (calibrate.running.sharded.Sharded). The stages run in one order for both (calibrate.running.pipeline's
    ``_run_stages``): read, fit, evaluate, write, inside ``with route:`` (leaving it removes the route's scratch
    files, also when the run failed)."""

    #: the folds fitted in the run's process (RunResult.folds); a sharded run keeps none
    folds: tuple[Fold, ...] = ()

    def __init__(self, recipe: Any, context: Any, staged: Any, times: StageTimes, dataset: Any, data: Any) -> None:
        self.recipe, self.context, self.staged, self.times = recipe, context, staged, times
        self.dataset, self.data = dataset, data

    def __enter__(self) -> "Route":
        return self

    def __exit__(self, *exc: object) -> None:
        """Remove the route's scratch files (it has none unless it says so)."""

    @abstractmethod
    def read(self) -> str:
        """Read and check the data (what this route cannot do refused, what it leaves out said); their kind."""

    @abstractmethod
    def fit(self) -> None:
        """transform -> (normaliser) -> estimators: the models fitted, with their thresholds at the targets."""

    @abstractmethod
    def evaluate(self) -> dict[str, list[TargetResult]]:
        """Each estimator's evaluation at the targets."""

    @abstractmethod
    def write(self, results: dict[str, list[TargetResult]]) -> None:
        """Stage every output file, then commit them as one file set."""
