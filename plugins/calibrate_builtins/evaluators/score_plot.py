"""``scores.png``: the genuine and impostor score distributions of the evaluation attempts, with the thresholds.

Top panel: the densities of the matcher's own evaluation scores (every fold pooled; a histogram of 120 bins, log
density so that the tails where thresholds sit show), and one pooled threshold at each target FPR (dashed: the
loosest single threshold whose FMR on these attempts is at most the target). Bottom panel, on the same score axis:
one row per estimator, its per-class thresholds at each target (the first fold's, as thresholds.csv) drawn as the
range holding 90% of the classes (5th to 95th percentile) and their median, in the colour of the target. A
normalised run's thresholds are on the normalised score, not on this axis: the row says so.

The figure grows a row per estimator (1 to 8 fit at 100 dpi); names longer than 24 characters are cut. The
histogram reads the pooled sorted scores by binary search (no pass over millions of attempts).
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Fold
from calibrate.statistics.verification import at_fmr

from .figure_layout import new_figure as _new_figure, png as _png
from .plots import _percent

#: histogram bins
BINS = 120
#: the longest estimator name drawn whole
NAME = 24


def _name(label: str) -> str:
    return label if len(label) <= NAME else label[:NAME - 1] + "\u2026"


def _class_thresholds(fold: Fold, label: str, targets) -> np.ndarray | None:
    """(classes, targets) thresholds in the data's own score units, or None where they have none (normalised, or a
    transform without an inverse)."""
    if getattr(fold, "normalization", None) is not None or fold.transform is None or label not in fold.tables:
        return None
    table = fold.tables[label]
    scores = fold.transform.score_thresholds(table.values, fold.kind)
    if scores is None:
        return None
    order = [list(table.targets).index(t) for t in targets]
    return np.asarray(scores, dtype=np.float64)[:, order]


def scores_figure(pool, folds: tuple[Fold, ...], labels: list[str], targets):
    """The figure (see the module docstring); ``pool``: costs.Pool (the evaluation attempts pooled and sorted as
    distances, ``pool.scores`` turning them into the matcher's scores). None without both kinds of attempt."""
    return pooled_scores_figure(pool.pooled, pool.kind, [(label, _class_thresholds(folds[0], label, sorted(
        targets, reverse=True))) for label in labels], targets)


def pooled_scores_figure(pooled, kind: str, rows: list, targets):
    """:func:`scores_figure` of the attempts ``pooled`` on the matcher's own scale oriented as distances (read through
    PooledScores' methods), and ``rows``: per estimator (label, its classes' score thresholds at the targets from the
    largest, or None)."""
    if not pooled.n_impostors or not pooled.n_genuine:
        return None
    from matplotlib import colormaps

    targets = sorted(targets, reverse=True)
    sim = kind == "similarity"
    sign = -1.0 if sim else 1.0
    lo = min(pooled.impostor_at(0), pooled.genuine_at(0))
    hi = max(pooled.impostor_at(pooled.n_impostors - 1), pooled.genuine_at(pooled.n_genuine - 1))
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, BINS + 1)
    shade = colormaps["viridis"](np.linspace(0.0, 0.85, max(len(targets), 1)))
    n = max(len(rows), 1)
    fig = _new_figure(7.2, 4.1 + 0.32 * n + 0.16 * ((len(targets) + 2) // 3))
    fig.set_layout_engine("constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2.6, 0.45 + 0.32 * n])
    x = np.sort(sign * edges)
    for accepted, size, name, colour in ((pooled.accepted_impostors, pooled.n_impostors, "impostor", "tab:red"),
                                         (pooled.accepted_genuine, pooled.n_genuine, "genuine", "tab:blue")):
        cum = np.asarray(accepted(edges), dtype=np.int64)
        cum[0] = 0
        density = np.diff(cum) / (size * np.diff(edges))
        if sim:
            density = density[::-1]
        top.stairs(np.where(density > 0, density, np.nan), x, color=colour, lw=1.3, gid=f"density-{name}",
                   label=f"{name} attempts ({size:,})")
    for k, t in enumerate(targets):
        point = at_fmr(pooled, t)
        if point is not None and np.isfinite(point.threshold):
            top.axvline(sign * point.threshold, color=shade[k], ls="--", lw=1.1, gid="one-threshold",
                        label=f"one threshold, FPR {_percent(t)}")
    top.set_yscale("log")
    from matplotlib.ticker import NullFormatter

    top.yaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels crowd a narrow range
    top.set_ylabel("density (log)")
    accept = "score >= threshold" if sim else "score <= threshold"
    top.set_title(f"Evaluation scores and thresholds (accept if {accept})", fontsize=10)
    fig.legend(*top.get_legend_handles_labels(), loc="outside lower center", fontsize=7, ncol=3, frameon=False)
    top.grid(True, alpha=0.3)
    spread = 0.7 / max(len(targets), 1)
    for i, (label, th) in enumerate(rows):
        y = n - 1 - i
        if th is None:
            bottom.text(0.5, y, "thresholds on normalised scores: not on this axis", transform=bottom.get_yaxis_transform(),
                        ha="center", va="center", fontsize=7, color="0.4", gid=f"thresholds-{label}")
            continue
        for k in range(len(targets)):
            v = th[:, k][np.isfinite(th[:, k])]
            if not v.size:
                continue
            yk = y + (k - (len(targets) - 1) / 2) * spread
            p5, p50, p95 = np.percentile(v, [5, 50, 95])
            bottom.plot([p5, p95], [yk, yk], color=shade[k], lw=2.2, solid_capstyle="butt", gid=f"thresholds-{label}")
            bottom.plot([p50], [yk], "o", color=shade[k], markersize=4)
    bottom.set_yticks(range(n), [_name(label) for label, _ in rows][::-1], fontsize=8)
    bottom.set_ylim(-0.6, n - 0.4)
    bottom.set_xlabel(f"{kind} score")
    bottom.set_title("per-class thresholds at each target: 5th-95th percentile over classes, dot at the median",
                     fontsize=8)
    bottom.grid(True, axis="x", alpha=0.3)
    return fig


def scores_plot(pool, folds: tuple[Fold, ...], labels: list[str], targets) -> bytes | None:
    fig = scores_figure(pool, folds, labels, targets)
    return None if fig is None else _png(fig)
