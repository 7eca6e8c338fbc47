"""Every picture fits its content at 1, 3 and 8 estimators, 2-5 groups and long names: rendered, each checked for
its size, nothing cut at the figure's edge, legends covering no label, and every estimator's marks visible."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.contract.types import TargetResult
from calibrate_builtins.evaluators import groups, plots
from test_plots import TARGETS, evaluation_input

NAMES = ["auto", "ncx2-grid", "generic-interp", "class-interp", "gpd-tail", "anchored", "shrinkage-with-a-long-name",
         "znorm"]
GROUPS = ["g1", "a much longer group name", "g3", "Michelle Obama's group", "g5"]
#: pixels of slack for antialiasing at a text's or legend's edge
SLACK = 1.0
#: two estimators' marks are told apart when their centres are at least this share of a mark's width apart
APART = 0.9


def rows(achieved, extra=None):
    extra = extra or {}
    return [TargetResult(t, f, f / t, round(f * 20_000), 20_000, 0.01 * (k + 1),
                         {"fpr_ci_low": f * 0.8, "fpr_ci_high": f * 1.3 + 2e-4, **extra.get(t, {})})
            for k, (t, f) in enumerate(zip(TARGETS, achieved))]


def estimators(n):
    """n estimators: the first reaches down to 0.0001% (long tick labels beside the y label), the second and the last
    achieve exactly what the first does (as auto and generic-interp did in the quickstart), the third has zeros."""
    base = [0.004, 0.002, 0.0011, 0.0000015]
    out = {}
    for i, name in enumerate(NAMES[:n]):
        same = i in (1, n - 1) and i > 0
        out[name] = rows(base if same else ([0.006, 0.0, 0.0, 0.0] if i == 2 else [b * (1.2 + 0.3 * i) for b in base]))
    return out


def group_rows(n_estimators, names):
    """Per estimator, per target, each group's same-group FMR (some 0, as small groups give) and one threshold's."""
    rng = np.random.default_rng(3)

    def figures():
        out = {}
        for k, name in enumerate(names):
            fmr = 0.0 if k % 2 else float(rng.uniform(1e-4, 5e-3))
            out[name] = {"fmr_same_group": fmr, "fmr_same_group_ci_low": fmr * 0.5, "fmr_same_group_ci_high": fmr * 2 + 1e-4}
        return out

    return {name: [TargetResult(t, t, 1.0, 10, 10_000, 0.1, {"groups": figures(), "one_threshold": {"groups": figures()}})
                   for t in TARGETS] for name in NAMES[:n_estimators]}


def render(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def inside(box, frame) -> bool:
    return (box.x0 >= frame.x0 - SLACK and box.y0 >= frame.y0 - SLACK and box.x1 <= frame.x1 + SLACK
            and box.y1 <= frame.y1 + SLACK)


def overlap(a, b) -> bool:
    return a.x0 < b.x1 - SLACK and b.x0 < a.x1 - SLACK and a.y0 < b.y1 - SLACK and b.y0 < a.y1 - SLACK


def assert_fits(fig, width=(480, 1700), height=(300, 1000)):
    """The figure's size is within bounds, everything drawn lies inside it, and no legend covers a label."""
    renderer = render(fig)
    frame = fig.bbox
    assert width[0] <= frame.width <= width[1] and height[0] <= frame.height <= height[1], (frame.width, frame.height)
    tight = fig.get_tightbbox(renderer)  # inches: every artist drawn
    assert inside(tight.transformed(fig.dpi_scale_trans), frame), (tight, frame)
    texts = [t for t in fig.texts if t.get_text()]
    for ax in fig.axes:
        texts += [t for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
        texts += [t for t in ax.texts if t.get_text()]
    for t in texts:  # every title, axis label and text artist, whole
        assert inside(t.get_window_extent(renderer), frame), repr(t.get_text())
    labels = [t.get_window_extent(renderer) for t in texts]
    labels += [axis.get_tightbbox(renderer) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        box = legend.get_window_extent(renderer)
        assert inside(box, frame)
        for t in legend.get_texts():
            assert inside(t.get_window_extent(renderer), frame), t.get_text()
        assert not any(overlap(box, label) for label in labels if label is not None and label.width > 0)
        assert not any(overlap(box, ax.bbox) for ax in fig.axes)  # nor any data
    return renderer


def mark_positions(fig, gid_prefix=("points", "zero-at-floor", "below-floor", "above-ceiling")):
    """Per axes, per series label, the pixel centres of its marks as drawn (offsets included)."""
    out = []
    for ax in fig.axes:
        by_label: dict[str, list] = {}
        for line in ax.get_lines():
            if str(line.get_gid()).startswith(gid_prefix):
                xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
                by_label.setdefault(line.get_label(), []).append(line.get_transform().transform(xy))
        out.append((ax, {k: np.vstack(v) for k, v in by_label.items()}))
    return out


def assert_every_series_visible(fig, labels, size_points):
    """Every series named in ``labels`` has marks in the figure, inside it, and no mark's centre is within
    APART of a mark's width of another series' mark: none hides another."""
    render(fig)
    width = size_points * fig.dpi / 72
    seen = set()
    for ax, found in mark_positions(fig):
        seen |= set(found)
        names = list(found)
        for i, a in enumerate(names):
            assert np.all((found[a][:, 0] >= 0) & (found[a][:, 0] <= fig.bbox.width)), a
            for b in names[i + 1:]:
                d = np.hypot(*(found[a][:, None, :] - found[b][None, :, :]).transpose(2, 0, 1))
                assert d.min() >= APART * width, (a, b, d.min(), width)
    assert set(labels) <= seen, set(labels) - seen


@pytest.mark.parametrize("n", [1, 3, 8])
def test_calibration_fits_and_shows_every_estimator(n):
    results = estimators(n)
    fig = plots.calibration_figure(results)
    assert_fits(fig)
    assert_every_series_visible(fig, results, plots._SPECIAL_SIZE)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_det_fits_and_shows_every_estimator(n):
    results = estimators(n)
    fig = plots.det_figure(evaluation_input(n_probes=400), results)
    assert_fits(fig)
    assert_every_series_visible(fig, results, 8)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_gid() == "target-label"]
    assert len(labels) == len(TARGETS)  # the loosest target's label too, uncovered (assert_fits)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_cdf_fits_shows_whole_class_names_and_every_estimators_thresholds(n):
    names = ["Michelle_Obama_0001", "0010B559B76132149D909F438AD0CA8E", "x", "Arnold_Schwarzenegger_0042"]
    data = evaluation_input(classes=names)
    fold = data.folds[0]
    for k in range(n - 2):  # more estimators, one with the same thresholds as "pooled"
        fold.tables[f"copy {k}"] = fold.tables["pooled"] if k == 0 else fold.tables["normal"]
    fig = plots.cdf_figure(data)
    assert_fits(fig)
    titles = " ".join(ax.get_title().replace("\n", "") for ax in fig.axes)
    assert all(name in titles for name in names), titles
    assert_every_series_visible(fig, [f"{label} thresholds" for label in fold.tables], 6)


@pytest.mark.parametrize("n_estimators", [1, 3, 8])
@pytest.mark.parametrize("n_groups", [2, 5])
def test_groups_fits_and_marks_each_zero(n_estimators, n_groups):
    names = GROUPS[:n_groups]
    results = group_rows(n_estimators, names)
    fig = groups.groups_figure(results, names)
    assert_fits(fig, height=(300, 1300))
    assert len(fig.axes) == n_estimators
    assert all(ax.get_ylabel() for ax in fig.axes[::3])
    # an FMR of 0 is a mark on the floor, inside the axes' view, named in the legend, each group's visible
    for ax in fig.axes:
        low, high = ax.get_ylim()
        zeros = [line for line in ax.get_lines() if str(line.get_gid()).startswith("zero-at-floor")]
        assert zeros and all(low < y < high for line in zeros for y in line.get_ydata())
    (legend,) = fig.legends
    assert groups.ZERO_FMR in [t.get_text() for t in legend.get_texts()]
    assert_every_series_visible_zeros(fig)


def assert_every_series_visible_zeros(fig):
    render(fig)
    width = groups._ZERO_MARK["markersize"] * fig.dpi / 72
    for ax in fig.axes:
        xy = np.vstack([line.get_transform().transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
                        for line in ax.get_lines() if str(line.get_gid()).startswith("zero-at-floor")])
        d = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
        assert d[~np.eye(len(xy), dtype=bool)].min() >= APART * width
