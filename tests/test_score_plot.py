"""scores.png (issue 41): the genuine and impostor score distributions with every estimator's thresholds, checked on
the matplotlib figure at 1, 3 and 8 estimators (size, nothing cut, every estimator drawn and named)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import EvaluationInput
from calibrate_builtins.evaluators.costs import pool_attempts
from calibrate_builtins.evaluators.score_plot import scores_figure, scores_plot
from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

TARGETS = (0.05, 0.02, 0.01)
NAMES = ["g", "an-estimator-with-a-name-far-too-long-to-draw", "c", "d3", "e4", "f5", "g6", "h7"]


@pytest.fixture(scope="module")
def folds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scores")
    csv = write_scores(tmp / "s.csv", *make_scores(n_classes=12, probes_per_class=8))
    estimators = [{"plugin": "class-interp" if k % 2 else "generic-interp", "name": n} for k, n in enumerate(NAMES)]
    recipe = score_recipe(csv, tmp / "out", estimators=estimators, targets=TARGETS)
    recipe["evaluation"]["prediction"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate.run(write_recipe(tmp / "r.yaml", recipe)).folds


@pytest.mark.parametrize("n", [1, 3, 8])
def test_the_picture_fits_and_draws_every_estimator(folds, n):
    data = EvaluationInput(folds, TARGETS)
    pool = pool_attempts(data)
    labels = NAMES[:n]
    fig = scores_figure(pool, folds, labels, TARGETS)
    width, height = fig.get_size_inches() * fig.dpi
    assert width >= 700 and 450 <= height <= 450 + 40 * n
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.get_tightbbox(renderer)  # inches: every artist, texts included
    assert box.x0 >= -0.01 and box.y0 >= -0.01, box
    assert box.x1 <= fig.get_figwidth() + 0.01 and box.y1 <= fig.get_figheight() + 0.01, box
    top, bottom = fig.axes
    drawn = {a.get_gid() for a in top.get_children()}
    assert {"density-impostor", "density-genuine"} <= drawn
    assert sum(line.get_gid() == "one-threshold" for line in top.get_lines()) == len(TARGETS)
    names = [t.get_text() for t in bottom.get_yticklabels()][::-1]
    assert names == [x if len(x) <= 24 else x[:23] + "\u2026" for x in labels]
    for label in labels:  # each estimator's thresholds at every target, inside the axes
        lines = [line for line in bottom.get_lines() if line.get_gid() == f"thresholds-{label}"]
        assert len(lines) == len(TARGETS), label
        low, high = bottom.get_xlim()
        assert all(low <= x <= high for line in lines for x in line.get_xdata())
    # the thresholds are the run's: the median of class-interp's at 5% is the median of its class thresholds
    values = folds[0].transform.score_thresholds(folds[0].tables[labels[0]].values, folds[0].kind)
    medians = [line.get_xdata()[0] for line in bottom.get_lines() if line.get_marker() == "o"]
    assert np.median(values[:, 0]) == pytest.approx(medians[0])
    assert "accept if score >= threshold" in top.get_title()


def test_the_png_is_written_and_a_run_links_it(folds, tmp_path):
    png = scores_plot(pool_attempts(EvaluationInput(folds, TARGETS)), folds, NAMES[:2], TARGETS)
    assert png.startswith(b"\x89PNG")
    csv = write_scores(tmp_path / "s.csv", *make_scores(n_classes=6, probes_per_class=6))
    recipe = score_recipe(csv, tmp_path / "out", estimators=({"plugin": "generic-interp"},))
    recipe["output"]["plots"] = True
    recipe["evaluation"]["prediction"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = calibrate.run(write_recipe(tmp_path / "r.yaml", recipe)).out_dir
    assert (out / "scores.png").read_bytes().startswith(b"\x89PNG")
    assert "(scores.png)" in (out / "report.md").read_text(encoding="utf-8")
