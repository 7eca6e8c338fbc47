"""The pictures beside report.md: what a reader relies on, checked on the matplotlib objects."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from calibrate.contract.base import EvaluationInput, FittedModel, Fold
from calibrate.contract.types import DistanceMatrix, TargetResult, ThresholdTable
from calibrate_builtins.evaluators import plots

TARGETS = (0.005, 0.0025, 0.001, 0.0005)
LONG = ["0010B559B76132149D909F438AD0CA8E", "54AEDD0B7095A732D3470B84D181B56D", "short", "FF527CC59D2653282A0C69C9AA5DC051"]


def rows(achieved, n=20_000):
    return [TargetResult(t, f, f / t, round(f * n), n, None, {"fpr_ci_low": f * 0.8, "fpr_ci_high": f * 1.3 + 2e-4})
            for t, f in zip(TARGETS, achieved)]


def legend_texts(ax):
    """The texts of the legend below ``ax``'s figure."""
    (legend,) = ax.figure.legends
    return [t.get_text() for t in legend.get_texts()]


def by_gid(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


def test_zero_achieved_fpr_is_marked_on_the_floor_and_named_in_the_legend():
    fig = plots.calibration_figure({"generic": rows([0.004, 0.0, 0.0, 0.0]), "ncx2": rows([0.006, 0.003, 0.0012, 0.0006])})
    ax = fig.axes[0]
    (marks,) = by_gid(ax, "zero-at-floor")
    assert len(marks.get_ydata()) == 3
    floor = float(marks.get_ydata()[0])
    low, high = ax.get_ylim()
    assert low < floor < high and np.allclose(marks.get_ydata(), floor)  # on screen, all at one floor level
    assert floor <= min(TARGETS) / 3  # and below everything that was actually achieved
    assert marks.get_marker() == "v" and marks.get_markerfacecolor() == "white"
    assert plots.ZERO_NOTE in legend_texts(ax)
    assert plots.ABOVE_NOTE not in legend_texts(ax) and plots.BELOW_NOTE not in legend_texts(ax)


def test_no_floor_note_when_every_estimator_achieves_a_positive_rate():
    fig = plots.calibration_figure({"a": rows([0.004, 0.002, 0.001, 0.0004])})
    ax = fig.axes[0]
    assert not by_gid(ax, "zero-at-floor")
    assert plots.ZERO_NOTE not in legend_texts(ax)
    assert {"a", "ideal (achieved = target)"} <= set(legend_texts(ax))


def test_off_scale_rates_are_marked_at_floor_and_ceiling():
    fig = plots.calibration_figure({"wild": rows([0.9, 0.003, 1e-9, 0.0006])})
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    (above,) = by_gid(ax, "above-ceiling")
    (below,) = by_gid(ax, "below-floor")
    assert low < float(below.get_ydata()[0]) < float(above.get_ydata()[0]) < high
    assert above.get_marker() == "^" and below.get_marker() == "v"
    assert {plots.ABOVE_NOTE, plots.BELOW_NOTE} <= set(legend_texts(ax))


def test_a_small_nonzero_rate_is_kept_clear_of_the_zero_markers():
    """paper-yale: one false accept in 59,052 attempts (1.7e-5) sat exactly on the floor under the zero markers."""
    one = 1 / 59052
    ax = plots.calibration_figure({"pooled": rows([one, one, 0.0, 0.0]),
                                   "per-class": rows([0.0, 0.0, 0.0, 0.0])}).axes[0]
    floor = ax.get_ylim()[0] * 1.2
    assert one >= 3 * floor * 0.999


def test_every_in_range_point_is_inside_the_axes():
    achieved = [0.0051, 0.0012, 0.0002, 0.00003]
    ax = plots.calibration_figure({"a": rows(achieved)}).axes[0]
    low, high = ax.get_ylim()
    assert all(low < f < high for f in achieved)
    assert not by_gid(ax, "below-floor") and not by_gid(ax, "zero-at-floor")


# --- cdf-fits --------------------------------------------------------------------------------


class NormalModel(FittedModel):
    """Per-class normal distances; exposes cdf(row, x) like the parametric models."""

    def __init__(self, classes, mu, sd):
        super().__init__(classes)
        self.mu, self.sd = np.asarray(mu, float), np.asarray(sd, float)

    def _thresholds(self, targets, rows=None):
        rows = np.arange(len(self.classes)) if rows is None else rows
        return self.mu[rows, None] + self.sd[rows, None] * ndtri(targets)[None, :]

    def cdf(self, row, x):
        return ndtr((np.asarray(x, float) - self.mu[row]) / self.sd[row])

    def to_state(self):
        return {"classes": list(self.classes), "mu": self.mu.tolist(), "sd": self.sd.tolist()}

    @classmethod
    def from_state(cls, state):
        return cls(state["classes"], state["mu"], state["sd"])


def evaluation_input(classes=LONG, n_probes=400, seed=0, targets=TARGETS, with_cdf=True) -> EvaluationInput:
    rng = np.random.default_rng(seed)
    g = len(classes)
    mu, sd = rng.uniform(4, 6, g), rng.uniform(0.5, 1.0, g)
    probes = np.array([f"other{i}" for i in range(n_probes)] + list(classes))
    train = DistanceMatrix(np.abs(mu + sd * rng.standard_normal((probes.size, g))), probes, np.array(classes))
    test_values = np.abs(mu + sd * rng.standard_normal((probes.size, g)))
    test_values[n_probes:] = rng.uniform(0, 3, (g, g))  # genuine rows (and a few impostors) near zero
    test = DistanceMatrix(test_values, probes, np.array(classes))
    model = NormalModel(classes, mu, sd)
    models = {"normal": model} if with_cdf else {}
    tables = {"normal": model.thresholds(targets, "normal"),
              "pooled": ThresholdTable("pooled", tuple(classes), tuple(targets),
                                       np.tile(np.quantile(train.values[:n_probes], targets), (g, 1)))}
    return EvaluationInput((Fold("fold 0", train, test, models, tables),), tuple(targets))


def test_cdf_panels_are_log_scaled_on_the_lower_tail_and_name_each_class_whole():
    data = evaluation_input()
    fig = plots.cdf_figure(data)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 4
    for ax, name in zip(panels, LONG):
        assert ax.get_yscale() == "log"
        low, high = ax.get_ylim()
        assert low < min(TARGETS) and max(TARGETS) < high <= 0.1  # the tail, not the bulk
        assert name in ax.get_title().replace("\n", "")  # wrapped to the panel's width, never cut


def test_cdf_panels_show_empirical_and_model_cdf_and_every_estimators_thresholds():
    data = evaluation_input()
    fold = data.folds[0]
    fig = plots.cdf_figure(data)
    ax = next(a for a in fig.axes if "0010B559" in a.get_title())
    fig.canvas.draw()
    lines = {line.get_label(): line for line in ax.get_lines()}
    low, high = ax.get_ylim()
    x_low, x_high = ax.get_xlim()
    for name in ("empirical", "normal model CDF"):
        y = np.asarray(lines[name].get_ydata(), float)
        x = np.asarray(lines[name].get_xdata(), float)
        shown = (y >= low) & (y <= high) & (x >= x_low) & (x <= x_high)
        assert shown.sum() >= 3, name  # visible in the tail, not only in the bulk
    for label in ("normal", "pooled"):
        marks = lines[f"{label} thresholds"]
        table = fold.tables[label]
        order = np.argsort(table.targets)
        np.testing.assert_allclose(marks.get_ydata(), np.asarray(table.targets)[order])
        np.testing.assert_allclose(marks.get_xdata(), table.values[table.classes.index(LONG[0])][order])
        assert all(x_low <= x <= x_high for x in marks.get_xdata())
    # the fitted model's threshold lies on its own CDF at each target
    th = fold.tables["normal"].values[0]
    np.testing.assert_allclose(fold.models["normal"].cdf(0, th), TARGETS, rtol=1e-6)


def test_cdf_range_reaches_up_to_the_first_empirical_steps_for_small_classes():
    low, high = plots.cdf_limits(TARGETS, n_impostors=37)
    assert low < min(TARGETS) and high >= 4 / 37
    assert plots.cdf_limits(TARGETS, n_impostors=100_000) == (min(TARGETS) / 4, 10 * max(TARGETS))


def test_no_cdf_picture_without_a_model_cdf():
    assert plots.cdf_figure(evaluation_input(with_cdf=False)) is None


# --- det ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lo, hi", [(1e-5, 0.5), (2.5e-5, 0.5), (1e-4, 0.5), (0.001, 0.99), (1e-6, 0.99)])
def test_probit_ticks_are_distinct_and_apart(lo, hi):
    ticks = plots.probit_ticks(lo, hi)
    assert len(ticks) >= 3
    z = ndtri(np.array(ticks))
    assert np.all(np.diff(z) >= 0.1 * (ndtri(hi) - ndtri(lo)) - 1e-12)
    labels = [plots._percent(p) for p in ticks]
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("n_probes", [60, 400, 3000])
def test_det_tick_labels_are_distinct_and_do_not_crowd(n_probes):
    fig = plots.det_figure(evaluation_input(n_probes=n_probes))
    ax = fig.axes[0]
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        labels = [t.get_text() for t in axis.get_ticklabels()]
        assert len(labels) >= 3 and all(labels) and len(set(labels)) == len(labels)
        pos = np.sort(axis.get_ticklocs())
        assert np.all(np.diff(pos) >= 0.1 * (lim[1] - lim[0]) - 1e-9)
    (curve,) = [line for line in ax.get_lines() if line.get_label().startswith("pooled curve")]
    assert np.ndim(curve.get_xdata()) == 1 and len(curve.get_xdata()) >= 10
    # the targets are marked where they lie on the probit FPR axis
    marked = sorted(float(line.get_xdata()[0]) for line in ax.get_lines()
                    if line.get_linestyle() == ":" and not str(line.get_gid()).startswith("operating"))
    np.testing.assert_allclose(marked, sorted(ndtri(np.array(TARGETS))))


def test_det_marks_each_estimators_operating_points_and_labels_the_targets_in_percent():
    def with_fnr(achieved, fnr):
        return [TargetResult(r.target_fpr, r.fpr, r.ratio, r.false_accepts, r.impostor_attempts, f, r.extra)
                for r, f in zip(rows(achieved), fnr)]

    results = {"normal": with_fnr([0.004, 0.0, 0.001, 0.0], [0.1, 0.2, 0.3, 0.4]),
               "other": with_fnr([0.006, 0.003, 0.0012, 0.0007], [0.05, 0.1, 0.2, 0.3])}
    fig = plots.det_figure(evaluation_input(n_probes=400), results)
    ax = fig.axes[0]
    operating = {line.get_gid(): line for line in ax.get_lines() if str(line.get_gid()).startswith("operating-")}
    assert set(operating) == {"operating-normal", "operating-other"}
    assert all(len(line.get_xdata()) == len(TARGETS) for line in operating.values())
    assert {line.get_label() for line in operating.values()} == {"normal: at each target", "other: at each target"}
    labels = sorted(t.get_text().strip() for t in ax.texts if t.get_gid() == "target-label")
    assert labels == sorted(plots._percent(t) for t in TARGETS)
    assert ax.get_title().startswith("DET on the evaluation data (distance scores") and all("%" in t.get_text() for t in ax.xaxis.get_ticklabels())


def test_calibration_axes_read_in_percent():
    fig = plots.calibration_figure({"normal": rows([0.004, 0.0, 0.001, 0.0])})
    fig.canvas.draw()
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.xaxis.get_ticklabels() + ax.yaxis.get_ticklabels() if t.get_text()]
    assert shown and all(text.endswith("%") for text in shown), shown


def test_make_plots_writes_three_pngs_and_links_them():
    data = evaluation_input()
    sections, files = plots.make_plots(data, {"normal": rows([0.004, 0.0, 0.001, 0.0])})
    assert set(files) == {"calibration.png", "cdf-fits.png", "det.png"}
    assert all(b.startswith(b"\x89PNG") for b in files.values())
    assert all(f"({name})" in sections[0] for name in files)


def test_importing_the_plot_module_does_not_load_matplotlib():
    code = "import sys, calibrate_builtins.evaluators.plots; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cdf_fits_are_drawn_on_the_similarity_score_axis(tmp_path):
    """Similarity data: the x axis is the user's score (through the transform's inverse), running from high
    to low so the accepted side is on the left, and the rate axis reads in percent."""
    import warnings

    import calibrate
    from calibrate.contract.base import EvaluationInput
    from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

    csv = write_scores(tmp_path / "s.csv", *make_scores(n_classes=6, probes_per_class=8))
    recipe = score_recipe(csv, tmp_path / "out", estimators=({"plugin": "auto"},))
    recipe["output"] = {"dir": str(tmp_path / "out"), "plots": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(write_recipe(tmp_path / "r.yaml", recipe))
    fig = plots.cdf_figure(EvaluationInput(result.folds, (0.05, 0.02), True))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "similarity score"
    low, high = ax.get_xlim()
    assert low > high and 0 <= high < low <= 1.0  # similarities, high to low
    fig.canvas.draw()
    assert all(t.get_text().endswith("%") for t in ax.yaxis.get_ticklabels() if t.get_text())
