"""Batched Algorithm 1 for ``ncx2-grid``: the ``exact`` cascade and the ``fast`` mode.

Both work on a chunk of classes at once (numpy calls cover many classes) and on the same per-class
sigma grid and dim range as :func:`calibrate_builtins.estimators.ncx2.search.fit_class`, the straightforward
implementation and the semantic reference. Grid point ``g`` is ``(dims[g // S], sigma[g % S])``;
loop order is ``g`` ascending; ties go to the first in loop order, as in ``fit_class``.

The numerics both use -- a chunk of classes compressed into weighted points, Sankaran's approximation
of the CDF, the interpolated exact CDF and the fit scores at each stage -- are in
:mod:`calibrate_builtins.estimators.ncx2.batch_scores` (``ClassChunk``), whose docstring describes them;
this module holds the two searches over the grid that use them.

Exact mode (thresholds equal to ``fit_class``'s)
------------------------------------------------
1. Stage 1 scores every grid point with Sankaran's CDF on 32 compressed points.
2. Stage 2 scores, with the exact CDF on 64 compressed points (interpolated from 16 nodes where lambda
   >= 50, checked to 1e-10: see batch_scores.py), the best 16 grid points of stage 1 and the best two
   sigmas of every dim (Sankaran's error differs between dims).
3. Stage 3 scores the best 2 of stage 2 on every training distance -- the score ``fit_class``
   computes (with the interpolated CDF, see batch_scores.py) -- and takes the maximum.
4. Self-check. From the candidates scored at two stages the run measures, per class, how far the
   cheaper score fell from the next stage's (``delta1 = S2 - S1`` per dim, ``delta2 = S3 - S2``)
   and bounds the unseen corrections by ``max(delta) + max(spread of delta, floor)`` (floors
   1e-6 and 2e-6). Every grid point whose cheaper score plus those bounds could still reach the
   best full score is promoted to the next stage, and the check repeats until nothing changes.
   Interpolated full scores within 1e-9 of the best are recomputed with ``chndtr``. A class that
   is not settled after ``EXACT_ROUNDS`` rounds, needs more than ``EXACT_MAX_EXTRA`` extra
   candidates, has two full scores within 1e-12 (a tie: loop order must decide) or no finite
   score is handed to ``fit_class`` itself. Validated against ``fit_class`` on generated classes
   of several families (tests/test_ncx2_fast.py, docs/performance.md).

Fast mode (thresholds within ``FAST_BOUND`` of exact mode)
---------------------------------------------------------
Classes with at most ``FAST_EXACT_UPTO`` (400) distances go through the exact cascade (cheap there,
and a coarse search on so few points is not reliable), and so do all classes when the dim range
starts below ``FAST_MIN_DIM`` (10): there Sankaran's approximation ranks grid points poorly, and
an independent check found the coarse search off by up to 97% (Rayleigh and uniform distances,
dim [1, 4]; Weibull, dim optimum 2-6). Heavily tied classes skip the cascade altogether
(``search.TIE_DISTINCT_FRACTION``). Larger classes with more than
``FAST_MAX_POINTS`` distances are first reduced to that many by a deterministic systematic
sample (``FAST_MAX_POINTS`` evenly spaced positions in the order given; the derived sigma range
comes from the sample, the mean of delta^2, which fixes lambda, from all distances), so the cost
per class stops growing there. Then, on
``FAST_M`` compressed points: Sankaran scores on every ``FAST_STEP``-th sigma of every dim; around
each dim's best coarse sigma a window of ``2 FAST_STEP - 1`` sigmas; the best ``FAST_K`` are
re-scored with the exact CDF on the compressed points and the best of them is the fit (its
``fit_score`` is that compressed score). The result is always a point of the same grid.

Bound. On generated data (the synthetic-impostors families: non-central chi-square, gamma,
lognormal, shifted |t|, 60% off-model; with ties; cohorts of 400 to 8,209; both scores; both
scalings; about 8,300 classes) ``|fast / exact - 1|`` of the thresholds at targets 1e-2, 1e-3
and 1e-4 had median 0 to 0.3%, 99th percentile at most 3.1% and maximum 3.9%; the documented and
tested bound is ``FAST_BOUND`` = 6%. The bound is measured, not proven: it holds for the families
above with dim ranges from 10 up, and the two guards above exist because it failed outside them. (With the coarse search on 250-300 distances, 4 of 3,200
classes moved by more, up to 28%: hence ``FAST_EXACT_UPTO``.)
"""

from __future__ import annotations

import numpy as np

from .batch_scores import ClassChunk

#: compressed points of stage 2 of the exact cascade
EXACT_M = 64
#: compressed points of stage 1 of the exact cascade
EXACT_M1 = 32
#: stage-2 and stage-3 candidate counts of the exact cascade (before the self-check adds more)
EXACT_K2 = 16
EXACT_K3 = 2
#: rounds of the self-check before a class is handed to fit_class
EXACT_ROUNDS = 10
#: a class needing more than this many extra stage-2 candidates is handed to fit_class
EXACT_MAX_EXTRA = 200
#: fast mode: compressed points, coarse sigma step, exact re-scored candidates, cohort cap
FAST_M = 16
FAST_STEP = 4
FAST_K = 4
FAST_MAX_POINTS = 4096
#: fast mode fits classes with at most this many distances with the exact cascade instead
FAST_EXACT_UPTO = 400
#: fast mode's coarse search needs Sankaran's approximation to rank grid points, which it does
#: poorly with few degrees of freedom; dim ranges starting below this use the exact cascade
FAST_MIN_DIM = 10
#: documented bound: |fast threshold / exact threshold - 1| <= FAST_BOUND at targets 1e-2 .. 1e-4
#: (measured on generated data of several families: see the module docstring and docs/performance.md)
FAST_BOUND = 0.06


def _margins(lo: np.ndarray, hi: np.ndarray, seen: np.ndarray, floor: float) -> np.ndarray:
    """Upper bound of the correction hi - lo from the pairs seen at both stages, along the last axis:
    the largest correction plus its spread (at least ``floor``); inf where no finite pair was seen."""
    with np.errstate(invalid="ignore"):
        ok = seen & np.isfinite(lo) & np.isfinite(hi)
        delta = hi - lo
    top = np.max(np.where(ok, delta, -np.inf), axis=-1)
    low = np.min(np.where(ok, delta, np.inf), axis=-1)
    with np.errstate(invalid="ignore"):
        out = top + np.maximum(top - low, floor)
    return np.where(ok.any(axis=-1), out, np.inf)


#: floors of the spread of the corrections (stage 1 -> 2: Sankaran's error; 2 -> 3: compression)
_FLOOR1 = 1e-6
_FLOOR2 = 2e-6


def exact_batch(prep: ClassChunk, score: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class: winning grid index (-1: hand the class to fit_class) and its full score; and
    [stage-2 scores, full-data scores] computed for the whole batch."""
    C, G, S, Dn = prep.C, prep.G, prep.S, prep.dims.size
    S1 = prep.stage1(score).reshape(C, G)
    S2 = np.full((C, G), np.nan)
    S3 = np.full((C, G), np.nan)
    A3 = np.zeros((C, G), dtype=bool)  # S3 from the interpolated CDF (error < ~1e-11)
    # stage 2: the best K2 overall and the best two sigmas of every dim (so that Sankaran's error,
    # which differs between dims, is measured in every dim)
    first = np.zeros((C, G), dtype=bool)
    order1 = np.argsort(-S1, axis=1, kind="stable")
    np.put_along_axis(first, order1[:, :min(EXACT_K2, G)], True, axis=1)
    per_dim = np.argsort(-S1.reshape(C, Dn, S), axis=2, kind="stable")[:, :, :min(2, S)]
    per_dim = per_dim + (np.arange(Dn) * S)[None, :, None]
    np.put_along_axis(first, per_dim.reshape(C, -1), True, axis=1)
    cls, g2 = np.nonzero(first)
    S2[cls, g2] = prep.stage2(cls, g2, score, interp=True)
    s2 = np.where(np.isnan(S2), -np.inf, S2)
    order2 = np.argsort(-s2, axis=1, kind="stable")
    k3 = min(EXACT_K3, G)
    cls = np.repeat(np.arange(C), k3)
    g3 = order2[:, :k3].ravel()
    S3[cls, g3], A3[cls, g3] = prep.stage3(cls, g3, score)
    winner = np.full(C, -1, dtype=np.int64)
    best = np.full(C, -np.inf)
    pending = np.ones(C, dtype=bool)
    evals = np.array([int(np.count_nonzero(~np.isnan(S2))), g3.size])
    dim_of = np.arange(G) // S
    for _ in range(EXACT_ROUNDS):
        # the self-check of every pending class at once (module docstring, step 4)
        rows = np.flatnonzero(pending)
        s1, s2, s3, a3 = S1[rows], S2[rows], S3[rows], A3[rows]
        seen2, seen3 = ~np.isnan(s2), ~np.isnan(s3)
        s = np.where(seen3, s3, -np.inf)
        b3 = s.max(axis=1)
        usable = np.isfinite(b3)  # else fit_class decides (and names the problem)
        margin2 = _margins(s2, s3, seen3, _FLOOR2)
        # stage-1 -> 2 correction bound per dim (Sankaran's error depends on dim and lambda)
        margin1 = _margins(s1.reshape(-1, Dn, S), s2.reshape(-1, Dn, S), seen2.reshape(-1, Dn, S), _FLOOR1)
        with np.errstate(invalid="ignore"):
            n2 = ~seen2 & (s1 + margin1[:, dim_of] + margin2[:, None] >= b3[:, None])
            n3 = seen2 & ~seen3 & (s2 + margin2[:, None] >= b3[:, None])
        n2 &= usable[:, None]
        n3 &= usable[:, None]
        wide = n2.sum(axis=1) > EXACT_MAX_EXTRA
        n2[wide] = False
        n3[wide] = False
        settled = usable & ~wide & ~n2.any(axis=1) & ~n3.any(axis=1)
        w = np.argmax(s, axis=1)  # first maximum: loop order
        top = s[np.arange(rows.size), w]
        close = a3 & (s >= (top - 1e-9)[:, None]) & settled[:, None]
        unsure = close.any(axis=1)  # interpolated scores too close to call: chndtr decides
        done = settled & ~unsure
        rest = s.copy()
        rest[np.arange(rows.size), w] = -np.inf
        tie = rest.max(axis=1) >= top - 1e-12 * np.maximum(1.0, np.abs(top))  # near tie: fit_class decides
        won = done & ~tie
        winner[rows[won]], best[rows[won]] = w[won], top[won]
        pending[rows[~usable | wide | done]] = False
        need2_c, need2_g = np.nonzero(n2)
        need3_c, need3_g = np.nonzero(n3)
        exact_c, exact_g = np.nonzero(close)
        need2_c, need3_c, exact_c = rows[need2_c], rows[need3_c], rows[exact_c]
        if not need2_c.size and not need3_c.size and not exact_c.size:
            break
        if exact_c.size:
            S3[exact_c, exact_g], A3[exact_c, exact_g] = prep.stage3(exact_c, exact_g, score, exact=True)
            evals[1] += exact_c.size
        if need2_c.size:
            S2[need2_c, need2_g] = prep.stage2(need2_c, need2_g, score, interp=True)
            evals[0] += need2_c.size
        if need3_c.size:
            S3[need3_c, need3_g], A3[need3_c, need3_g] = prep.stage3(need3_c, need3_g, score)
            evals[1] += need3_c.size
    winner[pending] = -1
    return winner, best, evals


def fast_batch(prep: ClassChunk, score: str) -> tuple[np.ndarray, np.ndarray]:
    """(winning grid index, compressed exact score) per class; -1 where nothing could be scored."""
    C, S, Dn = prep.C, prep.S, prep.dims.size
    coarse = np.arange(0, S, FAST_STEP)
    if coarse[-1] != S - 1:
        coarse = np.append(coarse, S - 1)
    s1 = prep.stage1(score, coarse)  # (C, D, Sc)
    at = coarse[np.argmax(s1, axis=2)]  # best coarse sigma index per class and dim
    width = min(2 * FAST_STEP - 1, S)
    start = np.clip(at - (FAST_STEP - 1), 0, S - width)  # a window of distinct sigmas around the best
    fine = start[:, :, None] + np.arange(width)[None, None, :]  # (C, D, width)
    cand_g = (np.arange(Dn)[None, :, None] * S + fine).reshape(C, -1)
    s1f = prep.pairs1(np.repeat(np.arange(C), cand_g.shape[1]), cand_g.ravel(), score).reshape(C, -1)
    order = np.argsort(-s1f, axis=1, kind="stable")
    k = min(FAST_K, cand_g.shape[1])
    chosen = np.take_along_axis(cand_g, order[:, :k], axis=1)
    cls = np.repeat(np.arange(C), k)
    s2 = prep.stage2(cls, chosen.ravel(), score).reshape(C, k)
    # ties: the first in loop order among the best
    s2 = np.where(np.isfinite(s2), s2, -np.inf)
    top = s2.max(axis=1, keepdims=True)
    g = np.where(s2 == top, chosen, np.iinfo(np.int64).max).min(axis=1)
    g = np.where(np.isfinite(top[:, 0]), g, -1)
    return g, top[:, 0]
