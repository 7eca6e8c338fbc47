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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.contract.base import EvaluationInput, Evaluator, Fold, RunContext
from calibrate.formatting import format_count, format_pct
from calibrate.statistics.sanity import accept_side_auc
from calibrate.statistics.order import clopper_pearson, tie_message, tied_floor  # noqa: F401 (clopper_pearson re-exported)
from calibrate.contract.types import EvaluationResult, TargetResult


#: bootstrap replicates for the class-level interval
BOOT_REPLICATES = 1000
#: resampled class indices held in memory at once (replicates x classes)
_BOOT_BLOCK = 2_000_000


def class_bootstrap(fa: np.ndarray, imp: np.ndarray, rng: np.random.Generator, level: float = 0.95,
                    replicates: int = BOOT_REPLICATES) -> tuple[float, float]:
    """Percentile interval of ``sum(fa) / sum(imp)`` when whole classes are resampled with replacement.

    ``fa[i]`` and ``imp[i]`` are class i's false accepts and attempts (classes with no attempts
    carry no information and are dropped first).
    """
    fa = np.asarray(fa, dtype=np.float64)
    imp = np.asarray(imp, dtype=np.float64)
    keep = imp > 0
    fa, imp = fa[keep], imp[keep]
    if imp.size == 0:
        return float("nan"), float("nan")
    chunk = max(1, min(replicates, _BOOT_BLOCK // imp.size))
    rates = []
    for start in range(0, replicates, chunk):
        idx = rng.integers(0, imp.size, size=(min(chunk, replicates - start), imp.size))
        rates.append(fa[idx].sum(axis=1) / imp[idx].sum(axis=1))
    rates = np.concatenate(rates)
    a = (1 - level) / 2
    return float(np.quantile(rates, a)), float(np.quantile(rates, 1 - a))


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
    """``rows`` (from :func:`measure_label`) with the predicted-interval fields added to each row's extra."""
    predicted = predicted_fields(folds, label, attempts, targets)
    if predicted:
        for k, row in enumerate(rows):
            row.extra.update({key: value[k] for key, value in predicted.items()})
            if row.impostor_attempts and predicted["predicted_fpr_low"][k] is not None:
                row.extra["predicted_covers"] = bool(predicted["predicted_fpr_low"][k] <= row.fpr
                                                     <= predicted["predicted_fpr_high"][k])
    return rows


def _nones(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def predicted_fields(folds: tuple[Fold, ...], label: str, attempts: list[int],
                     targets: tuple[float, ...]) -> dict[str, list]:
    """The estimator's predicted FPR interval (from training data only, calibrate.predicted.interval), per target:
    for the FPR measured on this evaluation's number of attempts (``predicted_fpr_low/high``; only the
    count of attempts is used, none of their outcomes) and for the long run
    (``predicted_fpr_long_run_low/high``); ``attempts``: each fold's impostor attempts. Empty when the run
    predicted nothing."""
    from calibrate.predicted.interval import PREDICTED, column_quantile, combine, measured_interval

    preds = [f.predictions.get(label) for f in folds]
    if not preds or any(p is None for p in preds):
        return {}
    if sum(attempts) == 0:
        return {}
    level = preds[0].level
    reps = combine(preds, attempts)
    low, high = measured_interval(reps, sum(attempts), level)
    t = np.asarray(targets, dtype=np.float64)
    out = {"predicted_fpr_low": _nones(low), "predicted_fpr_high": _nones(high),
           "predicted_ratio_low": _nones(low / t), "predicted_ratio_high": _nones(high / t),
           "predicted_fpr_long_run_low": _nones(column_quantile(reps, (1 - level) / 2)),
           "predicted_fpr_long_run_high": _nones(column_quantile(reps, (1 + level) / 2)),
           "predicted_level": [level] * t.size, "simulated_galleries": [int(reps.shape[0])] * t.size,
           "prediction_simulation": [preds[0].simulation] * t.size}
    statuses = [p.status for p in preds if p.status]
    if statuses:
        # over folds, the first status that gives no interval wins (the combined interval needs every fold's)
        out["prediction_status"] = [next((s[j] for s in statuses if s[j] not in PREDICTED), statuses[0][j])
                                    for j in range(t.size)]
    if preds[0].methods:
        out["confidence_method"] = list(preds[0].methods)
    return out


#: below this many training impostor distances under an on-target threshold, the threshold is an extrapolation
SUPPORT_WARNING = 10.0


def note_training_support(folds: tuple[Fold, ...] | list[Fold], targets: tuple[float, ...], context: RunContext) -> None:
    """Say which targets lie beyond what the training impostor distances can show: below the share of
    distances tied at the smallest value (no threshold reaches them), or with e x N_train < 10."""
    n = min(int(f.train.impostor_mask().sum()) for f in folds)
    pooled = folds[0].train.values[folds[0].train.impostor_mask()]
    smallest, tied = tied_floor(pooled)
    below = [t for t in targets if t < tied]
    if tied > 1.0 / max(pooled.size, 1) and below:
        context.note(tie_message(smallest, tied, below))
    thin = [t for t in targets if t * n < SUPPORT_WARNING]
    if not thin:
        return
    listed = ", ".join(f"{100 * t:.3g}% ({format_count(t * n)})" for t in sorted(thin, reverse=True))
    context.note(f"{n} training impostor distances: at target(s) {listed} fewer than {SUPPORT_WARNING:.0f} of them "
                 "would lie below an on-target threshold, so every estimator extrapolates there and the achieved "
                 "rate can stray far from the target by chance; read the class-bootstrap interval in the report, "
                 "and enroll more classes (or add impostor comparisons) for a firmer threshold")


def _pcts(targets) -> str:
    return ", ".join(f"{100 * t:.3g}%" for t in targets)


def unreachable_notes(folds: tuple[Fold, ...], label: str, rows: list[TargetResult]) -> list[str]:
    """Explain every ratio of 0 and every FNR of 100%: a target below what the estimator can reach
    from per-class data (1/n), or too few expected false accepts for 0 to mean anything."""
    fold = folds[0]
    train, table = fold.train, fold.tables[label]
    mask = train.impostor_mask()
    column = {c: j for j, c in enumerate(np.asarray(train.gallery_classes).astype(str))}
    cols = np.array([column[str(c)] for c in table.classes])
    n = mask.sum(axis=0)[cols]
    smallest = np.where(mask, train.values, np.inf).min(axis=0)[cols]
    at_floor = (table.values <= smallest[:, None]) & (n[:, None] > 0)  # (classes, targets)
    floor, pooled_floor, chance, strict, genuine_side = [], [], [], [], []
    n_pooled = int(n.sum())
    for k, r in enumerate(rows):
        zero = r.impostor_attempts > 0 and r.false_accepts == 0
        if not (zero or (r.fnr is not None and r.fnr >= 1.0)):
            continue
        if not zero and r.impostor_attempts > 0:  # FNR 100% at thresholds that do admit impostors
            genuine_side.append(k)
            continue
        one_threshold = bool(np.ptp(table.values[:, k]) == 0)  # the same for every class: a pooled estimator
        if one_threshold:
            if r.target_fpr * n_pooled < 1:
                pooled_floor.append(k)
            elif zero and r.target_fpr * r.impostor_attempts < 3:
                chance.append(k)
            else:
                strict.append(k)
        elif at_floor[:, k].mean() >= 0.5:
            floor.append(k)
        elif zero and r.target_fpr * r.impostor_attempts < 3:
            chance.append(k)
        else:
            strict.append(k)
    notes = []
    if floor:
        n_med = float(np.median(n))
        notes.append(
            f"{label} at {_pcts(rows[k].target_fpr for k in floor)}: ratio 0 and/or FNR 100% because the target is "
            f"below what per-class training data can reach: a class has about {n_med:.0f} training impostor distances "
            f"(1/n = {100 / max(n_med, 1):.3g}%), and for {100 * max(at_floor[:, k].mean() for k in floor):.0f}% of "
            "classes the threshold sits at or below the class's smallest training distance, so it accepts almost "
            "nothing, impostor or genuine. Such targets need an estimator that pools classes or models the tail "
            "(e.g. auto), or more impostor comparisons per class")
    if pooled_floor:
        notes.append(
            f"{label} at {_pcts(rows[k].target_fpr for k in pooled_floor)}: ratio 0 and/or FNR 100% because the "
            f"target is below 1/N of the {n_pooled} pooled training impostor distances, the least a pooled "
            "empirical threshold can reach; its threshold sits at the pooled minimum. Such targets need an "
            "estimator that models the tail (e.g. auto), or more training comparisons")
    if chance:
        notes.append(
            f"{label} at {_pcts(rows[k].target_fpr for k in chance)}: no false accept, where only "
            f"{', '.join(f'{rows[k].target_fpr * rows[k].impostor_attempts:.1f}' for k in chance)} were expected on "
            "target: with so few evaluation impostor attempts a ratio of 0 is within chance (read its Clopper-Pearson "
            "interval), not proof of a strict threshold")
    if genuine_side:
        notes.append(genuine_side_note(fold.test, label, [rows[k] for k in genuine_side]))
    if strict:
        notes.append(
            f"{label} at {_pcts(rows[k].target_fpr for k in strict)}: ratio 0 and/or FNR 100% although the target "
            "is within what the training data can reach: the thresholds are far stricter on the evaluation data than "
            "on the training data, i.e. the evaluation impostors lie further away (a shift between them)")
    return notes


def genuine_side_note(test, label: str, rows: list[TargetResult]) -> str:
    """FNR 100% where the thresholds admit impostors: the genuine scores are no better than the
    impostor tail, a matcher that does not separate there or scores read the wrong way round."""
    auc = accept_side_auc(test.values[test.genuine_mask()], test.values[test.impostor_mask()], "distance")
    ratios = ", ".join(f"{r.fpr / r.target_fpr:.2g}" for r in rows)
    return (f"{label} at {_pcts(r.target_fpr for r in rows)}: FNR 100% although impostors are accepted (ratio "
            f"{ratios}): every genuine evaluation attempt lies beyond thresholds that admit impostors, so the genuine "
            f"scores are no better than the impostor tail here. In the evaluation data {100 * auc:.3g}% of genuine-"
            "impostor pairs are ordered the accept way: near 50% the matcher does not separate these classes, well "
            "below 50% the scores are read the wrong way round (check `kind:`)")


#: an achieved FPR whose whole 95% interval lies beyond this factor of the target (either way) misses by a wide margin
MISS_FACTOR = 2.0


def off_band(results: dict[str, list[TargetResult]]) -> tuple[list[str], str | None]:
    """Estimators whose achieved FPR on this run's evaluation misses the target by more than
    MISS_FACTOR at some target beyond doubt (its whole Clopper-Pearson interval outside): one loud note
    each, and a report section listing them first, so that nobody deploys them by mistake."""
    notes, lines = [], []
    for label, rows in results.items():
        over = [r for r in rows if r.extra.get("ratio_ci_low", 0.0) > MISS_FACTOR]
        under = [r for r in rows if r.extra.get("ratio_ci_high", np.inf) < 1.0 / MISS_FACTOR]
        for group, word in ((over, "admits"), (under, "rejects")):
            if not group:
                continue
            worst = max(group, key=lambda r: r.ratio if word == "admits" else -r.ratio)
            said = (f"misses its target FPR beyond doubt on this run's own evaluation: at "
                    f"{_pcts(r.target_fpr for r in group)} it achieved {', '.join(f'{r.ratio:.2f}' for r in group)}x "
                    f"the target (95% intervals entirely {'above' if word == 'admits' else 'below'} "
                    f"{MISS_FACTOR if word == 'admits' else 1 / MISS_FACTOR:g}x; worst {worst.ratio:.2f}x at "
                    f"{100 * worst.target_fpr:.3g}%)")
            said += ("; it admits more impostors than promised: do not deploy its thresholds at these targets"
                     if word == "admits" else
                     "; it is far stricter than asked, rejecting genuine users needlessly")
            notes.append(f"WARNING: {label} {said}")
            lines.append(f"- **{label}** {said}.")
    if not lines:
        return notes, None
    return notes, "\n".join(["## Warning: estimators that miss their target", "",
                              f"Judged on this run's evaluation impostors; 1.0 is on target, and a miss counts only when "
                              f"the whole 95% interval of the achieved FPR lies beyond {MISS_FACTOR:g}x either way.", ""]
                             + lines) + "\n"


def uncertainty_section(results: dict[str, list[TargetResult]]) -> str:
    """report.md's section on how far each achieved FPR can be trusted (this evaluator's own figures)."""
    labels = list(results)
    lines: list[str] = []
    lines += ["## Uncertainty and per-class spread", "",
              "Each achieved FPR as a ratio to the target with two 95% intervals: Clopper-Pearson (every impostor "
              "attempt independent) and a bootstrap over enrolled classes (a class's attempts resampled together), "
              "which is the one to read when false accepts cluster in a few look-alike class pairs. Then the false "
              "accepts out of impostor attempts and how many distinct class pairs they come from; the training "
              "support (target x training impostor distances: how many training distances an on-target threshold "
              "has below it; under about 10 every estimator extrapolates); the share of enrolled classes whose own "
              "FPR exceeds 2x and 10x the target, and in brackets the share binomial noise alone gives when every "
              "class has the same FPR (with a few hundred attempts a class exceeds 2x often by chance: only the excess "
              "is unequal treatment); the dispersion of false accepts over classes (Pearson's chi-square over degrees "
              "of freedom: about 1 when every class has the same FPR, larger when some attract far more) and the "
              "share of all false accepts held by the 5% of classes with most, each beside one pooled threshold's at "
              "the same FPR; the FNR.", "",
              "| Estimator | Target FPR | Ratio [Clopper-Pearson] | Class bootstrap | False accepts / attempts "
              "(class pairs) | Training support | Classes > 2x (noise alone) | Classes > 10x (noise alone) | "
              "Dispersion (one threshold) | Top 5% of classes hold (one threshold) | FNR |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    nan = float("nan")
    for l in labels:
        for r in results[l]:
            e = r.extra
            one = e.get("one_threshold", {})
            ci = f"{r.ratio:.2f} [{e.get('ratio_ci_low', nan):.2f}, {e.get('ratio_ci_high', nan):.2f}]"
            boot = f"[{e.get('ratio_boot_low', nan):.2f}, {e.get('ratio_boot_high', nan):.2f}]"
            pairs = f" ({e['false_accept_pairs']})" if "false_accept_pairs" in e else ""
            lines.append(f"| {l} | {100 * r.target_fpr:.3g}% | {ci} | {boot} | {r.false_accepts} / {r.impostor_attempts}"
                         f"{pairs} | {format_count(e.get('training_support'))} | "
                         f"{_share(e.get('share_classes_over_2x'))} ({_share(e.get('share_classes_over_2x_noise'))}) | "
                         f"{_share(e.get('share_classes_over_10x'))} ({_share(e.get('share_classes_over_10x_noise'))}) | "
                         f"{_num(e.get('fa_dispersion'))} ({_num(one.get('fa_dispersion'))}) | "
                         f"{_share(e.get('fa_share_top_classes'), 0)} ({_share(one.get('fa_share_top_classes'), 0)}) | "
                         f"{format_pct(r.fnr)} |")
    lines.append("")
    return "\n".join(lines)


def _share(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.{digits}f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _pct3(rate: float) -> str:
    return f"{100 * rate:.3g}%"


def _per(rate: float, base: int) -> str:
    return f"{rate * base:.3g}"


def predicted_section(results: dict[str, list[TargetResult]]) -> str | None:
    """report.md's section on the predicted FPR intervals, in words; None when nothing was predicted."""
    rows = [(l, r) for l, rs in results.items() for r in rs if "predicted_fpr_low" in r.extra]
    if not rows:
        return None
    from calibrate.predicted.interval import STATUS
    level = rows[0][1].extra.get("predicted_level", 0.9)
    lines = ["## Predicted before evaluation: how far each threshold can be trusted", "",
             f"From the training impostor distances alone (no evaluation data), each estimator's thresholds were refitted "
             f"on simulated galleries of the same classes and sizes, drawn from a model of the training distances in "
             f"which the true FPR is known (calibrate.prediction); the {100 * level:.0f}% interval says what FPR the "
             "thresholds will achieve. The long-run interval is for unlimited new impostor attempts; the other adds "
             "the chance of counting false accepts among only this evaluation's attempts, and is the one the "
             "measured FPR is checked against. Read it as \"expect between low and high\"; a wide interval means "
             "the training data cannot pin the threshold down (too few distances below it).", ""]
    for label, r in rows:
        e = r.extra
        n = r.impostor_attempts
        if e["predicted_fpr_low"] is None:
            said = STATUS.get(e.get("prediction_status", ""), "no prediction")
            lines.append(f"- **{label} at {100 * r.target_fpr:.3g}%**: {said[0].upper()}{said[1:]}.")
            continue
        how = ""
        if e.get("confidence_method"):
            from calibrate.predicted.confidence import METHODS

            said = METHODS.get(e["confidence_method"], e["confidence_method"])
            how = (f" Confidence: {said[0].upper()}{said[1:]}." if e["confidence_method"] == "model-unmet" else
                   f" Chosen so that the FPR exceeds the target with small probability, by {said}.")
        verdict = ""
        if n:
            verdict = (f" It admitted {r.false_accepts} of {n:,} evaluation attempts ({format_pct(r.fpr)}), "
                       + ("inside" if e.get("predicted_covers") else "OUTSIDE") + " the predicted interval.")
        lines.append(
            f"- **{label} at {100 * r.target_fpr:.3g}%**: in the long run between {_pct3(e['predicted_fpr_long_run_low'])} "
            f"and {_pct3(e['predicted_fpr_long_run_high'])} (ratio {e['predicted_fpr_long_run_low'] / r.target_fpr:.2f}-"
            f"{e['predicted_fpr_long_run_high'] / r.target_fpr:.2f} of the target); on {n:,} attempts between "
            f"{_per(e['predicted_fpr_low'], n)} and {_per(e['predicted_fpr_high'], n)} false accepts were predicted."
            f"{how}{verdict}")
    covered = [bool(r.extra.get("predicted_covers")) for _, r in rows if "predicted_covers" in r.extra]
    if covered:
        lines += ["", f"{sum(covered)} of {len(covered)} measured FPRs lie inside their predicted {100 * level:.0f}% "
                      "interval (about 9 in 10 is what a 90% interval should give)."]
    lines.append("")
    return "\n".join(lines)


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

    def _evaluate(self, data: EvaluationInput, context: RunContext) -> EvaluationResult:
        from . import costs, groups

        note_training_support(data.folds, data.targets, context)
        measured = {label: measure_label(data.folds, label, data.targets, context.seed) for label in data.labels}
        with context.timed("fpr: genuine cost and groups"):
            pool = costs.pool_attempts(data)
            rows_of = costs.add_costs(measured, pool, data.targets)
            summary, files = {}, {}
            if pool.pooled.n_impostors and pool.pooled.n_genuine:
                summary["verification"], files["det.csv"] = costs.verification_summary(pool, data.targets, rows_of)
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
                if data.groups is not None:
                    png = groups.groups_plot(rows_of, list(summary["groups"]["names"]))
                    if png is not None:
                        files["groups.png"] = png
        results = {}
        for label, m in measured.items():  # inside Evaluator.evaluate's stage, which counts estimators
            results[label] = add_predicted(rows_of[label], data.folds, label, m.attempts, data.targets)
            for note in unreachable_notes(data.folds, label, results[label]):
                context.note(note)
            context.advance(1)
        sections = [costs.cost_section(results)]
        said = predicted_section(results)
        if said:
            sections.append(said)
        if "verification" in summary:
            sections.append(costs.verification_section(summary["verification"], data.targets))
        if data.groups is not None:
            said = groups.group_section(results, summary["groups"], picture="groups.png" in files)
            if said:
                sections.append(said)
        sections.append(uncertainty_section(results))
        loud, warning = off_band(results)
        for note in loud + costs.cost_notes(results) + groups.widening_notes(results):
            context.note(note)
        if warning:
            sections.insert(0, warning)
        sections += pictures
        return EvaluationResult("fpr", results, sections, files, summary)
