"""A sharded run's evaluation by the recipe's evaluators (calibrate.running.sharded): what each shard counts for them
in the last pass (:func:`shard_counts`, :func:`score_moments` in pass 0), the :class:`ShardedEvaluation` gathered from
those counts, and the passes that make the pooled evaluation attempts' answers exact (:class:`ShardPasses`, the
Resolver of calibrate.statistics.binned_scores).

Classes are in the order of their names over every shard (as the in-memory evaluation orders them); a class's figures
come from the one shard that holds it. What reaches the main process per shard is proportional to its classes (counts,
thresholds, one hash each) and to its false accepts (one 64-bit key per distinct class pair), never to its attempts;
each pass of :class:`ShardPasses` returns counts, or the values of the histogram bins asked for (at most the budget of
calibrate.statistics.binned_scores.GATHER_VALUES in all).
"""

from __future__ import annotations

import math
import os
import uuid

import numpy as np

from calibrate.contract.base import ShardedEvaluation
from calibrate.contract.packed import order_keys
from calibrate.contract.shard_data import name_hashes
from calibrate.contract.sharded import _BIN_SHIFT, ShardTraining, shard_data, shard_training
from calibrate.statistics import binned_scores
from calibrate.statistics.binned_scores import BIN_SHIFT, BinnedScores
from calibrate.statistics.eer_interval import _DENSE, UnitBins, stacked

assert BIN_SHIFT == _BIN_SHIFT  # the histogram the last pass makes is the one BinnedScores reads


def _moments(values: np.ndarray) -> tuple[int, float, float]:
    v = np.asarray(values, dtype=np.float64)
    if not v.size:
        return 0, 0.0, 0.0
    mean = float(v.mean())
    return int(v.size), mean, float(((v - mean) ** 2).sum())


def score_moments(test) -> dict:
    """Pass 0: (count, mean, sum of squared deviations) of the shard's genuine and impostor evaluation attempts on the
    matcher's own scores (``test``: the split's evaluation matrix before the transform), for d'."""
    return {"gen": _moments(test.values[test.genuine_mask()]), "imp": _moments(test.values[test.impostor_mask()])}


def _combined(parts: list[tuple[int, float, float]]) -> tuple[int, float, float]:
    """Chan et al.'s pairwise combination of (count, mean, M2)."""
    n, mean, m2 = 0, 0.0, 0.0
    for nb, mb, m2b in parts:
        if not nb:
            continue
        delta = mb - mean
        total = n + nb
        mean += delta * nb / total
        m2 += m2b + delta * delta * n * nb / total
        n = total
    return n, mean, m2


def d_prime_of(moments: list[dict]) -> float:
    """calibrate.statistics.verification.d_prime from the shards' :func:`score_moments`."""
    ng, mg, m2g = _combined([m["gen"] for m in moments])
    ni, mi, m2i = _combined([m["imp"] for m in moments])
    if ng < 2 or ni < 2:
        return float("nan")
    spread = math.sqrt((m2g / ng + m2i / ni) / 2.0)
    return abs(mg - mi) / spread if spread > 0 else float("nan")


class ShardCounts:
    """The last pass's counts for the evaluators, of one shard (``order``: each evaluation column's class, in the
    training order of ``impostors``): its classes, their evaluation impostor attempts, training impostor distances
    and smallest one; per estimator (:meth:`add`) each class's false accepts and thresholds in the matcher's scores,
    the classes at or below their smallest training distance and the range of thresholds per target, and the distinct
    class pairs of its false accepts (64-bit keys). :meth:`result` is what goes back to the main process."""

    def __init__(self, impostors, test_d, order: np.ndarray):
        self.order, self.n = order, len(impostors.classes)
        self.imp, self.gen, self.values = test_d.impostor_mask(), test_d.genuine_mask(), test_d.values
        offsets = np.asarray(impostors.offsets, dtype=np.int64)
        n_train = np.diff(offsets)
        values = impostors.values
        self.has = n_train > 0
        self.smallest = np.full(self.n, np.inf)
        if self.has.any():
            self.smallest[self.has] = np.minimum.reduceat(values, offsets[:-1][self.has])
        low = float(values.min()) if values.size else math.inf
        self.probe_h, self.gallery_h = (name_hashes(test_d.probe_classes).view(np.uint64),
                                         name_hashes(test_d.gallery_classes).view(np.uint64))
        self.out = {"classes": list(impostors.classes), "train_per_class": n_train, "smallest": low,
                    "class_attempts": np.bincount(order, weights=self.imp.sum(axis=0), minlength=self.n),
                    "tied": int((values == low).sum()), "labels": {}}

    def add(self, label: str, table, fa_cols: np.ndarray, transform, kind: str, scores: bool = True) -> None:
        """One estimator's ``table`` (ThresholdTable, training order) and its false accepts per evaluation column and
        target; ``scores``: its thresholds in the matcher's scores too (scores.png draws them)."""
        n_targets = fa_cols.shape[1]
        class_fa = np.stack([np.bincount(self.order, weights=fa_cols[:, k], minlength=self.n)
                             for k in range(n_targets)])
        tau_cols = np.asarray(table.values, dtype=np.float64)[self.order]   # (columns, targets)
        # the false accepts' places: the impostor attempts at or below their class's loosest threshold, then per target
        reach = np.fmax.reduce(tau_cols, axis=1) if n_targets else np.full(self.order.size, np.nan)
        rows, cols = np.nonzero(self.imp & (self.values <= reach[None, :]))
        hit = self.values[rows, cols][:, None] <= tau_cols[cols]
        ks, at = np.nonzero(hit.T)
        a, b = self.probe_h[rows[at]], self.gallery_h[cols[at]]
        with np.errstate(over="ignore"):
            keys = np.minimum(a, b) * np.uint64(0x9E3779B97F4A7C15) + np.maximum(a, b)  # unordered pair, mod 2^64
        tau = np.asarray(table.values, dtype=np.float64)                # (classes, targets)
        got = transform.score_thresholds(tau, kind) if self.n and scores else None
        nan = np.isnan(tau).any(axis=0)
        bounded = np.where(np.isnan(tau), np.inf, tau)
        self.out["labels"][label] = {
            "fa": class_fa, "pairs": [np.unique(keys[ks == k]) for k in range(n_targets)],
            "thresholds": None if got is None else np.asarray(got, dtype=np.float64).reshape(tau.shape),
            "at_floor": ((tau <= self.smallest[:, None]) & self.has[:, None]).sum(axis=0),
            "low": np.where(nan, np.nan, bounded.min(axis=0, initial=np.inf)),
            "high": np.where(nan, np.nan, bounded.max(axis=0, initial=-np.inf))}

    def result(self) -> dict:
        return self.out

    def save(self, path: str | None) -> None:
        """The shard's evaluation attempts as the later passes read them (:func:`_shard_attempts`), to ``path``
        (beside the shard's saved distances; None: nothing saved, they are read from those)."""
        if path is None:
            return
        rows, cols = np.nonzero(self.imp)
        g_rows, g_cols = np.nonzero(self.gen)
        temp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temp, "wb") as fh:
            for array in (self.values[rows, cols], self.order[cols], self.values[g_rows, g_cols], self.order[g_cols],
                          np.array([self.n])):
                np.save(fh, array, allow_pickle=False)
        os.replace(temp, path)


def attempts_file(job) -> str | None:
    """Where the last pass saves a shard's evaluation attempts (ShardCounts.save): beside its saved distances."""
    return None if job.cache is None else f"{job.cache}.eval"


def _shard_attempts(job):
    """A shard's evaluation attempts: impostor distances, each one's class, genuine distances, each one's class (the
    shard's classes in training order), and its number of classes."""
    path = attempts_file(job)
    if path is not None and os.path.exists(path):
        with open(path, "rb") as fh:
            imp, imp_cls, gen, gen_cls, n = (np.load(fh, allow_pickle=False) for _ in range(5))
        return imp, imp_cls, gen, gen_cls, int(n[0])
    impostors, test_d = shard_data(job)  # no saved attempts (a job without saved distances)
    index = {c: i for i, c in enumerate(impostors.classes)}
    order = np.array([index[c] for c in np.asarray(test_d.gallery_classes).tolist()], dtype=np.int64)
    i_rows, i_cols = np.nonzero(test_d.impostor_mask())
    rows, cols = np.nonzero(test_d.genuine_mask())
    return test_d.values[i_rows, i_cols], order[i_cols], test_d.values[rows, cols], order[cols], len(index)


def _gather(item):
    """One shard's impostor distances in the given histogram bins."""
    job, bins = item
    values = _shard_attempts(job)[0]
    return values[np.isin((order_keys(values) >> np.uint64(_BIN_SHIFT)).astype(np.int64), bins)]


def _csr(table):
    from scipy.sparse import csr_matrix

    return table if not isinstance(table, np.ndarray) else csr_matrix(table)


def _finish(item):
    """One shard's impostor attempts at or below each threshold, its AUC counts against every genuine attempt
    (``genuine`` sorted; None: not asked), and per array of unit thresholds its classes' (impostor, genuine) tables
    (rows: its classes in training order)."""
    job, thresholds, genuine, units, sparse = item
    imp, imp_cls, gen, gen_cls, n_cls = _shard_attempts(job)
    tables = []
    for t, thin in zip(units, sparse):
        i_tab, g_tab = UnitBins(t, n_cls), UnitBins(t, n_cls)
        i_tab.add(imp, imp_cls)
        g_tab.add(gen, gen_cls)
        tables.append(tuple(_csr(x.table()) if thin else x.table() for x in (i_tab, g_tab)))
    imp = np.sort(imp)
    counts = np.searchsorted(imp, thresholds, side="right")
    auc = None
    if genuine is not None:  # per impostor attempt: the genuine attempts more alike (smaller) and tied
        before = np.searchsorted(genuine, imp, side="left")
        auc = (int(before.sum()), int((np.searchsorted(genuine, imp, side="right") - before).sum()))
    return counts, auc, tables


class ShardPasses:
    """The Resolver of calibrate.statistics.binned_scores for a sharded run: each question a ``context.map`` over the
    shards' saved distances; ``rows``: per shard, the global position (classes by name) of each of its classes."""

    def __init__(self, context, jobs: list, rows: list[np.ndarray], n_classes: int, genuine: np.ndarray):
        self.context, self.jobs, self.rows, self.n_classes, self.genuine = context, jobs, rows, n_classes, genuine

    def gather(self, bins: np.ndarray) -> np.ndarray:
        got = self.context.map(_gather, [(job, bins) for job in self.jobs],
                               description=f"gathering the evaluation impostors of {bins.size} bins", unit="shards")
        return np.concatenate(got) if got else np.empty(0)

    def finish(self, thresholds: np.ndarray, auc: bool, units: list[np.ndarray]):
        genuine = self.genuine if auc else None
        # sparse where the whole table would be (calibrate.statistics.eer_interval.UnitBins), also each shard's part
        sparse = [self.n_classes * (t.size + 1) > _DENSE for t in units]
        got = self.context.map(_finish, [(job, thresholds, genuine, units, sparse) for job in self.jobs],
                               description="counting the evaluation attempts at the figures' thresholds", unit="shards")
        counts = np.sum([c for c, _, _ in got], axis=0) if got else np.zeros(thresholds.size, np.int64)
        pair = None
        if auc:
            pair = (sum(a[0] for _, a, _ in got), sum(a[1] for _, a, _ in got))
        tables = []
        for u in range(len(units)):
            both = []
            for side in (0, 1):
                table = stacked([t[u][side] for _, _, t in got])
                place = np.empty(self.n_classes, dtype=np.int64)  # the stacked rows in the order of the names
                place[np.concatenate(self.rows)] = np.arange(self.n_classes)
                both.append(table[place])
            tables.append(tuple(both))
        return counts, pair, tables


def sharded_evaluation(recipe, context, jobs: list, parts: list[dict], moments: list[dict], results: dict,
                       n_train: int, transform, kind: str, seed: int, fitters: dict) -> ShardedEvaluation:
    """What the recipe's evaluators receive from a sharded run (its rows ``results``, counted and summed; ``parts``:
    the last pass's returns with their ``eval``, :func:`shard_counts`)."""
    evals = [p["eval"] for p in parts]
    names = np.concatenate([np.asarray(e["classes"], dtype=str) for e in evals])
    order = np.argsort(names, kind="stable")
    sizes = np.cumsum([0] + [len(e["classes"]) for e in evals])
    position = np.empty(names.size, dtype=np.int64)
    position[order] = np.arange(names.size)
    rows = [position[a:b] for a, b in zip(sizes[:-1], sizes[1:])]
    genuine = np.sort(np.concatenate([p["gen_values"] for p in parts])) if parts else np.empty(0)
    hist: dict[int, int] = {}
    for p in parts:
        for b, c in zip(*p["imp_hist"]):
            hist[int(b)] = hist.get(int(b), 0) + int(c)
    bins = np.array(sorted(hist), dtype=np.int64)
    attempts = BinnedScores(genuine, bins, np.array([hist[int(b)] for b in bins], dtype=np.int64),
                            ShardPasses(context, jobs, rows, names.size, genuine), d_prime_of(moments),
                            binned_scores.GATHER_VALUES)

    def by_name(parts_of) -> np.ndarray:
        return np.concatenate(parts_of, axis=-1)[..., order]

    labels = list(results)
    targets = recipe.targets
    per = {label: [e["labels"][label] for e in evals] for label in labels}
    per_class = np.concatenate([e["train_per_class"] for e in evals])
    low = min((e["smallest"] for e in evals), default=math.inf)
    tied = sum(e["tied"] for e in evals if e["smallest"] == low)
    n_cls = max(names.size, 1)
    thresholds = {}
    for label in labels:
        got = [x["thresholds"] for x in per[label]]
        thresholds[label] = None if any(g is None for g in got) else np.concatenate(got, axis=0)[order]

    def one_for_all(label: str) -> list[bool]:  # np.ptp of a class's thresholds is 0 (NaN for inf or NaN ones)
        low_t = np.min([x["low"] for x in per[label]], axis=0)
        high_t = np.max([x["high"] for x in per[label]], axis=0)
        return [bool(np.isfinite(a) and a == b) for a, b in zip(low_t.tolist(), high_t.tolist())]

    def to_distances(scores: np.ndarray) -> np.ndarray:
        return np.asarray(transform._apply(np.asarray(scores, dtype=np.float64), kind), dtype=np.float64)

    def scores(distances) -> list:
        d = np.asarray(distances, dtype=np.float64).ravel()
        out: list = [None] * d.size
        finite = np.flatnonzero(np.isfinite(d))
        if finite.size:
            got = transform.score_thresholds(d[finite], kind)
            if got is not None:
                for i, v in zip(finite.tolist(), np.asarray(got, dtype=np.float64).ravel().tolist()):
                    out[i] = float(v)
        return out

    return ShardedEvaluation(
        targets=tuple(targets), plots=recipe.plots, groups=None, results=results, attempts=attempts, kind=kind,
        scores=scores, to_distances=to_distances, classes=names[order],
        class_attempts=by_name([e["class_attempts"] for e in evals]),
        class_false_accepts={label: by_name([x["fa"] for x in per[label]]) for label in labels},
        class_thresholds=thresholds,
        false_accept_pairs={label: [int(np.unique(np.concatenate([x["pairs"][k] for x in per[label]])).size)
                                    for k in range(len(targets))] for label in labels},
        training_impostors=int(n_train), smallest=(low, tied / max(n_train, 1)),
        median_per_class=float(np.median(per_class)) if per_class.size else 0.0,
        at_floor={label: (np.sum([x["at_floor"] for x in per[label]], axis=0) / n_cls).tolist() for label in labels},
        one_for_all={label: one_for_all(label) for label in labels}, seed=seed,
        sample=sample_fold(context, jobs, parts, fitters, transform, kind, targets) if recipe.plots else None)


def _sample_classes(item):
    """The training side (impostor and genuine distances, groups) of the named classes of one shard."""
    job, names = item
    training = shard_training(job)[0]
    return training.subset(np.array([i for i, c in enumerate(training.impostors.classes) if c in names],
                                    dtype=np.int64))


def sample_fold(context, jobs: list, parts: list[dict], fitters: dict, transform, kind: str, targets, n: int = 4):
    """A fold of ``n`` classes spread over the order of the names (what cdf-fits.png shows): their training side,
    gathered from the shards that hold them, and each estimator's part model fitted to it as the last pass fits a
    shard's (the pooled state its reduction found, the classes' groups: their thresholds are the run's)."""
    from calibrate.contract.base import Fold
    from calibrate.contract.types import DistanceMatrix
    from calibrate.running.sharded_predict import gathered

    where = {c: k for k, p in enumerate(parts) for c in p["eval"]["classes"]}
    names = sorted(where)
    if not names:
        return None
    picks = [names[j] for j in np.unique(np.linspace(0, len(names) - 1, min(n, len(names))).astype(int))]
    asked: dict[int, set] = {}
    for c in picks:
        asked.setdefault(where[c], set()).add(c)
    one = {c: sub.subset(np.array([i])) for sub in context.map(_sample_classes, [(jobs[k], s) for k, s in asked.items()])
           for i, c in enumerate(sub.impostors.classes)}
    impostors, genuine, groups, _ = gathered([one[c] for c in picks])
    training = ShardTraining(impostors, genuine, groups)
    models = {}
    for label, (_, _, fitter) in fitters.items():
        fit = getattr(fitter, "fit_training", None)  # a fit that reads the classes' groups, as in the last pass
        models[label] = fit(training) if fit is not None else fitter.fit_part(impostors)
    got = {c: impostors.values[impostors.offsets[j]:impostors.offsets[j + 1]] for j, c in enumerate(picks)}
    tables = {label: model.thresholds(targets, label=label) for label, model in models.items()}
    rows = max(v.size for v in got.values())
    values = np.full((rows, len(picks)), np.nan)
    valid = np.zeros(values.shape, dtype=bool)
    for j, c in enumerate(picks):
        values[:got[c].size, j], valid[:got[c].size, j] = got[c], True
    train = DistanceMatrix(values, np.full(rows, "", dtype=object), np.array(picks, dtype=object), valid, "distance",
                           source="a sample of the shards' classes")
    return Fold("sample", train, train, models, tables, transform, kind, impostors=impostors)
