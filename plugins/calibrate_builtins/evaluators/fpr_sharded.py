"""The ``fpr`` evaluator on a sharded run (Evaluator._evaluate_sharded): the rows, report sections, results.json's
``verification``, det.csv and the pictures an evaluation in memory gives (fpr.py), from what the run counted shard by
shard (calibrate.contract.evaluators.ShardedEvaluation), by the same functions.

What differs, and how far: the class bootstrap, the spread of false accepts over classes (the estimator's and one
threshold's) and the false-accept pairs are the in-memory figures (classes in the order of their names, as in memory;
dispersions summed in that order, so equal within rounding); the verification figures, det.csv and the EER's interval
read the evaluation attempts through the run's BinnedScores, whose ``resolve`` makes every answer exact that its
budget of gathered values allows (every one on galleries of up to a few million evaluation attempts); beyond it, the
thresholds det.csv samples in the bulk of the impostor scores lie within a histogram bin (1/256 of a binade) of the
in-memory ones, each row's rates still counted exactly. The figures are on the transformed distances (the same order
as the matcher's scores), thresholds written back in the matcher's scores through the transform's inverse; d' is the
run's, on the matcher's own scores. scores.png's histogram reads the attempts as they stand (interpolated within a bin
where none was gathered: a picture).
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.contract.base import EvaluationInput, RunContext, ShardedEvaluation
from calibrate.contract.types import EvaluationResult, TargetResult
from calibrate.statistics.verification import class_spread, loosest_below

from . import costs
from .fpr_fields import class_bootstrap, predicted_by_group, predictions_fields, with_predicted
from .fpr_report import report_parts, support_notes, unreachable_said

#: the spread of false accepts over classes beside binomial noise (calibrate.statistics.verification.class_spread)
SPREAD_KEYS = ("share_classes_over_2x_noise", "share_classes_over_10x_noise", "fa_dispersion", "fa_share_top_classes")
#: the route's row fields that come first, in the order an in-memory row has them (fpr.measure_label)
_FIRST = ("fpr_ci_low", "fpr_ci_high", "ratio_ci_low", "ratio_ci_high", "genuine_attempts", "share_classes_over_2x",
          "share_classes_over_10x")


def evaluate_sharded(data: ShardedEvaluation, context: RunContext, plots: bool = True) -> EvaluationResult:
    for note in support_notes(data.training_impostors, data.smallest[0], data.smallest[1], data.training_impostors,
                              data.targets):
        context.note(note)
    pooled = data.attempts
    both = bool(pooled.n_impostors and pooled.n_genuine)

    def numbers(p):
        refs = {label: [loosest_below(p, r.false_accepts) if r.impostor_attempts else math.nan for r in rows]
                for label, rows in data.results.items()}
        finite = np.unique([t for ts in refs.values() for t in ts if math.isfinite(t)])
        tables = p.unit_bins(finite) if finite.size else None
        figures = (costs.verification_figures(p, data.kind, data.scores, data.targets, data.results, data.seed,
                                              p.unit_bins if len(data.classes) >= 2 else None) if both else None)
        return refs, finite, tables, figures

    with context.timed("fpr: verification figures (sharded)"):
        refs, finite, tables, figures = pooled.resolve(numbers)
    below = None if tables is None else np.cumsum(_dense(tables[0]), axis=1)  # classes x (thresholds + 1)
    results = {}
    with context.timed("fpr: class bootstrap and spread (sharded)"):
        for label, rows in data.results.items():
            results[label] = _rows(data, label, rows, refs[label], finite, below)
            context.advance(1)
    summary, files = {}, {}
    if figures is not None:
        summary["verification"], files["det.csv"] = figures
    for label, rows in results.items():
        predicted = predictions_fields([data.predictions.get(label)], [rows[0].impostor_attempts if rows else 0],
                                       data.targets, lambda: data.unit_size)
        if predicted:
            with_predicted(rows, predicted)
            predicted_by_group(rows, [data.predictions.get(label)], [rows[0].impostor_attempts])
        for note in unreachable_said(label, rows, data.median_per_class, data.training_impostors, data.at_floor[label],
                                     data.one_for_all[label], lambda: _accept_side(pooled)):
            context.note(note)
    pictures = []
    if plots and data.plots:
        with context.stage(f"fpr: drawing plots for {len(results)} estimator(s)"):
            pictures, drawn = _pictures(data, results, pooled)
            files.update(drawn)
    sections, notes = report_parts(results, summary, data.targets, pictures)
    for note in notes:
        context.note(note)
    return EvaluationResult("fpr", results, sections, files, summary)


def _dense(table) -> np.ndarray:
    return table.toarray() if hasattr(table, "toarray") else np.asarray(table)


def _accept_side(pooled) -> float:
    above, ties = pooled.auc_counts()
    return float((above + 0.5 * ties) / max(pooled.n_genuine * pooled.n_impostors, 1))


def _rows(data: ShardedEvaluation, label: str, rows: list[TargetResult], refs: list[float], finite: np.ndarray,
          below: np.ndarray | None) -> list[TargetResult]:
    """One estimator's rows with the in-memory evaluation's fields, in its order: the class bootstrap and the
    false-accept pairs after the route's counts, the spread of false accepts (its own and one threshold's)."""
    from dataclasses import replace

    fa = data.class_false_accepts[label]
    imp = data.class_attempts
    out = []
    for k, row in enumerate(rows):
        target = row.target_fpr
        e = row.extra
        b_low, b_high = class_bootstrap(fa[k], imp, np.random.default_rng([data.seed, k]))
        extra = {key: e[key] for key in _FIRST if key in e}
        extra.update({"ratio_boot_low": b_low / target, "ratio_boot_high": b_high / target,
                      "false_accept_pairs": int(data.false_accept_pairs[label][k]),
                      "training_support": e.get("training_support")})
        spread = class_spread(fa[k], imp, target)
        extra.update({key: spread[key] for key in SPREAD_KEYS})
        extra.update({key: value for key, value in e.items() if key not in extra})
        t = refs[k]
        if "one_threshold" in extra and not math.isnan(t):
            ref_fa = imp if not math.isfinite(t) else below[:, int(np.searchsorted(finite, t))]
            theirs = class_spread(ref_fa, imp, target)
            one = {}
            for key, value in extra["one_threshold"].items():  # the spread right after its FNR, as in memory
                one[key] = value
                if key == "fnr":
                    one.update({"fa_dispersion": theirs["fa_dispersion"],
                                "fa_share_top_classes": theirs["fa_share_top_classes"]})
            extra["one_threshold"] = one
        out.append(replace(row, extra=extra))
    return out


class _OnScores:
    """The attempts on the matcher's own scale oriented as distances (sign x score), as scores.png reads them: through
    the run's transform (``to_distances``) and back (``scores``)."""

    def __init__(self, attempts, sign: float, to_distances, scores):
        self.attempts, self.sign, self.to_distances, self.scores = attempts, sign, to_distances, scores

    @property
    def n_impostors(self) -> int:
        return self.attempts.n_impostors

    @property
    def n_genuine(self) -> int:
        return self.attempts.n_genuine

    def _d(self, r) -> np.ndarray:
        r = np.asarray(r, dtype=np.float64)
        return np.asarray(self.to_distances(self.sign * r.ravel()), dtype=np.float64).reshape(r.shape)

    def _r(self, d):
        flat = np.atleast_1d(np.asarray(d, dtype=np.float64))
        out = np.array([np.nan if s is None else self.sign * s for s in self.scores(flat)])
        return float(out[0]) if np.ndim(d) == 0 else out.reshape(np.shape(d))

    def accepted_impostors(self, r) -> np.ndarray:
        return self.attempts.accepted_impostors(self._d(r), record=False)

    def accepted_genuine(self, r) -> np.ndarray:
        return self.attempts.accepted_genuine(self._d(r))

    def impostor_at(self, ranks):
        return self._r(self.attempts.impostor_at(ranks))

    def genuine_at(self, ranks):
        return self._r(self.attempts.genuine_at(ranks))


def _pictures(data: ShardedEvaluation, results: dict[str, list[TargetResult]], pooled) -> tuple[list[str], dict]:
    """calibration.png, cdf-fits.png (the run's sample of classes), det.png and scores.png, as in memory."""
    from .plots import cdf_plot, pictures, pooled_det_figure
    from .figure_layout import png
    from .score_plot import pooled_scores_figure

    def det():
        fig = pooled_det_figure(pooled, data.targets, data.kind, f"{len(data.classes):,} classes in shards", results)
        return None if fig is None else png(fig)

    def cdf():
        return None if data.sample is None else cdf_plot(EvaluationInput((data.sample,), data.targets))

    sections, files = pictures(results, cdf, det)
    order = sorted(data.targets, reverse=True)
    rows = [(label, None if data.class_thresholds.get(label) is None else
             np.asarray(data.class_thresholds[label])[:, [list(data.targets).index(t) for t in order]])
            for label in results]
    sign = -1.0 if data.kind == "similarity" else 1.0
    fig = pooled_scores_figure(_OnScores(pooled, sign, data.to_distances, data.scores), data.kind, rows, data.targets)
    if fig is not None:
        files["scores.png"] = png(fig)
        sections.append("![Genuine and impostor evaluation scores, each target's thresholds marked](scores.png)")
    return sections, files
