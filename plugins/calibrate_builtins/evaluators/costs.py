"""What thresholds cost genuine users, judged against one pooled threshold at the same FPR, and how they treat
demographic groups: the ``fpr`` evaluator's figures beyond the achieved FPR (calibrate.statistics.verification computes
them; this module gathers the run's attempts and hands each estimator's decisions to it).

The reference is one threshold for every class, set on the matcher's own scores (as the dataset gave them, before
the transform and any normaliser) over every fold's evaluation attempts pooled: the baseline anyone gets from
``sklearn.metrics.roc_curve`` or bob.measure in one line. For each estimator and target it is read at the
share of impostor attempts that estimator admitted (the loosest threshold admitting no more of them), so the
two are compared at the same FPR on the same genuine attempts:

* ``fnr_one_threshold`` and ``fnr_cost`` (TargetResult's fields), with ``fnr_paired``: the genuine attempts only
  the estimator rejects and only the one threshold rejects, and McNemar's exact p-value of the difference;
* ``one_threshold``: the reference's own figures (its threshold in score units, FPR, how its false accepts
  spread over classes, and per group);
* the spread of false accepts over (fold, enrolled class) units beside binomial noise
  (:func:`calibrate.statistics.verification.class_spread`);
* with groups: per group the same-group FMR, FMR and FNMR of the estimator and of the reference.

Cost: one sort of the evaluation impostor scores (shared with det.png), a pass over each evaluation matrix
for the impostor entries below the loosest reference threshold, and counts over those; the run's timings
show it as ``fpr: genuine cost and groups``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from calibrate.contract.base import EvaluationInput, Fold
from calibrate.contract.types import GroupLabels, TargetResult
from calibrate.statistics.verification import (STANDARD_FMRS, GroupCounts, OneThreshold, PooledScores, class_spread, cost_words,
                                    det_rows, group_figures, loosest_below, own_threshold, paired_fields,
                                    paired_fnr, verification_metrics)
from calibrate.statistics.eer_interval import UnitBins, attempt_interval, class_interval, grid, with_interval


@dataclass
class FoldAttempts:
    """One fold's evaluation attempts on the matcher's own scale (``gen_values`` oriented as distances)."""

    values: np.ndarray          # probes x enrolled classes, the matcher's own scores (Fold.matcher_scores)
    sign: float                 # -1 for similarities: sign * values are distances
    impostor: np.ndarray        # the impostor mask (the same entries in every scale)
    gen_rows: np.ndarray
    gen_cols: np.ndarray
    gen_values: np.ndarray
    probe_groups: np.ndarray | None    # group code of each probe's real class
    class_groups: np.ndarray | None    # group code of each enrolled class (column)
    gallery: np.ndarray | None = None  # each column's enrolled class


@dataclass
class Pool:
    """Every fold's evaluation attempts, pooled and sorted once (``pooled``, the matcher's scores as distances), with
    the group counts that do not depend on any estimator; ``kind``: the scores' own kind."""

    folds: list[FoldAttempts]
    pooled: PooledScores
    groups: GroupLabels | None
    kind: str
    group_impostors: np.ndarray | None = None   # (G+1, G+1): claimed group x probe group
    group_genuine: np.ndarray | None = None     # (G+1,)
    group_classes: np.ndarray | None = None     # (G+1,)
    #: per labelled group, its classes' same-group impostor attempts sorted (the matcher's scores as distances): where
    #: a threshold of that group's own admitting a given number of them lies
    group_same: list[np.ndarray] | None = None

    def scores(self, distances) -> list:
        """Thresholds on the oriented scale as the matcher's own scores (accept ``score >= t`` for similarities);
        None for an infinite one."""
        d = np.asarray(distances, dtype=np.float64)
        s = -d if self.kind == "similarity" else d
        return [float(v) if np.isfinite(v) else None for v in s]


def _kind(fold: Fold) -> str:
    raw = fold.raw_test if fold.raw_test is not None else fold.test
    return raw.kind


def pool_attempts(data: EvaluationInput) -> Pool:
    """The run's evaluation attempts on the matcher's own scale (the dataset's scores, before transform and
    normaliser), every fold pooled; the group counts of the attempts (not of any decision) when the run has groups."""
    groups = data.groups
    folds, imp_parts, gen_parts = [], [], []
    n_groups = len(groups.names) + 1 if groups is not None else 0
    g_imp = np.zeros((n_groups, n_groups), dtype=np.int64) if groups is not None else None
    g_gen = np.zeros(n_groups, dtype=np.int64) if groups is not None else None
    enrolled: dict[str, int] = {}
    for fold in data.folds:
        values, sign = fold.matcher_scores()
        imp = fold.test.impostor_mask()
        gen_rows, gen_cols = np.nonzero(fold.test.genuine_mask())
        gen_values = sign * values[gen_rows, gen_cols]
        part = values[imp]
        if sign < 0:
            np.negative(part, out=part)  # in place: no second copy of millions of scores
        imp_parts.append(part)
        gen_parts.append(gen_values)
        probe_groups = class_groups = None
        if groups is not None:
            probe_groups = groups.codes(fold.test.probe_classes)
            class_groups = groups.codes(fold.test.gallery_classes)
            for b in np.unique(probe_groups):
                per_column = imp[probe_groups == b].sum(axis=0)
                g_imp[:, b] += np.bincount(class_groups, weights=per_column, minlength=n_groups).astype(np.int64)
            g_gen += np.bincount(class_groups[gen_cols], minlength=n_groups)
            for c, code in zip(fold.test.gallery_classes.tolist(), class_groups.tolist()):
                enrolled[c] = code
        folds.append(FoldAttempts(values, sign, imp, gen_rows, gen_cols, gen_values, probe_groups, class_groups,
                                  fold.test.gallery_classes))
    imp_all = imp_parts[0] if len(imp_parts) == 1 else np.concatenate(imp_parts)
    imp_all.sort()  # sorted in place: the copy values[imp] made is this pool's own
    gen_all = np.concatenate(gen_parts)
    gen_all.sort()
    pool = Pool(folds, PooledScores(imp_all, gen_all), groups, _kind(data.folds[0]), g_imp, g_gen)
    if groups is not None:
        pool.group_classes = np.bincount(np.array(list(enrolled.values()), dtype=np.int64), minlength=n_groups)
        pool.group_same = _same_group_scores(folds, n_groups - 1)
    return pool


def _same_group_scores(folds: list[FoldAttempts], labelled: int) -> list[np.ndarray]:
    """Per labelled group, every fold's same-group impostor attempts of its classes, as distances, sorted."""
    parts: list[list[np.ndarray]] = [[] for _ in range(labelled)]
    for fa in folds:
        for g in range(labelled):  # the group's block of rows and columns, not an index of every impostor cell
            block = np.ix_(np.flatnonzero(fa.probe_groups == g), np.flatnonzero(fa.class_groups == g))
            parts[g].append(fa.sign * fa.values[block][fa.impostor[block]])
    return [np.sort(np.concatenate(p)) for p in parts]


def own_threshold_fields(pool: Pool, g: int, same_fa: int, est_accepts: list[np.ndarray]) -> dict:
    """Group ``g`` against one threshold of its own (calibrate.statistics.verification.own_threshold), every fold's
    genuine attempts of its classes pooled (``est_accepts``: the estimator's decisions on each fold's)."""
    of_group = [fa.class_groups[fa.gen_cols] == g for fa in pool.folds]
    return own_threshold(pool.group_same[g], same_fa,
                         np.concatenate([fa.gen_values[m] for fa, m in zip(pool.folds, of_group)]),
                         np.concatenate([a[m] for a, m in zip(est_accepts, of_group)]))


def _pairs(claimed: np.ndarray, probe: np.ndarray, n: int) -> np.ndarray:
    """(n, n) counts of (claimed group, probe group) pairs."""
    return np.bincount(claimed * n + probe, minlength=n * n).reshape(n, n)


def _group_counts(pool: Pool, fa_pairs: np.ndarray, rejects: np.ndarray) -> GroupCounts:
    return GroupCounts(pool.groups.names, pool.group_impostors, fa_pairs, pool.group_genuine, rejects,
                       pool.group_classes)


def add_costs(measured: dict, pool: Pool, targets: tuple[float, ...]) -> dict[str, list[TargetResult]]:
    """Every estimator's rows (``measured``: label -> fpr.Measured) with the one-threshold reference at its achieved
    FPR (``fnr_one_threshold``, ``fnr_paired``, ``one_threshold``), the spread of its false accepts beside noise,
    and with groups the group figures of both."""
    thresholds = {label: [loosest_below(pool.pooled, r.false_accepts) if r.impostor_attempts else math.nan
                          for r in m.rows] for label, m in measured.items()}
    finite = [t for ts in thresholds.values() for t in ts if not math.isnan(t)]
    reach = max(finite, default=-math.inf)
    # the impostor entries any reference threshold accepts, once per fold: (column, probe row, value), by value
    candidates = []
    for fa in pool.folds:
        within = fa.values <= reach if fa.sign > 0 else fa.values >= -reach
        rows, cols = np.nonzero(fa.impostor & within)
        vals = fa.sign * fa.values[rows, cols]
        order = np.argsort(vals, kind="stable")
        candidates.append((rows[order], cols[order], vals[order]))
    scores = {label: pool.scores(ts) for label, ts in thresholds.items()}
    n_groups = len(pool.groups.names) + 1 if pool.groups is not None else 0
    out = {}
    for label, m in measured.items():
        rows = []
        for k, row in enumerate(m.rows):
            t = thresholds[label][k]
            if math.isnan(t):
                rows.append(row)
                continue
            ref_fa, unit_fa, ref_gen, est_gen = 0, [], [], []
            ref_pairs = np.zeros((n_groups, n_groups), dtype=np.int64) if n_groups else None
            est_pairs = np.zeros((n_groups, n_groups), dtype=np.int64) if n_groups else None
            est_rej = np.zeros(n_groups, dtype=np.int64) if n_groups else None
            ref_rej = np.zeros(n_groups, dtype=np.int64) if n_groups else None
            for fa, (c_rows, c_cols, c_vals), counts in zip(pool.folds, candidates, m.counts):
                cut = int(np.searchsorted(c_vals, t, side="right"))
                ref_fa += cut
                unit_fa.append(np.bincount(c_cols[:cut], minlength=fa.values.shape[1]))
                ref_accept = fa.gen_values <= t
                ref_gen.append(ref_accept)
                est_accept = counts["gen_accept"][k]
                est_gen.append(est_accept)
                if n_groups:
                    ref_pairs += _pairs(fa.class_groups[c_cols[:cut]], fa.probe_groups[c_rows[:cut]], n_groups)
                    ks, fr, fc = counts["fa_at"]
                    sel = ks == k
                    est_pairs += _pairs(fa.class_groups[fc[sel]], fa.probe_groups[fr[sel]], n_groups)
                    gen_groups = fa.class_groups[fa.gen_cols]
                    est_rej += np.bincount(gen_groups[~est_accept], minlength=n_groups)
                    ref_rej += np.bincount(gen_groups[~ref_accept], minlength=n_groups)
            est_gen, ref_gen = np.concatenate(est_gen), np.concatenate(ref_gen)
            n_gen = est_gen.size
            ref_fnr = 1.0 - float(ref_gen.sum()) / n_gen if n_gen else None
            extra = dict(row.extra)
            spread = class_spread(m.unit_fa[k], m.unit_imp[k], row.target_fpr)
            ref_spread = class_spread(np.concatenate(unit_fa), m.unit_imp[k], row.target_fpr)
            extra.update({key: spread[key] for key in ("share_classes_over_2x_noise", "share_classes_over_10x_noise",
                                                        "fa_dispersion", "fa_share_top_classes")})
            reference = {"score_threshold": scores[label][k],
                         "false_accepts": ref_fa, "fpr": ref_fa / row.impostor_attempts, "fnr": ref_fnr,
                         "fa_dispersion": ref_spread["fa_dispersion"],
                         "fa_share_top_classes": ref_spread["fa_share_top_classes"]}
            if n_gen:
                extra["fnr_paired"] = paired_fields(paired_fnr(est_gen, ref_gen), row.false_accepts,
                                                    OneThreshold(t, ref_fa, row.impostor_attempts, 0, 0))
            if n_groups:
                mine = group_figures(_group_counts(pool, est_pairs, est_rej))
                theirs = group_figures(_group_counts(pool, ref_pairs, ref_rej))
                for g, name in enumerate(pool.groups.names):  # each group against one threshold of its own
                    if name in mine["groups"] and pool.group_same[g].size:
                        mine["groups"][name].update(own_threshold_fields(
                            pool, g, int(est_pairs[g, g]), [c["gen_accept"][k] for c in m.counts]))
                extra.update(mine)
                reference.update(theirs)
            extra["one_threshold"] = reference
            rows.append(replace(row, extra=extra, fnr_one_threshold=ref_fnr))
        out[label] = rows
    return out


def _class_counts(pool: Pool, thresholds: np.ndarray) -> tuple:
    """Per enrolled class (by name, over every fold), its impostor and genuine evaluation attempts in each bin of
    ``thresholds`` (calibrate.statistics.eer_interval.UnitBins), read a block of probes at a time: only the impostor
    attempts at or below the last threshold are binned, those beyond it counted from each class's total."""
    names = np.unique(np.concatenate([np.asarray(fa.gallery, dtype=str) for fa in pool.folds]))
    imp, gen = UnitBins(thresholds, names.size), UnitBins(thresholds, names.size)
    last = thresholds[-1]
    for fa in pool.folds:
        codes = np.searchsorted(names, np.asarray(fa.gallery, dtype=str))
        n_probes, n_classes = fa.values.shape
        step = max(1, 1_000_000 // max(n_classes, 1))
        for start in range(0, n_probes, step):
            block = fa.values[start:start + step]
            within = fa.impostor[start:start + step] & ((block <= last) if fa.sign > 0 else (block >= -last))
            rows, cols = np.nonzero(within)
            imp.add(fa.sign * block[rows, cols], codes[cols])
        imp.totals(np.bincount(codes, weights=fa.impostor.sum(axis=0), minlength=names.size))
        gen.add(fa.gen_values, codes[fa.gen_cols])
    return imp.table(), gen.table()


def verification_summary(pool: Pool, targets: tuple[float, ...], results: dict[str, list[TargetResult]], seed=0
                         ) -> tuple[dict, bytes]:
    """results.json's ``verification`` and det.csv of a run in memory (:func:`verification_figures`), the EER's
    interval over enrolled classes (over attempts when there is one class)."""
    several = len({c for fa in pool.folds for c in np.asarray(fa.gallery).tolist()}) >= 2
    return verification_figures(pool.pooled, pool.kind, pool.scores, targets, results, seed,
                                (lambda thresholds: _class_counts(pool, thresholds)) if several else None)


def verification_figures(pooled, kind: str, scores, targets: tuple[float, ...], results: dict[str, list[TargetResult]],
                         seed=0, class_tables=None) -> tuple[dict, bytes]:
    """results.json's ``verification`` (of the matcher's scores on the evaluation attempts ``pooled``, as distances:
    EER with its bootstrap interval over enrolled classes (``class_tables(thresholds)``: their attempts' tables,
    calibrate.statistics.eer_interval; None: over attempts), AUC, d', FNMR at fixed FMRs and at the run's targets, FMR
    at fixed FNMRs) and det.csv (``fpr,fnr,score_threshold``, probit-spaced rows that include every operating point's
    one-threshold reference); ``scores``: distance thresholds to the matcher's scores, of kind ``kind``. Reads the
    attempts only through PooledScores' methods (a sharded run's calibrate.statistics.binned_scores answers them)."""
    fmrs = tuple(STANDARD_FMRS) + tuple(t for t in sorted(targets, reverse=True) if t not in STANDARD_FMRS)
    metrics = verification_metrics(pooled, fmrs)
    thresholds = grid(pooled, metrics["eer"])
    if class_tables is not None:
        tables = class_tables(thresholds)
        interval = (None, None) if tables is None else class_interval(*tables, seed=seed)
        metrics = with_interval(metrics, *interval, "enrolled classes")
    else:  # one class (genuine and impostor score files): nothing to resample but the attempts
        metrics = with_interval(metrics, *attempt_interval(pooled, thresholds, seed=seed), "attempts")
    extra = [loosest_below(pooled, r.false_accepts) for rows in results.values() for r in rows
             if r.impostor_attempts and r.fnr_one_threshold is not None]
    t, fmr, fnmr = det_rows(pooled, extra=extra)
    metrics["eer_score_threshold"] = scores([metrics.pop("eer_threshold")])[0]
    metrics["d_prime"] = pooled.d_prime()  # |difference|: the sign of the scale is moot
    metrics["score_kind"] = kind
    lines = ["fpr,fnr,score_threshold"]
    for f, n, s in zip(fmr.tolist(), fnmr.tolist(), scores(t)):
        lines.append(f"{f!r},{n!r},{'' if s is None else repr(s)}")
    return metrics, ("\n".join(lines) + "\n").encode("utf-8")


# ---- report.md -------------------------------------------------------------------------------------------

def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None or (isinstance(rate, float) and math.isnan(rate)) else f"{100 * rate:.3g}%"


def _cost(row: TargetResult) -> str:
    return cost_words(row.fnr, row.fnr_one_threshold)


def _verdict(paired: dict | None) -> str:
    if not paired:
        return "n/a"
    if not paired.get("same_fpr", True):
        return "not at the same FPR (impostor scores tie there)"
    if paired["rejected_only_by_estimator"] + paired["rejected_only_by_one_threshold"] == 0:
        return "the same genuine attempts"
    if not paired["beyond_noise"]:
        return f"within noise ({_p(paired['p_value'])})"
    return ("more rejects" if paired["extra_rejects_per_1000"] > 0 else "fewer rejects") + f", {_p(paired['p_value'])}"


def _said(label: str, rows: list[TargetResult], worse: bool) -> str:
    parts = []
    for r in rows:
        pr = r.extra["fnr_paired"]
        parts.append(f"at {100 * r.target_fpr:.3g}% it rejects {_pct(r.fnr)} of genuine attempts against "
                     f"{_pct(r.fnr_one_threshold)} for one threshold, {abs(pr['extra_rejects_per_1000']):.3g} "
                     f"{'more' if worse else 'fewer'} per 1,000 ({pr['rejected_only_by_estimator']:,} rejected by {label} only, "
                     f"{pr['rejected_only_by_one_threshold']:,} by the one threshold only; McNemar {_p(pr['p_value'])})")
    return "; ".join(parts)


def paired_rows(rows: list[TargetResult], worse: bool) -> list[TargetResult]:
    """The rows whose FNR differs from one threshold's beyond counting noise, in the direction asked."""
    out = []
    for r in rows:
        pr = r.extra.get("fnr_paired")
        if pr and pr["beyond_noise"] and (pr["extra_rejects_per_1000"] > 0) == worse:
            out.append(r)
    return out


def cost_notes(results: dict[str, list[TargetResult]]) -> list[str]:
    """One run note per estimator that turns away more genuine users than one pooled threshold, beyond noise (at the
    same FPR)."""
    notes = []
    for label, rows in results.items():
        worse = paired_rows(rows, True)
        if worse:
            notes.append(f"{label} turns away more genuine users than one pooled threshold admitting the same share of "
                         "evaluation impostors, beyond counting noise: "
                         + ", ".join(f"{100 * r.target_fpr:.3g}%: FNR {_pct(r.fnr)} vs {_pct(r.fnr_one_threshold)} "
                                     f"(+{r.extra['fnr_paired']['extra_rejects_per_1000']:.3g} per 1,000)" for r in worse)
                         + " (report.md: What the thresholds cost genuine users)")
    return notes


def cost_section(results: dict[str, list[TargetResult]]) -> str | None:
    """report.md's section on what each estimator's thresholds cost genuine users against one threshold."""
    measured = [(l, r) for l, rows in results.items() for r in rows if r.fnr is not None]
    if not measured:
        return ("## What the thresholds cost genuine users\n\nThe evaluation data hold no genuine attempts, so no "
                "threshold's false non-match rate (FNR) can be measured here.\n")
    lines = ["## What the thresholds cost genuine users", "",
             "Each estimator's false non-match rate (FNR: genuine attempts rejected) beside that of one pooled "
             "threshold: the same for every class, on the matcher's own scores, set to admit the same share of these "
             "evaluation impostor attempts as the estimator did (the loosest such threshold, read off the pooled DET; "
             "where impostor scores tie it admits fewer): the baseline `sklearn.metrics.roc_curve` or bob.measure "
             "give in one line. FNR cost = FNR / one threshold's FNR: above 1 the estimator turns away more genuine "
             "users than one threshold would at the FPR it achieved. The paired test compares the two on the same "
             "genuine attempts (McNemar's exact test on those only one of them rejects); a difference with p >= 0.05 "
             "is within counting noise. HTER = (achieved FPR + FNR) / 2: bob.measure's half total error rate at the "
             "estimator's thresholds, set on training data and applied to these attempts (bob's dev/eval report). "
             "Where impostor scores tie so that one threshold cannot come within half of "
             "the estimator's false accepts, the two are not at the same FPR and no verdict is given.", "",
             "| Estimator | Target FPR | Achieved FPR | FNR | HTER | One threshold's FNR | FNR cost | More rejects per "
             "1,000 genuine attempts | Paired test |", "|---|---|---|---|---|---|---|---|---|"]
    for label, r in measured:
        pr = r.extra.get("fnr_paired")
        extra = "n/a" if not pr else f"{pr['extra_rejects_per_1000']:+.3g}"
        lines.append(f"| {label} | {100 * r.target_fpr:.3g}% | {_pct(r.fpr)} | {_pct(r.fnr)} | {_pct(r.hter)} | "
                     f"{_pct(r.fnr_one_threshold)} | {_cost(r)} | {extra} | {_verdict(pr)} |")
    lines.append("")
    calm = []
    for label, rows in results.items():
        worse, better = paired_rows(rows, True), paired_rows(rows, False)
        if worse:
            lines.append(f"- **{label} costs genuine users** beyond counting noise: {_said(label, worse, True)}.")
        if better:
            lines.append(f"- **{label} saves genuine users** beyond counting noise: {_said(label, better, False)}.")
        if not worse and not better and any(r.extra.get("fnr_paired", {}).get("same_fpr") for r in rows):
            calm.append(label)
        apart = [r for r in rows if r.extra.get("fnr_paired") and not r.extra["fnr_paired"]["same_fpr"]]
        if apart:
            lines.append(f"- **{label}** at {', '.join(f'{100 * r.target_fpr:.3g}%' for r in apart)}: one threshold "
                         "cannot admit the same share of impostors (their scores tie there; it admits "
                         + ", ".join(f"{r.extra['one_threshold']['false_accepts']:,} of {r.false_accepts:,}" for r in apart)
                         + " of the estimator's false accepts), so no verdict on genuine users is given there.")
    if calm:
        lines.append(f"- Within counting noise of one threshold at every target compared: {', '.join(calm)}.")
    lines.append("")
    return "\n".join(lines)


def verification_section(metrics: dict, targets: tuple[float, ...]) -> str:
    """report.md's section on the matcher itself (one pooled threshold on the evaluation attempts)."""
    if not metrics.get("genuine_attempts") or not metrics.get("impostor_attempts"):
        return ("## The matcher on the evaluation data\n\nThe evaluation data need both genuine and impostor attempts "
                "for the verification figures (EER, AUC, DET); det.csv is not written.\n")
    at = metrics["fnmr_at_fmr"]
    score = metrics.get("eer_score_threshold")
    eer_at = "n/a" if score is None else f"{'score >= ' if metrics['score_kind'] == 'similarity' else 'score <= '}{score:.6g}"
    at_g = metrics.get("fmr_at_fnmr", {})
    units = metrics.get("eer_ci_units", "enrolled classes")
    units = f"{units}: each class's attempts resampled together" if units == "enrolled classes" else units
    ci = ("n/a" if metrics.get("eer_ci_low") is None
          else f"{_pct(metrics['eer_ci_low'])} to {_pct(metrics['eer_ci_high'])}")
    lines = ["## The matcher on the evaluation data", "",
             f"What the {metrics['genuine_attempts']:,} genuine and {metrics['impostor_attempts']:,} impostor evaluation "
             "attempts say of the matcher itself with one pooled threshold (ISO/IEC 19795-1 terms, as pyeer and "
             "bob.measure report them): the equal error rate, its threshold and its 95% confidence interval (a "
             f"bootstrap over {units}), the area under the ROC curve, the decidability d' (on the matcher's own scores), the FNMR at "
             "fixed FMRs and the FMR at fixed FNMRs (n/a where the attempts are fewer than 1 / rate). det.csv holds "
             "the DET (`fpr,fnr,score_threshold`) at up to 10,000 thresholds spaced on the probit scale, every "
             "operating point's one-threshold reference among them.",
             "",
             "| EER | EER 95% interval | EER threshold | AUC | d' | FNMR at FMR 1% | FNMR at FMR 0.1% | "
             "FNMR at FMR 0.01% | FNMR at FMR 0 | FMR at FNMR 0 |", "|---|---|---|---|---|---|---|---|---|---|",
             f"| {_pct(metrics['eer'])} | {ci} | {eer_at} | {metrics['auc']:.5f} | {metrics['d_prime']:.3g} | "
             f"{_pct(at.get('0.01'))} | {_pct(at.get('0.001'))} | {_pct(at.get('0.0001'))} | "
             f"{_pct(metrics['fnmr_at_zero_fmr'])} | {_pct(metrics['fmr_at_zero_fnmr'])} |", "",
             "| FMR at FNMR 1% | FMR at FNMR 0.1% | FMR at FNMR 0.01% |", "|---|---|---|",
             f"| {_pct(at_g.get('0.01'))} | {_pct(at_g.get('0.001'))} | {_pct(at_g.get('0.0001'))} |", ""]
    own = [t for t in sorted(targets, reverse=True)]
    lines += ["One pooled threshold at each of the run's targets: " + ", ".join(
        f"FNMR {_pct(at.get(repr(float(t))))} at FMR {100 * t:.3g}%" for t in own) + ".", ""]
    return "\n".join(lines)
