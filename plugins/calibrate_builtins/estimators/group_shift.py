"""Each demographic group held where one pooled threshold puts it (auto's ``-matched`` structures, issue 39).

A class-specific structure (anchored, bulk) sets each class's FPR near the target over *all* its impostors. Where
groups differ in how many of a class's impostors are of its own group, that moves each group's *same-group* FMR
(ISO/IEC 19795-10: false accepts among impostors of the class's own group) apart: a class of a minority group meets
few same-group impostors, so the FPR budget its few look-alikes spend makes its same-group FMR several times the
target, and the gap between groups widens beyond what one pooled threshold leaves (CFP-like faces: women 3.3-4.6x
under anchored against 1.9-3.4x under one threshold).

The matched structure keeps the classes' locations relative to each other within a group (the per-class gain) and
shifts each labelled group as a whole by one constant on the standardised scale, so that the group's same-group FMR
is what one pooled threshold gives it: for class c of group g the threshold is ``m_c + s_c (z(e) + D_g)``, with
``z(e)`` the pooled quantile of the shifted scores ``z - D_g`` (so the overall FPR stays calibrated on every training
distance) and D_g solved on the training distances:

* at each level e of ``LEVELS`` where the group expects at least ``MIN_EXPECTED`` same-group false accepts under one
  pooled threshold (its e-quantile of all the log distances), D_g(e) makes the share of the group's same-group scores
  below ``z(e) + D_g`` equal to one threshold's share there;
* D_g is the median of D_g(e) over the group's ``LOWEST`` lowest such levels (the tail decides a low FPR; a small
  group is measured at higher levels only), one shift per group, not per target, so that the model answers any
  target; ``z(e)`` depends on the shifts, so this is repeated until they settle (a few rounds). A group that no
  level measures keeps D_g = 0; classes without a group too.

So the gap between groups is one threshold's (where the levels measure it) while each group's classes keep their own
locations. The shifts are in the saved locations; a class enrolled later is located as a class without a group (no
shift): refit to give it its group's. Cost: a partial sort of the scores per level and round (the choice judges it on at most a million).
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.contract.types import TrainingGroups

#: the levels the shifts are matched at, and the same-group false accepts each group must expect there
LEVELS = (0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001)
MIN_EXPECTED = 20.0
#: the shift is the median over a group's lowest this many measured levels
LOWEST = 3
#: rounds of (pooled quantile, shifts); the shifts settle in two or three
ROUNDS = 4


def _lowest_quantile(values: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """The linear quantile at rank share x n of ``values`` (unsorted) for each share, reading only the lowest."""
    n = values.size
    need = int(min(n, math.ceil(float(np.max(shares)) * n) + 2))
    low = np.sort(np.partition(values, need - 1)[:need]) if need < n else np.sort(values)
    k = np.clip(shares * n, 1.0, float(n))
    lo = np.clip(np.floor(k).astype(np.int64), 1, need)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, need)
    return low[lo - 1] + np.where(hi > lo, k - lo, 0.0) * (low[hi - 1] - low[lo - 1])


def group_shifts(z: np.ndarray, y: np.ndarray, counts: np.ndarray, groups: TrainingGroups) -> np.ndarray:
    """D per group code (len(names) + 1 values, the last, for classes without a group, 0): see the module.
    ``z``: every training distance's standardised score and ``y`` its working-scale value (log(d + offset)), in the
    gallery's value order (class by class, as ``groups.of_impostor``)."""
    n_groups = len(groups.names)
    shifts = np.zeros(n_groups + 1)
    own = np.repeat(groups.of_class, counts)
    same = (groups.of_impostor == own) & (own < n_groups)
    members = [np.flatnonzero(same & (own == g)) for g in range(n_groups)]
    levels = np.asarray(LEVELS, dtype=np.float64)
    # one pooled threshold's same-group share per group and level: the reference each group is held at
    tau = _lowest_quantile(y, levels)
    reference = np.array([[np.count_nonzero(y[idx] <= t) / max(idx.size, 1) for t in tau] for idx in members])
    use = [np.flatnonzero(reference[g] * members[g].size >= MIN_EXPECTED)[-LOWEST:] for g in range(n_groups)]
    measured = [g for g in range(n_groups) if use[g].size]
    if len(measured) < 2:
        return shifts  # fewer than two groups measured: no gap to hold
    for _ in range(ROUNDS):
        pooled = _lowest_quantile(z - shifts[own], levels)  # z(e) with the current shifts
        new = shifts.copy()
        for g in measured:
            at = _lowest_quantile(z[members[g]], reference[g][use[g]])  # the group's own score at one threshold's share
            new[g] = float(np.median(at - pooled[use[g]]))
        if np.allclose(new, shifts, atol=1e-6):
            break
        shifts = new
    return shifts


def shifted_model(model, impostors, pooled_z: np.ndarray, shift: np.ndarray, tail_params: dict):
    """``model`` (auto's ZnormModel: per-class location and scale, a pooled shape) with each class c's scores shifted by
    ``shift[c]`` on the standardised scale: location ``m_c + s_c shift_c``, the pooled shape the sorted ``z - shift``
    of ``pooled_z`` (every training distance's score, class by class as ``impostors``), its GPD tail fitted again."""
    from .znorm import ZnormModel, pooled_tail

    counts = impostors.counts()
    sorted_z = np.sort(pooled_z - np.repeat(shift, counts))
    tail = pooled_tail(sorted_z, tail_params["tail_fraction"], tail_params["min_exceedances"],
                       tail_params["shape_bounds"])
    return ZnormModel(model.classes, model.loc + model.scale * shift, model.scale, model.n, model.family, model.offset,
                      True, False, sorted_z, tail, model.min_tail_count, anchor=model.anchor)


# ---- the same shifts over a sharded gallery (calibrate.contract.sharded.select_ranks) -----------------------------

def _quantile_ranks(n: int, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k, lo, hi) of :func:`_lowest_quantile` at ``shares`` of ``n`` values: the 1-based ranks it reads."""
    need = int(min(n, math.ceil(float(np.max(shares)) * n) + 2))
    k = np.clip(shares * n, 1.0, float(n))
    return k, np.clip(np.floor(k).astype(np.int64), 1, need), np.clip(np.ceil(k).astype(np.int64), 1, need)


def _quantile_of(n: int, shares: np.ndarray, at: dict) -> np.ndarray:
    """:func:`_lowest_quantile`'s arithmetic on the order statistics ``at`` ({0-based rank: value}) it reads."""
    k, lo, hi = _quantile_ranks(n, shares)
    low_lo = np.array([at[int(r) - 1] for r in lo])
    low_hi = np.array([at[int(r) - 1] for r in hi])
    return low_lo + np.where(hi > lo, k - lo, 0.0) * (low_hi - low_lo)


def _wanted(n: int, shares: np.ndarray) -> list[int]:
    _, lo, hi = _quantile_ranks(n, shares)
    return sorted({int(r) - 1 for r in np.r_[lo, hi]})


def _shift_sets(training, arg) -> dict:
    """The value sets :func:`sharded_group_shifts` reads from a shard: every distance's working-scale value ``y`` and
    standardised score ``z``; per labelled group g its same-group distances' ``y<g>`` and ``m<g>``; per group code c
    (the unlabelled last) the scores of its classes' distances ``z<c>``."""
    values_fn, values_arg, n_groups, names = arg
    z, y = values_fn(training, values_arg)
    of = training.groups
    own = np.repeat(of.of_class, training.impostors.counts())
    out = {"y": y, "z": z}
    if any(n[0] in "ym" and n != "y" for n in names):
        same = (of.of_impostor == own) & (own < n_groups)
        for g in range(n_groups):
            members = same & (own == g)
            out[f"y{g}"], out[f"m{g}"] = y[members], z[members]
    if any(n[0] == "z" and n != "z" for n in names):
        for c in range(n_groups + 1):
            out[f"z{c}"] = z[own == c]
    return {n: out[n] for n in names if n in out}


def _merged(hists: list[tuple]) -> tuple:
    """Histograms (bins, counts) of disjoint sets as one of their union."""
    bins = np.concatenate([h[0] for h in hists]) if hists else np.zeros(0, np.int64)
    counts = np.concatenate([h[1] for h in hists]) if hists else np.zeros(0, np.int64)
    uniq, inverse = np.unique(bins, return_inverse=True)
    return uniq, np.bincount(inverse, weights=counts, minlength=uniq.size).astype(np.int64)


def _at_most(hist: tuple, gathered: np.ndarray, t: float) -> int:
    """How many of a set lie at or below ``t``: its histogram's bins below t's, and its gathered values in t's bin."""
    from calibrate.contract.sharded import _BIN_SHIFT, order_keys

    b = int(order_keys(np.array([t]))[0] >> np.uint64(_BIN_SHIFT))
    bins, counts = hist
    below = int(counts[bins < b].sum())
    in_bin = gathered[(order_keys(gathered) >> np.uint64(_BIN_SHIFT)) == np.uint64(b)] if gathered.size else gathered
    return below + int(np.count_nonzero(in_bin <= t))


def sharded_group_shifts(runner, values_fn, values_arg, n_groups: int) -> np.ndarray:
    """:func:`group_shifts` over every shard of a sharded gallery (the same numbers: the quantiles read the same
    order statistics, found exactly over the shards, calibrate.contract.sharded): ``values_fn(training, values_arg)``
    gives a shard's (standardised scores z, working-scale values y) in its value order, as group_shifts takes them
    for a whole gallery. A pass of histograms; one gathering one pooled threshold's quantiles, each group's share
    below them and the first round's pooled quantiles; one for each group's own quantiles; then one a round (the
    shifted scores' quantiles bracketed from the groups' histograms, calibrate.contract.sharded.shifted_ranks)."""
    from calibrate.contract.sharded import at_ranks, bins_of, gather_bins, named_histograms, shifted_ranks

    shifts = np.zeros(n_groups + 1)
    levels = np.asarray(LEVELS, dtype=np.float64)
    each = [f"y{g}" for g in range(n_groups)] + [f"m{g}" for g in range(n_groups)]
    groups = [f"z{c}" for c in range(n_groups + 1)]

    def arg(names):
        return values_fn, values_arg, n_groups, tuple(names)

    hists = named_histograms(runner, _shift_sets, arg(["y", *each, *groups]))
    hists["z"] = _merged([hists[c] for c in groups if c in hists])  # every score: the union of the groups'
    n = int(hists["y"][1].sum())
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ranks = _wanted(n, levels)
    tau_bins = bins_of(hists["y"], ranks)
    wanted = {"y": tau_bins, "z": bins_of(hists["z"], ranks)}
    wanted.update({f"y{g}": tau_bins for g in range(n_groups)})
    got = gather_bins(runner, _shift_sets, arg(wanted), wanted)
    tau = _quantile_of(n, levels, at_ranks(hists["y"], got["y"], ranks))
    size = np.array([int(hists.get(f"y{g}", empty)[1].sum()) for g in range(n_groups)])
    reference = np.array([[_at_most(hists.get(f"y{g}", empty), got[f"y{g}"], t) for t in tau]
                          for g in range(n_groups)]).reshape(n_groups, levels.size) / np.maximum(size, 1)[:, None]
    use = [np.flatnonzero(reference[g] * size[g] >= MIN_EXPECTED)[-LOWEST:] for g in range(n_groups)]
    measured = [g for g in range(n_groups) if use[g].size]
    if len(measured) < 2:
        return shifts
    pooled = _quantile_of(n, levels, at_ranks(hists["z"], got["z"], ranks))
    own_ranks = {g: _wanted(int(size[g]), reference[g][use[g]]) for g in measured}
    wanted = {f"m{g}": bins_of(hists[f"m{g}"], own_ranks[g]) for g in measured}
    got = gather_bins(runner, _shift_sets, arg(wanted), wanted)
    own_at = {g: _quantile_of(int(size[g]), reference[g][use[g]], at_ranks(hists[f"m{g}"], got[f"m{g}"], own_ranks[g]))
              for g in measured}
    of_groups = {c: hists[c] for c in groups if c in hists}
    for round_ in range(ROUNDS):
        if round_:  # the first round's pooled quantiles are the unshifted scores'
            pooled = _quantile_of(n, levels, shifted_ranks(runner, _shift_sets, arg(groups), of_groups,
                                                           {f"z{c}": float(shifts[c]) for c in range(n_groups + 1)},
                                                           ranks))
        new = shifts.copy()
        for g in measured:
            new[g] = float(np.median(own_at[g] - pooled[use[g]]))
        if np.allclose(new, shifts, atol=1e-6):
            break
        shifts = new
    return shifts
