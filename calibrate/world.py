"""The reference world of the predicted FPR intervals: a generative model of a gallery's impostor
distances, fitted to the training distances, in which the true FPR of any threshold is known.

It is auto's model (see auto.py and znorm.py) made into a distribution one can draw from:

* class c's distance is ``d = exp(m_c + s_c Z) - offset`` (auto's working scale, ``log(d + offset)``),
  with m_c, s_c the class's robust location and scale (median, IQR / 1.349);
* Z follows one shape G shared by all classes: the pooled standardised training scores (auto's,
  with its jackknife), continuous by linear interpolation between order statistics, whose lower
  tail below the ``2 sqrt(N)``-th lowest score (at least 30 of them) is a generalised Pareto fit
  (probability-weighted moments, the shape clipped to [-1, 0.5]), so that the world has a
  tail beyond the smallest training distance, where the thresholds at low targets lie.

Why this world (and not each estimator's own model): a percentile bootstrap is honest about an
estimator's *bias* only if the world is not the estimator's own assumption. auto's model is the
one that kept its promise across our datasets (docs/estimators.md), so an estimator that
misreads the tail (the non-central chi-square, a per-class normal) shows its bias in this world
as it does on real data. For auto itself the world repeats its assumptions, so its interval holds
the sampling error only; docs/estimators.md measures how that covers on real data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DataError
from .gpd import TailFit, fit_lower_tail
from .standardise import from_working, standardise_classes, to_working
from .types import ImpostorDistances

#: the reference model's settings: auto's (the ``auto`` estimator is configured from these)
REFERENCE_MODEL = {"family": "lognormal", "robust": True, "jackknife": 0.5}
_FAMILY = REFERENCE_MODEL["family"]


@dataclass(frozen=True)
class World:
    """Per class location and scale on the working scale ``log(d + offset)``, and the shared shape G."""

    classes: tuple[str, ...]
    counts: np.ndarray
    loc: np.ndarray
    scale: np.ndarray
    offset: float
    sorted_z: np.ndarray
    tail: TailFit | None
    #: which uniform draw each distance uses (``values`` order): the two entries of one pair of
    #: enrolled sets in a symmetric enrolled-vs-enrolled matrix share one, so the world's distances
    #: are as dependent as the data's (None: every distance its own draw)
    slots: np.ndarray | None = None

    # ---- the shape G -----------------------------------------------------------------------

    def shape_quantile(self, u: np.ndarray) -> np.ndarray:
        """G^{-1}(u): the GPD below its threshold's probability, the interpolated pooled scores above."""
        u = np.asarray(u, dtype=np.float64)
        z = self.sorted_z
        body = np.interp(u * z.size, np.arange(1, z.size + 1, dtype=np.float64), z)
        if self.tail is None:
            return body
        low = u < self.tail.p_u
        out = np.maximum(body, self.tail.u)
        out[low] = self.tail.quantile(np.maximum(u[low], 1e-300))
        return out

    def shape_cdf(self, z: np.ndarray) -> np.ndarray:
        """G(z), consistent with :meth:`shape_quantile`."""
        z = np.asarray(z, dtype=np.float64)
        s = self.sorted_z
        body = np.interp(z, s, np.arange(1, s.size + 1, dtype=np.float64) / s.size, left=0.0, right=1.0)
        if self.tail is None:
            return body
        return np.where(z < self.tail.u, self.tail.cdf(z), np.maximum(body, self.tail.p_u))

    # ---- drawing and judging ---------------------------------------------------------------

    def draw(self, rng: np.random.Generator) -> ImpostorDistances:
        """A gallery of the same classes and sizes, every distance drawn afresh from the world."""
        n = int(self.counts.sum())
        u = rng.random(n) if self.slots is None else rng.random(int(self.slots.max()) + 1)[self.slots]
        z = self.shape_quantile(u)
        y = np.repeat(self.loc, self.counts) + np.repeat(self.scale, self.counts) * z
        d = from_working(y, _FAMILY, self.offset)
        return ImpostorDistances(self.classes, d, np.concatenate([[0], np.cumsum(self.counts)]))

    def class_fpr(self, thresholds: np.ndarray) -> np.ndarray:
        """The true FPR of each class's threshold, ``thresholds`` of shape (classes, targets)."""
        tau = np.asarray(thresholds, dtype=np.float64)
        with np.errstate(divide="ignore"):
            y = to_working(np.maximum(tau, 0.0), _FAMILY, self.offset)
        z = (y - self.loc[:, None]) / self.scale[:, None]
        return self.shape_cdf(z)


def pair_slots(values: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """For a square training matrix whose impostor entries are symmetric (enrolled sets compared with
    each other, each pair seen from both ends), one slot per unordered pair, in the order
    ``ImpostorDistances.from_matrix`` lists the entries (column by column); None otherwise."""
    values, mask = np.asarray(values), np.asarray(mask, bool)
    if values.ndim != 2 or values.shape[0] != values.shape[1] or not np.array_equal(mask, mask.T):
        return None
    if not np.allclose(np.where(mask, values, 0.0), np.where(mask, values, 0.0).T, rtol=1e-9, atol=0.0):
        return None
    n = values.shape[0]
    rows, cols = np.nonzero(mask.T)  # (column, row) pairs in column-major order of the matrix
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    _, slot = np.unique(lo * n + hi, return_inverse=True)
    return slot.astype(np.int64)


def build_world(impostors: ImpostorDistances, slots: np.ndarray | None = None) -> World:
    """The world fitted to a gallery's training impostor distances (see the module's docstring);
    ``slots``: :func:`pair_slots` of the training matrix, when its entries come in symmetric pairs."""
    counts = impostors.counts()
    if np.any(counts < 3):
        small = impostors.classes[int(np.argmax(counts < 3))]
        raise DataError(f"predicted FPR interval: class {small!r} has {int(counts.min())} training distance(s); at least "
                        "3 per class are needed to estimate its location and scale")
    offset, locs, scales, zs = standardise_classes(impostors, _FAMILY, REFERENCE_MODEL["robust"], REFERENCE_MODEL["jackknife"],
                                                   "predicted FPR interval")
    sorted_z = np.sort(np.concatenate(zs))
    try:
        tail, _ = fit_lower_tail(sorted_z, min_exceedances=30)
    except DataError:
        tail = None  # too few or tied pooled scores: the interpolated scores throughout
    if slots is not None and np.asarray(slots).shape != impostors.values.shape:
        raise DataError("predicted FPR interval: the pair slots do not match the training distances")
    return World(tuple(impostors.classes), counts.astype(np.int64), np.asarray(locs), np.asarray(scales), offset,
                 sorted_z, tail, slots)
