"""The ``fpr`` evaluator's figures per demographic group in report.md and groups.png (ISO/IEC 19795-10).

The counts come from :mod:`.costs` (calibrate.statistics.verification.group_figures): per estimator and target, each group's
FMR over same-group impostor attempts (probe and claimed class in one group: the look-alikes that decide a
low FPR), over all its impostor attempts, and its FNMR, for the estimator and for one pooled threshold at the
same overall FPR. Small groups carry their 95% Clopper-Pearson intervals, never bare ratios. An estimator that
widens a differential beyond what one threshold gives (calibrate.statistics.verification.widening: the log max/min ratios
over 2 standard errors apart) is named in a warning and a run note.
"""

from __future__ import annotations

import io
import math

import numpy as np

from calibrate.contract.types import UNLABELLED, TargetResult
from calibrate.formatting import markdown_cell
from calibrate.statistics.verification import (WHICH, spread_words, widened,  # noqa: F401  (widening_notes: fpr's)
                                              widening_notes)

from .plots import _percent_axis


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
    one pooled threshold's at the same overall FPR, dashed; the diagonal is on target. None without groups."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    labels = [l for l, rows in results.items() if any(r.extra.get("groups") for r in rows)]
    if not labels:
        return None
    cols = min(3, len(labels))
    n_rows = math.ceil(len(labels) / cols)
    colours = _colours(len(names))
    legend = [Line2D([], [], color=colours[k], marker="o", ms=4, label=_text(name)) for k, name in enumerate(names)]
    legend += [Line2D([], [], color="0.3", ls="-", label="the estimator"),
               Line2D([], [], color="0.3", ls="--", marker="x", ms=4, label="one pooled threshold, same FPR"),
               Line2D([], [], color="0.6", ls=":", label="on target")]
    ncol = min(6, len(legend))
    legend_rows = math.ceil(len(legend) / ncol)
    height = 3.2 * n_rows + 0.9 + 0.2 * legend_rows  # inches: panels, titles and axis labels, then the legend
    fig = Figure(figsize=(3.6 * cols, height), dpi=100)
    targets = sorted({r.target_fpr for rows in results.values() for r in rows})
    lo_t, hi_t = min(targets), max(targets)
    values = [g[k] for rows in results.values() for r in rows if r.extra.get("groups")
              for src in (r.extra["groups"], r.extra["one_threshold"]["groups"])
              for g in src.values() for k in ("fmr_same_group",) if g.get(k)]
    floor = min([lo_t / 20] + [v / 1.5 for v in values])
    ceiling = max([hi_t * 5] + [v * 1.5 for v in values])
    for i, label in enumerate(labels):
        ax = fig.add_subplot(n_rows, cols, i + 1)
        rows = [r for r in results[label] if r.extra.get("groups")]
        t = np.array([r.target_fpr for r in rows])
        ax.plot([floor, ceiling], [floor, ceiling], color="0.6", lw=0.8, ls=":")
        for k, name in enumerate(names):
            colour = colours[k]
            for source in ("groups", "one"):
                got = [(r.extra["groups"] if source == "groups" else r.extra["one_threshold"]["groups"]).get(name, {})
                       for r in rows]
                y = np.array([g.get("fmr_same_group") if g.get("fmr_same_group") is not None else np.nan for g in got])
                shown = np.clip(np.where(y > 0, y, floor), floor, ceiling)
                if source == "groups":
                    lo = np.array([g.get("fmr_same_group_ci_low") or 0.0 for g in got])
                    hi = np.array([g.get("fmr_same_group_ci_high") or 0.0 for g in got])
                    err = [np.clip(shown - np.clip(lo, floor, ceiling), 0, None),
                           np.clip(np.clip(hi, floor, ceiling) - shown, 0, None)]
                    ax.errorbar(t, shown, yerr=err, color=colour, ls="-", marker="o", ms=4, capsize=2)
                else:
                    ax.plot(t * 1.04, shown, color=colour, ls="--", marker="x", ms=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _percent_axis(ax.xaxis)
        _percent_axis(ax.yaxis)
        ax.set_xlim(lo_t / 1.6, hi_t * 1.6)
        ax.set_ylim(floor, ceiling)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("target FPR", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("same-group FMR (evaluation)", fontsize=8)
    fig.legend(handles=legend, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    fig.suptitle("Same-group FMR per group: solid, the estimator (95% intervals); dashed, one pooled threshold at the "
                 "same overall FPR", fontsize=8)
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 0.45 / height, wspace=0.3, hspace=0.45,
                        bottom=(0.55 + 0.2 * legend_rows) / height)
    return fig


def groups_plot(results: dict[str, list[TargetResult]], names: list[str]) -> bytes | None:
    fig = groups_figure(results, names)
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    fig.clear()
    return buf.getvalue()
