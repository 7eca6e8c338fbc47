"""Pictures written next to report.md (matplotlib, Agg canvas, PNG).

* ``calibration.png``: achieved vs target FPR on log-log axes, one line per estimator, with the
  ideal diagonal and each point's 95% Clopper-Pearson interval. An achieved FPR of zero (or one
  beyond the axis) is drawn as a triangle on the floor (or ceiling), named in the legend.
* ``cdf-fits.png``: for a few classes, the impostor tail of the empirical CDF of the training scores
  and of the fitted model CDF (as the paper's Figure 4) on a log CDF axis spanning the targets, with
  every estimator's threshold for that class marked at each target; on the data's own score axis
  (through the fitted transform's inverse; similarity axes run from high to low, so the accepted side
  is on the left), for runs with at least one model that exposes ``cdf(row, x)``.
* ``det.png``: the DET curve (FNR against FPR, probit axes) of the scores on the evaluation data,
  with each estimator's operating point at each target (its achieved FPR and FNR with per-class
  thresholds, which need not lie on the pooled curve) and the target FPRs marked and labelled.

Rates are written in percent everywhere, as in the tables. Each figure is laid out to fit what it holds
(figure_layout.py: legends below the axes, long titles and class names wrapped, never cut), and an estimator's
mark that would sit on another's is drawn a mark's width beside it.

The ``*_figure`` functions build and return a matplotlib ``Figure`` (tests inspect it); the
``*_plot`` functions render it to PNG bytes. matplotlib is imported only when a picture is drawn,
and pyplot not at all: each figure is a plain ``Figure`` on the Agg canvas, freed once rendered.
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import EvaluationInput, FittedModel, overrides
from calibrate.contract.types import TargetResult

from .figure_layout import apart, marker_pixels, marks, new_figure, outside_legend, pixels, png, settle, shifted

ZERO_NOTE = "0 achieved (plotted at floor)"
BELOW_NOTE = "below the axis (plotted at floor)"
ABOVE_NOTE = "above the axis (plotted at ceiling)"
#: the marks of rates off the axis: gid -> (legend note, marker, face; None: the series' colour)
_SPECIAL = {"zero-at-floor": (ZERO_NOTE, "v", "white"), "below-floor": (BELOW_NOTE, "v", None),
            "above-ceiling": (ABOVE_NOTE, "^", None)}
_SPECIAL_SIZE = 9
_FNR_ZERO = {"marker": "v", "markersize": 8, "markerfacecolor": "white", "markeredgecolor": "0.25"}
#: at most this many points per drawn curve (sorted values are subsampled evenly beyond it)
MAX_POINTS = 600
_MARKERS = "osDpXhP*d"  # no up/down triangles: those mark the floor and ceiling


def _colours(n: int):
    from matplotlib import colormaps

    return colormaps["tab20" if n > 10 else "tab10"].colors


def _percent(p: float) -> str:
    """A rate in percent, as the tables write it (0.1%, 0.005%, 1e-05% below 1e-6)."""
    return f"{100 * p:g}%" if p >= 1e-6 else f"{100 * p:.0e}%"


def _percent_axis(axis) -> None:
    """Tick labels of a log-scaled rate axis in percent (0.1%, not 10^-3)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: _percent(v) if v > 0 else "0%"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def probit_ticks(lo: float, hi: float, min_gap: float = 0.1) -> list[float]:
    """Tick probabilities for a probit axis from ``lo`` to ``hi``: decades first, then 5%, 20%,
    50%, 80%..., each kept only if it is at least ``min_gap`` of the axis length from every tick
    already kept, so the labels never run into each other."""
    from scipy.special import ndtri

    a, b = ndtri(lo), ndtri(hi)
    decades = [10.0 ** e for e in range(-6, 0)]
    extra = [0.5, 0.05, 0.2, 0.8, 0.9, 0.95, 0.99, 0.02, 0.002, 0.0002]
    kept: list[float] = []
    for p in decades + extra:
        z = ndtri(p)
        if lo <= p <= hi and all(abs(z - ndtri(q)) >= min_gap * (b - a) for q in kept):
            kept.append(p)
    return sorted(kept)


def _thin(n: int, limit: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ``limit`` evenly spaced points of ``n``, first and last included."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


# --------------------------------------------------------------------------------------------
# calibration.png


def calibration_figure(results: dict[str, list[TargetResult]]):
    """Achieved vs target FPR; see the module docstring."""
    from matplotlib.lines import Line2D

    targets = sorted({r.target_fpr for rows in results.values() for r in rows})
    achieved = [r.fpr for rows in results.values() for r in rows if np.isfinite(r.fpr)]
    positive = [f for f in achieved if f > 0]
    x_lo, x_hi = min(targets) / 3, max(targets) * 3
    # the y axis reaches down to the smallest nonzero achieved FPR and up to the largest, within
    # 30x of the target range; zeros and anything beyond are drawn on that floor or ceiling
    floor = min(x_lo, max(min(positive, default=x_lo) / 1.5, min(targets) / 30))
    if positive and min(positive) < 3 * floor:
        # a nonzero rate close to the floor would sit under the zero markers: keep a factor 3 between them
        floor = min(floor, max(min(positive) / 3, min(targets) / 1000))
    ceiling = max(x_hi, min(max(positive, default=x_hi) * 1.5, max(targets) * 30))

    colours = _colours(len(results))
    series = []
    for i, (label, rows) in enumerate(results.items()):
        rows = [r for r in rows if np.isfinite(r.fpr)]
        if not rows:
            continue
        f = np.array([r.fpr for r in rows])
        series.append(dict(label=label, colour=colours[i % len(colours)], marker=_MARKERS[i % len(_MARKERS)],
                           t=np.array([r.target_fpr for r in rows]), shown=np.clip(f, floor, ceiling),
                           lo=np.clip([r.extra.get("fpr_ci_low", r.fpr) for r in rows], floor, ceiling),
                           hi=np.clip([r.extra.get("fpr_ci_high", r.fpr) for r in rows], floor, ceiling),
                           kinds={"zero-at-floor": f <= 0, "below-floor": (f > 0) & (f < floor), "above-ceiling": f > ceiling}))
    fig = new_figure(5.6, 4.6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(floor / 1.25, ceiling * 1.25)
    _percent_axis(ax.xaxis)
    _percent_axis(ax.yaxis)
    ax.set_xlabel("target FPR")
    ax.set_ylabel("achieved FPR on unseen impostors")
    ax.set_title("Calibration: achieved vs target FPR")
    ax.grid(True, which="both", alpha=0.3)
    # the legend: series first, then the diagonal and the floor/ceiling notes that occur
    handles = [Line2D([], [], color=s["colour"], marker=s["marker"], label=s["label"]) for s in series]
    handles.append(Line2D([], [], color="k", ls="--", lw=1, label="ideal (achieved = target)"))
    for kind, (note, symbol, face) in _SPECIAL.items():
        if any(s["kinds"][kind].any() for s in series):
            handles.append(Line2D([], [], linestyle="none", marker=symbol, markersize=8, markeredgewidth=1.6,
                                  markerfacecolor=face or "0.4", markeredgecolor="0.3", label=note))
    settle(fig, [ax.title], [outside_legend(fig, handles, 8, 3)])

    ax.plot([min(x_lo, floor), max(x_hi, ceiling)], [min(x_lo, floor), max(x_hi, ceiling)], "k--", lw=1, zorder=1)
    # each point's mark is kept clear of every earlier series' marks: an estimator whose rates equal another's is
    # drawn beside it, not under it
    offsets = apart([pixels(ax, s["t"], s["shown"]) for s in series], marker_pixels(_SPECIAL_SIZE) + 1)
    for s, off in zip(series, offsets):
        colour, special = s["colour"], np.logical_or.reduce(list(s["kinds"].values()))
        ax.plot(s["t"], s["shown"], color=colour, lw=1.5, gid=f"line-{s['label']}", zorder=2)
        for d in np.unique(off, axis=0):
            m = np.all(off == d, axis=1) & (s["lo"] < s["hi"])
            if m.any():
                tr = shifted(ax, *d)
                ax.vlines(s["t"][m], s["lo"][m], s["hi"][m], color=colour, lw=1.2, transform=tr, zorder=3)
                for end in (s["lo"][m], s["hi"][m]):
                    ax.plot(s["t"][m], end, linestyle="none", marker="_", markersize=6, color=colour, transform=tr,
                            zorder=3)
        marks(ax, s["t"][~special], s["shown"][~special], off[~special], marker=s["marker"], markersize=6,
              color=colour, gid="points", label=s["label"], zorder=4)
        for kind, (_, symbol, face) in _SPECIAL.items():
            m = s["kinds"][kind]
            if m.any():
                marks(ax, s["t"][m], s["shown"][m], off[m], marker=symbol, markersize=_SPECIAL_SIZE,
                      markeredgewidth=1.6, markerfacecolor=face or colour, markeredgecolor=colour,
                      clip_on=False, zorder=5, gid=kind, label=s["label"])
    return fig


def calibration_plot(results: dict[str, list[TargetResult]]) -> bytes:
    return png(calibration_figure(results))


# --------------------------------------------------------------------------------------------
# det.png


def det_figure(data: EvaluationInput, results: dict[str, list[TargetResult]] | None = None, pooled=None):
    """DET curve of one pooled threshold on the evaluation attempts (``pooled``: calibrate.statistics.verification.PooledScores
    of every fold on the matcher's own scale; default: the first fold's evaluation matrix) with each estimator's
    operating points, or None without both kinds of attempt."""
    from calibrate.statistics.verification import PooledScores

    fold = data.folds[0]
    if pooled is None:
        values, sign = fold.matcher_scores()
        pooled = PooledScores(np.sort(sign * values[fold.test.impostor_mask()]),
                              np.sort(sign * values[fold.test.genuine_mask()]))
        where = fold.name
    else:
        where = fold.name if len(data.folds) == 1 else f"{len(data.folds)} folds pooled"
    return pooled_det_figure(pooled, data.targets, fold.kind, where, results)


def pooled_det_figure(pooled, targets, kind: str, where: str, results: dict[str, list[TargetResult]] | None = None):
    """:func:`det_figure` of the attempts ``pooled`` (read through PooledScores' methods: a sharded run's
    calibrate.statistics.binned_scores too), titled with the scores' ``kind`` and ``where`` they come from."""
    from matplotlib.lines import Line2D
    from scipy.special import ndtr, ndtri  # the normal CDF and its inverse, without importing scipy.stats

    ni, ng = pooled.n_impostors, pooled.n_genuine
    if ni == 0 or ng == 0:
        return None
    # thresholds at FPR (and FNR) levels evenly spaced on the probit scale, so the low-FPR end is
    # as finely drawn as the bulk without evaluating every one of millions of distances
    levels = ndtr(np.linspace(ndtri(0.5 / max(ni, ng)), ndtri(1 - 0.5 / max(ni, ng)), MAX_POINTS // 2))
    thr = np.unique(np.concatenate([pooled.impostor_at(np.clip(np.ceil(levels * ni).astype(int) - 1, 0, ni - 1)),
                                    pooled.genuine_at(np.clip(np.ceil(levels * ng).astype(int) - 1, 0, ng - 1))]))
    fpr = pooled.accepted_impostors(thr) / ni
    fnr = 1 - pooled.accepted_genuine(thr) / ng
    points = {label: [(r.target_fpr, r.fpr, r.fnr) for r in rows if r.fnr is not None and np.isfinite(r.fpr)]
              for label, rows in (results or {}).items()}
    achieved = [f for pts in points.values() for _, f, _ in pts if f > 0]

    targets = sorted(targets)
    # the axes span the targets and the operating points, not the whole curve: that is where the story is
    x_lo = min(max(1.0 / ni, min(targets) / 20), min(targets) / 2, min(achieved, default=1.0) / 1.5)
    x_hi = min(0.5, max(20 * max(targets), 1.5 * max(achieved, default=0.0)))
    seen = (fpr >= x_lo) & (fpr <= x_hi)
    fnr_seen = np.r_[fnr[seen], [n for pts in points.values() for _, _, n in pts]]
    y_lo = max(0.5 / ng, min(fnr_seen[fnr_seen > 0], default=1.0 / ng) / 1.5)
    y_hi = min(0.99, max(2 * y_lo, float(fnr_seen.max(initial=y_lo)) * 1.5))
    # the curve stops where no genuine attempt is rejected any more (FNR 0 has no probit), marked
    stop = int(np.argmax(fnr <= 0)) if (fnr <= 0).any() else fpr.size
    keep = (fpr > 0) & (fpr <= 0.95) & (np.arange(fpr.size) <= stop)
    xs = ndtri(fpr[keep])
    ys = ndtri(np.clip(fnr[keep], y_lo, y_hi))

    zero_end = bool((fnr[keep] <= 0).any() and fpr[keep][-1] <= x_hi)
    colours = _colours(max(len(points), 1))
    series = [(label, colours[i % len(colours)], _MARKERS[i % len(_MARKERS)],
               ndtri(np.array([max(f, x_lo) for _, f, _ in pts])), ndtri(np.array([min(max(n, y_lo), y_hi) for _, _, n in pts])))
              for i, (label, pts) in enumerate(points.items()) if pts]

    fig = new_figure(5.6, 4.6)
    ax = fig.add_subplot()
    ax.set_xlim(ndtri(x_lo), ndtri(x_hi))
    ax.set_ylim(ndtri(y_lo), ndtri(y_hi))
    for axis, lo, hi in ((ax.xaxis, x_lo, x_hi), (ax.yaxis, y_lo, y_hi)):
        ticks = probit_ticks(lo, hi)
        axis.set_ticks(ndtri(ticks), [_percent(p) for p in ticks])
    ax.set_xlabel("false accept rate (FPR), probit scale; dotted: the target FPRs")
    ax.set_ylabel("false reject rate (FNR), probit scale")
    ax.set_title(f"DET on the evaluation data ({kind} scores, {where})", fontsize=10)
    ax.grid(True, alpha=0.3)
    for t in targets:
        if x_lo <= t <= x_hi:
            ax.axvline(ndtri(t), color="0.6", lw=0.8, ls=":", zorder=0)
            ax.text(ndtri(t), ndtri(y_hi), f" {_percent(t)}", rotation=90, va="top", ha="right", fontsize=7,
                    color="0.4", gid="target-label")
    handles = [Line2D([], [], lw=1.6, color="0.25", label="pooled curve (one threshold for all)")]
    if zero_end:
        handles.append(Line2D([], [], linestyle="none", **_FNR_ZERO, label="FNR 0 from here (plotted at floor)"))
    handles += [Line2D([], [], linestyle=":", lw=1, marker=marker, markersize=6, color=colour, label=f"{label}: at each target")
                for label, colour, marker, _, _ in series]
    settle(fig, [ax.title], [outside_legend(fig, handles, 7, 2)])

    ax.plot(xs, ys, lw=1.6, color="0.25", label="pooled curve (one threshold for all)")
    fixed = []
    if zero_end:
        ax.plot(xs[-1:], ys[-1:], linestyle="none", **_FNR_ZERO, clip_on=False, gid="fnr-zero",
                label="FNR 0 from here (plotted at floor)")
        fixed.append(pixels(ax, xs[-1:], ys[-1:]))
    # operating points that coincide (an estimator that chose one pooled threshold, as auto may) are set side by side
    offsets = apart(fixed + [pixels(ax, x, y) for *_, x, y in series], marker_pixels(8) + 1)[len(fixed):]
    for (label, colour, marker, x, y), off in zip(series, offsets):
        ax.plot(x, y, linestyle=":", lw=1, color=colour, label=f"{label}: at each target", gid=f"operating-{label}", zorder=4)
        marks(ax, x, y, off, marker=marker, markersize=6, color=colour, gid="points", label=label, zorder=4, clip_on=False)
    return fig


def det_plot(data: EvaluationInput, results: dict[str, list[TargetResult]] | None = None, pooled=None) -> bytes | None:
    fig = det_figure(data, results, pooled)
    return None if fig is None else png(fig)


# --------------------------------------------------------------------------------------------
# cdf-fits.png


def cdf_limits(targets, n_impostors: int) -> tuple[float, float]:
    """The CDF (y) range of a cdf-fits panel: from a little below the smallest target to 10x the
    largest, and at least far enough up to show the first few empirical steps (4 of n)."""
    return min(targets) / 4, min(1.0, max(10 * max(targets), 4.0 / max(n_impostors, 1)))


def cdf_figure(data: EvaluationInput, n_classes: int = 4):
    """The lower tail of the training impostor CDF for a few classes; None without a model CDF."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    fold = data.folds[0]
    fitted = {label: m for label, m in fold.models.items() if overrides(m, FittedModel, "cdf")}
    if not fitted:
        return None
    targets = np.array(sorted(data.targets))
    mask = fold.train.impostor_mask()
    classes = list(fold.train.gallery_classes)
    picks = np.unique(np.linspace(0, len(classes) - 1, min(n_classes, len(classes))).astype(int))
    # each estimator keeps its colour from calibration.png (the empirical CDF is black)
    labels = list(fold.models) + [label for label in fold.tables if label not in fold.models]
    colours = _colours(len(labels))
    colour_of = {label: colours[i % len(colours)] for i, label in enumerate(labels)}
    marker_of = {label: _MARKERS[i % len(_MARKERS)] for i, label in enumerate(labels)}
    to_score, x_label, accepted = _score_axis(fold)
    fig = new_figure(max(3.3 * len(picks), 5.0), 3.8)
    axes = [fig.add_subplot(1, len(picks), k + 1) for k in range(len(picks))]
    panels = []
    for ax, j in zip(axes, picks):
        cls = classes[j]
        d = np.sort(fold.train.values[mask[:, j], j])
        y_lo, y_hi = cdf_limits(targets, d.size)
        # thresholds of every estimator for this class, at each target
        thresholds = {}
        for label in labels:
            table = fold.tables.get(label)
            if table is not None and cls in table.classes:
                order = np.argsort(table.targets)
                thresholds[label] = (np.asarray(table.values[table.classes.index(cls)])[order],
                                     np.asarray(table.targets)[order])
        # x range: from the smallest training distance (or threshold) to where the CDF reaches y_hi
        shown = d[: min(d.size, int(np.ceil(y_hi * d.size)) + 1)]
        xs = [v for v in (shown[:1].tolist() + shown[-1:].tolist()) if np.isfinite(v)]
        xs += [float(v) for th, _ in thresholds.values() for v in th if np.isfinite(v)]
        if not xs:
            continue
        x_min, x_max = min(xs), max(xs)
        pad = 0.08 * (x_max - x_min) if x_max > x_min else 0.05 * max(abs(x_max), 1e-9)
        x_min, x_max = x_min - pad, x_max + pad
        if d.size and d[0] >= 0:
            x_min = max(x_min, 0.0)
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())  # minor ticks on four log panels cost more than they show
        _percent_axis(ax.yaxis)
        ax.set_ylim(y_lo, y_hi)
        ax.set_xlim(*to_score(np.array([x_min, x_max])))  # a similarity axis runs high to low: accepted side left
        ax.set_title(f"class {cls}  (n={d.size})", fontsize=9, parse_math=False)  # whole names, wrapped to fit
        ax.set_xlabel(x_label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="major", alpha=0.3)
        for t in targets:
            ax.axhline(t, color="0.75", lw=0.7, ls=":", zorder=0)
        panels.append((ax, cls, d, shown, x_min, x_max, thresholds))
    axes[0].set_ylabel("training impostors accepted (CDF)", fontsize=9)
    title = fig.suptitle(f"Impostor tail: training CDF, fitted CDF and thresholds at each target (dotted); {accepted}",
                         fontsize=9)
    drawn_cdf = [label for label, model in fitted.items()
                 if any(p[1] in model._index and model.cdf(model._index[p[1]], np.array([p[4]])) is not None
                        for p in panels)]
    marked = [label for label in labels if any(label in p[6] for p in panels)]
    handles = ([Line2D([], [], color="k", lw=1.4, label="empirical")] if any(p[3].size for p in panels) else [])
    handles += [Line2D([], [], ls="--", lw=1.4, color=colour_of[label], label=f"{label} model CDF") for label in drawn_cdf]
    handles += [Line2D([], [], linestyle="none", marker=marker_of[label], markersize=6, markerfacecolor="none",
                       markeredgewidth=1.4, color=colour_of[label], label=f"{label} thresholds") for label in marked]
    settle(fig, [title] + [p[0].title for p in panels], [outside_legend(fig, handles, 8, 4)])

    for ax, cls, d, shown, x_min, x_max, thresholds in panels:
        if shown.size:
            idx = _thin(shown.size)
            ax.step(to_score(np.append(shown[idx], x_max)), np.append((idx + 1) / d.size, (idx[-1] + 1) / d.size),
                    where="post", color="k", lw=1.4, label="empirical")
        grid = np.linspace(x_min, x_max, 160)
        for label, model in fitted.items():
            if cls not in model._index:
                continue
            with np.errstate(all="ignore"):
                y = model.cdf(model._index[cls], grid)
            if y is None:  # FittedModel.cdf's default: no curve
                continue
            y = np.asarray(y, dtype=np.float64)
            ax.plot(to_score(grid), np.where(y > 0, y, np.nan), "--", lw=1.4, color=colour_of[label],
                    label=f"{label} model CDF")
        # estimators with the same threshold for this class are marked side by side
        series = [(label, to_score(th), tg) for label, (th, tg) in thresholds.items()]
        offsets = apart([pixels(ax, x, y) for _, x, y in series], marker_pixels(6) + 2)
        for (label, x, y), off in zip(series, offsets):
            marks(ax, x, y, off, marker=marker_of[label], markersize=6, markerfacecolor="none", markeredgewidth=1.4,
                  color=colour_of[label], label=f"{label} thresholds", gid="points", zorder=4)
    return fig


def _score_axis(fold):
    """(distance -> the data's own score, axis label): through the fitted transform's inverse when it has
    one (similarity scores then decrease along the distances), else the distance itself. A normalised fold's
    distances are exp(z): the axis is the normalised score z (no raw score corresponds to a threshold)."""
    normalised = getattr(fold, "normalization", None)
    if normalised is not None:
        return ((lambda x: np.log(np.maximum(np.asarray(x, dtype=np.float64), np.finfo(float).tiny))),
                f"{normalised.plugin}-normalised score z", "z at or below a threshold is accepted")
    transform = fold.transform
    if transform is not None:
        probe = transform._inverse(np.array([0.0, 1.0]), fold.kind)
        if probe is not None:
            side = "at or above" if fold.kind == "similarity" else "at or below"
            return ((lambda x: np.asarray(transform._inverse(np.asarray(x, dtype=np.float64), fold.kind), dtype=np.float64)),
                    f"{fold.kind} score", f"scores {side} a threshold are accepted")
    return (lambda x: np.asarray(x, dtype=np.float64)), "distance", "distances at or below a threshold are accepted"


def cdf_plot(data: EvaluationInput, n_classes: int = 4) -> bytes | None:
    fig = cdf_figure(data, n_classes)
    return None if fig is None else png(fig)


def make_plots(data: EvaluationInput, results: dict[str, list[TargetResult]], pooled=None
               ) -> tuple[list[str], dict[str, bytes]]:
    return pictures(results, lambda: cdf_plot(data), lambda: det_plot(data, results, pooled))


def pictures(results: dict[str, list[TargetResult]], cdf, det) -> tuple[list[str], dict[str, bytes]]:
    """calibration.png, and cdf-fits.png and det.png from ``cdf()`` and ``det()`` (PNG bytes or None): the files and
    report.md's section that shows them."""
    files: dict[str, bytes] = {"calibration.png": calibration_plot(results)}
    lines = ["## Pictures", "", "![Achieved vs target FPR](calibration.png)", ""]
    cdf = cdf()
    if cdf is not None:
        files["cdf-fits.png"] = cdf
        lines += ["![Lower tail of the empirical and fitted CDF for a few classes, thresholds marked](cdf-fits.png)", ""]
    det = det()
    if det is not None:
        files["det.png"] = det
        lines += ["![DET curve of the scores on the evaluation data, each estimator's operating points marked](det.png)", ""]
    return ["\n".join(lines)], files
