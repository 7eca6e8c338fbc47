"""Dataset ``genuine-impostor``: two plain files of scores, one per line, as pyeer reads them: one of the genuine
comparisons' scores, one of the impostor comparisons'.

Such files say nothing of which class a comparison claims, so one threshold for every claimed class is all they
allow: every attempt claims one enrolled class, ``pooled``, and each estimator fits that one class (a pooled
threshold; per-class estimators give the same). A run says so in its notes, and its EER interval resamples attempts
(there are no classes to resample). With ``test_genuine``/``test_impostor`` the first pair fits and the second
evaluates (bob's dev and eval); without, each file is split at random, ``fit_fraction`` of its scores to the fit
(score-matrix's per-class split of the one class, seeded by ``seed``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.contract.types import DistanceMatrix
from calibrate.errors import ParameterError
from calibrate.files.score_lists import OTHER_CLASS as OTHER, POOLED_CLASS as POOLED, read_score_column

from .score_list import CHECK_LINES
from .score_matrix import split_per_class
#: what a run notes about such data
NOTE = (f"genuine and impostor score files carry no class: every attempt claims one enrolled class ({POOLED!r}), so "
        "each estimator sets one pooled threshold for everyone, and the EER's interval resamples attempts")


class GenuineImpostorFiles(Dataset):
    """Two plain files of scores, one per line (pyeer's input): the genuine comparisons' and the impostor ones'; no classes, so one pooled threshold.

    :param genuine: the genuine comparisons' scores, one per line (fit; split with impostors when no test files are given).
    :param impostor: the impostor comparisons' scores, one per line.
    :param test_genuine: the genuine scores to evaluate on (with test_impostor), e.g. bob's eval side.
    :param test_impostor: the impostor scores to evaluate on (with test_genuine).
    :param kind: similarity (higher = more alike) or distance (lower = more alike).
    :param missing: marker score of failed comparisons (e.g. -1); excluded and counted.
    :param fit_fraction: share of each file's scores used for fitting (no test files).
    :param seed: seed of that split.
    """

    produces = "scores"

    def __init__(self, *, genuine: Path, impostor: Path, test_genuine: Path | None = None,
                 test_impostor: Path | None = None, kind: Literal["similarity", "distance"] = "similarity",
                 missing: float | None = None, fit_fraction: float = 0.5, seed: int = 0):
        if (test_genuine is None) != (test_impostor is None):
            raise ParameterError("give both `test_genuine:` and `test_impostor:` (the scores to evaluate on), or "
                                 "neither (each file is then split into fit and evaluation scores)")
        if not 0.0 < fit_fraction < 1.0:
            raise ParameterError(f"fit_fraction must be in (0, 1), got {fit_fraction}")
        if seed < 0:
            raise ParameterError(f"seed must be a non-negative integer, got {seed}")
        self.genuine, self.impostor = genuine, impostor
        self.test_genuine, self.test_impostor = test_genuine, test_impostor
        self.kind, self.missing, self.fit_fraction, self.seed = kind, missing, fit_fraction, seed

    def output_kind(self) -> str | None:
        return self.kind

    def _files(self) -> list[tuple[Path, str]]:
        pairs = [(self.genuine, "the genuine scores"), (self.impostor, "the impostor scores")]
        if self.test_genuine is not None:
            pairs += [(self.test_genuine, "the evaluation genuine scores"),
                      (self.test_impostor, "the evaluation impostor scores")]
        return pairs

    def check(self) -> None:
        """The first lines of every file, read as a run reads them."""
        for path, what in self._files():
            read_score_column(path, what, missing=self.missing, max_lines=CHECK_LINES)

    def _matrix(self, genuine: Path, impostor: Path) -> tuple[DistanceMatrix, tuple[tuple[str, int], ...]]:
        """One column (the class every attempt claims): the genuine scores' rows, then the impostor scores'; the failed
        comparisons of each file."""
        gen, failed_g = read_score_column(genuine, "the genuine scores", missing=self.missing)
        imp, failed_i = read_score_column(impostor, "the impostor scores", missing=self.missing)
        probes = np.repeat(np.array([POOLED, OTHER]), [gen.size, imp.size])
        return (DistanceMatrix(np.concatenate([gen, imp])[:, None], probes, np.array([POOLED]), kind=self.kind,
                               source=f"{genuine.name} and {impostor.name}"),
                ((genuine.name, failed_g), (impostor.name, failed_i)))

    def _load(self, context: RunContext) -> ScoreSplit:
        context.note(NOTE)
        train, failed = self._matrix(self.genuine, self.impostor)
        if self.test_genuine is not None:
            test, failed_test = self._matrix(self.test_genuine, self.test_impostor)
            return ScoreSplit(train, test, sum(n for _, n in failed + failed_test),
                              f"fit {self.genuine.name} and {self.impostor.name}, evaluate {self.test_genuine.name} "
                              f"and {self.test_impostor.name}", failed + failed_test)
        fit, evaluate = split_per_class(train.valid, train.probe_classes, train.gallery_classes, self.fit_fraction,
                                        self.seed)
        return ScoreSplit(DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, fit, self.kind,
                                         train.probe_ids, source=f"{train.source} (fit scores)"),
                          DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, evaluate, self.kind,
                                         train.probe_ids, source=f"{train.source} (evaluation scores)"),
                          sum(n for _, n in failed),
                          f"{self.genuine.name} and {self.impostor.name}, split at random (seed {self.seed})", failed)
