"""Demographic groups in a sharded run (calibrate.running.sharded): the figures per group, and calibration group by
group against same-group impostors, as an in-memory run has them.

* Figures (the fpr evaluator's, plugins' costs.py): each shard's last pass counts, per estimator and target, its
  impostor attempts and false accepts by (claimed group, probe group) and its genuine attempts and rejects by group;
  the counts are summed here and handed to calibrate.statistics.verification.group_figures, for the estimator and
  for the one pooled threshold at its FPR (whose false accepts by group come from the pass that finds that threshold,
  calibrate.running.sharded). Each group against one threshold of its own (``own_threshold``) needs the group's
  same-group impostor attempts at one rank: each shard's histogram of their order keys, then only the values in the
  bins holding the ranks wanted (in the same pass). As the sharded run's other figures, these are read on the
  transformed evaluation distances (the in-memory run reads the matcher's own scores; a transform that keeps the order
  gives the same counts).
* Same-group (``impostors: same-group``): pass 0 leaves out the impostor comparisons of a labelled class with probes
  of another group (calibrate.contract.sharded.read_split), and every estimator is fitted once per group
  (:class:`GroupedPartitioned`: each group's own fitter, reduced on a runner restricted to the group's classes), its
  parts a calibrate.saved.grouped.GroupedModel per shard, as calibrate.saved.grouped.fit_by_group fits in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from calibrate.contract.sharded import _BIN_SHIFT, histogram, order_keys
from calibrate.contract.types import UNLABELLED
from calibrate.errors import DataError
from calibrate.saved.grouped import GroupedModel
from calibrate.statistics.verification import GroupCounts, group_figures, own_threshold_at


class GroupedPartitioned:
    """An estimator calibrated group by group against same-group impostors, shard by shard: one fitter per group
    (``make()`` builds each from a fresh estimator), each reduced over its group's classes only; a shard's part is a
    GroupedModel of its classes' groups' parts."""

    def __init__(self, make: Callable, strata: list[tuple[int, str, int]]):
        #: (group code, name, classes, its fitter)
        self.parts = [(code, name, n, make()) for code, name, n in strata]
        self.model_class = self.parts[0][3].model_class
        self.files: tuple = ()

    def reduce(self, runner, targets, label: str) -> None:
        files = []
        for code, name, n, fitter in self.parts:
            sub = runner.restricted(code, name)
            with _in_group(name, n):
                if getattr(fitter, "note", None):
                    sub.note(fitter.note)
                fitter.reduce(sub, targets, f"{label}-group{code}")
            files += list(getattr(fitter, "files", ()))
        self.files = tuple(files)

    def fit_training(self, training) -> GroupedModel:
        parts = []
        for code, name, n, fitter in self.parts:
            if not np.any(training.groups.of_class == code):
                continue
            sub = training.stratum(code)
            with _in_group(name, n):
                fit = getattr(fitter, "fit_training", None)
                parts.append((name, fit(sub) if fit is not None else fitter.fit_part(sub.impostors)))
        return GroupedModel(training.impostors.classes, parts)

    def group_sample_params(self) -> dict[str, dict]:
        """Per group, its fitter's ``sample_params()`` (auto: the structure it chose for the group's classes)."""
        return {name: getattr(fitter, "sample_params", dict)() for _, name, _, fitter in self.parts}

    def fit_part(self, impostors):
        raise DataError("a calibration group by group needs each class's group: fit_training")


class _in_group:
    """A DataError of one group's fit named with the group, as calibrate.saved.grouped.fit_by_group names it."""

    def __init__(self, name: str, classes: int):
        self.name, self.classes = name, classes

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and issubclass(kind, DataError):
            raise DataError(f"group {self.name[:40]!r} ({self.classes} classes, calibrated on its own against "
                            f"same-group impostors): {exc}") from None
        return False


def strata(names: tuple[str, ...], class_groups: np.ndarray) -> list[tuple[int, str, int]]:
    """(code, name, classes) of every labelled group with classes, then the classes without one (calibrate.saved.
    grouped.strata's order)."""
    sizes = np.bincount(class_groups, minlength=len(names) + 1)
    return [(k, name, int(sizes[k])) for k, name in enumerate([*names, UNLABELLED]) if sizes[k]]


# ---- the figures per group -----------------------------------------------------------------------------------

def shard_counts(test_d, groups, probe: np.ndarray, claimed: np.ndarray, accepts: dict) -> dict:
    """One shard's counts by group for the evaluation (``probe``/``claimed``: each row's and column's group code;
    ``accepts``: label -> (probe x class x target) accept decisions): attempts by (claimed, probe) group, genuine
    attempts and enrolled classes by group, per label and target false accepts by pair and rejects by group, each
    genuine attempt's group, and per labelled group the order-key histogram of its same-group impostor attempts."""
    n = groups.labelled + 1
    imp, gen = test_d.impostor_mask(), test_d.genuine_mask()
    rows, cols = np.nonzero(imp)
    pair = claimed[cols] * n + probe[rows]
    g_rows, g_cols = np.nonzero(gen)
    gen_groups = claimed[g_cols]
    out = {"imp": np.bincount(pair, minlength=n * n).reshape(n, n), "gen": np.bincount(gen_groups, minlength=n),
           "classes": np.bincount(claimed, minlength=n), "gen_groups": gen_groups, "labels": {}}
    for label, accept in accepts.items():
        hit = accept[rows, cols, :]                         # (impostor attempts, targets)
        gen_accept = accept[g_rows, g_cols, :]
        out["labels"][label] = {
            "pairs": np.stack([np.bincount(pair[hit[:, k]], minlength=n * n).reshape(n, n)
                               for k in range(hit.shape[1])]),
            "rejects": np.stack([np.bincount(gen_groups[~gen_accept[:, k]], minlength=n)
                                 for k in range(hit.shape[1])])}
    values = test_d.values[rows, cols]
    same = (claimed[cols] == probe[rows]) & (claimed[cols] < groups.labelled)
    out["same_hist"] = [histogram(values[same & (claimed[cols] == g)]) for g in range(groups.labelled)]
    return out


def same_group_values(test_d, probe: np.ndarray, claimed: np.ndarray, labelled: int, bins: dict) -> dict:
    """Per labelled group with ``bins`` wanted, its same-group impostor attempts in those bins of order keys."""
    rows, cols = np.nonzero(test_d.impostor_mask())
    values = test_d.values[rows, cols]
    same = (claimed[cols] == probe[rows]) & (claimed[cols] < labelled)
    out = {}
    for g, wanted in bins.items():
        mine = values[same & (claimed[cols] == g)]
        out[g] = mine[np.isin(order_keys(mine) >> np.uint64(_BIN_SHIFT), wanted)]
    return out


class GroupTotals:
    """The shards' group counts summed (the part of the figures that does not depend on a reference threshold)."""

    def __init__(self, names: tuple[str, ...], parts: list[dict]):
        self.names = names
        self.imp = sum(p["imp"] for p in parts)
        self.gen = sum(p["gen"] for p in parts)
        self.classes = sum(p["classes"] for p in parts)
        self.gen_groups = np.concatenate([p["gen_groups"] for p in parts])
        self.labels = {label: {key: sum(p["labels"][label][key] for p in parts) for key in ("pairs", "rejects")}
                       for label in parts[0]["labels"]}
        #: per labelled group: (bins, counts) of its same-group attempts' order keys, every shard's together
        self.same = []
        for g in range(len(names)):
            bins = np.concatenate([p["same_hist"][g][0] for p in parts])
            counts = np.concatenate([p["same_hist"][g][1] for p in parts])
            uniq, inverse = np.unique(bins, return_inverse=True)
            self.same.append((uniq, np.bincount(inverse, weights=counts, minlength=uniq.size).astype(np.int64)))

    def counts(self, pairs: np.ndarray, rejects: np.ndarray) -> GroupCounts:
        return GroupCounts(self.names, self.imp, pairs, self.gen, rejects, self.classes)

    def own_bins(self) -> dict:
        """Per labelled group, the bins holding every estimator's same-group false accepts as a rank (where its own
        threshold lies), for the pass that gathers their values."""
        self.needed = {}
        for g, (bins, counts) in enumerate(self.same):
            total = int(counts.sum())
            ranks = sorted(r for r in {int(est["pairs"][k][g, g]) for est in self.labels.values()
                                        for k in range(len(est["pairs"]))} if r < total)
            if ranks:
                self.needed[g] = np.unique(bins[np.searchsorted(np.cumsum(counts), np.asarray(ranks) + 1)])
        return self.needed

    def own_at(self, g: int, rank: int, gathered: np.ndarray) -> tuple[float, int]:
        """(group g's own threshold admitting at most ``rank`` of its same-group attempts, how many it admits), from
        the values of the bins :meth:`own_bins` named, sorted (``gathered``)."""
        bins, counts = self.same[g]
        total = int(counts.sum())
        if rank >= total:
            return float("inf"), total
        cumulative = np.cumsum(counts)
        b = int(np.searchsorted(cumulative, rank + 1))
        before = int(cumulative[b] - counts[b])
        needed = self.needed[g]
        start = int(counts[np.searchsorted(bins, needed[needed < bins[b]])].sum())
        value = float(gathered[start + rank - before])
        admitted = before + int(np.searchsorted(gathered[start:start + int(counts[b])], value, side="left"))
        return float(np.nextafter(value, -np.inf)), admitted


def add_group_figures(results: dict, totals: GroupTotals, reference: dict, own_values: dict, gen_values: np.ndarray,
                      gen_accept: dict) -> dict:
    """Every estimator's rows with the figures per group of the fpr evaluator (costs.add_costs): its own
    (``groups``, the max/min ratios, each group against a threshold of its own) and the one pooled threshold's at its
    FPR (``one_threshold.groups``); ``reference``: label -> per target (false accepts by pair, its accepted genuine
    attempts) of that threshold; ``gen_accept``: label -> (targets x genuine attempts) the estimator's decisions."""
    from dataclasses import replace

    out = {}
    for label, rows in results.items():
        new = []
        for k, row in enumerate(rows):
            est = totals.labels[label]
            mine = group_figures(totals.counts(est["pairs"][k], est["rejects"][k]))
            for g, name in enumerate(totals.names):
                same = int(totals.same[g][1].sum())
                if name in mine["groups"] and same:
                    t, admitted = totals.own_at(g, int(est["pairs"][k][g, g]), own_values.get(g, np.zeros(0)))
                    of_group = totals.gen_groups == g
                    mine["groups"][name].update(own_threshold_at(t, admitted, same, int(est["pairs"][k][g, g]),
                                                                 gen_values[of_group], gen_accept[label][k][of_group]))
            extra = dict(row.extra)
            extra.update(mine)
            if k in reference.get(label, {}) and "one_threshold" in extra:
                pairs, accepted = reference[label][k]
                rejects = np.bincount(totals.gen_groups[~accepted], minlength=len(totals.names) + 1)
                extra["one_threshold"] = {**extra["one_threshold"], **group_figures(totals.counts(pairs, rejects))}
            new.append(replace(row, extra=extra))
        out[label] = new
    return out


def groups_summary(source: str, totals: GroupTotals) -> dict:
    """results.json's ``groups`` (the fpr evaluator's groups_summary)."""
    names = list(totals.names)
    counts = {name: int(n) for name, n in zip(names + [UNLABELLED], totals.classes.tolist())}
    if not counts.get(UNLABELLED):
        counts.pop(UNLABELLED, None)
    return {"source": source, "names": names, "classes": counts,
            "impostor_attempts_same_group": {name: int(totals.imp[k, k]) for k, name in enumerate(names)},
            "genuine_attempts": {name: int(totals.gen[k]) for k, name in enumerate(names)}}


# ---- what pass 0 says of the groups -------------------------------------------------------------------------

def check_own_impostors(job, train) -> None:
    """With ``impostors: same-group``, every enrolled class must keep a training impostor comparison (as in memory)."""
    from calibrate.saved.grouped import no_own_impostor

    counts = train.impostor_mask().sum(axis=0)
    if np.any(counts == 0):
        cls = str(train.gallery_classes[int(np.argmax(counts == 0))])
        names = job.groups.names
        code = int(job.groups.codes(np.array([cls]))[0])
        raise no_own_impostor(cls, names[code] if code < len(names) else UNLABELLED, f"{Path(job.shard[0]).name}: ",
                              "remove `impostors: same-group` under `data:`, or give the group more probes")


def groups_survey(job, split, training, left_out: int, kept: int) -> dict:
    """What the run says of the groups from one shard: the groups file's classes it holds (positions in the file's
    sorted list), its enrolled classes without a group (how many, the first names), the groups its enrolled classes
    are in; per group code the training distances' minimum, smallest positive and count; the same-group comparisons
    left out and kept."""
    groups = job.groups
    enrolled, at_enrolled = groups.lookup(split.test.gallery_classes)
    seen = [at_enrolled] + [groups.lookup(m.probe_classes)[1] for m in (split.train, split.test)]
    names = np.asarray(split.test.gallery_classes).astype(str)
    missing = np.sort(names[enrolled == groups.labelled])
    strata = {}
    imp, of = training.impostors, training.groups
    own = np.repeat(of.of_class, imp.counts())
    for code in np.unique(of.of_class).tolist():
        values = imp.values[own == code]
        positive = values[values > 0]
        strata[code] = (float(values.min()) if values.size else np.inf,
                        float(positive.min()) if positive.size else np.inf, int(values.size))
    return {"seen": np.unique(np.concatenate(seen)), "enrolled": int(names.size),
            "enrolled_first": np.sort(names)[:3].tolist(), "missing": int(missing.size),
            "missing_first": missing[:3].tolist(),
            "in_use": np.unique(enrolled[enrolled < groups.labelled]).tolist(), "strata": strata,
            "left_out": left_out, "kept": kept}


def strata_minima(survey: list[dict]) -> dict[int, tuple[float, float, int]]:
    """Per group code, the minimum, smallest positive and count of its classes' training distances over every shard."""
    out: dict[int, tuple[float, float, int]] = {}
    for s in survey:
        for code, (low, positive, n) in s.get("groups", {}).get("strata", {}).items():
            was = out.get(code, (np.inf, np.inf, 0))
            out[code] = (min(was[0], low), min(was[1], positive), was[2] + n)
    return out


def groups_said(context, recipe, groups, survey: list[dict]) -> None:
    """The run's notes on the groups file against the shards' classes (calibrate.recipe.groups.check_against's),
    and with ``impostors: same-group`` what was left out (calibrate.running.pipeline.same_group_folds's)."""
    from calibrate.recipe.groups import groups_notes

    labels, said = recipe.groups, [s["groups"] for s in survey]
    order = sorted(range(len(labels.classes)), key=lambda i: labels.classes[i].encode("utf-8"))
    seen = np.zeros(len(order), dtype=bool)
    for g in said:
        seen[g["seen"]] = True
    unknown = [labels.classes[order[i]] for i in np.flatnonzero(~seen)[:3].tolist()]
    missing = sorted(name for g in said for name in g["missing_first"])[:3]
    enrolled = sorted(name for g in said for name in g["enrolled_first"])[:3]
    in_use = {groups.names[c] for g in said for c in g["in_use"]}
    for note in groups_notes(labels, int(seen.sum()), unknown, int((~seen).sum()), enrolled,
                             sum(g["enrolled"] for g in said), missing, sum(g["missing"] for g in said), in_use):
        context.note(note)
    if recipe.same_group:
        left_out, kept = sum(g["left_out"] for g in said), sum(g["kept"] for g in said)
        unlabelled = sum(g["missing"] for g in said)
        context.note(
            f"calibrated against same-group impostors (`impostors: same-group`, ISO/IEC 19795-10): {left_out:,} "
            f"impostor comparisons of a class with a probe of another group were left out of fitting and "
            f"evaluation ({kept:,} kept), so every FPR in this report is over same-group impostor attempts"
            + (f"; {unlabelled:,} enrolled class(es) without a group are calibrated against all their "
               "impostors" if unlabelled else ""))
