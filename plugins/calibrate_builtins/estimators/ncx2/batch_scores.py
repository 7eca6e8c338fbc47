"""The numerics of the batched cascade (batch.py): a chunk of classes and the fit scores of its grid points.

``ClassChunk`` holds a chunk of classes (sorted distances, padded; ranks; the per-class sigma grids and
lambdas) and scores pairs (class, grid point) at the cascade's three stages: Sankaran's CDF on compressed
points (``stage1``, ``pairs1``), the exact CDF on compressed points (``stage2``) and, on every training
distance, the score :func:`calibrate_builtins.estimators.ncx2.search.fit_class` computes (``stage3``).
``CompressedRanks`` is one compression of the chunk.

Ingredients
-----------
* **Compression.** A class's sorted training distances are cut into ``m`` contiguous groups
  (edges finer in the tails); group ``j`` keeps its size, mean squared distance ``s``, mean rank
  (ranks count ties fully, as ``phi_ref`` does) and the within-group moments (covariance of rank
  and ``s``, variances) that carry the first-order terms of the scores. A fit score becomes a
  weighted score over ``m`` points, whatever the cohort size.
* **Sankaran's approximation** (Sankaran 1963; Johnson, Kotz & Balakrishnan, Continuous
  Univariate Distributions 2, 29.8) of the non-central chi-square CDF, ``Phi(((x/a)^h - mu)/s)``:
  closed form, absolute error about 1e-3 for 15 <= dim <= 22 (larger for dim < 5), used to rank.
* **Interpolated exact CDF** for the full-data scores: with Sankaran's transform ``u(x)``, the exact
  CDF is ``Phi(u + r(u))`` with a smooth correction ``r``; ``r`` is interpolated at 24 Chebyshev
  nodes per candidate from ``chndtr`` (lower half) and Boost's upper tail (upper half), and every
  candidate is checked against ``chndtr`` at four points between nodes (|error| <= 1e-12, else
  ``chndtr`` at every point). Used for lambda >= 50, where ``chndtr`` is slowest (its series
  grows with lambda) and the correction is smoothest; about 7x cheaper than ``chndtr`` there. Exact
  mode's stage 2 uses the same interpolant on its 64 compressed points, from 16 nodes checked to
  1e-10 (far below the self-check's floors of 1e-6): 20 CDF values per candidate instead of 64.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
from scipy import special

try:  # the upper tail with full relative accuracy (Boost), as scipy.stats.ncx2.sf uses it
    from scipy.special._ufuncs import _ncx2_sf
except ImportError:  # pragma: no cover - private in scipy; the public route computes the same
    from scipy.stats import ncx2 as _ncx2

    def _ncx2_sf(x, k, lam):
        return _ncx2.sf(x, k, lam)


#: elements of one stage-1 array (a few arrays of this many float64 stay in the CPU cache)
_STAGE1_ELEMENTS = 1 << 16


def _phi_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF for stage-1 screening (scipy.special.ndtr)."""
    return special.ndtr(z)


def sankaran_parts(k, lam):
    """(h, log a, mu, 1/s) of Sankaran's normal approximation for CDF(x; k, lam).

    ``P(X <= x) ~ Phi(((x / a)^h - mu) / s)`` with ``a = k + lam`` and ``h``, ``mu``, ``s`` from
    the first three cumulants (Sankaran 1963, eq. for the cube-root-type transformation).
    """
    k = np.asarray(k, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    a = k + lam
    b = k + 2.0 * lam
    c = k + 3.0 * lam
    h = 1.0 - 2.0 * a * c / (3.0 * b * b)
    p = b / (a * a)
    m = (h - 1.0) * (1.0 - 3.0 * h)
    mu = 1.0 + h * p * (h - 1.0 - 0.5 * (2.0 - h) * m * p)
    inv_s = 1.0 / (h * np.sqrt(2.0 * p) * (1.0 + 0.5 * m * p))
    return h, np.log(a), mu, inv_s


def sankaran_cdf(x, k, lam) -> np.ndarray:
    """Sankaran's approximation of the non-central chi-square CDF (vectorised, broadcasting)."""
    h, loga, mu, inv_s = sankaran_parts(k, lam)
    with np.errstate(divide="ignore"):
        t = np.exp(h * (np.log(np.asarray(x, dtype=np.float64)) - loga))
    return special.ndtr((t - mu) * inv_s)


#: spacing of the group edges in quantile level: 0 = even, 1 = Chebyshev (finer in the tails)
EDGE_MIX = 0.5


def _edges(m: int) -> np.ndarray:
    """Group edges as quantile levels in [0, 1]: a mix of even and Chebyshev spacing, finer in the
    tails, where the model CDF bends most relative to the ranks."""
    j = np.arange(m + 1) / m
    return (1.0 - EDGE_MIX) * j + EDGE_MIX * 0.5 * (1.0 - np.cos(np.pi * j))


class CompressedRanks:
    """One compression of a chunk of classes into m weighted points per class.

    Group ``j`` of a class holds the sorted distances at positions ``[e_j n, e_{j+1} n)`` (edges
    from :func:`_edges`); it keeps its size, mean squared distance ``s``, mean rank, and the
    within-group moments (covariance of rank and s, variances of s and rank) that the
    first-order corrections of the compressed scores use.
    """

    def __init__(self, prep: "ClassChunk", m: int):
        n, C = prep.n, prep.C
        bounds = np.rint(_edges(m)[None, :] * n[:, None]).astype(np.int64)
        cnt = np.diff(bounds, axis=1).astype(np.float64)
        filled = cnt > 0
        safe = np.where(filled, cnt, 1.0)
        sc = prep.sc  # s - class mean of s, zero on padding
        if prep.uniform and filled.all():
            starts = bounds[0, :-1]

            def group_sum(values):
                return np.add.reduceat(values, starts, axis=1)
        else:
            zero = np.zeros((C, 1))

            def group_sum(values):
                cum = np.concatenate([zero, np.cumsum(values, axis=1)], axis=1)
                return np.diff(np.take_along_axis(cum, bounds, axis=1), axis=1)

        s_sum = group_sum(sc)
        s_mean = s_sum / safe
        sq = group_sum(sc * sc)
        if prep.ties:
            ranks = prep.ranks
            r_mean = group_sum(ranks) / safe
            rs = group_sum(ranks * sc)
            rr = group_sum(ranks * ranks)
            var_r = np.maximum(rr - cnt * r_mean * r_mean, 0.0)
        else:  # ranks are the positions 1..n: group sums in closed form
            lo = bounds[:, :-1].astype(np.float64)
            r_mean = lo + (cnt + 1.0) / 2.0
            rs = group_sum(prep.pos * sc)
            var_r = cnt * (cnt * cnt - 1.0) / 12.0
        self.cw = cnt
        first = np.take_along_axis(prep.d2, np.minimum(bounds[:, :-1], n[:, None] - 1), axis=1)
        self.cs = np.maximum(np.where(filled, s_mean + prep.mean_d2[:, None], first), 0.0)  # (rounding)
        self.cr = np.where(filled, r_mean, 0.0)
        self.ca = np.where(filled, r_mean - prep.rbar[:, None], 0.0)
        self.cwa = cnt * self.ca
        self.cov_rs = np.where(filled, rs - cnt * r_mean * s_mean, 0.0)
        self.var_s = np.where(filled, np.maximum(sq - cnt * s_mean * s_mean, 0.0), 0.0)
        self.var_r = np.where(filled, var_r, 0.0)
        self.cw_sqrt_r = cnt * np.sqrt(self.cr)
        with np.errstate(divide="ignore"):  # zero distances: log 0 = -inf, CDF 0 there
            self.logcs = np.log(self.cs)
        self.cwsum = cnt.sum(axis=1)
        # |a| of the full rank vector from the groups: sum over groups of n_j (mean a)^2 + within variance
        self.anorm = np.sqrt((self.cwa * self.ca).sum(axis=1) + self.var_r.sum(axis=1))


class ClassChunk:
    """A chunk of classes: sorted distances (padded), ranks, compressed groups, grids."""

    def __init__(self, distances: Sequence[np.ndarray], grids: np.ndarray | None, dims: Sequence[int], scaling: str,
                 points: int, refine_points: int | None = None, cap: int | None = None):
        refine_points = points if refine_points is None else refine_points
        self.C = len(distances)
        # mean of delta^2 over every distance (it fixes lambda), before any subsampling
        self.mean_sq_all = np.array([float(np.einsum("i,i->", d, d)) / d.size for d in distances])  # no BLAS threads
        if cap is not None and max(d.size for d in distances) > cap:
            distances = [d if d.size <= cap else d[np.linspace(0, d.size - 1, cap).round().astype(np.int64)]
                         for d in distances]
        n = np.array([d.size for d in distances], dtype=np.int64)
        self.n = n
        nmax = int(n.max())
        self.uniform = bool(n.min() == nmax)
        if self.uniform:
            D = np.array(distances, dtype=np.float64)
        else:
            D = np.full((self.C, nmax), np.inf)
            for i, d in enumerate(distances):
                D[i, :d.size] = d
        D.sort(axis=1)
        cols = np.arange(nmax)
        valid = cols[None, :] < n[:, None]
        self.valid = valid
        same = D[:, 1:] == D[:, :-1]
        self.ties = bool(same.any())
        self.pos = (cols + 1.0)[None, :]
        if self.ties:
            # ranks: #{j: d_j <= d_i}, i.e. 1 + the position of the last equal value (ties count fully)
            last = np.ones_like(valid)
            last[:, :-1] = ~same
            idx = np.where(last, cols[None, :] + 1, nmax + 1)
            ranks = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1].astype(np.float64)
            ranks[~valid] = 0.0
        else:
            ranks = np.where(valid, self.pos, 0.0) if not self.uniform else np.broadcast_to(self.pos, D.shape)
        if not self.uniform:
            top = D[np.arange(self.C), n - 1]
            D = np.where(valid, D, top[:, None])
        self.d2 = D * D
        self.ranks = ranks
        self.sumr = ranks.sum(axis=1) if self.ties or not self.uniform else np.full(self.C, nmax * (nmax + 1) / 2.0)
        self.rbar = self.sumr / n
        # moments of delta^2 of the distances used here (for the derived sigma range)
        if self.uniform:
            self.mean_d2 = self.d2.mean(axis=1)
            self.sc = self.d2 - self.mean_d2[:, None]
        else:
            self.mean_d2 = np.where(valid, self.d2, 0.0).sum(axis=1) / n
            self.sc = np.where(valid, self.d2 - self.mean_d2[:, None], 0.0)
        self.var_d2 = np.einsum("ij,ij->i", self.sc, self.sc) / n
        self.g1 = CompressedRanks(self, points)
        self.g2 = self.g1 if refine_points == points else CompressedRanks(self, refine_points)
        self.anorm = self.g1.anorm
        self._a = None
        self._sqrt_p = None
        self.scaling = scaling
        if grids is not None:
            self.set_grids(grids, dims)

    @property
    def a(self) -> np.ndarray:
        """Centred ranks per point (zero on padding) for the full scores."""
        if self._a is None:
            self._a = np.where(self.valid, self.ranks - self.rbar[:, None], 0.0)
            self.full_anorm = np.sqrt(np.einsum("ij,ij->i", self._a, self._a))
        return self._a

    def set_grids(self, grids: np.ndarray, dims: Sequence[int]) -> None:
        """The per-class sigma grids (C, S) and the dims, in loop order."""
        scaling = self.scaling
        self.grids = np.asarray(grids, dtype=np.float64)
        self.S = self.grids.shape[1]
        self.dims = np.asarray(list(dims), dtype=np.float64)
        self.G = self.dims.size * self.S
        self.fac = 1.0 / self.grids**2 if scaling == "divide" else self.grids**2
        mean_x = self.fac[:, None, :] * self.mean_sq_all[:, None, None]  # (C, D, S)
        k = self.dims[None, :, None]
        self.lam = np.maximum(mean_x - k, mean_x / (1.0 + k)).reshape(self.C, self.G)

    @property
    def sqrt_p(self) -> np.ndarray:
        if self._sqrt_p is None:
            self._sqrt_p = np.sqrt(self.ranks / self.ranks.sum(axis=1, keepdims=True))
        return self._sqrt_p

    # -- parameters of grid points -------------------------------------------------------------
    def k_of(self, g: np.ndarray) -> np.ndarray:
        return self.dims[np.asarray(g) // self.S]

    def fac_of(self, c: np.ndarray, g: np.ndarray) -> np.ndarray:
        return self.fac[c, np.asarray(g) % self.S]

    # -- scores ---------------------------------------------------------------------------------
    def compressed_scores(self, F: np.ndarray, dF: np.ndarray, c: np.ndarray, score: str, grp: CompressedRanks) -> np.ndarray:
        """Scores of the model CDF F (P, m) on the compressed points of classes c (P,).

        ``dF`` is dF/ds at the group means (s = squared distance); it carries the first-order
        within-group terms, so that the compressed score approximates the full one to second order.
        """
        w = grp.cw[c]
        if score == "ncc":
            fbar = np.einsum("pm,pm->p", F, w) / grp.cwsum[c]
            b = F - fbar[:, None]
            num = np.einsum("pm,pm->p", b, grp.cwa[c]) + np.einsum("pm,pm->p", dF, grp.cov_rs[c])
            var = np.einsum("pm,pm,pm->p", b, b, w) + np.einsum("pm,pm,pm->p", dF, dF, grp.var_s[c])
            den = grp.anorm[c] * np.sqrt(var)
        else:
            r = grp.cr[c]
            with np.errstate(divide="ignore", invalid="ignore"):
                sF = np.sqrt(F)
                rF = np.sqrt(r * F)
                corr = (0.25 * dF * grp.cov_rs[c] / rF - 0.125 * sF * grp.var_r[c] / (r * np.sqrt(r))
                        - 0.125 * np.sqrt(r) * dF * dF * grp.var_s[c] / (F * sF))
            corr = np.where((F > 1e-6) & (w > 0) & np.isfinite(corr), corr, 0.0)
            num = np.einsum("pm,pm->p", sF, grp.cw_sqrt_r[c]) + corr.sum(axis=1)
            den = np.sqrt(self.sumr[c] * np.einsum("pm,pm->p", F, w))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = num / den
        return np.where((den > 0) & np.isfinite(out), out, -np.inf)

    def _sankaran(self, c: np.ndarray, g: np.ndarray, grp: CompressedRanks) -> tuple[np.ndarray, np.ndarray]:
        """Sankaran's CDF and its derivative in s at the group means, for pairs (c, g): (P, m) each."""
        h, loga, mu, inv_s = sankaran_parts(self.k_of(g), self.lam[c, g])
        cs = grp.cs[c]
        logx = np.log(self.fac_of(c, g))[:, None] + grp.logcs[c]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            t = np.exp(h[:, None] * (logx - loga[:, None]))
            z = (t - mu[:, None]) * inv_s[:, None]
            F = special.ndtr(z)
            dF = np.exp(-0.5 * z * z) * (0.3989422804014327 * h * inv_s)[:, None] * t / cs
        return F, np.where(np.isfinite(dF), dF, 0.0)

    def stage1(self, score: str, sigma_index: np.ndarray | None = None) -> np.ndarray:
        """Sankaran scores on the compressed classes: (C, len(dims), len(sigma_index)).

        Written with broadcasting over (class, dim, sigma, point) and in cache-sized pieces: this
        is the one place where every grid point is touched.
        """
        si = np.arange(self.S) if sigma_index is None else np.asarray(sigma_index)
        grp = self.g1
        Dn, Sn, m = self.dims.size, si.size, grp.cs.shape[1]
        out = np.empty((self.C, Dn, Sn))
        step = max(1, _STAGE1_ELEMENTS // (Dn * Sn * m))
        k = self.dims[None, :, None]
        ncc = score == "ncc"
        for c0 in range(0, self.C, step):
            c1 = min(self.C, c0 + step)
            lam = self.lam[c0:c1].reshape(c1 - c0, Dn, self.S)[:, :, si]
            h, loga, mu, inv_s = sankaran_parts(k, lam)
            hu = (h * (np.log(self.fac[c0:c1, si])[:, None, :] - loga))[..., None]
            logcs = grp.logcs[c0:c1, None, None, :]
            e = h[..., None] * logcs
            e += hu
            np.minimum(e, 700.0, out=e)
            t = np.exp(e, out=e)
            t *= inv_s[..., None]
            t -= (mu * inv_s)[..., None]
            F = _phi_cdf(t)
            if ncc:
                fbar = np.einsum("cdsm,cm->cds", F, grp.cw[c0:c1]) / grp.cwsum[c0:c1, None, None]
                F -= fbar[..., None]
                num = np.einsum("cdsm,cm->cds", F, grp.cwa[c0:c1])
                F *= F
                var = np.einsum("cdsm,cm->cds", F, grp.cw[c0:c1])
                den = grp.anorm[c0:c1, None, None] * np.sqrt(var)
                with np.errstate(divide="ignore", invalid="ignore"):
                    res = num / den
                out[c0:c1] = np.where((den > 0) & np.isfinite(res), res, -np.inf)
            else:
                c = np.repeat(np.arange(c0, c1), Dn * Sn)
                zero = np.zeros((c.size, m))
                out[c0:c1] = self.compressed_scores(F.reshape(-1, m), zero, c, score, grp).reshape(c1 - c0, Dn, Sn)
        return out

    def pairs1(self, c: np.ndarray, g: np.ndarray, score: str) -> np.ndarray:
        """Sankaran scores on the compressed points for pairs (class c, grid point g)."""
        if c.size == 0:
            return np.empty(0)
        F, dF = self._sankaran(c, g, self.g1)
        return self.compressed_scores(F, dF, c, score, self.g1)

    def stage2(self, c: np.ndarray, g: np.ndarray, score: str, interp: bool = False) -> np.ndarray:
        """Exact CDF on the compressed points for pairs (class c, grid point g); with ``interp``, where lambda >=
        ``_INTERP_LAM``, its interpolant (``_STAGE2_NODES`` nodes, checked to ``_STAGE2_TOL``, else ``chndtr``)."""
        if c.size == 0:
            return np.empty(0)
        grp = self.g2
        X = self.fac_of(c, g)[:, None] * grp.cs[c]
        k, lam = self.k_of(g), self.lam[c, g]
        use = lam >= _INTERP_LAM if interp and X.shape[1] > 2 * _STAGE2_NODES else np.zeros(c.size, dtype=bool)
        F = np.empty_like(X)
        if use.any():
            Fi, ok = self._interp_cdf(X[use], k[use], lam[use], np.full(int(use.sum()), X.shape[1]),
                                      _STAGE2_NODES, _STAGE2_TOL)
            F[use] = Fi
            use[use] = ok
        rest = ~use
        if rest.any():
            F[rest] = special.chndtr(X[rest], k[rest, None], lam[rest, None])
        _, dF = self._sankaran(c, g, grp)
        return self.compressed_scores(F, dF, c, score, grp)

    def stage3(self, c: np.ndarray, g: np.ndarray, score: str, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The full score fit_class computes, for pairs (class c, grid point g): (scores, approximate?).

        The model CDF at every training distance is ``chndtr`` itself, or (unless ``exact``) for
        lambda >= ``_INTERP_LAM`` its interpolant :meth:`_interp_cdf` (absolute error checked
        below 1e-12 per candidate, else ``chndtr``); such scores are flagged approximate.
        """
        out = np.empty(c.size)
        approx = np.zeros(c.size, dtype=bool)
        if c.size == 0:
            return out, approx
        per = max(1, (1 << 20) // self.d2.shape[1])
        for p0 in range(0, c.size, per):
            cc, gg = c[p0:p0 + per], g[p0:p0 + per]
            X = self.fac_of(cc, gg)[:, None] * self.d2[cc]
            k, lam = self.k_of(gg), self.lam[cc, gg]
            F = np.empty_like(X)
            use = np.zeros(cc.size, dtype=bool) if exact else lam >= _INTERP_LAM
            if use.any():
                Fi, ok = self._interp_cdf(X[use], k[use], lam[use], self.n[cc[use]])
                F[use] = Fi
                use[use] = ok
            rest = ~use
            if rest.any():
                F[rest] = special.chndtr(X[rest], k[rest, None], lam[rest, None])
            approx[p0:p0 + per] = use
            out[p0:p0 + per] = self._full_scores(F, cc, score)
        return out, approx

    def _full_scores(self, F: np.ndarray, cc: np.ndarray, score: str) -> np.ndarray:
        valid = True if self.uniform else self.valid[cc]
        if score == "ncc":
            fbar = np.where(valid, F, 0.0).sum(axis=1) / self.n[cc]
            b = np.where(valid, F - fbar[:, None], 0.0)
            num = np.einsum("pn,pn->p", b, self.a[cc])
            den = self.full_anorm[cc] * np.sqrt(np.einsum("pn,pn->p", b, b))
        else:
            num = np.einsum("pn,pn->p", np.sqrt(F), self.sqrt_p[cc])
            den = np.sqrt(np.where(valid, F, 0.0).sum(axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            s = num / den
        return np.where((den > 0) & np.isfinite(s), s, -np.inf)

    @staticmethod
    def _interp_cdf(X: np.ndarray, k: np.ndarray, lam: np.ndarray, n: np.ndarray, nodes: int = 0,
                    tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
        """The non-central chi-square CDF at sorted rows X (P, N) from ``nodes`` (default ``_INTERP_M``) exact
        values per row.

        With Sankaran's transform u(x) (closed form, invertible), ``F(x) = Phi(u + r(u))`` where the
        correction r is smooth for lambda >= 50; r is interpolated at Chebyshev nodes in u over the
        row's range (clipped to |u| <= 8: beyond, F is within 1e-15 of 0 or 1), from ``chndtr``
        below the median and the upper-tail function above it (so r keeps its digits in both
        tails). Each row is then checked against ``chndtr`` at four points between nodes, where
        interpolation errors peak; ``ok`` is False where the error exceeds ``tol``.
        """
        P, N = X.shape
        M = nodes or _INTERP_M
        cheb, cheb_fit = _chebyshev(M)
        h, loga, mu, inv_s = sankaran_parts(k, lam)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            u = (np.exp(h[:, None] * (np.log(X) - loga[:, None])) - mu[:, None]) * inv_s[:, None]
            last = u[np.arange(P), n - 1]
            ua = np.maximum(u[:, 0], -_INTERP_U)
            ub = np.minimum(last, _INTERP_U)
            ok = (ub - ua > 1e-3) & np.isfinite(ua) & np.isfinite(ub)
            ua, ub = np.where(ok, ua, -1.0), np.where(ok, ub, 1.0)
            mid, half = (ua + ub) / 2.0, (ub - ua) / 2.0
            checks = np.array([(cheb[0] + cheb[1]) / 2, (cheb[M // 3] + cheb[M // 3 + 1]) / 2,
                               (cheb[2 * M // 3] + cheb[2 * M // 3 + 1]) / 2, (cheb[-1] + cheb[-2]) / 2])
            wn = np.concatenate([cheb, checks])
            un = mid[:, None] + half[:, None] * wn[None, :]
            tn = mu[:, None] + un / inv_s[:, None]
            ok &= np.all(tn > 0, axis=1)
            Xn = np.exp(loga[:, None] + np.log(np.where(tn > 0, tn, 1.0)) / h[:, None])
            lower = un <= 0.0
            kk = np.broadcast_to(k[:, None], Xn.shape)
            ll = np.broadcast_to(lam[:, None], Xn.shape)
            Fn = np.empty_like(Xn)
            Fn[lower] = special.chndtr(Xn[lower], kk[lower], ll[lower])
            Qn = _ncx2_sf(Xn[~lower], kk[~lower], ll[~lower])
            Fn[~lower] = 1.0 - Qn
            rn = np.empty_like(Xn)
            rn[lower] = special.ndtri(Fn[lower])
            rn[~lower] = -special.ndtri(Qn)
            rn -= un
            ok &= np.all(np.isfinite(rn[:, :M]), axis=1)
            coef = np.einsum("pj,kj->pk", np.where(np.isfinite(rn[:, :M]), rn[:, :M], 0.0), cheb_fit)
            # Clenshaw at the data points and at the check points
            pts = np.concatenate([u, un[:, M:]], axis=1)
            t = np.clip((pts - mid[:, None]) / half[:, None], -1.0, 1.0)
            t2 = 2.0 * t
            b1 = np.zeros_like(t)
            b2 = np.zeros_like(t)
            for j in range(M - 1, 0, -1):
                b0 = t2 * b1
                b0 -= b2
                b0 += coef[:, j:j + 1]
                b2, b1 = b1, b0
            r = t * b1 - b2 + coef[:, :1]
            F = special.ndtr(pts + r)
        err = np.abs(F[:, N:] - Fn[:, M:]).max(axis=1)
        ok &= err <= tol
        return F[:, :N], ok


#: interpolated full-data CDF (stage 3): Chebyshev nodes per candidate, smallest lambda, |u| range
_INTERP_M = 24
_INTERP_LAM = 50.0
_INTERP_U = 8.0
#: stage 2 with the interpolated CDF (exact mode): nodes per candidate, and the error checked (far below
#: the 1e-6 floors of the self-check's margins, batch.py)
_STAGE2_NODES = 16
_STAGE2_TOL = 1e-10


@functools.lru_cache(maxsize=None)
def _chebyshev(m: int) -> tuple[np.ndarray, np.ndarray]:
    """``m`` Chebyshev nodes in [-1, 1], ascending, and the matrix F with coefficients = values @ F.T."""
    nodes = np.cos(np.pi * (np.arange(m) + 0.5) / m)[::-1].copy()
    fit = np.cos(np.outer(np.arange(m), np.arccos(nodes))) * (2.0 / m)
    fit[0] /= 2.0
    return nodes, fit
