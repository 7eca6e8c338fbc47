"""What the built-in normalisers share: a cohort row's mean and spread, the standardised distance, and the base
class (MeanAndSpread) of the normalisers whose statistics are those (znorm, tnorm, snorm).

The spread is the population standard deviation (ddof 0, as bob.bio.base's Z- and T-norm).

**Correctly rounded, so the same cohort gives the same bits by any path.** A row's ``mean`` is its exact
mean rounded to the nearest double, its variance the exact ``sum((x - mean_exact)**2) / n`` rounded to the
nearest double, and ``std`` that variance's square root (IEEE, correctly rounded). These are functions of
the row's values as a multiset, so the same cohort gives the same statistics whether they are computed
from the row itself (``_statistics``: a class's saved statistics, a probe's row given to
``Calibration.accept``) or from a longer row with one member left out (``_statistics_left_out``: every
training attempt of a run, a probe's row with the claimed class left out), in any order and with any other
rows: a run, ``accept``, ``enroll`` and the command line decide alike, bit for bit.

How, in O(1) per attempt after O(row) per row. Each row is centred on c (its mean, rounded) and every
y = x - c is held exactly as two doubles (TwoSum); y**2 to within 2**-104 of itself (TwoProduct). The
row's sums A = sum(y) and Q = sum(y**2) are kept as double-doubles with a rigorous error bound (a TwoSum
tree, its error terms summed in floating point with their bound), and the member left out comes off them
exactly. With m members kept, M = A / m and N = Q / m are double-doubles (Joldes, Muller and Popescu's
algorithms, relative error below 8 * 2**-106 each); the exact mean is c + M and the exact variance
N - M**2. Each is rounded to a double, and kept where the interval (value +- bound, bounded per row for
whichever member is left out) holds no point halfway between doubles. Two things leave it in doubt:

* an exact tie of the mean, which is common (about once in m attempts when the members share the mean's
  binade, as distances in [0.5, 1) do): settled exactly from the sign of A - m (t - c), t the midpoint, a
  multiple of the grid of the members, c and t, which the double-double approximation pins down
  (_settle_mean);
* anything else (a tie of the variance, about once in m**2; members whose grid is too fine to pin down):
  computed exactly, math.fsum expansions and fractions, one attempt at a time (_exact_moments).

A variance whose upper bound is far below the spread floor (calibrate.normalisation.cohort.SPREAD_FLOOR: a row without
spread, which the core refuses anyway) is returned as its approximation: the row is refused either way.

Against numpy's ``mean``/``std`` (pairwise sums, the built-ins before issue 32): within a few units in the
last place, and exact where numpy's was off by a rounding residue (0.1 forty-seven times: std 0, not 5.6e-17).

A row whose largest |distance| lies beyond 2**250 (or below 2**-250) is brought near 1 by a power of two
first, which is exact, so that squares neither overflow nor underflow; the results are scaled back
exactly (a correctly rounded value scales exactly), so this does not depend on which members are kept.
The core refuses a spread of 0 or a rounding residue (calibrate.normalisation.cohort.statistics_problem: the ``std``
named in ``Normalizer.spreads``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from calibrate.contract.base import Normalizer
from calibrate.normalisation.cohort import SPREAD_FLOOR

#: rows whose largest |distance| lies outside [2**-LIMIT, 2**LIMIT] are scaled by a power of two first
LIMIT = 250
_U = 2.0 ** -53        # unit roundoff
_U2 = 2.0 ** -106      # its square: the double-double operations' relative error unit
_SPLIT = 134217729.0   # 2**27 + 1, Dekker's splitter
_SAFE = 1.0 + 2.0 ** -40  # bounds computed in floating point, inflated by this
_TINY = 2.0 ** -1000   # absolute slack per operation for products near underflow
#: a variance whose upper bound is below (this x the spread floor x the row's level)**2 is refused anyway
_FAR_BELOW_FLOOR = 0.25


# ---- error-free transformations and double-double operations (exact inputs, bounds carried) -----------

def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):  # |a| >= |b| (or a == 0)
    s = a + b
    return s, b - (s - a)


def _split(a):
    t = _SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def _two_square(a):
    p = a * a
    hi, lo = _split(a)
    return p, ((hi * hi - p) + 2.0 * hi * lo) + lo * lo


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_div(ah, al, b):
    """A double-double over a whole number b < 2**26 (its own Dekker split: th * b is exact in two parts):
    relative error below 3u**2."""
    th = ah / b
    ph = th * b
    hi, lo = _split(th)
    pl = (hi * b - ph) + lo * b
    return _fast_two_sum(th, (((ah - ph) - pl) + al) / b)


def _tree_sum(v):
    """Row sums of ``v`` as (s, e, bound): the exact sum lies within ``bound`` of s + e. Pairs are added by
    TwoSum level by level (the row padded with zeros to a power of two), their error terms summed in floating
    point: over fewer than 2 x width terms, within 2.2 x width x u of their absolute sum."""
    width = v.shape[1]
    size = 1 << max(width - 1, 0).bit_length()
    if size != width:
        v = np.concatenate([v, np.zeros((v.shape[0], size - width))], axis=1)
    errors = np.empty((v.shape[0], max(size - 1, 1)))
    errors[:, 0] = 0.0
    at = 0
    while v.shape[1] > 1:
        half = v.shape[1] // 2
        v, errors[:, at:at + half] = _two_sum(v[:, :half], v[:, half:])
        at += half
    return v[:, 0], errors.sum(axis=1), 2.2 * max(width, 1) * _U * np.abs(errors).sum(axis=1)


# ---- the moments -------------------------------------------------------------------------------------

#: values per chunk of work: arrays of 128 KB, which numpy allocates and reuses without mapping pages
CHUNK = 1 << 14


def moments(values: np.ndarray, usable: np.ndarray, rows: np.ndarray, left_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) per attempt a: of row ``rows[a]``'s ``usable`` values, without column ``left_out[a]``
    (-1: none), correctly rounded (see the module). Every attempt keeps at least one value."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.asarray(usable, dtype=bool)
    rows = np.asarray(rows, dtype=np.int64)
    left_out = np.asarray(left_out, dtype=np.int64)
    mean, std = np.empty(rows.size), np.empty(rows.size)
    if not rows.size:
        return mean, std
    # the attempts as a few runs of ascending rows (a run's attempts of a chunk of rows are a slice of it), or
    # sorted by row when they are many
    breaks = np.flatnonzero(rows[1:] < rows[:-1]) + 1
    order = None
    if breaks.size > 7:
        order = np.argsort(rows.astype(np.min_scalar_type(int(rows.max()))), kind="stable")  # radix: < 65536 rows
        rows, left_out, breaks = rows[order], left_out[order], breaks[:0]
    runs = list(zip([0, *breaks.tolist()], [*breaks.tolist(), rows.size]))
    if usable.size and usable.sum() < 0.6 * usable.size:  # mostly padding (a class's training impostors): packed
        values, usable, left_out = _packed(values, usable, left_out, rows)
    per = max(1, CHUNK // max(values.shape[1], 1))
    for r0 in range(int(rows.min()) // per * per, int(rows.max()) + 1, per):
        parts = [(a + int(np.searchsorted(rows[a:b], r0)), a + int(np.searchsorted(rows[a:b], r0 + per)))
                 for a, b in runs]
        if all(a0 == a1 for a0, a1 in parts):
            continue
        sums = _row_sums(values[r0:r0 + per], usable[r0:r0 + per])
        for a0, a1 in parts:
            for b0 in range(a0, a1, CHUNK):
                b1 = min(a1, b0 + CHUNK)
                mean[b0:b1], std[b0:b1] = _attempts(sums, rows[b0:b1] - r0, left_out[b0:b1])
    if order is not None:
        mean[order], std[order] = mean.copy(), std.copy()
    return mean, std


def _packed(values: np.ndarray, usable: np.ndarray, left_out: np.ndarray, rows: np.ndarray) -> tuple:
    """(values, usable, left_out) with each row's usable values moved to its front, in their order (the rest
    padding), and the columns left out moved with them: the row sums then skip the padding."""
    width = max(int(usable.sum(axis=1).max()), 1)
    place = np.cumsum(usable, axis=1) - 1  # where each usable member goes in its row
    r, c = np.nonzero(usable)
    packed = np.zeros((values.shape[0], width))
    packed[r, place[r, c]] = values[r, c]
    kept = np.arange(width)[None, :] < usable.sum(axis=1)[:, None]
    moved = np.where(left_out >= 0, place[rows, np.maximum(left_out, 0)], -1)
    return packed, kept, moved


def _row_sums(values: np.ndarray, usable: np.ndarray) -> dict[str, np.ndarray]:
    """Per row: its centre c, scale, count, the sums A = sum(y), Q = sum(y**2) (y = x - c) as
    double-doubles, and bounds (for any one member left out) on the errors of the mean's and the variance's
    double-double values; per member: y and y**2, each as two doubles."""
    x = np.where(usable, values, 0.0)
    n = usable.sum(axis=1).astype(np.float64)
    largest = np.abs(x).max(axis=1, initial=0.0)
    far = (largest > 2.0 ** LIMIT) | ((largest > 0) & (largest < 2.0 ** -LIMIT))
    scale = np.where(far, np.frexp(largest)[1], 0)
    if far.any():
        x = np.ldexp(x, -scale[:, None])
    c = x.sum(axis=1) / np.maximum(n, 1.0)
    y1, y2, p, s = (np.empty_like(x) for _ in range(4))
    parts: list[tuple] = []
    for j in range(0, x.shape[1], CHUNK):  # a row longer than a chunk in segments (arrays of 128 KB at most)
        part = slice(j, j + CHUNK)
        y1[:, part], y2[:, part], p[:, part], s[:, part], sums = _members(x[:, part], usable[:, part], c)
        parts.append(sums)
    a_h, a_e, a_b, a_abs, q_h, q_e, q_b, q_abs, y2_sum, y2_abs, s_sum, s_abs, t_abs, y_top, p_top, t_top, s_top = (
        parts[0] if len(parts) == 1 else _combined(np.stack([np.stack(part, axis=1) for part in parts], axis=2)))
    width = 2.2 * max(x.shape[1], 1) * _U  # a float sum of that many terms errs by at most this x their |sum|
    a_l = a_e + y2_sum
    a_b = a_b + width * (y2_abs + a_abs) + _U * np.abs(a_l)
    a_h, a_l = _two_sum(a_h, a_l)
    q_l = q_e + s_sum
    # each member's slack (the roundings of t and s, and y2**2 <= u**2 p): summed, and at most for one member
    slack = (_U * (t_abs + s_abs) + _U * _U * np.abs(q_h)) * (1 + 1e-6)
    slack_top = (_U * (t_top + s_top) + _U * _U * p_top) * (1 + 1e-6)
    q_b = q_b + width * (s_abs + q_abs) + _U * np.abs(q_l) + slack
    q_h, q_l = _two_sum(q_h, q_l)
    # bounds for every attempt of the row at once (see _attempts)
    m = np.maximum(n - 1.0, 1.0)
    a_top = np.abs(a_h) + 2.0 * y_top
    b_a = a_b + 8.0 * _U2 * a_top                                     # A - y_m
    b_q = q_b + slack_top + 8.0 * _U2 * (np.abs(q_h) + p_top)         # Q - y_m**2
    m_top = a_top / m * (1 + 1e-6)                                    # |M|, M = A / m
    b_m = (b_a + 8.0 * _U2 * a_top) / m                               # M's double-double
    mean_top = np.abs(c) + m_top
    b_mean = (b_m + 2.0 * _U * np.spacing(mean_top)) * _SAFE + _TINY
    n_top = (np.abs(q_h) + p_top) / m * (1 + 1e-6)                    # N = Q / m
    b_n = (b_q + 8.0 * _U2 * (np.abs(q_h) + p_top)) / m
    b_s = 4.0 * _U2 * m_top * m_top + 2.1 * m_top * b_m              # S = M_h**2 + 2 M_h M_l against M**2
    b_var = (b_n + b_s + 4.0 * _U * np.spacing(n_top + m_top * m_top)) * _SAFE + _TINY
    return {"x": x, "usable": usable, "n": n, "scale": scale, "c": c, "y1": y1, "y2": y2, "p": p, "s": s,
            "a_h": a_h, "a_l": a_l, "q_h": q_h, "q_l": q_l, "b_a": b_a * _SAFE + _TINY, "b_mean": b_mean,
            "b_var": b_var}


def _members(x: np.ndarray, usable: np.ndarray, c: np.ndarray) -> tuple:
    """Of a segment of the rows' members: y = x - c and y**2 = p + s (exact but for the slack), and the
    segment's sums: (A's tree sum, its error sum and bound, 0, the same of Q, then sum and sum |.| of y2
    and of s, sum |t|, and the largest |y|, p, |t|, |s|)."""
    y1, y2 = _two_sum(x, -c[:, None])
    y1, y2 = np.where(usable, y1, 0.0), np.where(usable, y2, 0.0)
    p, e = _two_square(y1)
    t = 2.0 * y1 * y2
    s = e + t
    abs_t, abs_s = np.abs(t), np.abs(s)
    a_h, a_e, a_b = _tree_sum(y1)
    q_h, q_e, q_b = _tree_sum(p)
    zero = np.zeros_like(c)
    return y1, y2, p, s, (a_h, a_e, a_b, zero, q_h, q_e, q_b, zero, y2.sum(axis=1), np.abs(y2).sum(axis=1),
                          s.sum(axis=1), abs_s.sum(axis=1), abs_t.sum(axis=1), np.abs(y1).max(axis=1, initial=0.0),
                          p.max(axis=1, initial=0.0), abs_t.max(axis=1, initial=0.0), abs_s.max(axis=1, initial=0.0))


def _combined(parts: np.ndarray) -> list[np.ndarray]:
    """The segments' sums (_members; ``parts[:, item, segment]``) for whole rows: the tree sums' leading terms
    (items 0 and 4) tree-summed again, their error terms going to items 1 and 5, the absolute sum of those to
    3 and 7 (2 and 6 sum the bounds); maxima (13 on) their largest; the rest added."""
    out = []
    for item in range(parts.shape[1]):
        if item in (0, 4):
            head, errors, bound = _tree_sum(parts[:, item])
            out.append(head)
        elif item in (1, 5):  # the segments' error sums and the new tree's
            out.append(parts[:, item].sum(axis=1) + errors)
        elif item in (3, 7):  # what the float sums of items 1 and 5 may err by: the absolute sum of their terms
            out.append(np.abs(parts[:, item - 2]).sum(axis=1) + bound / (2.2 * parts.shape[2] * _U))
        elif item >= 13:
            out.append(parts[:, item].max(axis=1))
        else:
            out.append(parts[:, item].sum(axis=1))
    return out


def _certain(r, q, b):
    """Whether r (a double) is the nearest double to every value within ``b`` of r + q (|q| <= ulp(r) / 2):
    the interval holds no point halfway between doubles."""
    pow2 = (np.abs(r).view(np.int64) & 0xFFFFFFFFFFFFF) == 0  # a power of two: the gap below is half
    half = np.spacing(np.abs(r)) * np.where(pow2, 0.25, 0.5)
    return np.abs(q) + b < half


def _settle_mean(sums: dict[str, np.ndarray], rows: np.ndarray, r: np.ndarray, q: np.ndarray, a_h: np.ndarray,
                 a_l: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, settled) of attempts whose mean lies next to the midpoint t between r and its neighbour on q's
    side (an exact tie, about 1 in m attempts when the members share the mean's binade): exactly, from the
    sign of D = A - m (t - c) = m (mean - t). D is a multiple of the grid G of the members, c and t, so an
    approximation within less than G/2 of it settles a tie (D = 0: the even neighbour) as well as a side."""
    c = sums["c"][rows]
    side = np.where(q >= 0, 1.0, -1.0) * np.sign(np.where(r == 0, 1.0, r))  # towards larger |r| or smaller
    pow2 = (np.abs(r).view(np.int64) & 0xFFFFFFFFFFFFF) == 0
    eta = np.copysign(np.spacing(np.abs(r)) * np.where(pow2 & (side < 0), 0.25, 0.5), q)  # t = r + eta
    d1, d2 = _two_sum(r, -c)
    terms = [a_h, a_l] + [-v for v in (*_two_prod(d1, m), *_two_prod(d2, m))] + [-(eta * m)]
    total, err, err_abs = terms[0], np.zeros_like(r), np.zeros_like(r)
    for t in terms[1:]:
        total, e = _two_sum(total, t)
        err, err_abs = err + e, err_abs + np.abs(e)
    d = total + err
    bound = (sums["b_a"][rows] + 16.0 * _U * err_abs + _U * np.abs(d)) * _SAFE + _TINY
    x, usable = sums["x"], sums["usable"]
    grid = np.where(usable & (x != 0), np.spacing(np.abs(x)), np.inf).min(axis=1)[rows]
    grid = np.minimum(np.minimum(grid, np.spacing(np.abs(c))), np.abs(eta))
    beyond = np.abs(d) > bound
    tie = ~beyond & (bound < grid / 2)
    neighbour = np.nextafter(r, r + eta)
    odd = (r.view(np.int64) & 1) == 1
    out = np.where(beyond & (np.sign(d) == np.sign(eta)), neighbour, np.where(tie & odd, neighbour, r))
    return out, beyond | tie


def _attempts(sums: dict[str, np.ndarray], rows: np.ndarray, left_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of each attempt from its row's sums, the member left out taken off them.

    With m members kept, A and Q their sums: M = A / m and N = Q / m as double-doubles, the mean c + M and
    the variance N - M**2. Every error is bounded per row (_row_sums) for whichever member is
    left out; a result is kept where no rounding boundary lies within its bound (_certain), and computed
    exactly otherwise."""
    gone = left_out >= 0
    m = sums["n"][rows] - gone
    A_h, A_l, Q_h, Q_l = sums["a_h"][rows], sums["a_l"][rows], sums["q_h"][rows], sums["q_l"][rows]
    if gone.any():
        flat = rows * sums["x"].shape[1] + np.maximum(left_out, 0)

        every = bool(gone.all())

        def member(name: str) -> np.ndarray:  # the member left out's value, 0 where none is (exact below)
            got = sums[name].ravel()[flat]
            return got if every else np.where(gone, got, 0.0)

        # A - y and Q - y**2 (error below 4 u**2 (|A| + |y|), resp. (|Q| + y**2): bounded per row)
        h, l = _two_sum(A_h, -member("y1"))
        A_h, A_l = _fast_two_sum(h, l + (A_l - member("y2")))
        h, l = _two_sum(Q_h, -member("p"))
        Q_h, Q_l = _fast_two_sum(h, l + (Q_l - member("s")))
    M_h, M_l = _dd_div(A_h, A_l, m)
    mean, q = _two_sum(sums["c"][rows], M_h)
    mean, q = _fast_two_sum(mean, q + M_l)
    mean_sure = _certain(mean, q, sums["b_mean"][rows])
    if not mean_sure.all():
        u = np.flatnonzero(~mean_sure)
        mean[u], mean_sure[u] = _settle_mean(sums, rows[u], mean[u], q[u], A_h[u], A_l[u], m[u])
    N_h, N_l = _dd_div(Q_h, Q_l, m)
    S_h, S_l = _two_square(M_h)
    h, l = _two_sum(N_h, -S_h)
    var, q = _two_sum(h, l + (N_l - (S_l + 2.0 * M_h * M_l)))
    var_sure = _certain(var, q, sums["b_var"][rows])
    if not (mean_sure.all() and var_sure.all()):
        x, usable = sums["x"], sums["usable"]
        # a variance certainly far below the spread floor is refused whatever its last digits
        smallest = np.where(usable, np.abs(x), np.inf).min(axis=1)[rows]
        level = np.maximum(np.abs(mean), smallest) * (1 - 1e-9)
        top = np.abs(var) + np.abs(q) + sums["b_var"][rows]
        far_below = top <= (_FAR_BELOW_FLOOR * SPREAD_FLOOR * level) ** 2
        var = np.where(~var_sure & far_below, np.maximum(var, 0.0), var)
        for a in np.flatnonzero(~mean_sure | (~var_sure & ~far_below)).tolist():
            kept = np.flatnonzero(usable[rows[a]])
            if gone[a]:
                kept = kept[kept != left_out[a]]
            mean[a], var[a] = _exact_moments(x[rows[a], kept])
    scale = sums["scale"][rows]
    return np.ldexp(mean, scale), np.ldexp(np.sqrt(np.maximum(var, 0.0)), scale)


def _expansion(values: list[float]) -> list[float]:
    """Doubles whose exact sum is that of ``values`` (math.fsum, correctly rounded, of what is left, until
    nothing is): usually two or three."""
    parts: list[float] = []
    while True:
        rest = math.fsum(values + [-v for v in parts])
        if rest == 0:
            return parts
        parts.append(rest)


def _exact_moments(values: np.ndarray) -> tuple[float, float]:
    """(mean, variance) of ``values`` computed exactly, each rounded once to the nearest double."""
    n = values.size
    total = sum(map(Fraction, _expansion(values.tolist())))
    tiny = np.abs(values) < 2.0 ** -480  # their squares would underflow TwoProduct: exactly, one by one
    p, e = _two_square(values[~tiny])
    squares = sum(map(Fraction, _expansion(p.tolist() + e.tolist())))
    squares += sum(Fraction(v) ** 2 for v in values[tiny].tolist())
    return float(total / n), float((n * squares - total * total) / (n * n))


def mean_and_spread(cohort: np.ndarray) -> dict[str, np.ndarray]:
    """``{"mean", "std"}`` of each row of cohort distances (every value used), correctly rounded."""
    rows = np.asarray(cohort, dtype=np.float64)
    n = rows.shape[0]
    mean, std = moments(rows, np.ones(rows.shape, dtype=bool), np.arange(n), np.full(n, -1))
    return {"mean": mean, "std": std}


class MeanAndSpread(Normalizer):
    """A normaliser whose statistics on each of its sides are a cohort row's ``{"mean", "std"}``: of the row itself,
    or per attempt of its row's usable values without the member left out, bit for bit the same."""

    def _statistics(self, cohort: np.ndarray) -> dict[str, np.ndarray]:
        return mean_and_spread(cohort)

    def _statistics_left_out(self, cohort, usable, rows, left_out) -> dict[str, np.ndarray]:
        mean, std = moments(cohort, usable, rows, left_out)
        return {"mean": mean, "std": std}


def standardised(distances: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """(d - mean) / std per attempt; a spread of 0 gives a non-finite z, which the core refuses by name."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (distances - stats["mean"]) / stats["std"]
