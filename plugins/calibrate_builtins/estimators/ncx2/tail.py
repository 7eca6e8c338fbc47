"""Estimators ``ncx2-tail`` and ``ncx2-cv``: the paper's non-central chi-square model, fitted for the tail.

Both produce the model of ``ncx2-grid`` (per class dim, sigma, lambda; threshold
``sigma sqrt(F^-1(e; dim, lambda))``) and use its grid: every integer dim in the range, a sigma
grid per class (``search.sigma_grid``: derived from the class's distances unless given), and
lambda from Algorithm 1's rule ``max(mean(X) - dim, mean(X) / (1 + dim))``. They differ from it in
how a grid point is scored, or in where the dim range comes from.

``ncx2-tail``: the threshold lives in the lower tail, but the NCC of Algorithm 1 compares the CDFs
at every training point and so is dominated by the bulk. Here a grid point is scored by the
likelihood of the lowest ``tail`` fraction of the class's distances only, with the rest censored
(type II censoring: the k smallest are observed, the other n - k are only known to be larger)::

    log L = sum_{i <= k} log f_D(d_(i)) + (n - k) log(1 - F_D(d_(k)))
    f_D(d) = f_X((d / sigma)^2; dim, lambda) 2 d / sigma^2          (the density of the distance)

``k = max(ceil(tail n), 5)`` (at most n). Distances of exactly 0 (ties at the best score) have zero
density under any model with dim > 2; in the likelihood they are replaced by half the class's
smallest positive distance. Lambda still follows Algorithm 1's rule (it matches the model's mean
to the data's), so the fit combines the bulk's mean with the tail's shape.

``ncx2-cv``: a data-driven prior. The paper takes dim in [15, 22] from prior knowledge of faces;
for other data there is no such knowledge. Candidate dim windows (``windows``) are compared by
split-half cross-validation on the training distances: for up to ``cv_classes`` classes (a seeded
random choice), each class's distances are split at random into halves A and B; every class is
fitted on A with the window's dims (at most ``cv_dims`` evenly spaced dims of the window, and
``cv_sigma_steps`` sigmas, for speed), its thresholds at the check targets are applied to B, and
the pooled false accepts over all classes are compared with the expected count::

    score(window) = mean over check targets of | log((FA + 0.5) / (e N_B + 0.5)) |

The check targets are those of 5%, 2%, 1%, 0.5%, 0.25%, 0.1%, 0.05% with at least 10 expected held-out
false accepts (``e N_B >= 10``; if none qualify, the largest). The window with the lowest score is
then fitted on all distances of every class with the chosen ``score`` (ncc as Algorithm 1, or the
tail likelihood). Only training distances are used; the choice is recorded in the run's notes and
in models.csv. Limitation, stated plainly: the check targets are as low as the held-out data allow,
which for small galleries (tens of classes) is far above the targets of interest.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import ImpostorDistances

from .grid import Ncx2GridModel
from .search import check_class_distances, check_dim, check_sigma, fit_class, sigma_grid

Score = Literal["ncc", "tail-likelihood"]
CHECK_TARGETS = (0.05, 0.02, 0.01, 0.005, 0.0025, 0.001, 0.0005)


def tail_loglik(distances: np.ndarray, dim: int, sigmas: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """Censored log-likelihood of the lowest ``tail`` fraction for every sigma (and the lambdas used)."""
    from scipy import special, stats  # imported here: listing plugins must not load scipy.stats

    d = np.sort(np.asarray(distances, dtype=np.float64))
    n = d.size
    k = int(min(n, max(5, math.ceil(tail * n))))
    positive = d[d > 0]
    floor = 0.5 * float(positive.min()) if positive.size else 1.0
    dt = np.maximum(d[:k], floor)
    f = 1.0 / np.square(np.asarray(sigmas, dtype=np.float64))  # X = f d^2
    mean_x = f * float(np.mean(d * d))
    lam = np.maximum(mean_x - dim, mean_x / (1.0 + dim))
    X = f[:, None] * np.square(dt)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        logpdf = stats.ncx2.logpdf(X, dim, lam[:, None]) + np.log(2.0 * dt)[None, :] + np.log(f)[:, None]
        ll = np.sum(logpdf, axis=1)
        if k < n:
            surv = special.chndtr(f * dt[-1] ** 2, dim, lam)
            ll = ll + (n - k) * np.log1p(-np.minimum(surv, 1.0))
    return np.where(np.isfinite(ll), ll, -np.inf), lam


def fit_class_tail(distances: np.ndarray, dims, sigmas: np.ndarray, tail: float) -> tuple[int, float, float, float]:
    """The grid point with the highest censored tail likelihood: ``(dim, sigma, lambda, log-likelihood)``."""
    d = check_class_distances(distances)
    best = (-np.inf, 0, 0.0, 0.0)
    for dim in dims:
        ll, lam = tail_loglik(d, int(dim), sigmas, tail)
        j = int(np.argmax(ll))
        if ll[j] > best[0]:
            best = (float(ll[j]), int(dim), float(sigmas[j]), float(lam[j]))
    if not np.isfinite(best[0]):
        raise DataError("no grid point gives a finite tail likelihood; widen sigma: {low, high}")
    score, dim, sigma, lam = best
    return dim, sigma, lam, score


def _fit_one(item: tuple[str, np.ndarray], dims: tuple[int, ...], spec: dict[str, Any], score: str, tail: float,
             who: str) -> tuple[int, float, float, float]:
    """One class (module level so that process executors can pickle it)."""
    name, d = item
    try:
        d = check_class_distances(d)
        grid = sigma_grid(d, spec, (min(dims), max(dims)))
        if score == "ncc":
            return fit_class(d, dims, grid, "ncc")
        return fit_class_tail(d, dims, grid, tail)
    except DataError as exc:
        raise DataError(f"estimator {who}, class {name!r}: {exc}") from None


def _window_dims(window: tuple[int, int], at_most: int) -> tuple[int, ...]:
    lo, hi = window
    if hi - lo + 1 <= at_most:
        return tuple(range(lo, hi + 1))
    return tuple(sorted({int(round(v)) for v in np.linspace(lo, hi, at_most)}))


def _fit_all(items, dims, spec, score, tail, who, context: RunContext, description: str | None = None) -> list[tuple]:
    """Fits per class through the executor; progress goes to the fit's stage (counting classes), or to a
    stage of its own when ``description`` is given (fits that are not the final ones)."""
    work = functools.partial(_fit_one, dims=tuple(dims), spec=spec, score=score, tail=tail, who=who)
    return list(context.map(work, items, description=description, unit="classes"))


def _model(classes, fits, score: str) -> Ncx2GridModel:
    dim, sigma, lam, fit_score = (list(col) for col in zip(*fits))
    return Ncx2GridModel(classes, dim, sigma, lam, fit_score, scaling="divide", score=score)


class Ncx2Tail(Estimator):
    """Non-central chi-square per class (the paper's model and grid), scored by the censored likelihood of the lowest distances.

    :param dim: [low, high] degrees of freedom to try (integers, inclusive).
    :param sigma: {low, high, steps, spacing} sigma grid as in ncx2-grid (bounds derived per class when omitted).
    :param tail: share of each class's lowest distances whose likelihood scores a grid point (the rest are censored).
    """

    model_class = Ncx2GridModel

    def __init__(self, *, dim: list[int] = [15, 22], sigma: dict | None = None, tail: float = 0.2):  # noqa: B006
        self._dims = check_dim(dim)
        self._spec = check_sigma(sigma)
        if not 0.0 < tail <= 1.0:
            raise ParameterError(f"tail must be in (0, 1], the share of lowest distances used; got {tail}")
        self.dim, self.sigma, self.tail = list(dim), None if sigma is None else dict(sigma), tail

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        items = [(c, np.asarray(impostors.of(i))) for i, c in enumerate(impostors.classes)]
        dims = tuple(range(self._dims[0], self._dims[1] + 1))
        fits = _fit_all(items, dims, self._spec, "tail-likelihood", self.tail, "ncx2-tail", context)
        return _model(impostors.classes, fits, "tail-likelihood")


class Ncx2Cv(Estimator):
    """Non-central chi-square per class with the dim range chosen by split-half cross-validation on the training distances.

    :param windows: candidate [low, high] dim ranges.
    :param score: ncc (Algorithm 1) or tail-likelihood (as ncx2-tail) for the fits.
    :param tail: tail-likelihood only: share of lowest distances used.
    :param sigma_steps: sigma grid steps of the final fit (bounds derived per class).
    :param cv_dims: at most this many dims of a window are tried during cross-validation (and in the final fit).
    :param cv_sigma_steps: sigma grid steps during cross-validation.
    :param cv_classes: at most this many (randomly chosen, seeded) classes take part in the cross-validation.
    """

    model_class = Ncx2GridModel

    def __init__(self, *, windows: list[list[int]] = [[1, 2], [3, 5], [6, 10], [11, 20], [21, 40], [41, 80]],  # noqa: B006
                 score: Score = "ncc", tail: float = 0.2, sigma_steps: int = 40, cv_dims: int = 5,
                 cv_sigma_steps: int = 25, cv_classes: int = 100):
        if not isinstance(windows, (list, tuple)) or not windows:
            raise ParameterError("windows must be a non-empty list of [low, high] dim ranges")
        self._windows = [check_dim(w) for w in windows]
        if score not in ("ncc", "tail-likelihood"):
            raise ParameterError(f"score must be ncc or tail-likelihood; got {score!r}")
        if not 0.0 < tail <= 1.0:
            raise ParameterError(f"tail must be in (0, 1]; got {tail}")
        for name, value, low in (("sigma_steps", sigma_steps, 2), ("cv_dims", cv_dims, 1),
                                 ("cv_sigma_steps", cv_sigma_steps, 2), ("cv_classes", cv_classes, 2)):
            if value < low:
                raise ParameterError(f"{name} must be at least {low}; got {value}")
        self.windows = [list(w) for w in windows]
        self.score, self.tail, self.sigma_steps = score, tail, sigma_steps
        self.cv_dims, self.cv_sigma_steps, self.cv_classes = cv_dims, cv_sigma_steps, cv_classes

    def cross_validate(self, impostors: ImpostorDistances, context: RunContext) -> tuple[int, list[float], list[float]]:
        """Index of the chosen window, every window's score, and the check targets."""
        rng = np.random.default_rng([context.seed, 5152])
        chosen = np.sort(rng.permutation(len(impostors))[:self.cv_classes])
        halves_a, halves_b = [], []
        for i in chosen:
            d = np.asarray(impostors.of(int(i)))
            perm = rng.permutation(d.size)
            a, b = d[perm[: d.size // 2]], d[perm[d.size // 2:]]
            if a.size >= 3 and np.unique(a).size >= 2 and np.any(a > 0):
                halves_a.append((impostors.classes[int(i)], a))
                halves_b.append(b)
        if not halves_a:
            raise DataError("estimator ncx2-cv: no class has enough distinct training distances (at least 6) to cross-validate")
        n_b = sum(b.size for b in halves_b)
        targets = [e for e in CHECK_TARGETS if e * n_b >= 10] or [CHECK_TARGETS[0]]
        spec = {"low": None, "high": None, "steps": self.cv_sigma_steps, "spacing": "log"}
        scores = []
        for j, window in enumerate(self._windows, start=1):
            fits = _fit_all(halves_a, _window_dims(window, self.cv_dims), spec, self.score, self.tail, "ncx2-cv", context,
                            f"ncx2-cv: cross-validating dim window {j}/{len(self._windows)} {list(window)} "
                            f"on {len(halves_a)} half classes")
            model = _model([c for c, _ in halves_a], fits, self.score)
            tau = model.thresholds(targets).values
            fa = np.array([sum(int(np.sum(b <= tau[j, k])) for j, b in enumerate(halves_b)) for k in range(len(targets))])
            expected = np.asarray(targets) * n_b
            scores.append(float(np.mean(np.abs(np.log((fa + 0.5) / (expected + 0.5))))))
        return int(np.argmin(scores)), scores, targets

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        best, scores, targets = self.cross_validate(impostors, context)
        window = self._windows[best]
        context.note(f"ncx2-cv: chose dim window {list(window)} by split-half cross-validation at target(s) "
                     f"{', '.join(f'{t:g}' for t in targets)} (scores: "
                     f"{', '.join(f'{list(w)}: {s:.3f}' for w, s in zip(self._windows, scores))})")
        items = [(c, np.asarray(impostors.of(i))) for i, c in enumerate(impostors.classes)]
        spec = {"low": None, "high": None, "steps": self.sigma_steps, "spacing": "log"}
        fits = _fit_all(items, _window_dims(window, self.cv_dims), spec, self.score, self.tail, "ncx2-cv", context)
        return _model(impostors.classes, fits, self.score)
