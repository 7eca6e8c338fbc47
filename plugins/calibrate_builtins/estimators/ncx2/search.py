"""The grid search of ``ncx2-grid`` (the paper's Algorithm 1): parameter checks, sigma grids, the fits.

:func:`fit_class` is Algorithm 1 for one class: the straightforward implementation and the semantic
reference of the batched cascade (batch.py). ``_fit_chunk`` fits a chunk of classes through that cascade,
or through :func:`fit_class` (heavily tied cohorts, classes the cascade's self-check hands back); the
estimator (grid.py, which describes the model, the scaling and the modes) maps it over the run's executor.

Fit (Algorithm 1). For every integer ``dim`` in [dim_low, dim_high] (ascending) and every sigma
of the grid (ascending):

* ``X_i = (delta_i / sigma)^2``;
* ``lambda = max(mean(X) - dim, mean(X) / (1 + dim))`` (Li et al.'s estimator with beta = 1/(1+dim),
  applied to the scaled squared distances, as the issue fixes it; the paper writes the mean of
  the raw distances);
* the empirical CDF ``phi_ref(i) = #{j : delta_j <= delta_i}`` (ties count fully) and the model
  CDF ``phi(i) = F(X_i; dim, lambda)`` are compared at every training point;
* the triple with the best fit score is kept; ties go to the first in loop order (dim
  ascending, then sigma ascending).

Fit scores (``score``):

* ``ncc`` (default, Algorithm 1): the Pearson correlation of the two vectors,
  ``sum(a_i b_i) / (|a| |b|)`` with ``a = phi_ref - mean(phi_ref)`` and ``b = phi - mean(phi)``.
  Higher is better, at most 1.
* ``bhattacharyya`` (the paper's text): each sampled CDF vector is divided by its sum and treated
  as a discrete distribution p, q over the training points; the score is the Bhattacharyya
  coefficient ``sum_i sqrt(p_i q_i)`` (in [0, 1], higher is better; the Bhattacharyya distance is
  ``-ln`` of it, so maximising one minimises the other).

A grid point whose model CDF is constant over the training points (e.g. all 0 or all 1 because
sigma is far off) cannot be scored and never wins; a class where no grid point can be scored is
a DataError that names the class.

Default sigma range (``sigma.low`` / ``sigma.high`` omitted). Derived from the class's own training
distances only (and the dim range). With ``m = mean(delta^2)`` and ``v = var(delta^2)``, the
method-of-moments scale for ``dim = k`` (divide units) solves ``mean(X) = k + lambda``,
``var(X) = 2k + 4 lambda``::

    sigma_k^2 = (m - sqrt(m^2 - k v / 2)) / k      if m^2 > k v / 2
    sigma_k^2 = m / k                              otherwise (data as dispersed as a central chi^2)

In divide units the range is::

    low  = min_k sigma_k / 2             (k over the integers in the dim range)
    high = 2 sqrt(m / dim_low)           (mean(X) = dim_low / 4)

so that mean(X) = m / sigma^2 spans ``[dim_low / 4, max(4 dim_high, 4 m / min_k sigma_k^2)]``. For
widely dispersed data (sigma_k^2 = m / k) this is ``[dim_low / 4, 4 dim_high]``; for concentrated data
(real impostor distances: mean(X) in the hundreds) the lower end follows the spread, where a
range fixed by dim alone would miss the fit entirely. The upper end (near-central models) stays,
because with few samples the best NCC fit is often nearly central even when the data were drawn
with a large lambda. In multiply mode the bounds are the reciprocals. When a class's best sigma
lies on the edge of its grid the run records a note.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, Sequence

import numpy as np

from calibrate.errors import DataError, ParameterError

Score = Literal["ncc", "bhattacharyya"]
Mode = Literal["exact", "fast"]
Scaling = Literal["divide", "multiply"]

SIGMA_KEYS = ("low", "high", "steps", "spacing")
SIGMA_DEFAULTS: dict[str, Any] = {"low": None, "high": None, "steps": 100, "spacing": "log"}

#: elements of one (sigmas x points) block; bounds the memory of a fit (a few arrays of this size)
_BLOCK = 1 << 21


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: bounds of the grid a recipe may ask for (far beyond any use: the paper's faces use dims 15-22, 100 steps)
MAX_DIM, MAX_SIGMA_STEPS = 10_000, 100_000


def check_dim(dim: Any) -> tuple[int, int]:
    """``[low, high]`` as two integers with 1 <= low <= high, or a ParameterError."""
    if not isinstance(dim, (list, tuple)) or len(dim) != 2:
        raise ParameterError(f"dim must be a list of two integers [low, high] (inclusive), e.g. [15, 22]; got {dim!r}")
    if not all(_is_int(v) for v in dim):
        raise ParameterError(f"dim must hold whole numbers (degrees of freedom), e.g. [15, 22]; got {dim!r}")
    low, high = int(dim[0]), int(dim[1])
    if low < 1:
        raise ParameterError(f"dim low must be at least 1 degree of freedom; got {dim!r}")
    if low > high:
        raise ParameterError(f"dim low ({low}) is greater than dim high ({high}); give [low, high]")
    if high > MAX_DIM:  # a grid of that many dims cannot be allocated (or takes forever)
        raise ParameterError(f"dim high must be at most {MAX_DIM} degrees of freedom; got {dim!r}")
    return low, high


def check_sigma(sigma: Any) -> dict[str, Any]:
    """The ``sigma`` mapping with defaults filled in, or a ParameterError."""
    if sigma is None:
        return dict(SIGMA_DEFAULTS)
    if not isinstance(sigma, dict):
        raise ParameterError(f"sigma must be a mapping {{low, high, steps, spacing}} or omitted; got {sigma!r}")
    unknown = sorted(str(k) for k in sigma if k not in SIGMA_KEYS)
    if unknown:
        raise ParameterError(f"sigma: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(SIGMA_KEYS)}")
    spec = {**SIGMA_DEFAULTS, **sigma}
    for key in ("low", "high"):
        value = spec[key]
        if value is not None and not (_is_number(value) and math.isfinite(value) and value > 0):
            raise ParameterError(f"sigma.{key} must be a positive number (or omitted to derive it from the data); got {value!r}")
        spec[key] = None if value is None else float(value)
    if spec["low"] is not None and spec["high"] is not None and spec["low"] > spec["high"]:
        raise ParameterError(f"sigma.low ({spec['low']:g}) is greater than sigma.high ({spec['high']:g})")
    if not _is_int(spec["steps"]) or spec["steps"] < 1:
        raise ParameterError(f"sigma.steps must be a whole number >= 1; got {spec['steps']!r}")
    if spec["steps"] > MAX_SIGMA_STEPS:
        raise ParameterError(f"sigma.steps must be at most {MAX_SIGMA_STEPS:,}; got {spec['steps']!r}")
    spec["steps"] = int(spec["steps"])
    if spec["spacing"] not in ("log", "linear"):
        raise ParameterError(f"sigma.spacing must be 'log' or 'linear'; got {spec['spacing']!r}")
    return spec


def moment_sigmas(distances: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """Method-of-moments scale (divide units) for each dim; see the module docstring."""
    d2 = np.square(np.asarray(distances, dtype=np.float64))
    m, v = float(d2.mean()), float(d2.var())
    k = np.asarray(dims, dtype=np.float64)
    disc = m * m - k * v / 2.0
    # m - sqrt(disc) written as (k v / 2) / (m + sqrt(disc)) to avoid cancellation when v is small
    moment = (v / 2.0) / (m + np.sqrt(np.maximum(disc, 0.0)))
    return np.sqrt(np.where(disc > 0, moment, m / k))


def sigma_grid(distances: np.ndarray, spec: dict[str, Any] | None, dims: Sequence[int] = (15, 22),
               scaling: Scaling = "divide") -> np.ndarray:
    """The ascending sigma grid for one class.

    :param distances: that class's training impostor distances (at least one positive).
    :param spec: the ``sigma`` parameter (checked with :func:`check_sigma`; None for defaults).
    :param dims: ``(dim_low, dim_high)``; used only for bounds derived from the data.
    :param scaling: the mode whose units the bounds are in.
    """
    spec = check_sigma(spec)
    low, high = spec["low"], spec["high"]
    if low is None or high is None:
        moments = moment_sigmas(distances, range(int(dims[0]), int(dims[1]) + 1))
        m = float(np.mean(np.square(np.asarray(distances, dtype=np.float64))))
        lo_div, hi_div = moments.min() / 2.0, 2.0 * math.sqrt(m / int(dims[0]))
        lo_auto, hi_auto = (lo_div, hi_div) if scaling == "divide" else (1.0 / hi_div, 1.0 / lo_div)
        low = lo_auto if low is None else low
        high = hi_auto if high is None else high
        if low > high:
            raise DataError(f"sigma range [{low:.6g}, {high:.6g}] is empty: the bound derived from the training "
                            "distances falls on the wrong side of the one given; give both sigma.low and sigma.high")
    steps = spec["steps"]
    if spec["spacing"] == "log":
        return np.asarray([math.sqrt(low * high)]) if steps == 1 else np.geomspace(low, high, steps)
    return np.asarray([(low + high) / 2.0]) if steps == 1 else np.linspace(low, high, steps)


def batch_grids(mean_d2: np.ndarray, var_d2: np.ndarray, spec: dict[str, Any], dims: Sequence[int],
                scaling: Scaling) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sigma_grid` for many classes at once from each class's mean and variance of delta^2.

    Returns (grids (C, steps), ok (C,)); rows with ``ok`` False have an empty range (call
    :func:`sigma_grid` on them for the error message).
    """
    m = np.asarray(mean_d2, dtype=np.float64)
    v = np.asarray(var_d2, dtype=np.float64)
    C = m.size
    low, high = spec["low"], spec["high"]
    lo = np.full(C, np.nan if low is None else low)
    hi = np.full(C, np.nan if high is None else high)
    if low is None or high is None:
        k = np.arange(int(dims[0]), int(dims[1]) + 1, dtype=np.float64)[None, :]
        disc = m[:, None] ** 2 - k * v[:, None] / 2.0
        moment = (v[:, None] / 2.0) / (m[:, None] + np.sqrt(np.maximum(disc, 0.0)))
        moments = np.sqrt(np.where(disc > 0, moment, m[:, None] / k))
        lo_div, hi_div = moments.min(axis=1) / 2.0, 2.0 * np.sqrt(m / int(dims[0]))
        lo_auto, hi_auto = (lo_div, hi_div) if scaling == "divide" else (1.0 / hi_div, 1.0 / lo_div)
        lo = lo_auto if low is None else lo
        hi = hi_auto if high is None else hi
    ok = lo <= hi
    lo, hi = np.where(ok, lo, 1.0), np.where(ok, hi, 1.0)
    steps = spec["steps"]
    if spec["spacing"] == "log":
        grids = np.sqrt(lo * hi)[:, None] if steps == 1 else np.geomspace(lo, hi, steps, axis=-1)
    else:
        grids = ((lo + hi) / 2.0)[:, None] if steps == 1 else np.linspace(lo, hi, steps, axis=-1)
    return grids, ok


#: the positive distances whose squares and the moments of those (fourth powers) stay normal floats
SQUARE_RANGE = (1e-75, 1e75)


def check_class_distances(distances: np.ndarray) -> np.ndarray:
    d = np.asarray(distances, dtype=np.float64).ravel()
    if d.size == 0 or not np.any(d > 0):
        raise DataError(f"all {d.size} training distances are zero; a scale cannot be fitted to them")
    if d.min() == d.max():
        raise DataError(f"all {d.size} training distances are equal ({d[0]:.6g}); the fit needs at least 2 distinct distances")
    positive = d[d > 0]
    low, high = float(positive.min()), float(d.max())
    if low < SQUARE_RANGE[0] or high > SQUARE_RANGE[1]:
        raise DataError(f"training distances from {low:.3g} to {high:.3g} lie outside [{SQUARE_RANGE[0]:.0e}, "
                        f"{SQUARE_RANGE[1]:.0e}], where the non-central chi-square fit works on their squares and fourth powers without "
                        "floating-point under- or overflow; multiply the scores by a constant before calibrating, "
                        "or use estimator auto, which takes any scale")
    return d


def _scores(phi_ref: np.ndarray, phi: np.ndarray, score: Score) -> np.ndarray:
    """Fit score of each row of ``phi`` against ``phi_ref`` (-inf where undefined)."""
    if score == "ncc":
        a = phi_ref - phi_ref.mean()
        b = phi - phi.mean(axis=1, keepdims=True)
        num = b @ a
        den = np.linalg.norm(a) * np.linalg.norm(b, axis=1)
    else:
        p = phi_ref / phi_ref.sum()
        num = np.sqrt(phi) @ np.sqrt(p)
        den = np.sqrt(phi.sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    return np.where((den > 0) & np.isfinite(out), out, -np.inf)


def fit_class(distances: np.ndarray, dims: Sequence[int], sigmas: np.ndarray, score: Score = "ncc",
              scaling: Scaling = "divide") -> tuple[int, float, float, float]:
    """Algorithm 1 for one class: the best ``(dim, sigma, lambda, fit_score)``.

    :param distances: training impostor distances (>= 2 distinct values, not all zero).
    :param dims: the degrees of freedom to try, in loop order (e.g. ``range(15, 23)``).
    :param sigmas: the sigma values to try, in loop order (positive).
    :param score: ``ncc`` or ``bhattacharyya`` (see the module docstring).
    :param scaling: ``divide`` (X = (delta/sigma)^2) or ``multiply`` (X = (sigma delta)^2).
    """
    from scipy import special  # imported where it computes: listing plugins must not load scipy

    d = check_class_distances(distances)
    sigmas = np.asarray(sigmas, dtype=np.float64).ravel()
    if sigmas.size == 0 or not np.all(np.isfinite(sigmas) & (sigmas > 0)):
        raise DataError("the sigma grid must be non-empty, finite and positive")
    phi_ref = np.searchsorted(np.sort(d), d, side="right").astype(np.float64)
    d2 = d * d
    # Heavily tied cohorts (integer matcher scores; they all come here, in either mode) have few distinct
    # distances: the model CDF, the cost of a fit, is computed once per distinct value and spread to its
    # copies -- the same numbers, bit for bit, at a fraction of the cost.
    distinct, inverse = np.unique(d2, return_inverse=True)
    tied = distinct.size < 0.75 * d2.size
    factors = 1.0 / sigmas**2 if scaling == "divide" else sigmas**2  # X = factor * delta^2
    block = max(1, _BLOCK // d.size)
    best = (-np.inf, 0, 0.0, 0.0)
    for dim in dims:
        for start in range(0, sigmas.size, block):
            f = factors[start:start + block]
            X = f[:, None] * d2[None, :]
            mean_x = X.mean(axis=1)
            lam = np.maximum(mean_x - dim, mean_x / (1.0 + dim))
            if tied:
                # C order, as the full array is: the scores' sums then run in the same order
                cdf = np.ascontiguousarray(special.chndtr(f[:, None] * distinct[None, :], dim, lam[:, None])[:, inverse])
            else:
                cdf = special.chndtr(X, dim, lam[:, None])
            s = _scores(phi_ref, cdf, score)
            j = int(np.argmax(s))  # first maximum: loop order breaks ties
            if s[j] > best[0]:
                best = (float(s[j]), int(dim), float(sigmas[start + j]), float(lam[j]))
    if not np.isfinite(best[0]):
        raise DataError(f"no grid point gives a usable model CDF (sigma {sigmas.min():.6g}..{sigmas.max():.6g} puts every "
                        "training distance where the model CDF is flat); widen or move sigma: {low, high}")
    fit_score, dim, sigma, lam = best
    return dim, sigma, lam, fit_score


def _fit_item(item: tuple[str, np.ndarray], dims: tuple[int, int], spec: dict[str, Any], score: Score,
              scaling: Scaling) -> tuple[int, float, float, float, bool]:
    """One class, named in any error; module-level so that process executors can pickle it."""
    name, distances = item
    try:
        d = check_class_distances(distances)
        grid = sigma_grid(d, spec, dims, scaling)
        dim, sigma, lam, fit_score = fit_class(d, range(dims[0], dims[1] + 1), grid, score, scaling)
    except DataError as exc:
        raise DataError(f"estimator ncx2-grid, class {name!r}: {exc}") from None
    on_edge = grid.size > 1 and sigma in (grid[0], grid[-1])
    return dim, sigma, lam, fit_score, on_edge


#: classes per numpy batch inside a task
_SUB = 64


#: classes with fewer distinct distances than this share of their count skip the cascade
TIE_DISTINCT_FRACTION = 0.95
#: ties are counted on a systematic sample of at most this many distances, so that the check
#: does not make fast mode's cost per class grow with the cohort (a sample only shows more
#: distinct values than the whole, and heavy ties stay visible in it)
TIE_SAMPLE = 4096


def heavily_tied(distances: np.ndarray) -> bool:
    d = np.asarray(distances)
    if d.size > TIE_SAMPLE:
        d = d[:: d.size // TIE_SAMPLE][:TIE_SAMPLE]
    return np.unique(d).size < TIE_DISTINCT_FRACTION * d.size


def _fit_chunk(chunk: list[tuple[str, np.ndarray]], dims: tuple[int, int], spec: dict[str, Any], score: Score,
               scaling: Scaling, mode: Mode) -> list[tuple[int, float, float, float, bool]]:
    """Many classes through the batched cascade (:mod:`calibrate_builtins.estimators.ncx2.batch`); module-level
    so that process executors can pickle it. Results in the order of ``chunk``."""
    from . import batch, batch_scores

    names, ds = [], []
    for name, distances in chunk:
        try:
            ds.append(check_class_distances(distances))
        except DataError as exc:
            raise DataError(f"estimator ncx2-grid, class {name!r}: {exc}") from None
        names.append(name)
    loop_dims = list(range(dims[0], dims[1] + 1))
    out: list[Any] = [None] * len(ds)
    # The cascade's compressed scores assume (nearly) distinct distances; on heavily tied cohorts
    # (integer fingerprint scores: 3.5% distinct) it missed Algorithm 1's grid point for 6 of 104
    # BSSR1 finger-left classes, so those go to fit_class itself, in either mode.
    tied = np.array([heavily_tied(d) for d in ds], dtype=bool)
    for i in np.flatnonzero(tied):
        out[i] = _fit_item((names[i], ds[i]), dims, spec, score, scaling)
    sizes = np.array([d.size for d in ds])
    order = np.argsort(sizes, kind="stable")  # similar sizes share a batch: little padding
    order = order[~tied[order]]
    # fast mode on small cohorts: the exact cascade is cheap there, and the fast search's error is not
    all_exact = mode == "exact" or dims[0] < batch.FAST_MIN_DIM
    exact_upto = len(order) if all_exact else int(np.searchsorted(sizes[order], batch.FAST_EXACT_UPTO, side="right"))
    batches = [order[s0:min(s0 + _SUB, exact_upto)] for s0 in range(0, exact_upto, _SUB)]
    batches += [order[s0:s0 + _SUB] for s0 in range(exact_upto, len(order), _SUB)]
    for idx in batches:
        sub = [ds[i] for i in idx]
        exact = all_exact or sizes[idx].max() <= batch.FAST_EXACT_UPTO
        if exact:
            prep = batch_scores.ClassChunk(sub, None, loop_dims, scaling, batch.EXACT_M1, batch.EXACT_M)
        else:
            prep = batch_scores.ClassChunk(sub, None, loop_dims, scaling, batch.FAST_M, cap=batch.FAST_MAX_POINTS)
        grids, ok = batch_grids(prep.mean_d2, prep.var_d2, spec, dims, scaling)
        if not ok.all():
            bad = int(idx[np.flatnonzero(~ok)[0]])
            _fit_item((names[bad], ds[bad]), dims, spec, score, scaling)  # raises the named DataError
        prep.set_grids(grids, loop_dims)
        if exact:
            winner, best, _ = batch.exact_batch(prep, score)
        else:
            winner, best = batch.fast_batch(prep, score)
        S = grids.shape[1]
        for j, i in enumerate(idx):
            g = int(winner[j])
            if g < 0:  # the cascade's self-check (or an unusable class) hands it to Algorithm 1 itself
                out[i] = _fit_item((names[i], ds[i]), dims, spec, score, scaling)
                continue
            di, si = divmod(g, S)
            sigma = float(grids[j, si])
            out[i] = (loop_dims[di], sigma, float(prep.lam[j, g]), float(best[j]),
                      S > 1 and sigma in (grids[j, 0], grids[j, -1]))
    return out
