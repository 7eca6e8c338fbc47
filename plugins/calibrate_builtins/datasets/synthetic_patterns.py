"""Dataset ``synthetic-patterns``: a seeded synthetic gallery for examples, tests and benchmarks.

Generation (documented so results can be reproduced): class centres are drawn from an
isotropic normal N(0, class_spread^2 I) in R^dim; each class gets ``sets`` image sets of
``samples`` samples each; a sample is its class centre plus a set offset N(0, set_shift^2 I)
shared by the set (a session effect, like a change of illumination) plus per-sample noise
N(0, noise^2 I). Everything comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Dataset, RunContext
from calibrate.errors import ParameterError
from calibrate.contract.types import PatternSet


#: the most sample values generated (8 GB as float64)
MAX_VALUES = 10 ** 9


class SyntheticPatterns(Dataset):
    """Seeded Gaussian classes with set-level session effects (no files needed).

    :param classes: number of classes.
    :param sets: image sets per class (one is enrolled, the rest query).
    :param samples: samples per set.
    :param dim: feature dimension.
    :param class_spread: standard deviation of class centres.
    :param set_shift: standard deviation of a set's shared offset (session effect).
    :param noise: standard deviation of per-sample noise.
    :param seed: random seed.
    """

    produces = "patterns"
    default_distance = "euclidean"  # between set means

    def __init__(self, *, classes: int = 60, sets: int = 3, samples: int = 6, dim: int = 16,
                 class_spread: float = 1.0, set_shift: float = 0.35, noise: float = 0.3, seed: int = 0):
        for name, value, low in (("classes", classes, 2), ("sets", sets, 1), ("samples", samples, 1), ("dim", dim, 1)):
            if value < low:
                raise ParameterError(f"{name} must be at least {low}, got {value}")
        if seed < 0:  # numpy.random.default_rng takes non-negative seeds only
            raise ParameterError(f"seed must be a non-negative integer, got {seed}")
        for name, value in (("class_spread", class_spread), ("set_shift", set_shift), ("noise", noise)):
            if not value >= 0:
                raise ParameterError(f"{name} must be >= 0, got {value}")
        values = classes * sets * samples * dim
        if values > MAX_VALUES:  # numpy would fail with "dimension exceeded" or MemoryError, after validation
            raise ParameterError(f"classes x sets x samples x dim = {values:.3g} values ({8 * values / 1e9:.3g} GB); "
                                 f"choose sizes that give at most {MAX_VALUES:.0e}")
        self.classes, self.sets, self.samples, self.dim = classes, sets, samples, dim
        self.class_spread, self.set_shift, self.noise, self.seed = class_spread, set_shift, noise, seed

    def _load(self, context: RunContext) -> PatternSet:
        rng = np.random.default_rng(self.seed)
        centres = rng.normal(0.0, self.class_spread, (self.classes, self.dim))
        shifts = rng.normal(0.0, self.set_shift, (self.classes, self.sets, self.dim))
        noise = rng.normal(0.0, self.noise, (self.classes, self.sets, self.samples, self.dim))
        X = centres[:, None, None, :] + shifts[:, :, None, :] + noise
        width = len(str(self.classes - 1))
        labels = np.repeat([f"c{c:0{width}d}" for c in range(self.classes)], self.sets * self.samples)
        sets = np.tile(np.repeat([f"s{s}" for s in range(self.sets)], self.samples), self.classes)
        return PatternSet(X.reshape(-1, self.dim), labels, sets, source=f"synthetic-patterns(seed={self.seed})")
