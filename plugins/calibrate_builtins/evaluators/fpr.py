"""Evaluator ``fpr``: achieved false positive rate per estimator and target on unseen impostors.

For each target FPR e and estimator: false accepts = evaluation impostor attempts with
distance <= the enrolled class's threshold; FPR = false accepts / impostor attempts;
ratio = FPR / e; FNR = rejected genuine attempts / genuine attempts. With several folds
(rotating enrollment) the counts are summed over folds. Alongside: the 95% Clopper-Pearson
interval of the FPR, and the share of enrolled classes whose own FPR exceeds 2x and 10x e.

Clopper-Pearson treats every impostor attempt as independent. They are not: on a small gallery
the false accepts at low targets come from a handful of look-alike class pairs (on Extended
Yale B at e = 0.5%, 17 of 184 false accepts came from one pair of subjects, seen through several
query sets). So each row also carries

* ``ratio_boot_low`` / ``ratio_boot_high``: a 95% percentile bootstrap over enrolled classes
  (each class's false accepts and attempts, summed over folds, resampled with replacement as a
  unit; 1,000 replicates, seeded by the run's seed), which widens when false accepts cluster;
* ``false_accept_pairs``: how many distinct (unordered) class pairs the false accepts come from;
* ``training_support``: ``e`` times the number of training impostor distances (mean over folds),
  i.e. how many training distances lie below an on-target threshold. Below about 10 every
  estimator extrapolates; in image-set protocols each pair of enrolled sets is counted twice
  (the enrolled-vs-enrolled matrix is symmetric), so the distinct pairs are half of that.

This module measures those figures and holds the evaluator; what it says about them, the run notes
(thin training support, targets no threshold reaches) and report.md's sections on the achieved FPR
(the warning for estimators that miss their target, uncertainty, predicted intervals), is in
fpr_report.py; the genuine cost in costs.py, the groups in groups.py, the pictures in plots.py (the score
distributions in score_plot.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.contract.base import EvaluationInput, Evaluator, Fold, RunContext, ShardedEvaluation
from calibrate.statistics.order import clopper_pearson  # noqa: F401 (clopper_pearson re-exported)
from calibrate.contract.types import EvaluationResult, TargetResult

from .fpr_fields import (BOOT_REPLICATES, class_bootstrap, predicted_by_group, predictions_fields,  # noqa: F401
                         with_predicted)  # (re-exported)
from .fpr_report import note_training_support, report_parts, unreachable_notes


def class_names(folds: tuple[Fold, ...]) -> np.ndarray:
    """Every class name met in the evaluation folds (probe or enrolled), sorted: the codes of :func:`fold_counts`."""
    return np.unique(np.concatenate([np.concatenate([np.asarray(f.test.probe_classes).astype(str),
                                                     np.asarray(f.test.gallery_classes).astype(str)]) for f in folds]))


def fold_counts(fold: Fold, label: str, names: np.ndarray) -> dict[str, np.ndarray]:
    """Per target (rows) and enrolled class (columns): false accepts, impostor attempts, genuine; and
    ``pairs``: one int64 key per false accept, ``target * M^2 + lo * M + hi`` with ``lo <= hi`` the
    codes (indices into ``names``, M of them) of its probe and enrolled classes; ``fa_at``: (target, row,
    column) of every false accept; ``gen_accept``: whether each genuine attempt (in the order of
    ``np.nonzero(test.genuine_mask())``) is accepted, per target (targets x genuine attempts).

    One pass over the matrix finds the impostor attempts at or below their class's largest threshold
    (the only ones any target can accept: a few in a thousand at low targets); only those, and the
    genuine attempts, are compared with every target's threshold."""
    table = fold.tables[label]
    test = fold.test
    index = {c: i for i, c in enumerate(table.classes)}
    order = np.array([index[c] for c in test.gallery_classes])
    tau = table.values[order]  # (gallery, targets), aligned with the evaluation columns
    n_gallery, n_targets = tau.shape
    imp, gen = test.impostor_mask(), test.genuine_mask()
    reach = np.fmax.reduce(tau, axis=1) if n_targets else np.full(n_gallery, np.nan)  # NaN thresholds accept nothing
    rows, cols = np.nonzero(imp & (test.values <= reach[None, :]))
    k, hit = np.nonzero((test.values[rows, cols][:, None] <= tau[cols]).T)  # false accepts, target by target
    rows, cols = rows[hit], cols[hit]
    g_rows, g_cols = np.nonzero(gen)
    gen_accept = (test.values[g_rows, g_cols][:, None] <= tau[g_cols]).T
    g_k, g_hit = np.nonzero(gen_accept)
    a = np.searchsorted(names, np.asarray(test.probe_classes).astype(str))[rows].astype(np.int64)
    b = np.searchsorted(names, np.asarray(test.gallery_classes).astype(str))[cols].astype(np.int64)
    m = np.int64(names.size)
    size = n_targets * n_gallery

    def per_target(k: np.ndarray, c: np.ndarray) -> np.ndarray:
        return np.bincount(k * n_gallery + c, minlength=size).reshape(n_targets, n_gallery)

    return {"fa": per_target(k, cols), "imp": np.broadcast_to(imp.sum(axis=0), (n_targets, n_gallery)),
            "ga": per_target(g_k, g_cols[g_hit]), "gen": np.broadcast_to(gen.sum(axis=0), (n_targets, n_gallery)),
            "pairs": k.astype(np.int64) * m * m + np.minimum(a, b) * m + np.maximum(a, b),
            "fa_at": (k, rows, cols), "gen_accept": gen_accept}


def per_class_totals(folds: tuple[Fold, ...], counts: list[dict[str, np.ndarray]], label: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """False accepts and attempts per target (rows) and enrolled class (columns, by name), summed over folds."""
    classes = np.concatenate([np.asarray(f.tables[label].classes).astype(str) for f in folds])
    _, slot = np.unique(classes, return_inverse=True)
    n = int(slot.max()) + 1
    fa = np.concatenate([c["fa"] for c in counts], axis=1)
    imp = np.concatenate([c["imp"] for c in counts], axis=1)
    return (np.stack([np.bincount(slot, weights=row, minlength=n) for row in fa]),
            np.stack([np.bincount(slot, weights=row, minlength=n) for row in imp]))


def evaluate_label(folds: tuple[Fold, ...], label: str, targets: tuple[float, ...], seed: int = 0) -> list[TargetResult]:
    measured = measure_label(folds, label, targets, seed)
    return add_predicted(measured.rows, folds, label, measured.attempts, targets)


@dataclass
class Measured:
    """One estimator's results per target from the evaluation data (``rows``), each fold's number of impostor
    attempts (``attempts``), and what the genuine-cost figures read: each fold's counts (:func:`fold_counts`:
    false accepts with their places, the genuine decisions), and the false accepts and impostor attempts of
    every (fold, enrolled class) unit per target (``unit_fa``, ``unit_imp``: targets x units)."""

    rows: list[TargetResult]
    attempts: list[int]
    counts: list[dict]
    unit_fa: np.ndarray
    unit_imp: np.ndarray


def measure_label(folds: tuple[Fold, ...], label: str, targets: tuple[float, ...], seed: int = 0) -> Measured:
    """One estimator's results per target from the evaluation data alone (no predicted interval: the
    folds' predictions are not read); see :class:`Measured`."""
    names = class_names(folds)
    counts = [fold_counts(f, label, names) for f in folds]
    class_fa, class_imp = per_class_totals(folds, counts, label)
    pair_targets = np.unique(np.concatenate([c["pairs"] for c in counts])) // (names.size * names.size)
    n_pairs = np.bincount(pair_targets, minlength=len(targets))
    n_train = float(np.mean([f.train.impostor_mask().sum() for f in folds]))
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
        b_low, b_high = class_bootstrap(class_fa[k], class_imp[k], np.random.default_rng([seed, k]))
        extra = {"fpr_ci_low": low, "fpr_ci_high": high, "ratio_ci_low": low / target, "ratio_ci_high": high / target,
                 "genuine_attempts": gen,
                 "share_classes_over_2x": float(np.mean(scored > 2 * target)) if scored.size else float("nan"),
                 "share_classes_over_10x": float(np.mean(scored > 10 * target)) if scored.size else float("nan"),
                 "ratio_boot_low": b_low / target, "ratio_boot_high": b_high / target,
                 "false_accept_pairs": int(n_pairs[k]), "training_support": target * n_train}
        rows.append(TargetResult(target, fpr, fpr / target, n_fa, n_imp, (1 - ga / gen) if gen else None, extra))
    unit_fa = np.concatenate([c["fa"] for c in counts], axis=1)
    unit_imp = np.concatenate([c["imp"] for c in counts], axis=1)
    return Measured(rows, [int(c["imp"][0].sum()) for c in counts], counts, unit_fa, unit_imp)


def add_predicted(rows: list[TargetResult], folds: tuple[Fold, ...], label: str, attempts: list[int],
                  targets: tuple[float, ...]) -> list[TargetResult]:
    """``rows`` (from :func:`measure_label`) with the predicted-interval fields added to each row's extra, and, for a
    model predicted group by group (``impostors: same-group``), each group's row its predicted same-group FMR."""
    predicted = predicted_fields(folds, label, attempts, targets)
    if predicted:
        with_predicted(rows, predicted)
        predicted_by_group(rows, [f.predictions.get(label) for f in folds], attempts)
    return rows


def predicted_fields(folds: tuple[Fold, ...], label: str, attempts: list[int],
                     targets: tuple[float, ...]) -> dict[str, list]:
    """The estimator's predicted FPR interval (from training data only, calibrate.predicted.interval), per target:
    for the FPR measured on this evaluation's number of attempts (``predicted_fpr_low/high``; only the
    count of attempts is used, none of their outcomes) and for the long run
    (``predicted_fpr_long_run_low/high``); ``attempts``: each fold's impostor attempts. Empty when the run
    predicted nothing."""
    from calibrate.predicted.interval import unit_size

    return predictions_fields([f.predictions.get(label) for f in folds], attempts, targets,
                              lambda: unit_size([f.test for f in folds]))


def confidence_cost(folds: tuple[Fold, ...], label: str, rows: list[TargetResult], targets: tuple[float, ...]) -> str | None:
    """For thresholds set with a confidence (a model whose ``inner`` is the plain fit), each row's
    ``fnr_without_confidence`` (the plain thresholds' FNR on the same genuine attempts) and the note stating what
    the confidence costs per target (issue 40); None otherwise or without genuine attempts."""
    inner = [getattr(f.models.get(label), "inner", None) for f in folds]
    if any(m is None for m in inner):
        return None
    rejected, attempts = np.zeros(len(targets)), 0
    for fold, model in zip(folds, inner):
        table = model.thresholds(targets)
        index = {c: i for i, c in enumerate(table.classes)}
        order = np.array([index[c] for c in fold.test.gallery_classes])
        g_rows, g_cols = np.nonzero(fold.test.genuine_mask())
        tau = np.asarray(table.values)[order][g_cols]
        rejected += np.sum(~(fold.test.values[g_rows, g_cols][:, None] <= tau), axis=0)
        attempts += g_rows.size
    if not attempts:
        return None
    plain = rejected / attempts
    for row, f in zip(rows, plain):
        row.extra["fnr_without_confidence"] = float(f)
    confidence = getattr(folds[0].models[label], "confidence", None)
    said = ", ".join(f"{100 * t:.3g}%: {100 * r.fnr:.3g}% against {100 * f:.3g}%" for t, r, f in zip(targets, rows, plain)
                     if r.fnr is not None)
    return (f"{label}: confidence {confidence} costs genuine users, the FNR per target against its plain thresholds' "
            f"on the same {attempts} genuine attempts: {said}")


def groups_summary(pool) -> dict:
    """results.json's ``groups``: where they came from, their names and how many enrolled classes each holds."""
    from calibrate.contract.types import UNLABELLED

    groups = pool.groups
    names = list(groups.names)
    counts = {name: int(n) for name, n in zip(names + [UNLABELLED], pool.group_classes.tolist())}
    if not counts.get(UNLABELLED):
        counts.pop(UNLABELLED, None)
    return {"source": groups.source, "names": names, "classes": counts,
            "impostor_attempts_same_group": {name: int(pool.group_impostors[k, k]) for k, name in enumerate(names)},
            "genuine_attempts": {name: int(pool.group_genuine[k]) for k, name in enumerate(names)}}


class FprEvaluator(Evaluator):
    """Achieved FPR, its ratio to the target, Clopper-Pearson interval, per-class spread, FNR.

    :param plots: write the pictures (calibration plot, fitted CDFs, DET curve) beside report.md.
    """

    def __init__(self, *, plots: bool = True):
        self.plots = plots

    def _evaluate_sharded(self, data: ShardedEvaluation, context: RunContext) -> EvaluationResult:
        from .fpr_sharded import evaluate_sharded

        return evaluate_sharded(data, context, self.plots)

    def _evaluate(self, data: EvaluationInput, context: RunContext) -> EvaluationResult:
        from . import costs, groups

        note_training_support(data.folds, data.targets, context)
        measured = {label: measure_label(data.folds, label, data.targets, context.seed) for label in data.labels}
        with context.timed("fpr: genuine cost and groups"):
            pool = costs.pool_attempts(data)
            rows_of = costs.add_costs(measured, pool, data.targets)
            summary, files = {}, {}
            if pool.pooled.n_impostors and pool.pooled.n_genuine:
                summary["verification"], files["det.csv"] = costs.verification_summary(pool, data.targets, rows_of,
                                                                                               context.seed)
            if data.groups is not None:
                summary["groups"] = groups_summary(pool)
        pictures = []
        if self.plots and data.plots:
            # drawn before the predicted intervals are read: they need only the measured rates, and a
            # prediction computed beside the run (calibrate.running.beside) is meanwhile finishing on another core
            from . import plots

            with context.stage(f"fpr: drawing plots for {len(measured)} estimator(s)"):
                pictures, drawn = plots.make_plots(data, rows_of, pool.pooled)
                files.update(drawn)
                from .score_plot import scores_plot

                png = scores_plot(pool, data.folds, list(measured), data.targets)
                if png is not None:
                    files["scores.png"] = png
                    pictures.append("![Genuine and impostor evaluation scores, each target's thresholds marked]"
                                    "(scores.png)")
                if data.groups is not None:
                    png = groups.groups_plot(rows_of, list(summary["groups"]["names"]))
                    if png is not None:
                        files["groups.png"] = png
        results = {}
        for label, m in measured.items():  # inside Evaluator.evaluate's stage, which counts estimators
            results[label] = add_predicted(rows_of[label], data.folds, label, m.attempts, data.targets)
            for note in unreachable_notes(data.folds, label, results[label]):
                context.note(note)
            cost = confidence_cost(data.folds, label, results[label], data.targets)
            if cost:
                context.note(cost)
            context.advance(1)
        said = (groups.group_section(results, summary["groups"], picture="groups.png" in files)
                if data.groups is not None else None)
        sections, notes = report_parts(results, summary, data.targets, pictures, said, groups.widening_notes(results))
        for note in notes:
            context.note(note)
        return EvaluationResult("fpr", results, sections, files, summary)
