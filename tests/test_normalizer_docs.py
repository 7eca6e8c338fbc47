"""docs/plugins.md's normaliser example, run as written: the plugin passes the conformance kit and its
recipe runs on the bob lists; and the kit fails normalisers that break the contract the docs state."""

from __future__ import annotations

import re
import shutil
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import Normalizer
from calibrate.testing import check_component

ROOT = Path(__file__).resolve().parents[1]
BOB = ROOT / "examples" / "bob-scores"
HEADING = "### A complete example: `trimmed-snorm`"


def _blocks() -> tuple[str, str]:
    doc = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = doc[doc.index(HEADING):]
    section = section[:section.index("\n## ")]
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    recipe = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return python, recipe


def _plugin() -> types.ModuleType:
    module = types.ModuleType("calibrate_trimmed")
    exec(compile(_blocks()[0], "docs/plugins.md", "exec"), module.__dict__)  # noqa: S102 - the project's own docs
    return module


def test_the_documented_normaliser_passes_the_kit():
    outcome = check_component("normalizer", _plugin().TrimmedSNorm, {"trim": 0.1}, name="trimmed-snorm")
    # it has no fast path (_statistics_left_out, optional): that one check does not apply
    assert outcome.pop("check_normalizer_left_out").startswith("skipped: normalizer:trimmed-snorm(trim=0.1) has no "
                                                                "fast path"), outcome
    assert set(outcome.values()) == {"passed"}, outcome


def test_the_documented_recipe_runs_and_its_calibration_decides_as_the_run(tmp_path):
    plugin = _plugin()
    for name in ("scores-dev", "scores-eval", "cohort-znorm", "cohort-tnorm"):
        shutil.copy(BOB / name, tmp_path / name)
    (tmp_path / "r.yaml").write_text(_blocks()[1], encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(tmp_path / "r.yaml", extra_plugins=(plugin,))
    fold = result.folds[0]
    assert fold.normalization.plugin == "trimmed-snorm" and fold.normalization.params == {"trim": 0.1}
    cal = calibrate.load(tmp_path / "results-trimmed", extra_plugins=(plugin,))
    tnorm: dict[str, list[tuple[str, float]]] = {}
    for line in (tmp_path / "cohort-tnorm").read_text().splitlines():
        model, _, probe, score = line.split()
        tnorm.setdefault(probe, []).append((model, float(score)))
    rows, cols = np.nonzero(fold.test.valid)
    probes, claimed = fold.test.probe_ids[rows], fold.test.gallery_classes[cols]
    scores = {(c, p): float(s) for c, _, p, s in (l.split() for l in (tmp_path / "scores-eval").read_text().splitlines())}
    for k, target in enumerate(fold.tables["auto"].targets):
        want = fold.test.values[rows, cols] <= fold.tables["auto"].values[cols, k]
        got = cal.accept(claimed, [scores[(c, p)] for c, p in zip(claimed, probes)], target,
                         probe_cohort_scores=[[s for m, s in tnorm[p] if m != c] for p, c in zip(probes, claimed)])
        assert np.array_equal(got, want)


class _Base(Normalizer):
    sides = ("enrolled", "probe")

    def _statistics(self, cohort):
        return {"mean": cohort.mean(axis=1), "std": cohort.std(axis=1)}

    def _normalize(self, distances, enrolled, probe):
        return (distances - enrolled["mean"]) / enrolled["std"] + (distances - probe["mean"]) / probe["std"]


class MixesRows(_Base):
    """Centres each row on the block's mean: a row's statistics depend on the rows computed with it."""

    def _statistics(self, cohort):
        return {"mean": cohort.mean(axis=1) - 0.1 * cohort.mean(), "std": cohort.std(axis=1)}


class Reversed(_Base):
    """Larger distances get smaller scores."""

    def _normalize(self, distances, enrolled, probe):
        return -super()._normalize(distances, enrolled, probe)


class BadSides(_Base):
    """Names a side that does not exist."""

    sides = ("enrolled", "gallery")


class Remembers(_Base):
    """Keeps a running state between calls: a loaded calibration does not have it."""

    def __init__(self):
        self._calls = 0

    def _statistics(self, cohort):
        self._calls += 1
        return {"mean": cohort.mean(axis=1) + 1e-3 * self._calls, "std": cohort.std(axis=1)}


@pytest.mark.parametrize("broken,check", [(MixesRows, "check_normalizer_statistics"),
                                          (Reversed, "check_normalizer_monotone"),
                                          (BadSides, "check_normalizer_sides"),
                                          (Remembers, "check_normalizer_reproducible_after_saving")])
def test_the_kit_catches_a_broken_normaliser(broken, check):
    with pytest.raises(AssertionError) as err:
        check_component("normalizer", broken, {})
    assert f"{check}:" in str(err.value), str(err.value)
