"""Estimator ``ncx2-grid``: the paper's Algorithm 1, a non-central chi-square fit per class.

Model. For one enrolled class, the training impostor distances delta_1..delta_N are taken to be
``delta = sigma * sqrt(X)`` with ``X ~ chi'^2(dim, lambda)`` (the paper's Eq. 3). The threshold
at target FPR ``e`` is the model's e-quantile of delta::

    tau(e) = sigma * sqrt(F^-1(e; dim, lambda))        F = non-central chi-square CDF

The fit -- Algorithm 1, its fit scores and the default sigma range -- is in
:mod:`calibrate_builtins.estimators.ncx2.search`, whose docstring describes it; this module holds the
estimator and its fitted model.

Scaling (``scaling``). The paper divides in its text (``(delta/sigma)^2 ~ chi'^2``) but Algorithm 1
writes ``CumDensity({sigma delta})``. ``divide`` (default) uses ``X = (delta/sigma)^2`` and
``tau = sigma sqrt(F^-1)``; ``multiply`` is Algorithm 1 literally: ``X = (sigma delta)^2`` and
``tau = sqrt(F^-1) / sigma``. The issue asks for Algorithm 1 where the sources disagree, but its
own formulas for X, lambda and the threshold are in the divide form, so divide is the default;
it also keeps sigma in distance units, which makes models.csv readable. The two are the same
model under ``sigma_multiply = 1 / sigma_divide``: a grid G in one mode and the grid 1/G in the
other produce the same set of X vectors and hence the same fit and thresholds (only the order
in which exact ties are broken differs). The reciprocal of a log-spaced grid is again log-spaced,
and the default (derived) ranges of the two modes are reciprocals of each other, so with the
default ``spacing: log`` both modes give the same thresholds (so do hand-given bounds, which are read
in the chosen mode's units, when one mode's bounds are the reciprocals of the other's). They
differ only with ``spacing: linear``: the reciprocal of an evenly spaced grid is not evenly spaced.

Modes (``mode``). ``exact`` (default) returns the grid point Algorithm 1 returns -- thresholds equal
to ``search.fit_class``'s to rounding -- through a cascade of cheaper scores with a self-check that
falls back to wider candidate sets and ultimately to ``fit_class`` itself (about 200x faster
than a plain implementation at 1,000 distances per class). ``fast`` searches the same grid on
compressed classes (at most 4,096 distances read per class for the shape) and moves thresholds by
at most 6% relative to ``exact`` (measured and tested bound), about 10x faster again. Both are in
:mod:`calibrate_builtins.estimators.ncx2.batch`; docs/performance.md has the measurements. Fits run in chunks
of classes through the run's executor (``context.map``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract import statecheck
from calibrate.contract.types import ImpostorDistances

from .search import Mode, Scaling, Score, _fit_chunk, check_dim, check_sigma


#: classes per task sent to an executor
_CHUNK = {"exact": 128, "fast": 1024}


class Ncx2GridModel(FittedModel):
    """Per class: ``dim``, ``sigma``, ``lambda`` and the fit score of the winning grid point."""

    def __init__(self, classes, dim, sigma, lam, fit_score, scaling: Scaling = "divide", score: Score = "ncc"):
        super().__init__(classes)
        self.dim = np.asarray(dim, dtype=np.int64)
        self.sigma = np.asarray(sigma, dtype=np.float64)
        self.lam = np.asarray(lam, dtype=np.float64)
        self.fit_score = np.asarray(fit_score, dtype=np.float64)
        self.scaling = scaling
        self.score = score
        n = len(self.classes)
        for name, arr in (("dim", self.dim), ("sigma", self.sigma), ("lambda", self.lam), ("fit_score", self.fit_score)):
            if arr.shape != (n,):
                raise DataError(f"ncx2-grid model: {name} has shape {arr.shape}, expected ({n},) for {n} classes")
        if scaling not in ("divide", "multiply"):
            raise DataError(f"ncx2-grid model: unknown scaling {scaling!r}")

    def _scale(self, rows: np.ndarray) -> np.ndarray:
        """Distance per unit sqrt(X): delta = scale * sqrt(X)."""
        return self.sigma[rows] if self.scaling == "divide" else 1.0 / self.sigma[rows]

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        from scipy import special

        targets = np.asarray(targets, dtype=np.float64)
        order = np.argsort(targets, kind="stable")
        q = special.chndtrix(targets[order][None, :], self.dim[rows][:, None], self.lam[rows][:, None])
        # guard against root-finder jitter: thresholds never decrease as the target FPR grows
        q = np.maximum.accumulate(np.maximum(q, 0.0), axis=1)
        out = np.empty_like(q)
        out[:, order] = self._scale(rows)[:, None] * np.sqrt(q)
        return out

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray:
        """Model CDF of the distance for class ``row``: P(delta <= x) = F((x / scale)^2; dim, lambda)."""
        from scipy import special

        x = np.asarray(x, dtype=np.float64)
        X = np.square(np.maximum(x, 0.0) / self._scale(np.asarray(row)))
        return special.chndtr(X, self.dim[row], self.lam[row])

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "dim": int(k), "sigma": float(s), "lambda": float(l), "fit_score": float(f)}
                for c, k, s, l, f in zip(self.classes, self.dim, self.sigma, self.lam, self.fit_score)]

    def to_state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "dim": self.dim.tolist(), "sigma": self.sigma.tolist(),
                "lambda": self.lam.tolist(), "fit_score": self.fit_score.tolist(),
                "scaling": self.scaling, "score": self.score}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Ncx2GridModel":
        """The model a saved state describes, every field checked (calibrate.contract.statecheck): dim a whole number
        >= 1, sigma > 0, lambda >= 0."""
        classes = statecheck.field(state, "classes")
        size = len(classes) if isinstance(classes, list) else 0
        return cls(classes, statecheck.numbers(statecheck.field(state, "dim"), "dim", 1, size=size, integer=True),
                   statecheck.numbers(statecheck.field(state, "sigma"), "sigma", 0.0, size=size, open_low=True),
                   statecheck.numbers(statecheck.field(state, "lambda"), "lambda", 0.0, size=size),
                   statecheck.numbers(statecheck.field(state, "fit_score"), "fit_score", size=size),
                   scaling=statecheck.choice(statecheck.field(state, "scaling", "divide"), "scaling", ("divide", "multiply")),
                   score=statecheck.choice(statecheck.field(state, "score", "ncc"), "score",
                                          ("ncc", "bhattacharyya", "tail-likelihood")))  # ncx2-tail's too


class Ncx2Grid(Estimator):
    """Class-specific thresholds from a non-central chi-square fitted by grid search (the paper's Algorithm 1).

    :param dim: [low, high] degrees of freedom to try (integers, inclusive); the paper uses [15, 22] for faces.
    :param sigma: {low, high, steps, spacing: log|linear} sigma grid; omitted bounds are derived per class from its distances (default steps 100, log).
    :param score: fit score: ncc (Algorithm 1, correlation of the CDFs) or bhattacharyya (the paper's text).
    :param scaling: divide (X = (delta/sigma)^2, default) or multiply (X = (sigma delta)^2, Algorithm 1 literally).
    :param mode: exact (the grid's best point, as Algorithm 1; a cascade makes it fast) or fast (about 10x faster again; thresholds within a documented bound of exact: docs/performance.md).
    """

    model_class = Ncx2GridModel
    #: each class's grid search sees only its own distances: enrolling one gives a full fit's thresholds
    enroll_mode = "per-class"

    def __init__(self, *, dim: list[int] = [15, 22], sigma: dict | None = None,  # noqa: B006 - never mutated
                 score: Score = "ncc", scaling: Scaling = "divide", mode: Mode = "exact"):
        self._dims = check_dim(dim)
        self._sigma_spec = check_sigma(sigma)
        if score not in ("ncc", "bhattacharyya"):
            raise ParameterError(f"score must be 'ncc' or 'bhattacharyya'; got {score!r}")
        if scaling not in ("divide", "multiply"):
            raise ParameterError(f"scaling must be 'divide' or 'multiply'; got {scaling!r}")
        if mode not in ("exact", "fast"):
            raise ParameterError(f"mode must be 'exact' (Algorithm 1's grid optimum) or 'fast'; got {mode!r}")
        self.dim = list(dim)
        self.sigma = None if sigma is None else dict(sigma)
        self.score = score
        self.scaling = scaling
        self.mode = mode

    @property
    def progress_name(self) -> str:
        return f"ncx2-grid ({self.mode})"

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        from . import batch_scores  # noqa: F401 - imported (scipy.special with it) before the map may fork
        work = functools.partial(_fit_chunk, dims=self._dims, spec=self._sigma_spec, score=self.score,
                                 scaling=self.scaling, mode=self.mode)
        items = [(c, np.asarray(impostors.of(i))) for i, c in enumerate(impostors.classes)]
        # tasks of many classes each (one batched numpy computation per task); the executor reports
        # each task's classes to the fit's progress stage (Estimator.fit's) as the task completes
        size = _CHUNK[self.mode]
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        fits: list[tuple] = []
        for part in context.map(work, chunks, sizes=[len(chunk) for chunk in chunks], spread=True):
            fits.extend(part)
        dim, sigma, lam, fit_score, on_edge = (list(col) for col in zip(*fits))
        edge = [c for c, e in zip(impostors.classes, on_edge) if e]
        if edge:
            context.note(f"ncx2-grid: for {len(edge)} of {len(items)} classes (e.g. {edge[0]!r}) the best sigma lies on "
                         "the edge of the sigma grid, so the optimum may lie outside it; widen sigma: {low, high}")
        return Ncx2GridModel(impostors.classes, dim, sigma, lam, fit_score, scaling=self.scaling, score=self.score)
