"""What the ``fpr`` evaluator says about the achieved FPR it measured (fpr.py): run notes and report.md sections.

Notes: targets beyond what the training impostor distances can show (too few below an on-target
threshold, or below the share tied at the smallest distance), and the reason behind every ratio of 0
and every FNR of 100%. Sections: the warning naming estimators that miss their target beyond doubt
(first in report.md), the predicted FPR intervals in words, and the uncertainty and per-class spread table.
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Fold, RunContext
from calibrate.formatting import format_count, format_pct
from calibrate.statistics.sanity import accept_side_auc
from calibrate.statistics.order import tie_message, tied_floor
from calibrate.contract.types import TargetResult


#: below this many training impostor distances under an on-target threshold, the threshold is an extrapolation
SUPPORT_WARNING = 10.0


def note_training_support(folds: tuple[Fold, ...] | list[Fold], targets: tuple[float, ...], context: RunContext) -> None:
    """Say which targets lie beyond what the training impostor distances can show: below the share of
    distances tied at the smallest value (no threshold reaches them), or with e x N_train < 10."""
    n = min(int(f.train.impostor_mask().sum()) for f in folds)
    pooled = folds[0].train.values[folds[0].train.impostor_mask()]
    for note in support_notes(n, *tied_floor(pooled), pooled.size, targets):
        context.note(note)


def support_notes(n: int, smallest: float, tied: float, pooled: int, targets: tuple[float, ...]) -> list[str]:
    """:func:`note_training_support`'s notes from the training impostor distances' count ``n`` (the smallest over
    folds), the smallest distance and the share ``tied`` at it among the first fold's ``pooled`` distances."""
    out = []
    below = [t for t in targets if t < tied]
    if tied > 1.0 / max(pooled, 1) and below:
        out.append(tie_message(smallest, tied, below))
    thin = [t for t in targets if t * n < SUPPORT_WARNING]
    if not thin:
        return out
    listed = ", ".join(f"{100 * t:.3g}% ({format_count(t * n)})" for t in sorted(thin, reverse=True))
    out.append(f"{n} training impostor distances: at target(s) {listed} fewer than {SUPPORT_WARNING:.0f} of them "
               "would lie below an on-target threshold, so every estimator extrapolates there and the achieved "
               "rate can stray far from the target by chance; read the class-bootstrap interval in the report, "
               "and enroll more classes (or add impostor comparisons) for a firmer threshold")
    return out


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
    return unreachable_said(label, rows, float(np.median(n)), int(n.sum()), at_floor.mean(axis=0).tolist(),
                            [bool(np.ptp(table.values[:, k]) == 0) for k in range(len(rows))],
                            lambda: accept_side_auc(fold.test.values[fold.test.genuine_mask()],
                                                    fold.test.values[fold.test.impostor_mask()], "distance"))


def unreachable_said(label: str, rows: list[TargetResult], n_med: float, n_pooled: int, at_floor: list[float],
                     one_for_all: list[bool], auc) -> list[str]:
    """:func:`unreachable_notes` from the figures they read: the median training impostor distances of a class and
    their number pooled, per target the share of classes whose threshold is at or below their smallest training
    distance and whether every class has the same threshold, and ``auc()``: the evaluation's genuine-impostor pairs
    ordered the accept way (calibrate.statistics.sanity.accept_side_auc), read only when needed."""
    floor, pooled_floor, chance, strict, genuine_side = [], [], [], [], []
    for k, r in enumerate(rows):
        zero = r.impostor_attempts > 0 and r.false_accepts == 0
        if not (zero or (r.fnr is not None and r.fnr >= 1.0)):
            continue
        if not zero and r.impostor_attempts > 0:  # FNR 100% at thresholds that do admit impostors
            genuine_side.append(k)
            continue
        if one_for_all[k]:  # the same threshold for every class: a pooled estimator
            if r.target_fpr * n_pooled < 1:
                pooled_floor.append(k)
            elif zero and r.target_fpr * r.impostor_attempts < 3:
                chance.append(k)
            else:
                strict.append(k)
        elif at_floor[k] >= 0.5:
            floor.append(k)
        elif zero and r.target_fpr * r.impostor_attempts < 3:
            chance.append(k)
        else:
            strict.append(k)
    notes = []
    if floor:
        notes.append(
            f"{label} at {_pcts(rows[k].target_fpr for k in floor)}: ratio 0 and/or FNR 100% because the target is "
            f"below what per-class training data can reach: a class has about {n_med:.0f} training impostor distances "
            f"(1/n = {100 / max(n_med, 1):.3g}%), and for {100 * max(at_floor[k] for k in floor):.0f}% of "
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
        notes.append(genuine_side_said(auc(), label, [rows[k] for k in genuine_side]))
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
    return genuine_side_said(auc, label, rows)


def genuine_side_said(auc: float, label: str, rows: list[TargetResult]) -> str:
    """:func:`genuine_side_note` given the evaluation's AUC on the accept side."""
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


def report_parts(results: dict[str, list[TargetResult]], summary: dict, targets: tuple[float, ...], pictures: list,
                 groups_said: str | None = None, extra_notes: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The fpr evaluator's report.md sections and notes, in their order, as both routes give them: the genuine cost,
    the predicted intervals, the verification figures, the groups (``groups_said``), the uncertainty, the pictures;
    the off-band warning first where there is one."""
    from . import costs

    sections = [costs.cost_section(results)]
    said = predicted_section(results)
    if said:
        sections.append(said)
    if "verification" in summary:
        sections.append(costs.verification_section(summary["verification"], targets))
    if groups_said:
        sections.append(groups_said)
    sections.append(uncertainty_section(results))
    loud, warning = off_band(results)
    if warning:
        sections.insert(0, warning)
    return sections + list(pictures), loud + costs.cost_notes(results) + list(extra_notes)
