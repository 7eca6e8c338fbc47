"""Dataset ``synthetic-impostors``: a seeded gallery of impostor distances, for scale tests and benchmarks.

It produces comparison scores directly (a :class:`~calibrate.contract.base.ScoreSplit`), so that a gallery
of 100,000 classes needs no patterns and no distance stage: memory is the two matrices only
(``train x classes`` and ``test x classes`` float64, plus their masks).

Generation (block ``b`` of 2,048 classes draws from ``numpy.random.default_rng([seed, b])``, so
any block can be regenerated alone):

* Class ``i`` gets a family: ``ncx2`` unless it is one of the ``off_model`` fraction of classes
  (chosen by a uniform draw per class), which cycle through ``gamma``, ``lognormal`` and
  ``shifted-t`` (|t_4| shifted), data the non-central chi-square model does not describe.
* ``ncx2`` classes: ``dim ~ U{10..30}``, ``lambda ~ U(50, 400)``, ``sigma ~ logU(0.02, 0.05)``
  (concentrated distances, like real matchers' impostor scores); a distance is
  ``sigma * sqrt((Z + sqrt(lambda))^2 + chi^2(dim - 1))`` with ``Z ~ N(0, 1)``, i.e.
  ``sigma * sqrt(X)`` with ``X ~ chi'^2(dim, lambda)``.
* ``gamma``: shape ``~ U(20, 200)``, scale ``1 / shape`` (mean 1); ``lognormal``: ``mu = 0``,
  ``s ~ U(0.05, 0.3)``; ``shifted-t``: ``3 + |t_4| / 4``.
* ``train`` training distances and ``test`` evaluation distances per class are drawn from the
  same law. The probes are ``train + test`` synthetic impostor identities (``imp0`` ...), none of
  them enrolled, so every comparison is an impostor comparison (no genuine scores, so no FNR).
* ``round`` (optional) rounds every distance to that many decimals, which creates ties.
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import ParameterError
from calibrate.contract.types import DistanceMatrix

FAMILIES = ("ncx2", "gamma", "lognormal", "shifted-t")
#: the most distances generated (8 GB as float64; the 100,000-class benchmark needs 1.2e8)
MAX_VALUES = 10 ** 9
#: classes generated per block (bounds the temporary memory of generation)
_BLOCK = 2048


def impostor_block(rng: np.random.Generator, classes: int, n: int, off_model: float) -> tuple[np.ndarray, np.ndarray]:
    """(distances (n, classes), family index per class) for one block of classes."""
    u = rng.random(classes)
    fam = np.where(u < off_model, 1 + (np.arange(classes) % 3), 0)
    dim = rng.integers(10, 31, classes)
    lam = rng.uniform(50.0, 400.0, classes)
    sigma = np.exp(rng.uniform(np.log(0.02), np.log(0.05), classes))
    z = rng.standard_normal((n, classes))
    x = (z + np.sqrt(lam)) ** 2 + rng.chisquare(dim - 1, (n, classes))
    out = sigma * np.sqrt(x)
    if np.any(fam > 0):
        shape = rng.uniform(20.0, 200.0, classes)
        g = rng.gamma(shape, 1.0 / shape, (n, classes))
        ln = rng.lognormal(0.0, rng.uniform(0.05, 0.3, classes), (n, classes))
        t = 3.0 + np.abs(rng.standard_t(4, (n, classes))) / 4.0
        out = np.where(fam == 1, g, out)
        out = np.where(fam == 2, ln, out)
        out = np.where(fam == 3, t, out)
    return out, fam


def impostor_distances(classes: int, n: int, seed: int = 0, off_model: float = 0.2,
                       block: int = _BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """(distances (n, classes), family index per class (see FAMILIES)) by the documented recipe."""
    out = np.empty((n, classes))
    fam = np.empty(classes, dtype=np.int64)
    for c0 in range(0, classes, block):
        c1 = min(classes, c0 + block)
        out[:, c0:c1], fam[c0:c1] = impostor_block(np.random.default_rng([seed, c0 // block]), c1 - c0, n, off_model)
    return out, fam


class SyntheticImpostors(Dataset):
    """Seeded impostor distances for many classes, as training and evaluation score matrices (no files needed).

    :param classes: enrolled classes.
    :param train: training impostor distances per class (used to fit thresholds).
    :param test: evaluation impostor distances per class.
    :param off_model: fraction of classes drawn from gamma, lognormal or shifted |t| instead of the model.
    :param round: round distances to this many decimals (creates ties); omitted: no rounding.
    :param seed: random seed.
    """

    produces = "scores"

    def __init__(self, *, classes: int = 1000, train: int = 1000, test: int = 200, off_model: float = 0.2,
                 round: int | None = None, seed: int = 0):  # noqa: A002 - the recipe key
        for name, value, low in (("classes", classes, 2), ("train", train, 2), ("test", test, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(f"{name} must be a whole number >= {low}, got {value!r}")
        if seed < 0:  # numpy.random.default_rng takes non-negative seeds only
            raise ParameterError(f"seed must be a non-negative integer, got {seed}")
        if not 0.0 <= off_model <= 1.0:
            raise ParameterError(f"off_model must be a fraction in [0, 1], got {off_model!r}")
        if round is not None and (isinstance(round, bool) or not isinstance(round, int) or round < 0):
            raise ParameterError(f"round must be a whole number of decimals >= 0 (or omitted), got {round!r}")
        if classes * (train + test) > MAX_VALUES:  # numpy would fail with "dimension exceeded" or MemoryError
            raise ParameterError(f"classes x (train + test) = {classes * (train + test):.3g} distances "
                                 f"({8 * classes * (train + test) / 1e9:.3g} GB); choose sizes that give at most {MAX_VALUES:.0e}")
        self.classes, self.train, self.test = classes, train, test
        self.off_model, self.round, self.seed = off_model, round, seed

    def output_kind(self) -> str:
        return "distance"  # always: so that a recipe's transform for similarities is refused at validation

    def _load(self, context: RunContext) -> ScoreSplit:
        values, fam = impostor_distances(self.classes, self.train + self.test, self.seed, self.off_model)
        if self.round is not None:
            np.round(values, self.round, out=values)
        width = len(str(self.classes - 1))
        gallery = np.array([f"c{i:0{width}d}" for i in range(self.classes)])
        probes = np.array([f"imp{j}" for j in range(self.train + self.test)])
        source = f"synthetic-impostors(seed={self.seed})"
        train = DistanceMatrix(values[:self.train], probes[:self.train], gallery, source=f"{source} train")
        test = DistanceMatrix(values[self.train:], probes[self.train:], gallery, source=f"{source} test")
        del values
        counts = np.bincount(fam, minlength=len(FAMILIES))
        description = ", ".join(f"{n} {f}" for f, n in zip(FAMILIES, counts) if n)
        return ScoreSplit(train, test, description=f"{self.classes} classes ({description})")
