"""How class-specific ``auto`` should be, chosen from the training data by what it costs genuine users (issue 30).

The structures (every one auto's pooled shape on the log scale, differing in how a class is located; znorm.py):

* ``one``: no class is located apart: one pooled threshold for everyone (the pooled quantile of the log
  distances, with auto's GPD tail where the pooled sample is thin);
* ``anchored``: each class at its own nearest impostors, shrunk toward the others (anchored.py);
* ``bulk``: each class by the median and IQR of all its impostors (what ``auto`` was, now ``auto-bulk``).

The choice is cross-fitted on the training data only. Each class's training impostor distances are cut in two
halves; a structure is fitted on one half of every class and judged on the other half, then the other way round.
At each FPR level of ``LEVELS`` that the held-out half can measure (at least ``MIN_EXPECTED`` false accepts expected),
its thresholds admit some of the held-out impostors; one pooled threshold admitting the same number of them is the
reference (calibrate.verification.one_threshold), and the training genuine comparisons are decided by both. The
genuine comparisons only one of the two rejects are counted over the levels and the two folds (calibrate.
verification.paired_fnr): a structure that turns away fewer of them than one threshold, beyond ``Z_CHOOSE``
standard errors of the paired difference, may be chosen; of those the one with the most net saves is. Otherwise,
and without enough genuine comparisons (``MIN_GENUINE``), one pooled threshold is used: the choice that is never
worse than one pooled threshold by design.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from calibrate.types import GenuineDistances, ImpostorDistances
from calibrate.verification import PooledScores, loosest_below

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


@dataclass
class Judged:
    """One structure's cross-fitted comparison with one pooled threshold on the training genuine comparisons."""

    structure: str
    worse: int = 0      # genuine comparisons it rejects and one threshold accepts
    better: int = 0     # ... it accepts and one threshold rejects
    decided: int = 0    # genuine decisions counted (comparisons x levels x folds)

    @property
    def z(self) -> float:
        n = self.worse + self.better
        return (self.worse - self.better) / math.sqrt(n) if n else 0.0

    @property
    def per_1000(self) -> float:
        return 1000.0 * (self.worse - self.better) / self.decided if self.decided else 0.0


def halves(impostors: ImpostorDistances) -> tuple[ImpostorDistances, ImpostorDistances]:
    """Each class's training distances cut in two by a fixed shuffle of its positions (the same every run)."""
    a, b = {}, {}
    for i, c in enumerate(impostors.classes):
        d = impostors.of(i)
        order = np.random.default_rng([i, d.size]).permutation(d.size)
        a[c], b[c] = d[order[: d.size // 2]], d[order[d.size // 2:]]
    return ImpostorDistances.from_lists(a), ImpostorDistances.from_lists(b)


def judge(fit, impostors: ImpostorDistances, genuine: GenuineDistances, structures: tuple[str, ...]) -> list[Judged]:
    """Every structure of ``structures`` (``fit(structure, impostors)`` gives its model) judged against one pooled
    threshold, cross-fitted over the two halves (see the module). The (fold, structure) fits are independent and
    spend their time in numpy, which releases the GIL: they run on two threads (the fit stage has the machine to
    itself), the counts summed, so the result does not depend on their order."""
    gen_class = np.repeat(np.arange(len(genuine)), genuine.counts())
    gen_values = genuine.values
    cut = halves(impostors)
    folds = []
    for fitted_on, judged_on in (cut, cut[::-1]):
        pooled = PooledScores.of(judged_on.values, gen_values)
        levels = np.array([e for e in LEVELS if e * pooled.n_impostors >= MIN_EXPECTED])
        if levels.size:
            folds.append((fitted_on, judged_on, pooled, levels))

    def one(task: tuple[int, str]) -> tuple[str, int, int, int]:
        fitted_on, held, pooled, levels = folds[task[0]]
        held_class = np.repeat(np.arange(len(held)), held.counts())
        tau = fit(task[1], fitted_on).thresholds(levels).values  # (classes, levels)
        worse = better = 0
        for k in range(levels.size):
            fa = int(np.count_nonzero(held.values <= tau[held_class, k]))
            reference = loosest_below(pooled, fa)
            mine = gen_values <= tau[gen_class, k]
            theirs = gen_values <= reference
            worse += int(np.count_nonzero(~mine & theirs))
            better += int(np.count_nonzero(mine & ~theirs))
        return task[1], worse, better, int(gen_values.size) * int(levels.size)

    # the bulk fits (a leave-one-out standardisation of every distance) take longest: they start first
    tasks = [(f, s) for s in sorted(structures, key=lambda s: s != "bulk") for f in range(len(folds))]
    with ThreadPoolExecutor(max_workers=max(1, min(2, len(tasks)))) as pool:
        done = list(pool.map(one, tasks))
    out = {s: Judged(s) for s in structures}
    for s, worse, better, decided in done:
        out[s].worse += worse
        out[s].better += better
        out[s].decided += decided
    return [out[s] for s in structures]


def can_choose(impostors: ImpostorDistances, genuine: GenuineDistances | None) -> str | None:
    """Why no choice can be made from these training data (None when it can)."""
    if genuine is None or genuine.values.size < MIN_GENUINE:
        held = 0 if genuine is None else int(genuine.values.size)
        return (f"the training data hold {held} genuine comparison(s), fewer than the {MIN_GENUINE} a choice needs "
                "(image sets have none: a class's other sets are evaluation attempts)")
    if int(impostors.counts().min()) < MIN_PER_CLASS:
        return (f"a class has {int(impostors.counts().min())} training impostor distances, fewer than the "
                f"{MIN_PER_CLASS} that two halves need")
    return None


def choose(judged: list[Judged]) -> tuple[str, str]:
    """(the structure chosen, why, in words) from :func:`judge`'s comparisons."""
    candidates = [j for j in judged if j.structure != "one" and j.z < -Z_CHOOSE]
    said = "; ".join(f"{j.structure}: {j.per_1000:+.3g} rejects per 1,000 genuine decisions (z = {j.z:+.1f})"
                     for j in judged if j.structure != "one")
    if not candidates:
        return "one", (f"no class-specific structure turned away fewer training genuine comparisons than one pooled "
                       f"threshold at the same FPR beyond {Z_CHOOSE:g} standard errors (cross-fitted: {said}), so one "
                       "pooled threshold")
    best = min(candidates, key=lambda j: (j.worse - j.better) / max(j.decided, 1))
    return best.structure, (f"{best.structure} turned away the fewest training genuine comparisons against one pooled "
                            f"threshold at the same FPR (cross-fitted: {said})")
