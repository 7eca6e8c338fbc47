"""Dataset ``synthetic-groups``: a seeded gallery with demographic structure, genuine and impostor scores.

What it imitates: a modern matcher on a population of unequal demographic groups, where impostors of one's own
group are the look-alikes (they score closer than impostors of another group), and where a class's genuine
scores either move with its impostor statistics or do not. Both decide whether class-specific thresholds pay:
standardising a class by the bulk of its impostors helps when its genuine scores move with that bulk
(``genuine: follows``) and spends the FPR budget in the wrong places when they do not (``genuine: fixed``); a
class of a small group has mostly other-group impostors, so its bulk is far and its look-alikes near.

Generation (similarity scores, higher = more alike; ``numpy.random.default_rng(seed)``):

* enrolled classes ``c0000`` ... in groups ``g1``, ``g2``, ... of shares ``group_shares`` (the first classes in g1);
* per class a location ``a ~ N(0, class_spread)``; per probe a location ``b ~ N(0, probe_spread)`` (probes that
  score high against everyone); ``train_probes`` and ``test_probes`` probes of every class, each compared with
  every enrolled class;
* impostor score: ``0.1 * (a_claimed + b_probe + within_group * [same group] + e)``, ``e ~ N(0, 1)``;
* genuine score: ``0.1 * (separation + b_probe + e)``, plus ``0.1 * a_claimed`` with ``genuine: follows``;
* ``look_alikes``: that share of the impostor comparisons are look-alikes instead, scoring
  ``0.1 * (look_alike_level + b_probe + within_group * [same group] + e)`` whatever the claimed class's location:
  the bulk of a class's impostors moves with its location, its nearest impostors do not (as deep face embeddings
  show: a class far from the crowd still has its few look-alikes).

The groups come with the data (``ScoreSplit.groups``); a recipe's ``data: {groups: FILE}`` replaces them.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import ParameterError
from calibrate.contract.types import DistanceMatrix, GroupLabels

#: the most comparisons generated (probes x classes, training and evaluation together)
MAX_VALUES = 2 * 10 ** 8
#: score units per standard deviation of the impostor noise
SCALE = 0.1


class SyntheticGroups(Dataset):
    """Seeded genuine and impostor similarity scores of classes in demographic groups (no files needed).

    :param classes: enrolled classes.
    :param group_shares: the share of the classes in each group (g1, g2, ...), e.g. [0.75, 0.25].
    :param train_probes: probes per class whose comparisons are used for fitting.
    :param test_probes: probes per class whose comparisons are used for evaluation.
    :param within_group: how much closer same-group impostors score, in impostor standard deviations (one value, or one per group).
    :param genuine: follows (a class's genuine scores move with its impostor location) or fixed (they do not).
    :param class_spread: standard deviation of the classes' impostor locations.
    :param probe_spread: standard deviation of the probes' locations.
    :param separation: mean genuine score above the mean other-group impostor score, in standard deviations.
    :param look_alikes: share of impostor comparisons that are look-alikes, whose scores ignore the class's location.
    :param look_alike_level: mean look-alike score above the mean other-group impostor score, in standard deviations.
    :param seed: random seed.
    """

    produces = "scores"

    def __init__(self, *, classes: int = 300, group_shares: list[float] = [0.75, 0.25],  # noqa: B006 (never mutated)
                 train_probes: int = 2, test_probes: int = 2, within_group: float | list[float] = 1.5,
                 genuine: Literal["follows", "fixed"] = "follows", class_spread: float = 0.5,
                 probe_spread: float = 0.3, separation: float = 6.0, look_alikes: float = 0.0,
                 look_alike_level: float = 2.5, seed: int = 0):
        for name, value, low in (("classes", classes, 2), ("train_probes", train_probes, 1),
                                 ("test_probes", test_probes, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(f"{name} must be a whole number >= {low}, got {value!r}")
        shares = list(group_shares)
        if not shares or any(isinstance(x, bool) or not (isinstance(x, (int, float)) and x > 0) for x in shares) \
                or abs(sum(shares) - 1.0) > 1e-6:
            raise ParameterError(f"group_shares must be positive shares that sum to 1 (e.g. [0.75, 0.25]), got "
                                 f"{group_shares!r}")
        counts = np.floor(np.asarray(shares) * classes + 1e-9).astype(int)
        counts[0] += classes - counts.sum()
        if (counts < 1).any():
            raise ParameterError(f"group_shares {group_shares!r} leave a group without classes among {classes}; give more "
                                 "classes")
        within = [within_group] * len(shares) if isinstance(within_group, (int, float)) else list(within_group)
        if len(within) != len(shares) or any(isinstance(w, bool) or not isinstance(w, (int, float)) for w in within):
            raise ParameterError(f"within_group must be a number or one per group ({len(shares)}), got {within_group!r}")
        for name, value in (("class_spread", class_spread), ("probe_spread", probe_spread)):
            if not value >= 0:
                raise ParameterError(f"{name} must be >= 0, got {value!r}")
        if not 0.0 <= look_alikes < 1.0:
            raise ParameterError(f"look_alikes must be a share in [0, 1), got {look_alikes!r}")
        if seed < 0:
            raise ParameterError(f"seed must be a non-negative integer, got {seed}")
        if classes * classes * (train_probes + test_probes) > MAX_VALUES:
            raise ParameterError(f"classes^2 x (train_probes + test_probes) = "
                                 f"{classes * classes * (train_probes + test_probes):.3g} comparisons; choose sizes that "
                                 f"give at most {MAX_VALUES:.0e}")
        self.classes, self.group_shares, self.train_probes = classes, group_shares, train_probes
        self.test_probes = test_probes
        self.within_group, self.genuine, self.class_spread, self.probe_spread = within_group, genuine, class_spread, probe_spread
        self.separation, self.look_alikes, self.look_alike_level, self.seed = separation, look_alikes, look_alike_level, seed
        self._counts, self._within = counts, np.asarray(within, dtype=np.float64)

    def output_kind(self) -> str:
        return "similarity"

    def _matrix(self, rng: np.random.Generator, names: np.ndarray, group: np.ndarray, a: np.ndarray, per_class: int,
                source: str) -> DistanceMatrix:
        n = names.size
        probe_class = np.repeat(np.arange(n), per_class)
        b = rng.normal(0.0, self.probe_spread, probe_class.size)
        same = group[probe_class][:, None] == group[None, :]
        location = a[None, :]
        if self.look_alikes > 0:
            location = np.where(rng.random((probe_class.size, n)) < self.look_alikes, self.look_alike_level, location)
        values = location + b[:, None] + rng.standard_normal((probe_class.size, n))
        values += np.where(same, self._within[group][None, :], 0.0)
        rows = np.arange(probe_class.size)
        genuine = self.separation + b + rng.standard_normal(probe_class.size)
        if self.genuine == "follows":
            genuine = genuine + a[probe_class]
        values[rows, probe_class] = genuine
        ids = np.array([f"{names[c]}#p{k}" for c, k in zip(probe_class, np.tile(np.arange(per_class), n))])
        return DistanceMatrix(SCALE * values, names[probe_class], names, kind="similarity", probe_ids=ids,
                              source=source)

    def _names(self) -> np.ndarray:
        width = len(str(self.classes - 1))
        return np.array([f"c{i:0{width}d}" for i in range(self.classes)])

    def class_names(self) -> tuple[list[str], list[str]]:
        names = self._names().tolist()
        return names, names

    def _load(self, context: RunContext) -> ScoreSplit:
        rng = np.random.default_rng(self.seed)
        n = self.classes
        names = self._names()
        group = np.repeat(np.arange(self._counts.size), self._counts)
        a = rng.normal(0.0, self.class_spread, n)
        source = f"synthetic-groups(seed={self.seed})"
        train = self._matrix(rng, names, group, a, self.train_probes, f"{source} train")
        test = self._matrix(rng, names, group, a, self.test_probes, f"{source} test")
        labels = GroupLabels(tuple(names.tolist()), tuple(f"g{g + 1}" for g in group.tolist()), source=source)
        shares = ", ".join(f"g{k + 1} {c}" for k, c in enumerate(self._counts.tolist()))
        return ScoreSplit(train, test, groups=labels,
                          description=f"{n} classes in groups ({shares}), genuine scores {self.genuine}")
