"""The ``fpr`` evaluator's figures per demographic group in report.md and groups.png (ISO/IEC 19795-10).

The counts come from :mod:`.costs` (calibrate.statistics.verification.group_figures): per estimator and target, each group's
FMR over same-group impostor attempts (probe and claimed class in one group: the look-alikes that decide a
low FPR), over all its impostor attempts, and its FNMR, for the estimator and for one pooled threshold at the
same overall FPR. Small groups carry their 95% Clopper-Pearson intervals, never bare ratios. An estimator that
widens a differential beyond what one threshold gives (calibrate.statistics.verification.widening: the log max/min ratios
over 2 standard errors apart) is named in a warning and a run note.
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.contract.types import UNLABELLED, TargetResult
from calibrate.formatting import markdown_cell
from calibrate.statistics.verification import (WHICH, spread_words, widened,  # noqa: F401  (widening_notes: fpr's)
                                              widening_notes)

from .figure_layout import apart, marker_pixels, marks, new_figure, outside_legend, pixels, png, settle
from .plots import _percent, _percent_axis

#: an FMR of zero, drawn on the axis floor (a log axis has no 0): the estimator's hollow, one threshold's filled
ZERO_FMR = "FMR 0, the estimator (on the floor)"
ZERO_FMR_ONE = "FMR 0, one pooled threshold (on the floor)"
_ZERO_MARK = {"marker": "v", "markersize": 7, "markeredgewidth": 1.4}


def _ratio_cell(g: dict, target: float) -> str:
    if g.get("fmr_same_group") is None:
        return "n/a (no same-group attempts)"
    lo, hi = g["fmr_same_group_ci_low"], g["fmr_same_group_ci_high"]
    predicted = g.get("predicted_fmr_same_group_low")
    return (f"{g['fmr_same_group'] / target:.2f} [{lo / target:.2f}, {hi / target:.2f}] "
            f"({g['false_accepts_same_group']}/{g['impostor_attempts_same_group']:,})"
            + ("" if predicted is None else
               f"; predicted {predicted / target:.2f}-{g['predicted_fmr_same_group_high'] / target:.2f}"))


def _fnmr_cell(g: dict) -> str:
    if g.get("fnmr") is None:
        return "n/a"
    own = g.get("fnmr_own_threshold")
    paired = g.get("fnmr_paired_own_threshold") or {}
    verdict = "" if not paired.get("beyond_noise") else (
        ", fewer" if paired["extra_rejects_per_1000"] < 0 else ", more")
    return (f"{100 * g['fnmr']:.3g}% [{100 * g['fnmr_ci_low']:.3g}, {100 * g['fnmr_ci_high']:.3g}] "
            f"({g['false_rejects']}/{g['genuine_attempts']:,})"
            + ("" if own is None else f"; own threshold {100 * own:.3g}%{verdict}"))


def _md(name: str) -> str:
    """A group name inside a markdown table cell (calibrate.formatting.markdown_cell)."""
    return markdown_cell(name)


_spread = spread_words


def _zero_note(groups: dict, key: str) -> str:
    return "n/a (a group at 0)" if any(g.get(key) == 0 for n, g in groups.items() if n != UNLABELLED) else "n/a"


def group_section(results: dict[str, list[TargetResult]], summary: dict, picture: bool = True) -> str | None:
    """report.md's section on the groups (linking groups.png when ``picture``), or None when the run has none."""
    rows = [(l, r) for l, rs in results.items() for r in rs if r.extra.get("groups")]
    if not rows:
        return None
    names = [n for n in summary["names"]]
    sizes = ", ".join(f"{_md(n)} {summary['classes'].get(n, 0):,} classes" for n in names)
    unl = summary["classes"].get(UNLABELLED, 0)
    lines = ["## Demographic groups", "",
             f"Groups from {summary['source']}: {sizes}" + (f" ({unl:,} enrolled classes without a group, reported as "
                                                          f"`{UNLABELLED}`)" if unl else "") + ". "
             "Per group, the FMR over same-group impostor attempts (probe and claimed class in one group: the look-alikes "
             "that matter at a low FPR; the ISO/IEC 19795-10 view) as a ratio to the target, with its 95% "
             "Clopper-Pearson interval and the counts (and, where each group was calibrated and predicted on its own, the "
             "interval predicted from its training data); then the FNMR, beside that of one threshold of the group's own "
             "admitting as many of its same-group impostor attempts (\"fewer\"/\"more\": beyond noise, McNemar p < "
             "0.05). The max/min columns compare the groups "
             "(labelled groups only), for the estimator and for one pooled threshold at the same overall FPR; n/a "
             "when a group had none. Every group's FMR over all its impostor attempts is in results.json (`groups`).",
             "", "| Estimator | Target FPR | " + " | ".join(f"{_md(n)}: same-group FMR / target" for n in names)
             + " | max/min | one threshold's max/min |", "|---|---|" + "---|" * (len(names) + 2)]
    for label, r in rows:
        g, ref = r.extra["groups"], r.extra["one_threshold"]["groups"]
        cells = [_ratio_cell(g.get(n, {}), r.target_fpr) for n in names]
        lines.append(f"| {label} | {100 * r.target_fpr:.3g}% | " + " | ".join(cells) + " | "
                     f"{_spread(r.extra.get('fmr_same_group_max_over_min'), _zero_note(g, 'fmr_same_group'))} | "
                     f"{_spread(r.extra['one_threshold'].get('fmr_same_group_max_over_min'), _zero_note(ref, 'fmr_same_group'))} |")
    lines += ["", "| Estimator | Target FPR | " + " | ".join(f"{_md(n)}: FNMR" for n in names)
              + " | max/min | one threshold's max/min |", "|---|---|" + "---|" * (len(names) + 2)]
    for label, r in rows:
        g, ref = r.extra["groups"], r.extra["one_threshold"]["groups"]
        cells = [_fnmr_cell(g.get(n, {})) for n in names]
        lines.append(f"| {label} | {100 * r.target_fpr:.3g}% | " + " | ".join(cells) + " | "
                     f"{_spread(r.extra.get('fnmr_max_over_min'), _zero_note(g, 'fnmr'))} | "
                     f"{_spread(r.extra['one_threshold'].get('fnmr_max_over_min'), _zero_note(ref, 'fnmr'))} |")
    lines.append("")
    hits = widened(results)
    if hits:
        lines.append("**Warning**: wider differentials than one pooled threshold at the same FPR gives, beyond counting "
                     "noise (the log max/min ratios more than 2 standard errors apart):")
        for label, found in hits.items():
            lines.append(f"- **{label}**: " + "; ".join(
                f"{WHICH[w]} at {100 * r.target_fpr:.3g}%: max/min {_spread(r.extra.get(f'{w}_max_over_min'), 'inf')} "
                f"against {_spread(r.extra['one_threshold'].get(f'{w}_max_over_min'), 'inf')} (z = {z:.1f})"
                for r, w, z in found) + ".")
    else:
        lines.append("No estimator widens a differential between groups beyond what one pooled threshold at the same "
                     "FPR gives, beyond counting noise.")
    if picture:
        lines += ["", "![Same-group FMR per group against the target, per estimator, with one pooled threshold at the "
                      "same FPR](groups.png)"]
    lines.append("")
    return "\n".join(lines)


def _colours(n: int) -> list:
    from matplotlib import colormaps

    if n <= 10:
        return list(colormaps["tab10"].colors)
    if n <= 20:
        return list(colormaps["tab20"].colors)
    return [colormaps["turbo"](x) for x in np.linspace(0.05, 0.95, n)]


def _text(name: str) -> str:
    """A group name as matplotlib draws it literally (a `$` would start mathtext)."""
    return name.replace("$", r"\$")


def groups_figure(results: dict[str, list[TargetResult]], names: list[str]):
    """One panel per estimator: each group's same-group FMR (with its 95% interval) against the target, solid, and
    one pooled threshold's at the same overall FPR, dashed; the diagonal is on target; an FMR of 0 is a hollow
    triangle on the floor. None without groups."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    labels = [l for l, rows in results.items() if any(r.extra.get("groups") for r in rows)]
    if not labels:
        return None
    cols = min(3, len(labels))
    n_rows = math.ceil(len(labels) / cols)
    colours = _colours(len(names))
    targets = sorted({r.target_fpr for rows in results.values() for r in rows})
    lo_t, hi_t = min(targets), max(targets)
    values = [g[k] for rows in results.values() for r in rows if r.extra.get("groups")
              for src in (r.extra["groups"], r.extra["one_threshold"]["groups"])
              for g in src.values() for k in ("fmr_same_group",) if g.get(k)]
    floor = min([lo_t / 20] + [v / 1.5 for v in values])
    ceiling = max([hi_t * 5] + [v * 1.5 for v in values])

    # the x ticks are the targets, a quarter of a decade apart at least so their labels never meet
    ticks = targets[:1]
    for t in targets[1:]:
        if math.log10(t / ticks[-1]) >= 0.25:
            ticks.append(t)
    fig = new_figure(max(3.6 * cols, 5.6), 3.2 * n_rows + 1.2)
    axes = []
    for i, label in enumerate(labels):
        ax = fig.add_subplot(n_rows, cols, i + 1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _percent_axis(ax.xaxis)
        _percent_axis(ax.yaxis)
        ax.set_xlim(lo_t / 1.6, hi_t * 1.6)
        ax.set_xticks(ticks, [_percent(t) for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_ylim(floor / 1.5, ceiling)  # room below the floor for the marks of an FMR of 0
        ax.set_title(label, fontsize=9, parse_math=False)
        ax.set_xlabel("target FPR", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("same-group FMR (evaluation)", fontsize=8)
        axes.append(ax)
    zeros = {source: any(g.get("fmr_same_group") == 0 for rows in results.values() for r in rows if r.extra.get("groups")
                         for n, g in (r.extra["groups"] if source == "groups" else r.extra["one_threshold"]["groups"]).items()
                         if n in names)
             for source in ("groups", "one")}
    legend = [Line2D([], [], color=colours[k], marker="o", ms=4, label=_text(name)) for k, name in enumerate(names)]
    legend += [Line2D([], [], color="0.3", ls="-", label="the estimator"),
               Line2D([], [], color="0.3", ls="--", marker="x", ms=4, label="one pooled threshold, same FPR"),
               Line2D([], [], color="0.6", ls=":", label="on target")]
    for source, note in (("groups", ZERO_FMR), ("one", ZERO_FMR_ONE)):
        if zeros[source]:
            legend.append(Line2D([], [], linestyle="none", label=note, **_ZERO_MARK, markeredgecolor="0.3",
                                 markerfacecolor="white" if source == "groups" else "0.3"))
    title = fig.suptitle("Same-group FMR per group: solid, the estimator (95% intervals); dashed, one pooled threshold "
                         "at the same overall FPR", fontsize=8)
    settle(fig, [title] + [ax.title for ax in axes], [outside_legend(fig, legend, 7, 6)])

    for ax, label in zip(axes, labels):
        rows = [r for r in results[label] if r.extra.get("groups")]
        t = np.array([r.target_fpr for r in rows])
        ax.plot([floor, ceiling], [floor, ceiling], color="0.6", lw=0.8, ls=":")
        zero_marks = []  # (group, x) of each FMR of 0, drawn last and side by side
        for k, name in enumerate(names):
            colour = colours[k]
            for source in ("groups", "one"):
                got = [(r.extra["groups"] if source == "groups" else r.extra["one_threshold"]["groups"]).get(name, {})
                       for r in rows]
                y = np.array([g.get("fmr_same_group") if g.get("fmr_same_group") is not None else np.nan for g in got])
                shown = np.clip(np.where(y > 0, y, floor), floor, ceiling)
                x = t if source == "groups" else t * 1.04
                nonzero = [int(j) for j in np.flatnonzero(y != 0)]
                if source == "groups":
                    lo = np.array([g.get("fmr_same_group_ci_low") or 0.0 for g in got])
                    hi = np.array([g.get("fmr_same_group_ci_high") or 0.0 for g in got])
                    err = [np.clip(shown - np.clip(lo, floor, ceiling), 0, None),
                           np.clip(np.clip(hi, floor, ceiling) - shown, 0, None)]
                    ax.errorbar(x, shown, yerr=err, color=colour, ls="-", marker="o", ms=4, capsize=2, markevery=nonzero)
                else:
                    ax.plot(x, shown, color=colour, ls="--", marker="x", ms=4, markevery=nonzero)
                if (y == 0).any():
                    zero_marks.append((k, name, source, x[y == 0]))
        offsets = apart([pixels(ax, x, np.full(x.size, floor)) for *_, x in zero_marks],
                        marker_pixels(_ZERO_MARK["markersize"]) + 1, sideways=True)
        for (k, name, source, x), off in zip(zero_marks, offsets):
            marks(ax, x, np.full(x.size, floor), off, **_ZERO_MARK, markeredgecolor=colours[k], clip_on=False, zorder=5,
                  markerfacecolor="white" if source == "groups" else colours[k],
                  gid="zero-at-floor" if source == "groups" else "zero-at-floor-one", label=name)
    return fig


def groups_plot(results: dict[str, list[TargetResult]], names: list[str]) -> bytes | None:
    fig = groups_figure(results, names)
    return None if fig is None else png(fig)
