"""How class-specific ``auto`` should be, chosen from the training data by what it costs genuine users (issue 30).

The structures (every one auto's pooled shape on the log scale, differing in how a class is located; znorm.py):

* ``one``: no class is located apart: one pooled threshold for everyone (the pooled quantile of the log
  distances, with auto's GPD tail where the pooled sample is thin);
* ``anchored``: each class at its own nearest impostors, shrunk toward the others (anchored.py);
* ``bulk``: each class by the median and IQR of all its impostors (what ``auto`` was, now ``auto-bulk``);
* with two or more labelled groups, ``anchored-matched`` and ``bulk-matched``: the same, each group shifted as a whole to
  one pooled threshold's same-group FMR (group_shift.py), so that per-class thresholds need not widen the gap.

The choice is cross-fitted on the training data only. Each class's training impostor distances are cut in two
halves; a structure is fitted on one half of every class and judged on the other half, then the other way round.
At each FPR level of ``LEVELS`` that the held-out half can measure (at least ``MIN_EXPECTED`` false accepts expected),
its thresholds admit some of the held-out impostors; one pooled threshold admitting the same number of them is the
reference (calibrate.statistics.verification.one_threshold), and the training genuine comparisons are decided by both. The
genuine comparisons only one of the two rejects are counted over the levels and the two folds (calibrate.
verification.paired_fnr): a structure that turns away fewer of them than one threshold, beyond ``Z_CHOOSE``
standard errors of the paired difference (clustered by class: :attr:`Judged.z`), may be chosen; of those the one with the most net saves is. Otherwise,
and without enough genuine comparisons (``MIN_GENUINE``), one pooled threshold is used: the choice that is never
worse than one pooled threshold by design.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from calibrate.contract.types import GenuineDistances, ImpostorDistances, TrainingGroups
from calibrate.statistics.verification import PooledScores, loosest_below

#: the FPR levels the choice is judged at (those the held-out halves can measure)
LEVELS = (0.01, 0.003, 0.001, 0.0003, 0.0001)
#: a level counts when the held-out half expects at least this many false accepts there
MIN_EXPECTED = 20.0
#: fewer training genuine comparisons than this: no choice, one pooled threshold
MIN_GENUINE = 30
#: a class needs this many training distances for both halves to locate it
MIN_PER_CLASS = 8
#: a structure is chosen over one pooled threshold only when its paired saving is beyond this many standard errors
Z_CHOOSE = 2.0
STRUCTURES = ("one", "anchored", "bulk")
#: with two or more labelled groups, the class-specific structures with each group held at one pooled threshold's
#: same-group FMR (group_shift.py)
MATCHED = ("anchored-matched", "bulk-matched")
#: the widest same-group FMR max/min ratio between groups a structure may have (issue 30's bar) where one pooled
#: threshold's is narrower
MAX_SPREAD = 1.5
#: the choice is judged on at most this many training impostor distances (a fixed subset of classes beyond)
MAX_JUDGED = 1_000_000
#: ... but a labelled group of at most this many classes is judged whole
KEEP_GROUP = 200


@dataclass
class Judged:
    """One structure's cross-fitted comparison with one pooled threshold on the training genuine comparisons, and,
    with groups, its false accepts among each group's same-group held-out impostors against what its targets
    expect there."""

    structure: str
    worse: int = 0      # genuine comparisons it rejects and one threshold accepts
    better: int = 0     # ... it accepts and one threshold rejects
    decided: int = 0    # genuine decisions counted (comparisons x levels x folds)
    rejected: int = 0   # ... of which it rejected (its cross-fitted training FNR: rejected / decided)
    group_fa: np.ndarray | None = None        # per labelled group: same-group false accepts (levels x folds summed)
    group_expected: np.ndarray | None = None  # ... what the levels expect among those impostors
    group_var: np.ndarray | None = None       # ... the variance of group_fa (nested Poisson counts, see judge)

    #: per class: its genuine comparisons' net (worse - better) summed over the levels and the folds
    net_per_class: np.ndarray | None = None

    @property
    def z(self) -> float:
        """The paired difference over its standard error, clustered by class: a class's comparisons are decided at
        several nested levels, in two folds, by one threshold per level, so they are not independent (McNemar's
        (worse - better) / sqrt(worse + better) would treat them so and choose about twice as often as it says
        where nothing is gained); sum d_c / sqrt(sum d_c^2) over the classes' nets d_c. Without per-class nets
        (a Judged made by hand), McNemar's."""
        if self.net_per_class is not None:
            total, spread = float(self.net_per_class.sum()), float(np.square(self.net_per_class).sum())
            return total / math.sqrt(spread) if spread > 0 else 0.0
        n = self.worse + self.better
        return (self.worse - self.better) / math.sqrt(n) if n else 0.0

    @property
    def fnr(self) -> float | None:
        """Its training-side FNR, cross-fitted, over the levels and the two folds."""
        return self.rejected / self.decided if self.decided else None

    @property
    def fnr_one(self) -> float | None:
        """One pooled threshold's at the same FPR on the same decisions."""
        return (self.rejected - self.worse + self.better) / self.decided if self.decided else None

    @property
    def per_1000(self) -> float:
        return 1000.0 * (self.worse - self.better) / self.decided if self.decided else 0.0

    def _measured(self) -> np.ndarray | None:
        if self.group_fa is None:
            return None
        measured = self.group_expected >= MIN_EXPECTED
        return measured if np.count_nonzero(measured) >= 2 else None

    @property
    def group_spread(self) -> float | None:
        """The largest over the smallest group's same-group achieved/target ratio (groups expecting at least
        ``MIN_EXPECTED`` false accepts); inf when one of them has none; None with fewer than two such groups."""
        measured = self._measured()
        if measured is None:
            return None
        r = self.group_fa[measured] / self.group_expected[measured]
        return math.inf if r.min() == 0 else float(r.max() / r.min())

    def spread_variance(self) -> float:
        """The variance of log :attr:`group_spread` (delta method over the two extreme groups' counts)."""
        measured = self._measured()
        r = self.group_fa[measured] / self.group_expected[measured]
        fa, var = self.group_fa[measured], self.group_var[measured]
        hi, lo = int(np.argmax(r)), int(np.argmin(r))
        return float(var[hi] / fa[hi] ** 2 + var[lo] / fa[lo] ** 2)


def wider(judged: Judged, reference: Judged) -> bool:
    """Whether ``judged``'s group spread is wider than ``reference``'s and than ``MAX_SPREAD`` beyond counting noise
    (the log ratios more than ``Z_CHOOSE`` standard errors apart, the two treated as independent, which overstates
    the error: they are counted on the same impostors)."""
    mine, theirs = judged.group_spread, reference.group_spread
    if mine is None or mine <= MAX_SPREAD:
        return False
    if math.isinf(mine):
        return theirs is not None and not math.isinf(theirs)
    if theirs is None or math.isinf(theirs):
        return False
    bar = max(theirs, MAX_SPREAD)
    se = math.sqrt(judged.spread_variance() + (reference.spread_variance() if theirs > MAX_SPREAD else 0.0))
    return (math.log(mine) - math.log(bar)) > Z_CHOOSE * se


def halves_index(impostors: ImpostorDistances) -> tuple[np.ndarray, np.ndarray]:
    """Each class's training distances cut in two by a fixed shuffle of its positions (the same every run): the
    flat indices into ``impostors.values`` of the first and of the second half, class by class."""
    a, b = [], []
    for i in range(len(impostors)):
        lo, hi = int(impostors.offsets[i]), int(impostors.offsets[i + 1])
        order = lo + np.random.default_rng([i, hi - lo]).permutation(hi - lo)
        a.append(order[: (hi - lo) // 2])
        b.append(order[(hi - lo) // 2:])
    return np.concatenate(a), np.concatenate(b)


def halves(impostors: ImpostorDistances) -> tuple[ImpostorDistances, ImpostorDistances]:
    """:func:`halves_index` as two galleries of the same classes."""
    a, b = halves_index(impostors)
    return _take(impostors, a, True), _take(impostors, b, False)


def _take(impostors: ImpostorDistances, index: np.ndarray, first: bool) -> ImpostorDistances:
    """The gallery of the same classes holding ``impostors.values[index]``: :func:`halves_index`'s first half
    (``first``: n // 2 of each class's n) or its second."""
    counts = impostors.counts()
    half = counts // 2 if first else counts - counts // 2
    return ImpostorDistances(impostors.classes, impostors.values[index],
                             np.concatenate([[0], np.cumsum(half)]).astype(np.int64))


def judged_rows(counts: np.ndarray, of_class: np.ndarray | None, labelled: int) -> tuple[np.ndarray, int, bool]:
    """:func:`judged_subset`'s classes from each class's training impostor count and group code (``of_class``, None
    without groups; ``labelled``: the number of groups): (their rows, ascending; the step k; whether small groups
    were kept whole). Every row when the counts add up to at most ``MAX_JUDGED``."""
    counts = np.asarray(counts, dtype=np.int64)
    if int(counts.sum()) <= MAX_JUDGED:
        return np.arange(counts.size), 1, False
    # a labelled group of at most KEEP_GROUP classes is judged whole (its gap is what a subset would lose first)
    whole = np.zeros(counts.size, dtype=bool)
    if of_class is not None:
        sizes = np.bincount(of_class, minlength=labelled + 1)
        whole = (of_class < labelled) & (sizes[of_class] <= KEEP_GROUP)
    rest = np.flatnonzero(~whole)
    budget = max(MAX_JUDGED - int(counts[whole].sum()), 1)
    step = max(1, math.ceil(int(counts[rest].sum()) / budget))
    while int(counts[rest[::step]].sum()) > budget and step < rest.size:
        step += 1
    return np.sort(np.concatenate([np.flatnonzero(whole), rest[::step]])), step, bool(whole.any())


def subset_words(rows: np.ndarray, step: int, kept_whole: bool, classes: int, distances: int) -> str:
    """What :func:`judged_rows` left out, in words ("" when nothing was)."""
    if rows.size == classes:
        return ""
    kept = f", every class of groups of at most {KEEP_GROUP} classes" if kept_whole else ""
    return (f"judged on one class in {step}{kept} ({rows.size:,} of {classes:,}: {distances:,} training impostor "
            f"distances, at most {MAX_JUDGED:,}{' but for those groups' if kept else ''})")


def judged_subset(impostors: ImpostorDistances, genuine: GenuineDistances, groups: TrainingGroups | None
                  ) -> tuple[ImpostorDistances, GenuineDistances, TrainingGroups | None, str]:
    """The classes the choice is judged on: all of them up to ``MAX_JUDGED`` training impostor distances; beyond,
    every k-th class (a fixed subset, k the smallest that brings them under the cap), every class of a labelled
    group of at most ``KEEP_GROUP`` classes kept, with what was left out in words ("" when nothing was). Beyond a million distances the choice is rarely close, and where it is, the
    smaller sample keeps one pooled threshold, the choice that is never worse by design."""
    counts = impostors.counts()
    rows, step, kept_whole = judged_rows(counts, None if groups is None else groups.of_class,
                                         0 if groups is None else len(groups.names))
    if rows.size == len(impostors):
        return impostors, genuine, groups, ""
    sub = ImpostorDistances.from_lists({impostors.classes[i]: impostors.of(i) for i in rows.tolist()})
    sub_genuine = GenuineDistances.from_lists({genuine.classes[i]: genuine.of(i) for i in rows.tolist()})
    sub_groups = None
    if groups is not None:
        index = np.concatenate([np.arange(impostors.offsets[i], impostors.offsets[i + 1]) for i in rows.tolist()])
        sub_groups = TrainingGroups(groups.names, groups.of_class[rows], groups.of_impostor[index])
    return sub, sub_genuine, sub_groups, subset_words(rows, step, kept_whole, len(impostors), int(sub.values.size))


def judge(fit, impostors: ImpostorDistances, genuine: GenuineDistances, structures: tuple[str, ...],
          groups: TrainingGroups | None = None) -> list[Judged]:
    """Every structure of ``structures`` (``fit(structure, impostors)`` gives its model) judged against one pooled
    threshold, cross-fitted over the two halves (see the module); with ``groups``, each labelled group's false
    accepts among its same-group held-out impostors counted too. The (fold, structure) fits are independent and
    spend their time in numpy, which releases the GIL: they run on two threads (the fit stage has the machine to
    itself), the counts summed, so the result does not depend on their order."""
    gen_class = np.repeat(np.arange(len(genuine)), genuine.counts())
    gen_values = genuine.values
    index = halves_index(impostors)
    cut = [_take(impostors, idx, first) for idx, first in zip(index, (True, False))]
    n_groups = 0 if groups is None else len(groups.names)
    folds = []
    for f, h in ((0, 1), (1, 0)):
        fitted_on, judged_on = cut[f], cut[h]
        pooled = PooledScores.of(judged_on.values, gen_values)
        levels = np.array([e for e in LEVELS if e * pooled.n_impostors >= MIN_EXPECTED])
        if not levels.size:
            continue
        same_code = fitted_groups = None
        if n_groups:
            held_groups = groups.take(index[h])
            fitted_groups = groups.take(index[f])
            own = np.repeat(groups.of_class, judged_on.counts())
            # the held-out impostor's group when it is a same-group comparison of a labelled class, else n_groups
            same_code = np.where(held_groups.same_group(judged_on), own, n_groups)
        folds.append((fitted_on, judged_on, pooled, levels, same_code, fitted_groups))

    def one(task: tuple[int, str]) -> tuple:
        fitted_on, held, pooled, levels, same_code, fitted_groups = folds[task[0]]
        held_class = np.repeat(np.arange(len(held)), held.counts())
        tau = (fit(task[1], fitted_on, fitted_groups) if task[1] in MATCHED else
               fit(task[1], fitted_on)).thresholds(levels).values  # (classes, levels)
        worse = better = rejected = 0
        net = np.zeros(len(held))
        fa_g, expected_g = np.zeros((n_groups, levels.size)), np.zeros(n_groups)
        per_group = None if same_code is None else np.bincount(same_code, minlength=n_groups + 1)[:n_groups]
        for k in range(levels.size):
            accepted = held.values <= tau[held_class, k]
            fa = int(np.count_nonzero(accepted))
            reference = loosest_below(pooled, fa)
            mine = gen_values <= tau[gen_class, k]
            theirs = gen_values <= reference
            lost, saved = ~mine & theirs, mine & ~theirs
            worse += int(np.count_nonzero(lost))
            better += int(np.count_nonzero(saved))
            rejected += int(np.count_nonzero(~mine))
            net += np.bincount(gen_class, weights=lost.astype(np.float64) - saved, minlength=len(held))
            if same_code is not None:
                fa_g[:, k] = np.bincount(same_code[accepted], minlength=n_groups + 1)[:n_groups]
                expected_g += levels[k] * per_group
        # the counts at the levels are nested (a threshold at a lower level accepts a subset): as counts of one
        # Poisson process, cov(FA_j, FA_k) = min(mean_j, mean_k), estimated by the counts themselves
        var_g = np.minimum(fa_g[:, :, None], fa_g[:, None, :]).sum(axis=(1, 2))
        return (task[1], worse, better, int(gen_values.size) * int(levels.size), rejected, fa_g.sum(axis=1),
                expected_g, var_g, net)

    # the bulk fits (a leave-one-out standardisation of every distance) take longest: they start first
    tasks = [(f, s) for s in sorted(structures, key=lambda s: s != "bulk") for f in range(len(folds))]
    with ThreadPoolExecutor(max_workers=max(1, min(2, len(tasks)))) as pool:
        done = list(pool.map(one, tasks))
    out = {s: Judged(s) for s in structures}
    if n_groups:
        for j in out.values():
            j.group_fa, j.group_expected, j.group_var = np.zeros(n_groups), np.zeros(n_groups), np.zeros(n_groups)
    for s, worse, better, decided, rejected, fa_g, expected_g, var_g, net in done:
        out[s].net_per_class = net if out[s].net_per_class is None else out[s].net_per_class + net
        out[s].worse += worse
        out[s].better += better
        out[s].decided += decided
        out[s].rejected += rejected
        if n_groups:
            out[s].group_fa += fa_g
            out[s].group_expected += expected_g
            out[s].group_var += var_g
    return [out[s] for s in structures]


def can_choose(impostors: ImpostorDistances, genuine: GenuineDistances | None) -> str | None:
    """Why no choice can be made from these training data (None when it can)."""
    return why_not_choose(impostors.counts(), 0 if genuine is None else int(genuine.values.size))


def why_not_choose(counts: np.ndarray, genuine: int) -> str | None:
    """:func:`can_choose` from each class's training impostor count and the number of training genuine distances."""
    if genuine < MIN_GENUINE:
        return (f"the training data hold {genuine} genuine comparison(s), fewer than the {MIN_GENUINE} a choice needs "
                "(image sets have none: a class's other sets are evaluation attempts)")
    return halving_problem(np.asarray(counts))


def can_halve(impostors: ImpostorDistances) -> str | None:
    """Why the training impostors cannot be cut in two halves that locate every class (None when they can)."""
    return halving_problem(impostors.counts())


def halving_problem(counts: np.ndarray) -> str | None:
    """:func:`can_halve` from each class's training impostor count."""
    if int(counts.min()) < MIN_PER_CLASS:
        return (f"a class has {int(counts.min())} training impostor distances, fewer than the "
                f"{MIN_PER_CLASS} that two halves need")
    total = int(counts.sum())
    if total // 2 * max(LEVELS) < MIN_EXPECTED:
        return (f"the training data hold {total:,} impostor distances; a half expects fewer than "
                f"{MIN_EXPECTED:g} false accepts even at {100 * max(LEVELS):g}%, so no FPR level can be judged")
    return None


def _percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.3g}%"


def _spread_words(j: Judged) -> str:
    spread = j.group_spread
    return "not measured" if spread is None else ("a group at 0" if math.isinf(spread) else f"{spread:.2f}x")


def admissible(judged: list[Judged]) -> tuple[list[Judged], str]:
    """The structures that do not widen the same-group FMR differential between groups beyond one pooled
    threshold's (or ``MAX_SPREAD``) and counting noise (:func:`wider`), cross-fitted, and what was said of it;
    all of them without groups measured (or without one pooled threshold judged)."""
    reference = next((j for j in judged if j.structure == "one"), None)
    if reference is None:
        return judged, ""
    # a plain class-specific structure whose gap the halves cannot measure (a small group) is not taken: a matched
    # one holds each group where one threshold puts it as far as the data measure it
    unmeasured = [j for j in judged if j.structure in STRUCTURES and j is not reference and j.group_spread is None]
    if all(j.group_spread is None for j in judged):
        kept = [j for j in judged if j not in unmeasured]
        return kept, ("" if len(kept) == len(judged) else
                      f"the gap between groups is not measured in the training halves (a group too small): "
                      f"{', '.join(j.structure for j in unmeasured)} not taken")
    said = "same-group FMR max/min between groups (cross-fitted): " + "; ".join(
        f"{j.structure} {_spread_words(j)}" for j in judged)
    if unmeasured:
        said += f"; {', '.join(j.structure for j in unmeasured)} not taken: its gap is not measured"
    return [j for j in judged if j is reference or not (wider(j, reference) or j in unmeasured)], said


def choose(judged: list[Judged]) -> tuple[str, str]:
    """(the structure chosen, why, in words) from :func:`judge`'s comparisons: of the :func:`admissible` ones, a
    class-specific structure that turns away fewer training genuine comparisons than one pooled threshold beyond
    ``Z_CHOOSE`` standard errors (the most net saves), else one pooled threshold."""
    kept, group_said = admissible(judged)
    said = "; ".join(f"{j.structure}: training FNR {_percent(j.fnr)} against {_percent(j.fnr_one)} for one pooled "
                     f"threshold, {j.per_1000:+.3g} rejects per 1,000 genuine decisions (z = {j.z:+.1f})"
                     for j in judged if j.structure != "one")
    said = f"cross-fitted, FNR averaged over the FPR levels a half measures: {said}"
    if group_said:
        said += f"; {group_said}"
    refused = [j.structure for j in judged if j not in kept and j.group_spread is not None]
    if refused:
        said += f"; {', '.join(refused)} refused: wider between groups than one pooled threshold beyond noise"
    candidates = [j for j in kept if j.structure != "one" and j.z < -Z_CHOOSE]
    if not candidates:
        return "one", (f"no class-specific structure turned away fewer training genuine comparisons than one pooled "
                       f"threshold at the same FPR beyond {Z_CHOOSE:g} standard errors"
                       f"{' without widening the gap between groups' if len(kept) < len(judged) else ''} ({said}), so one pooled "
                       "threshold" + ("; `impostors: same-group` under `data:` calibrates each group on its own against "
                                      "its same-group impostors (ISO/IEC 19795-10), which keeps each group's same-group "
                                      "FMR near the target and lets each be class-specific" if len(kept) < len(judged) else ""))
    # with groups measured, a structure whose gap is wider than one threshold's (or MAX_SPREAD) even within noise
    # gives way to one that is not (a matched structure holds each group where one threshold puts it)
    reference = next((j for j in judged if j.structure == "one"), None)
    bar = None if reference is None or reference.group_spread is None else max(reference.group_spread, MAX_SPREAD)
    best = min(candidates, key=lambda j: (bar is not None and j.group_spread is not None and j.group_spread > bar,
                                          (j.worse - j.better) / max(j.decided, 1)))
    return best.structure, (f"{best.structure} turned away the fewest training genuine comparisons against one pooled "
                            f"threshold at the same FPR ({said})")
