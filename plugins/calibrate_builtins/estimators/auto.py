"""Estimators ``auto`` (the default) and ``auto-bulk`` (what ``auto`` was until issue 30).

``auto`` chooses, from the training data, how class-specific its thresholds are: one pooled threshold for everyone,
each class located at its own nearest impostors (``anchored``), or each class located and scaled by the bulk of its
impostors (``auto-bulk``), whichever turned away the fewest training genuine comparisons against one pooled
threshold at the same FPR, cross-fitted (choose.py); with demographic groups also anchored and bulk with each group held
at one pooled threshold's same-group FMR (``-matched``, group_shift.py). Every structure is auto's pooled shape on the
log scale, so the *overall* FPR is calibrated on all the training distances at once whatever is chosen. Without enough training
genuine comparisons (image sets have none; a score list or matrix split for training holds some) it uses one pooled
threshold, the choice that is never worse than one pooled threshold by design, and says so in the run's notes, as
it says what it chose and why. ``structure:`` fixes the structure instead of choosing.

Why (docs/genuine-cost.md, docs/default-check.md): bulk standardisation saves genuine users where a class's
genuine scores move with its impostor bulk (BSSR1's 2004 matchers: 0.74-0.93x one threshold's FNR) and costs them
where the bulk moves without its nearest impostors (a modern face matcher, CFP: 1.3-3.2x); anchoring a class at its
nearest impostors saved them on every dataset measured, and one pooled threshold is what the others must beat.

``auto-bulk``: the hierarchical model of ``znorm`` with ``pooled_shape: true`` (one distribution shape shared by all
classes, a location and a scale per class), configured as follows:

* working scale ``log(d + c)`` (``family: lognormal``; ``c`` is 0 unless some distance is 0, see znorm.py);
* per class the median and the IQR / 1.349 (``robust: true``);
* every class's standardised training distances are pooled (N values), and the threshold of class c at target e is
  ``m_c + s_c z(e)`` mapped back to a distance, with ``z(e)`` the pooled e-quantile: the empirical one (interpolated)
  when at least 10 pooled values lie below it, otherwise a generalised Pareto tail fitted by probability-weighted
  moments to the lowest 10% of the pooled values (at least 30);
* the training scores are standardised half with their class's full statistics and half with leave-one-out
  statistics (``jackknife: 0.5``), between what is right when the evaluation impostors are new people (score
  matrices) and when they are the same enrolled people seen in other image sets (see znorm.py).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import ParameterError
from calibrate.contract.types import GenuineDistances, ImpostorDistances, TrainingGroups
from calibrate.predicted.world import REFERENCE_MODEL
from calibrate.statistics.standardise import anchored_classes, standardise_classes, to_working

from .anchored import ANCHORED_CONFIG, anchored_ranks, anchored_simulate, enroll_anchored, fit_anchored
from .choose import MATCHED, STRUCTURES, can_choose, choose, judge, judged_subset
from .group_shift import group_shifts, shifted_model
from .znorm import ZnormModel, enroll_znorm, fit_znorm

#: auto-bulk's configuration, in znorm's terms (recorded in models.csv through the model's parameters)
#: (its family, robustness and jackknife are the reference world's model: calibrate.predicted.world.REFERENCE_MODEL)
AUTO_CONFIG = {**REFERENCE_MODEL, "pooled_shape": True, "predictive": False,
               "min_tail_count": 10.0, "tail_fraction": 0.1, "min_exceedances": 30, "shape_bounds": (-1.0, 0.5)}


class AutoBulk(Estimator):
    """Class-specific thresholds from the training distances alone (log scale, robust per-class location and scale, pooled shape with a GPD tail): what auto was."""

    model_class = ZnormModel
    #: a new class gets its own robust location and scale; the pooled standardised quantiles (and
    #: their GPD tail) stay as fitted, so refit once enrolled classes are a sizeable share of the gallery
    enroll_mode = "pooled"

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        return enroll_znorm(model, cls, single.of(0), AUTO_CONFIG["robust"], "auto-bulk")

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        from .simulate import pooled_shape

        return pooled_shape(galleries, targets, **AUTO_CONFIG)

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        from .simulate import pooled_shape_ranks

        return pooled_shape_ranks(counts, targets, world, **AUTO_CONFIG)

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        return fit_znorm(impostors, who="auto-bulk", **AUTO_CONFIG)

    def partitioned(self):
        """Fitting sharded data shard by shard, with the same thresholds (calibrate/contract/sharded.py)."""
        from .partitioned import AutoPartitioned

        return AutoPartitioned(AUTO_CONFIG)


class Auto(Estimator):
    """The default: one pooled threshold, or class-specific ones where the training genuine comparisons show they turn away fewer genuine users at the same FPR.

    :param structure: choose (from the training genuine comparisons, cross-fitted), or one of one, anchored, bulk, anchored-matched, bulk-matched (with groups: each group held at one pooled threshold's same-group FMR).
    """

    model_class = ZnormModel
    #: a new class is located as the chosen structure locates classes; the pooled shape stays as fitted
    enroll_mode = "pooled"

    def __init__(self, *, structure: Literal["choose", "one", "anchored", "bulk", "anchored-matched",
                                             "bulk-matched"] = "choose"):
        if structure not in ("choose", *STRUCTURES, *MATCHED):
            raise ParameterError(f"structure must be choose, one, anchored, bulk, anchored-matched or bulk-matched; "
                                 f"got {str(structure)[:40]!r}")
        self.structure = structure
        #: the structure the last fit on real training data chose (refits on simulated galleries keep it)
        self.chosen: str | None = None if structure == "choose" else structure
        #: a matched structure's shift per class (group_shift.py), as fitted on the real training data: refits on
        #: simulated galleries (which carry no groups) keep it
        self.class_shift: dict[str, float] = {}

    def _structure_fit(self, structure: str, impostors: ImpostorDistances,
                       groups: TrainingGroups | None = None) -> ZnormModel:
        base = structure.removesuffix("-matched")
        if base == "bulk":
            model = fit_znorm(impostors, who="auto", **AUTO_CONFIG)
        else:
            model = fit_anchored(impostors, who="auto", structure=base, **ANCHORED_CONFIG)
        if base == structure:
            return model
        if groups is not None:
            y = to_working(impostors.values, model.family, model.offset)
            seg = np.repeat(np.arange(len(impostors)), impostors.counts())
            shifts = group_shifts((y - model.loc[seg]) / model.scale[seg], y, impostors.counts(), groups)
            shift = shifts[groups.of_class]
        else:  # a refit on a simulated gallery: the shifts fitted on the real one
            shift = np.array([self.class_shift.get(c, 0.0) for c in impostors.classes])
        pooled = (np.concatenate(standardise_classes(impostors, AUTO_CONFIG["family"], True, AUTO_CONFIG["jackknife"],
                                                     "estimator auto")[3]) if base == "bulk" else
                  anchored_classes(impostors, ANCHORED_CONFIG["family"], ANCHORED_CONFIG["jackknife"],
                                   ANCHORED_CONFIG["max_rank"], "estimator auto")[2])
        matched = shifted_model(model, impostors, pooled, shift, ANCHORED_CONFIG)
        matched.class_shift = shift  # read by _fit_chosen (not saved: the locations hold it)
        return matched

    def _fit_genuine(self, impostors: ImpostorDistances, genuine: GenuineDistances, context: RunContext,
                     groups: TrainingGroups | None = None) -> FittedModel:
        if self.structure != "choose":
            return self._fit_chosen(impostors, groups)
        why_not = can_choose(impostors, genuine)
        if why_not is not None:
            self.chosen = "one"
            context.note(f"auto: one pooled threshold for every class: no choice can be made, {why_not}")
        else:
            # with two or more groups, one pooled threshold is judged too: the gap between groups it leaves is the
            # reference a class-specific structure must not widen; without, it is the reference itself
            labelled = groups is not None and np.unique(groups.of_class[groups.of_class < len(groups.names)]).size > 1
            structures = (*STRUCTURES, *MATCHED) if labelled else tuple(s for s in STRUCTURES if s != "one")
            sub, sub_genuine, sub_groups, subset = judged_subset(impostors, genuine, groups if labelled else None)
            judged = judge(self._structure_fit, sub, sub_genuine, structures, sub_groups)
            self.chosen, why = choose(judged)
            context.note(f"auto chose {self._words(self.chosen)}: {why}" + (f"; {subset}" if subset else ""))
        return self._fit_chosen(impostors, groups)

    def _fit_chosen(self, impostors: ImpostorDistances, groups: TrainingGroups | None) -> FittedModel:
        model = self._structure_fit(self.chosen, impostors, groups)
        if self.chosen in MATCHED and groups is not None:
            self.class_shift = dict(zip(impostors.classes, model.class_shift.tolist()))
        return model

    #: what auto says when the training data hold no genuine comparison at all
    NO_GENUINE = ("auto: one pooled threshold for every class: the training data hold no genuine comparison to judge a "
                  "class-specific structure by (image sets have none: a class's other sets are evaluation attempts); "
                  "`structure: anchored` or `bulk` makes the thresholds class-specific anyway")

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        if self.chosen is None:  # no genuine comparisons at all (a first fit through _fit): one pooled threshold
            self.chosen = "one"
            context.note(self.NO_GENUINE)
        return self._structure_fit(self.chosen, impostors)

    @staticmethod
    def _words(structure: str) -> str:
        words = {"one": "one pooled threshold", "anchored": "classes located at their nearest impostors (anchored)",
                 "bulk": "classes located by the bulk of their impostors (auto-bulk)"}
        base = structure.removesuffix("-matched")
        return words[base] + ("" if base == structure else
                              ", each group held at one pooled threshold's same-group FMR (matched)")

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        if getattr(model, "anchor", None) is None:
            return enroll_znorm(model, cls, single.of(0), AUTO_CONFIG["robust"], "auto")
        return enroll_anchored(model, cls, single.of(0), "auto")

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        base = (self.chosen or "one").removesuffix("-matched")
        shift = self._shift(galleries.counts.size)
        if base == "bulk":
            from .simulate import pooled_shape

            return pooled_shape(galleries, targets, shift=shift, **AUTO_CONFIG)
        return anchored_simulate(galleries, targets, structure=base, shift=shift, **ANCHORED_CONFIG)

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        base = (self.chosen or "one").removesuffix("-matched")
        if base == "bulk":
            from .simulate import pooled_shape_ranks

            return pooled_shape_ranks(counts, targets, world, **AUTO_CONFIG)
        return anchored_ranks(counts, targets, world, structure=base, **ANCHORED_CONFIG)

    def _shift(self, classes: int) -> np.ndarray | None:
        """A matched structure's shifts in the fitted classes' order (the simulated galleries'), held as fitted."""
        if self.chosen not in MATCHED or len(self.class_shift) != classes:
            return None
        return np.fromiter(self.class_shift.values(), dtype=np.float64, count=classes)

    def partitioned(self):
        """Sharded data: the structure chosen as in memory (partitioned_auto.py: the same classes judged by the same
        code), or the one given, fitted shard by shard."""
        from .partitioned_auto import AutoChoosing

        if self.structure == "choose":
            return AutoChoosing(structure_fitter, Auto())
        return structure_fitter(self.structure)


def structure_fitter(structure: str):
    """The partitioned fit of one of auto's structures (partitioned.py, partitioned_auto.py)."""
    from .partitioned import AutoPartitioned
    from .partitioned_auto import AnchoredPartitioned, MatchedPartitioned

    if structure == "one":
        return AutoPartitioned({**AUTO_CONFIG, "structure": "one"})
    if structure == "bulk":
        return AutoPartitioned(AUTO_CONFIG)
    if structure == "anchored":
        return AnchoredPartitioned(ANCHORED_CONFIG, "auto")
    base = structure.removesuffix("-matched")
    return MatchedPartitioned(base, AUTO_CONFIG if base == "bulk" else ANCHORED_CONFIG, ANCHORED_CONFIG)
