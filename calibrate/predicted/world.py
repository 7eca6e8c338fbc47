"""The reference world of the predicted FPR intervals: a generative model of a gallery's impostor
distances, fitted to the training distances, in which the true FPR of any threshold is known.

It is auto's model (see the ``auto`` and ``znorm`` estimators) made into a distribution one can
draw from:

* class c's distance is ``d = exp(m_c + s_c Z) - offset`` (auto's working scale, ``log(d + offset)``),
  with m_c, s_c the class's robust location and scale (median, IQR / 1.349);
* Z follows one shape G shared by all classes: the pooled standardised training scores (auto's,
  with its jackknife), continuous by linear interpolation between order statistics, with a
  generalised Pareto lower tail below a threshold, so that the world has a tail beyond the
  smallest training distance, where the thresholds at low targets lie.

The world checks its own fit before it is used (:func:`build_world`). Its tail is tested against
the pooled scores it was fitted to: at log-spaced ranks k from 10 up to the tail's threshold, the
world's G at the k-th lowest score must lie in the 99.9% binomial band of k / N (G at the k-th of
N draws is Beta(k, N - k + 1) when the world is right). Tail models are tried in order, and the
first that passes is kept (``World.tail_model``):

1. ``gpd-pwm``: a GPD fitted by probability-weighted moments to the lowest ``2 sqrt(N)`` scores
   (at least 30), its shape clipped to [-1, 0.5] (auto's own tail);
2. ``gpd-mle``: the same exceedances fitted by maximum likelihood with the shape free in
   [-5, 0.9], so that a short, bounded tail (a matcher whose scores saturate) stays short;
3. ``empirical``: the interpolated scores themselves down to the 10th lowest, where the data
   have support, and the likelihood GPD only below it.

When none passes, the last is kept and the failure is recorded (``World.tail_check``); the
prediction then gives no interval where its thresholds lie in that tail (calibrate.predicted.interval).

Why this world (and not each estimator's own model): a percentile bootstrap is honest about an
estimator's *bias* only if the world is not the estimator's own assumption. auto's model is the
one that kept its promise across our datasets (docs/estimators.md), so an estimator that
misreads the tail (the non-central chi-square, a per-class normal) shows its bias in this world
as it does on real data. For auto itself the world repeats its assumptions, so its interval holds
the sampling error only; docs/prediction-coverage.md measures how that covers on real data.

Here: the :class:`World` (its shape G, its draws, the true FPR of any threshold in it), :func:`build_world`, and
the world judged against the training distances at an estimator's thresholds (:func:`training_check`,
:func:`count_agrees`, :func:`tail_reaches`). The tail models and the tail check are calibrate.predicted.world_tail;
what a draw gives an estimator (:class:`Galleries`, :class:`DrawPlan`) is calibrate.predicted.simulated_galleries.
Every name this module had before that split is importable from here still (a public module: plugins import them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from calibrate.errors import DataError
from calibrate.statistics.gpd import TailFit
from calibrate.statistics.standardise import (ANCHOR_MAX_RANK, anchored_classes, anchored_sorted, pooled_sorted, standardise_classes,
                          to_working)
from calibrate.contract.types import ImpostorDistances
from calibrate.predicted.simulated_galleries import DrawPlan, Galleries, fill_between, sorted_unique  # noqa: F401  (re-exported: public API)
from calibrate.predicted.world_tail import (CHECK_LEVEL, CHECK_SUPPORT, EMPIRICAL_RANK, TAIL_MODELS,  # noqa: F401  (re-exported: public API)
                                            TailCheck, _tail, band, check_tail)

#: the reference model's settings: auto's (the ``auto`` estimator is configured from these)
REFERENCE_MODEL = {"family": "lognormal", "robust": True, "jackknife": 0.5}
_FAMILY = REFERENCE_MODEL["family"]  # World._distances maps back by exp(y) - offset: this family's inverse

#: the largest working-scale value a drawn distance may have (exp of it is finite)
_LOG_MAX = 700.0
#: how a world locates its classes (build_world's ``structure``): by the bulk of their impostors, or at their nearest
WORLDS = ("bulk", "anchored")
#: how far outside the binomial band the world may lie at an estimator's own thresholds: the world
#: describes *new* impostors (its shape is the jackknifed pooled scores, as auto's is), while counting the
#: training distances below thresholds fitted to those very distances is biased; on BSSR1 face-C auto's
#: 0.5% thresholds hold 0.62% of the training distances, the world says 0.50% and the held-out half measured
#: 0.53%. The misfits the check exists for are several-fold (3-6x on a saturating matcher's tail).
CHECK_RATIO = 1.5


def _rank_cdf(s: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``np.interp(z, s, [1, 2, ..., n] / n, left=0, right=1)`` for ascending ``s``, to the bit (numpy's own
    formula and its choice of interval among ties, ``s[j] <= z < s[j + 1]``), without the n-array of ranks that
    np.interp needs: 38 MB built for every call at 4.8 million pooled scores."""
    n = s.size
    j = np.searchsorted(s, z, side="right") - 1
    out = np.where(j < 0, 0.0, 1.0)
    inside = (j >= 0) & (j < n - 1)
    jj = j[inside]
    x0 = s[jj]
    y0 = (jj + 1.0) / n
    slope = ((jj + 2.0) / n - y0) / (s[jj + 1] - x0)
    out[inside] = slope * (z[inside] - x0) + y0
    out[np.isnan(z)] = np.nan
    return out


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
    #: which tail model (TAIL_MODELS) the world uses, and how it fared against the pooled scores
    tail_model: str = "gpd-pwm"
    tail_check: TailCheck | None = field(default=None, compare=False)
    #: tail models tried before this one, with why each was rejected
    rejected: tuple[str, ...] = ()
    #: how the classes are located (WORLDS): ``bulk``, by the median and IQR of all their impostors (auto's model),
    #: or ``anchored``, at their own nearest impostors with scale 1 (the ``anchored`` estimator's)
    structure: str = "bulk"

    def __getstate__(self) -> dict:
        """Pickled (refits in other processes) without the training checks kept on it (calibrate.predicted.interval), which
        hold the training distances."""
        state = dict(self.__dict__)
        state.pop("_training_checks", None)
        return state

    # ---- the shape G -----------------------------------------------------------------------

    def shape_quantile(self, u: np.ndarray) -> np.ndarray:
        """G^{-1}(u): the GPD below its threshold's probability, the interpolated pooled scores above."""
        u = np.asarray(u, dtype=np.float64)
        z = self.sorted_z
        n = z.size
        # linear interpolation at position u n between the order statistics z_(1..n) (clamped): the
        # positions are evenly spaced, so index arithmetic replaces a search; in place, as these arrays
        # hold millions of simulated distances
        pos = np.multiply(u, float(n))
        np.clip(pos, 1.0, float(n), out=pos)
        lo = pos.astype(np.int64)  # floor, as pos >= 1
        np.minimum(lo, n, out=lo)
        pos -= lo  # the fraction
        lo -= 1
        out = z[lo]
        np.minimum(lo + 1, n - 1, out=lo)
        step = z[lo]
        step -= out
        step *= pos
        out += step
        if self.tail is None:
            return out
        low = u < self.tail.p_u
        np.maximum(out, self.tail.u, out=out)
        if low.any():
            out[low] = self.tail.quantile(np.maximum(u[low], 1e-300))
        return out

    def shape_cdf(self, z: np.ndarray) -> np.ndarray:
        """G(z), consistent with :meth:`shape_quantile`."""
        z = np.asarray(z, dtype=np.float64)
        body = _rank_cdf(self.sorted_z, z)
        if self.tail is None:
            return body
        return np.where(z < self.tail.u, self.tail.cdf(z), np.maximum(body, self.tail.p_u))

    # ---- drawing and judging ---------------------------------------------------------------

    def draw(self, rng: np.random.Generator) -> ImpostorDistances:
        """A gallery of the same classes and sizes, every distance drawn afresh from the world."""
        n = int(self.counts.sum())
        u = rng.random(n) if self.slots is None else rng.random(int(self.slots.max()) + 1)[self.slots]
        return ImpostorDistances(self.classes, self._distances(u), self.offsets)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.counts)])

    def _distances(self, u: np.ndarray, cls: np.ndarray | None = None) -> np.ndarray:
        """Distances from uniforms (last axis): of class ``cls[j]`` at position j, by default laid out like
        the gallery's values."""
        if cls is None:
            cls = np.repeat(np.arange(self.counts.size), self.counts)
        y = self.shape_quantile(u)
        y *= self.scale[cls]
        y += self.loc[cls]
        np.minimum(y, _LOG_MAX, out=y)  # finite distances even where an extreme shape reaches past exp's range
        np.exp(y, out=y)  # from_working, in place: exp(y) - offset, never below 0
        y -= self.offset
        return np.maximum(y, 0.0, out=y)

    def draw_sorted(self, rng: np.random.Generator, replicates: int) -> np.ndarray:
        """``replicates`` galleries at once, shape (replicates, N) in the gallery's value order, each
        class's distances ascending within its segment. Without pair slots, every class's sorted
        uniforms come straight from exponential spacings (``U_(i) = S_i / S_{n+1}``, S the partial sums
        of n + 1 standard exponentials: the joint law of n sorted uniforms), so nothing is sorted; with
        slots, shared uniforms are drawn and sorted within each class."""
        counts = self.counts
        c = counts.size
        n = int(counts.sum())
        seg = np.repeat(np.arange(c), counts)
        if self.slots is not None:
            u = rng.random((replicates, int(self.slots.max()) + 1))[:, self.slots]
            u = np.sort(u + 2.0 * seg, axis=1) - 2.0 * seg  # classes' segments are in order: one sort sorts each
            np.clip(u, 0.0, np.nextafter(1.0, 0.0), out=u)
        else:
            e = rng.standard_exponential((replicates, n + c))
            np.cumsum(e, axis=1, out=e)
            starts = self.offsets[:-1] + np.arange(c)  # class i's n_i + 1 exponentials start here
            base = np.repeat(starts - 1, counts)
            within = np.arange(n) - np.repeat(self.offsets[:-1], counts)
            value_at = np.repeat(starts, counts) + within
            total_at = np.repeat(starts + counts, counts)
            first = base < 0
            below = e[:, np.maximum(base, 0)]
            below[:, first] = 0.0
            u = e[:, value_at]
            u -= below
            total = e[:, total_at]
            total -= below
            u /= total
        return self._distances(u)

    def draw_plan(self, ranks: list[np.ndarray]) -> "DrawPlan":
        """The layout of a draw at ``ranks`` (one array of 0-based ranks per class; sorted and made unique here),
        computed once for every chunk of a simulation (:meth:`draw_galleries`)."""
        return DrawPlan.of(self.counts, ranks)

    def draw_galleries(self, rng: np.random.Generator, replicates: int,
                       ranks: "list[np.ndarray] | DrawPlan | None" = None) -> Galleries:
        """``replicates`` galleries, drawn whole (``ranks`` None, or pair slots present) or only at ``ranks``
        (one array of 0-based ranks per class, or their :meth:`draw_plan`). A class's values at ranks
        k_1 < ... < k_m (1-based) are its quantile function at U_(k_i) = S_(k_i) / S_(n+1), S the partial sums of
        n + 1 standard exponentials, whose increments between the ranks are Gamma(k_i - k_(i-1)) and
        Gamma(n + 1 - k_m): the exact joint law of those order statistics, with m + 1 draws per class instead of n."""
        if ranks is None or self.slots is not None:
            return Galleries(self.counts, np.arange(int(self.counts.sum())), self.draw_sorted(rng, replicates), True)
        plan = ranks if isinstance(ranks, DrawPlan) else self.draw_plan(ranks)
        if not np.array_equal(plan.counts, self.counts):
            raise ValueError("the draw plan was made for other class sizes")
        g = rng.standard_gamma(plan.shapes, size=(replicates, plan.shapes.size))
        np.cumsum(g, axis=1, out=g)
        before = g[:, np.maximum(plan.before_cols, 0)]  # the partial sum before each class's first increment
        before[:, plan.before_cols < 0] = 0.0
        below = before[:, plan.cls]
        u = g[:, plan.value_cols]
        u -= below
        total = g[:, plan.total_cols]
        total -= below
        u /= total
        np.clip(u, 0.0, np.nextafter(1.0, 0.0), out=u)
        return Galleries(self.counts, plan.keys, self._distances(u, plan.cls), False, u)

    def widen(self, galleries: Galleries, rows: np.ndarray, wider: np.ndarray | None,
              rng: np.random.Generator) -> Galleries:
        """Galleries ``rows`` of a partial draw seen also at the global positions ``wider`` (a superset of its keys;
        None: every rank, whole galleries): the values drawn stay, the others are drawn given them
        (calibrate.predicted.simulated_galleries.fill_between). For a gallery whose partial draw did not reach
        what an estimator reads: the same gallery, seen at more ranks, instead of another drawn whole."""
        n = int(self.counts.sum())
        full = wider is None or wider.size == n
        wider = np.arange(n) if wider is None else np.asarray(wider, dtype=np.int64)
        u = fill_between(self.counts, galleries.keys, galleries.uniforms[rows], wider, rng)
        cls = np.searchsorted(self.offsets, wider, side="right") - 1
        return Galleries(self.counts, wider, self._distances(u, cls), full, u)

    def pooled_quantile(self, e: float) -> float:
        """The distance below which a share ``e`` of the world's pooled distances lie (bisection on the
        log working scale)."""
        target = float(e)
        lo = float(np.min(self.loc + self.scale * self.shape_quantile(np.array([1e-12]))[0]))
        hi = float(np.max(self.loc + self.scale * self.shape_quantile(np.array([1.0 - 1e-12]))[0]))
        w = self.counts / self.counts.sum()
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            share = float(np.sum(w * self.shape_cdf((mid - self.loc) / self.scale)))
            lo, hi = (mid, hi) if share < target else (lo, mid)
        return float(max(np.exp(hi) - self.offset, 0.0))

    def class_fpr(self, thresholds: np.ndarray) -> np.ndarray:
        """The true FPR of each class's threshold, ``thresholds`` of shape (..., classes, targets)."""
        return self.shape_cdf(self._standardised(thresholds))

    def _standardised(self, thresholds: np.ndarray) -> np.ndarray:
        """Each class's thresholds (..., classes, targets) on the scale of G: (log(tau + offset) - m_c) / s_c."""
        tau = np.asarray(thresholds, dtype=np.float64)
        with np.errstate(divide="ignore"):
            y = to_working(np.maximum(tau, 0.0), _FAMILY, self.offset)
        return (y - self.loc[:, None]) / self.scale[:, None]

    def gallery_fpr(self, per_class: np.ndarray) -> np.ndarray:
        """The gallery's FPR from per-class FPRs (..., classes, targets): attempts weighted by each class's count."""
        w = self.counts.astype(np.float64)
        return np.tensordot(w / w.sum(), per_class, axes=([0], [-2]))

    def independent(self) -> int:
        """How many of the pooled training values are independent draws (distinct pairs with slots)."""
        return int(self.slots.max()) + 1 if self.slots is not None and self.slots.size else int(self.counts.sum())


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


def build_world(impostors: ImpostorDistances, slots: np.ndarray | None = None, structure: str = "bulk") -> World:
    """The world fitted to a gallery's training impostor distances (see the module's docstring);
    ``slots``: :func:`pair_slots` of the training matrix, when its entries come in symmetric pairs; ``structure``
    (WORLDS): how the classes are located, by their bulk (auto's model) or at their nearest impostors."""
    counts = impostors.counts()
    if np.any(counts < 3):
        small = impostors.classes[int(np.argmax(counts < 3))]
        raise DataError(f"predicted FPR interval: class {small!r} has {int(counts.min())} training distance(s); at least "
                        "3 per class are needed to estimate its location and scale")
    if structure == "anchored":
        offset, locs, _, _ = anchored_classes(impostors, _FAMILY, REFERENCE_MODEL["jackknife"], ANCHOR_MAX_RANK,
                                              "predicted FPR interval")
        scales = np.ones(counts.size)
        sorted_z = anchored_sorted(impostors, _FAMILY, REFERENCE_MODEL["jackknife"], ANCHOR_MAX_RANK,
                                   "predicted FPR interval")  # the anchored estimator's own, computed once
    elif structure == "bulk":
        offset, locs, scales, _ = standardise_classes(impostors, _FAMILY, REFERENCE_MODEL["robust"],
                                                      REFERENCE_MODEL["jackknife"], "predicted FPR interval")
        sorted_z = pooled_sorted(impostors, _FAMILY, REFERENCE_MODEL["robust"], REFERENCE_MODEL["jackknife"],
                                 "predicted FPR interval")  # auto's own, computed once (calibrate.statistics.standardise)
    else:
        raise ValueError(f"world structure {structure!r} is not one of {', '.join(WORLDS)}")
    if slots is not None and np.asarray(slots).shape != impostors.values.shape:
        raise DataError("predicted FPR interval: the pair slots do not match the training distances")
    base = dict(classes=tuple(impostors.classes), counts=counts.astype(np.int64), loc=np.asarray(locs),
                scale=np.asarray(scales), offset=offset, sorted_z=sorted_z, slots=slots, structure=structure)
    rejected: list[str] = []
    world = None
    for model in TAIL_MODELS:
        world = World(**base, tail=_tail(sorted_z, model), tail_model=model, rejected=tuple(rejected))
        check = check_tail(sorted_z, world.tail, world.shape_cdf, world.independent())
        world = World(**base, tail=world.tail, tail_model=model, tail_check=check, rejected=tuple(rejected))
        if check.passed:
            return world
        rejected.append(f"{model}: {check.worst()}")
    return world


def threshold_positions(impostors: ImpostorDistances, tau: np.ndarray) -> np.ndarray:
    """Per class and target (classes x targets): the continuous rank of the threshold among the class's
    sorted distances, ``j + (t - d_j) / (d_(j+1) - d_j)`` with j the distances at or below it (0 below the
    smallest, j at or beyond the largest). All classes at once: j is a count of comparisons, one pass over
    the distances per target, and the neighbours are gathered from the sorted segments."""
    counts = impostors.counts()
    starts = impostors.offsets[:-1]
    values = impostors.sorted_within()
    seg = np.repeat(np.arange(counts.size), counts)
    position = np.zeros_like(tau)
    for k in range(tau.shape[1]):
        t = tau[:, k]
        j = np.bincount(seg[impostors.values <= t[seg]], minlength=counts.size)
        j[np.isnan(t)] = counts[np.isnan(t)]  # as a search of NaN in sorted values: past the end
        nxt = values[starts + np.minimum(j, counts - 1)]
        prev = values[starts + np.maximum(j - 1, 0)]
        gap = nxt - prev
        frac = np.where((j > 0) & (j < counts) & (gap > 0), (t - prev) / np.where(gap > 0, gap, 1.0), 0.0)
        position[:, k] = np.where(j == 0, 0.0, j + frac)
    return position


def training_check(world: World, impostors: ImpostorDistances, thresholds: np.ndarray) -> list[dict]:
    """The world against the training data at one estimator's thresholds (classes x targets, fitted on
    ``impostors``): per target the training support k, the training FPR, the world's FPR there and the
    99.9% binomial band of the training FPR; ``fits`` is None when k < CHECK_SUPPORT (nothing to check
    against), else whether the world lies in the band widened by CHECK_RATIO either way.

    A threshold fitted to these very distances sits at an order statistic of them (class-interp's at
    rank e n_c of its class), where counting the distances below it is biased low: the k-th smallest
    of n has expected FPR k / (n + 1), not (k - 1) / n. So each class counts its *position* r_c, the
    continuous rank of its threshold among its sorted distances (linear between order statistics, as
    the interpolating estimators place them; 0 below the smallest), and the training FPR
    is ``sum r_c / sum (n_c + 1)``, its support ``k = sum r_c``."""
    tau = np.asarray(thresholds, dtype=np.float64)
    counts = impostors.counts()
    position = threshold_positions(impostors, tau)
    support = position.sum(axis=0)
    n = int(counts.sum())
    empirical = support / float((counts + 1).sum())
    p_world = world.gallery_fpr(world.class_fpr(tau))
    ind = world.independent()
    out = []
    for j in range(tau.shape[1]):
        k = float(support[j])
        low, high = band(k * ind / n, ind)
        if k >= CHECK_SUPPORT:
            fits = bool(low / CHECK_RATIO <= p_world[j] <= high * CHECK_RATIO)
        else:
            expected = float(p_world[j]) * float((counts + 1).sum())
            fits = None if count_agrees(k * ind / n, expected * ind / n) else False
        out.append({"support": k, "empirical_fpr": float(empirical[j]), "world_fpr": float(p_world[j]),
                    "band": (low, high), "fits": fits})
    return out


def count_agrees(observed: float, expected: float) -> bool:
    """Where fewer than CHECK_SUPPORT training distances lie below a threshold, whether the world's expected count
    there agrees with the observed one, both ways: the observed count (rounded) lies within the 99.9% Poisson band
    of the expected count, widened CHECK_RATIO-fold (a world that predicts hundreds of training false accepts where
    there is one is contradicted at any support, and so is one that predicts none where there are eight)."""
    from scipy.special import pdtr, pdtrc  # the Poisson CDF and its complement (here only, not at import)

    k = int(round(observed))
    alpha = (1 - CHECK_LEVEL) / 2
    if expected <= 0:
        return k == 0
    too_many = float(pdtr(k, expected / CHECK_RATIO)) < alpha  # P(X <= k) under the world: it expects far more
    too_few = k > 0 and float(pdtrc(k - 1, expected * CHECK_RATIO)) < alpha  # P(X >= k): it expects far fewer
    return not (too_many or too_few)


def tail_reaches(world: World, thresholds: np.ndarray) -> np.ndarray:
    """Per target (column of classes x targets thresholds): whether some class's threshold lies in the
    world's tail model (below its threshold), where only the tail check speaks for the world."""
    if world.tail is None:
        return np.zeros(np.asarray(thresholds).shape[-1], dtype=bool)
    return np.any(world._standardised(thresholds) < world.tail.u, axis=0)
