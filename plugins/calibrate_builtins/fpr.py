"""Evaluator ``fpr``: achieved false positive rate per estimator and target on unseen impostors.

For each target FPR e and estimator: false accepts = evaluation impostor attempts with
distance <= the enrolled class's threshold; FPR = false accepts / impostor attempts;
ratio = FPR / e; FNR = rejected genuine attempts / genuine attempts. With several folds
(rotating enrollment) the counts are summed over folds. Alongside: the 95% Clopper-Pearson
interval of the FPR, and the share of enrolled classes whose own FPR exceeds 2x and 10x e.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta

from calibrate.base import EvaluationInput, Evaluator, Fold, RunContext
from calibrate.types import EvaluationResult, TargetResult


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes in n trials."""
    if n == 0:
        return float("nan"), float("nan")
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def fold_counts(fold: Fold, label: str) -> dict[str, np.ndarray]:
    """Per target (rows) and enrolled class (columns): false accepts, impostor attempts, genuine."""
    table = fold.tables[label]
    test = fold.test
    index = {c: i for i, c in enumerate(table.classes)}
    order = np.array([index[c] for c in test.gallery_classes])
    tau = table.values[order]  # (gallery, targets), aligned with the evaluation columns
    imp, gen = test.impostor_mask(), test.genuine_mask()
    accept = test.values[:, :, None] <= tau[None, :, :]
    return {"fa": (accept & imp[:, :, None]).sum(axis=0).T, "imp": np.broadcast_to(imp.sum(axis=0), (tau.shape[1], tau.shape[0])),
            "ga": (accept & gen[:, :, None]).sum(axis=0).T, "gen": np.broadcast_to(gen.sum(axis=0), (tau.shape[1], tau.shape[0]))}


def evaluate_label(folds: tuple[Fold, ...], label: str, targets: tuple[float, ...]) -> list[TargetResult]:
    counts = [fold_counts(f, label) for f in folds]
    rows = []
    for k, target in enumerate(targets):
        fa = np.concatenate([c["fa"][k] for c in counts])
        imp = np.concatenate([c["imp"][k] for c in counts])
        ga = int(sum(c["ga"][k].sum() for c in counts))
        gen = int(sum(c["gen"][k].sum() for c in counts))
        n_fa, n_imp = int(fa.sum()), int(imp.sum())
        fpr = n_fa / n_imp if n_imp else float("nan")
        low, high = clopper_pearson(n_fa, n_imp)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_class = np.where(imp > 0, fa / np.maximum(imp, 1), np.nan)
        scored = per_class[~np.isnan(per_class)]
        extra = {"fpr_ci_low": low, "fpr_ci_high": high, "ratio_ci_low": low / target, "ratio_ci_high": high / target,
                 "genuine_attempts": gen,
                 "share_classes_over_2x": float(np.mean(scored > 2 * target)) if scored.size else float("nan"),
                 "share_classes_over_10x": float(np.mean(scored > 10 * target)) if scored.size else float("nan")}
        rows.append(TargetResult(target, fpr, fpr / target, n_fa, n_imp, (1 - ga / gen) if gen else None, extra))
    return rows


class FprEvaluator(Evaluator):
    """Achieved FPR, its ratio to the target, Clopper-Pearson interval, per-class spread, FNR.

    :param plots: write the pictures (calibration plot, fitted CDFs, DET curve) beside report.md.
    """

    def __init__(self, *, plots: bool = True):
        self.plots = plots

    def _evaluate(self, data: EvaluationInput, context: RunContext) -> EvaluationResult:
        results = {label: evaluate_label(data.folds, label, data.targets) for label in data.labels}
        sections, files = [], {}
        if self.plots and data.plots:
            from . import plots

            sections, files = plots.make_plots(data, results)
        return EvaluationResult("fpr", results, sections, files)
