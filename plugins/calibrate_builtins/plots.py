"""Pictures written next to report.md (matplotlib, Agg backend, PNG).

* ``calibration.png``: achieved vs target FPR on log-log axes, one line per estimator, with the
  ideal diagonal and each point's 95% Clopper-Pearson interval.
* ``cdf-fits.png``: for a few classes, the empirical CDF of the training impostor distances and
  the fitted model CDF (as the paper's Figure 4), for models that expose ``cdf(row, x)``.
* ``det.png``: the DET curve (FNR against FPR) of the distance on the evaluation data.
"""

from __future__ import annotations

import io

import numpy as np

from calibrate.base import EvaluationInput
from calibrate.types import TargetResult


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _figure().close(fig)
    return buf.getvalue()


def calibration_plot(results: dict[str, list[TargetResult]]) -> bytes:
    plt = _figure()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    targets = sorted({r.target_fpr for rows in results.values() for r in rows})
    lo, hi = min(targets) / 3, max(targets) * 3
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="ideal (achieved = target)")
    colours = plt.get_cmap("tab20" if len(results) > 10 else "tab10").colors
    markers = "os^Dv<>pXh*"
    for i, (label, rows) in enumerate(results.items()):
        t = np.array([r.target_fpr for r in rows])
        f = np.array([r.fpr for r in rows])
        err_lo = f - np.array([r.extra.get("fpr_ci_low", r.fpr) for r in rows])
        err_hi = np.array([r.extra.get("fpr_ci_high", r.fpr) for r in rows]) - f
        shown = np.maximum(f, lo)  # a zero (or tiny) FPR is drawn on the bottom edge
        below = np.clip(np.minimum(err_lo, shown - lo * 0.999), 0.0, None)
        above = np.clip(err_hi - (shown - f), 0.0, None)
        ax.errorbar(t, shown, yerr=[below, above], marker=markers[i % len(markers)], color=colours[i % len(colours)],
                    capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, max(hi, max((r.fpr for rows in results.values() for r in rows), default=hi) * 1.5))
    ax.set_xlabel("target FPR")
    ax.set_ylabel("achieved FPR on unseen impostors")
    ax.set_title("Calibration: achieved vs target FPR")
    if len(results) > 4:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    else:
        ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return _png(fig)


def det_plot(data: EvaluationInput) -> bytes | None:
    from scipy.stats import norm

    test = data.folds[0].test
    imp = np.sort(test.values[test.impostor_mask()])
    gen = np.sort(test.values[test.genuine_mask()])
    if imp.size == 0 or gen.size == 0:
        return None
    plt = _figure()
    fig, ax = plt.subplots(figsize=(5, 4.5))
    thresholds = np.unique(np.quantile(np.concatenate([imp, gen]), np.linspace(0, 1, 400)))
    fpr = np.searchsorted(imp, thresholds, side="right") / imp.size
    fnr = 1 - np.searchsorted(gen, thresholds, side="right") / gen.size
    eps = 0.5 / max(imp.size, gen.size)
    ax.plot(norm.ppf(np.clip(fpr, eps, 1 - eps)), norm.ppf(np.clip(fnr, eps, 1 - eps)))
    ticks = np.array([1e-4, 1e-3, 1e-2, 0.05, 0.2, 0.5, 0.8])
    ax.set_xticks(norm.ppf(ticks), [f"{100 * t:g}%" for t in ticks])
    ax.set_yticks(norm.ppf(ticks), [f"{100 * t:g}%" for t in ticks])
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("false negative rate")
    ax.set_title(f"DET of the distance ({data.folds[0].name})")
    ax.grid(True, alpha=0.3)
    return _png(fig)


def cdf_plot(data: EvaluationInput, n_classes: int = 4) -> bytes | None:
    fold = data.folds[0]
    fitted = {label: m for label, m in fold.models.items() if hasattr(m, "cdf")}
    if not fitted:
        return None
    mask = fold.train.impostor_mask()
    classes = list(fold.train.gallery_classes)
    picks = np.unique(np.linspace(0, len(classes) - 1, min(n_classes, len(classes))).astype(int))
    plt = _figure()
    fig, axes = plt.subplots(1, len(picks), figsize=(3.6 * len(picks), 3.3), squeeze=False)
    for ax, j in zip(axes[0], picks):
        d = np.sort(fold.train.values[mask[:, j], j])
        ax.step(d, np.arange(1, d.size + 1) / d.size, where="post", color="c", label="empirical")
        grid = np.linspace(0, d.max() * 1.05, 300)
        for label, model in fitted.items():
            row = model._index[classes[j]]
            ax.plot(grid, model.cdf(row, grid), "--", label=label)
        ax.set_title(f"class {classes[j]}", fontsize=9)
        ax.set_xlabel("distance")
    axes[0][0].set_ylabel("CDF of training impostor distances")
    axes[0][0].legend(fontsize=7)
    return _png(fig)


def make_plots(data: EvaluationInput, results: dict[str, list[TargetResult]]) -> tuple[list[str], dict[str, bytes]]:
    files: dict[str, bytes] = {"calibration.png": calibration_plot(results)}
    lines = ["## Pictures", "", "![Achieved vs target FPR](calibration.png)", ""]
    cdf = cdf_plot(data)
    if cdf is not None:
        files["cdf-fits.png"] = cdf
        lines += ["![Empirical vs fitted CDF for a few classes](cdf-fits.png)", ""]
    det = det_plot(data)
    if det is not None:
        files["det.png"] = det
        lines += ["![DET curve of the distance on the evaluation data](det.png)", ""]
    return ["\n".join(lines)], files
