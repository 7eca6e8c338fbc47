"""Partitioned runs: comparison scores that stay in shards, read, fitted and evaluated on the workers
(what plugins provide for it is in calibrate.contract.sharded).

A dataset whose ``load`` returns :class:`ShardedScores` (e.g. ``score-shards``) hands the run a list of
shards and a picklable reader instead of matrices; the pipeline's stages then take the route :class:`Sharded`
(calibrate.running.result.Route: its read, fit, evaluate and write). Nothing proportional to the number of comparisons
reaches the main process; what it holds is per shard (counts, a 20-bit histogram) plus one 64-bit
hash per class (to find a class in two shards) and the pooled lowest values that the fitted models
keep (see below). Every pass is a ``context.map`` over the shards, so it runs on whatever executor
the recipe names (serial, processes, dask). A shard is read and parsed once, in pass 0, which saves its
transformed training impostors and evaluation distances to a scratch file in the staging folder (which the
workers share); the later passes load that file. Tasks keep nothing in a worker's memory between passes,
so a task lost with a worker is simply run again (dask retries it on another worker).

Passes:

0. per shard: read, split (seeds continue across shards), fit the transform on the training
   impostors and report its fitted state (every shard must agree: a transform whose fit depends on
   the data, e.g. similarity-to-distance without ``upper:``, is refused with the fix), check the
   evaluation distances, count, and save the distances for the later passes (about 9 bytes per distance,
   removed before the commit). The estimators' first passes (``PartitionedFitter.first_pass``) run here
   too, on the distances just read: auto's tail selection begins here (its histogram, and each shard's
   lowest standardised scores saved), on the guess that every training distance is positive (a zero
   makes auto's working offset depend on all shards: it then makes its own pass), generic-interp's
   histogram always.
1. per estimator, its reduction (:class:`PartitionedFitter.reduce`): per-class estimators need
   none; pooled quantities come from :func:`lowest_sorted`, an exact two-pass selection of the
   pooled lower tail (per-shard histograms of the values' order-preserving 64-bit keys, cut at the
   bin holding rank k; then only the values at or below the cut are written to scratch files and
   one task sorts them), or :func:`lowest_moments` (auto's tail: one pass that also saves each
   shard's lowest values, then buckets summed without gathering). With their first pass made in
   pass 0, auto reads no shard here and generic-interp one pass (the values up to the cut). The k
   smallest values are bit for bit those of ``np.sort`` of all values.
2. per shard: fit each estimator's part model (its classes, with the pooled state), write the
   shard's ``thresholds-partNNNNN.csv``, ``models-partNNNNN.csv``, ``calibration-partNNNNN.json``
   and ``classes-partNNNNN.json`` into the run's staging folder, and count false accepts, impostor
   attempts and genuine accepts per target; the counts are summed here.

Outputs are committed through :class:`~calibrate.files.commit.StagedOutput` (workers write into its
staging folder, which must be on a file system the workers share with the main process; each
file's size and SHA-256 come back with the counts): a failed run leaves no manifest, hence no
result that looks complete. ``calibration.json`` is then the head of a *partitioned calibration*
(format ``calibrate-partitioned``), which :func:`load_partitioned` (or ``calibrate.load``) opens
lazily: the class index is read on the first lookup, a part's models when one of its classes is
asked for (kept in a small cache).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np

from calibrate.saved.json_format import artifact, dumps_artifact, training_entry
from calibrate.statistics.sanity import training_span
from calibrate.contract.base import Transform, overrides
from calibrate.errors import DataError, RecipeError
from calibrate.running.outputs import models_csv, thresholds_csv
from calibrate.running.report import evaluators_summary, versions, write_reports
from calibrate.contract.sharded import (_BIN_SHIFT, HEAD_FORMAT, HEAD_VERSION, PART, ShardClasses, ShardedScores,
                                       ShardGroups, ShardJob, ShardRunner, fitter_for, order_keys, read_split,
                                       save_shard_data, shard_data, shard_training, training_of, write_staged)
from calibrate.running.sharded_groups import (GroupedPartitioned, GroupTotals, add_group_figures, check_own_impostors,
                                              groups_said, groups_summary, groups_survey, same_group_values,
                                              shard_counts, strata, strata_minima)
from calibrate.statistics.verification import widening_notes
from calibrate.running.result import Route
from calibrate.contract.shard_data import name_hashes
from calibrate.running.sharded_eval import ShardCounts, attempts_file, score_moments, sharded_evaluation
from calibrate.running.sharded_predict import predict_sample, probe_attempts, sample_positions, unit_size
from calibrate.statistics.order import clopper_pearson  # the in-memory evaluation's interval
from calibrate.contract.types import TargetResult


def _survey(item):
    """Pass 0: the shard's counts, class hashes and the transform's state fitted on its training impostors, and what
    the estimators' first passes (PartitionedFitter.first_pass) return for it; with groups, what the run says of
    them (calibrate.recipe.groups.check_against's evidence, the same-group comparisons left out)."""
    job, firsts = item
    split, columns, absent, notes, left_out, kept = read_split(job)
    if job.groups is not None and job.groups.same_group:
        check_own_impostors(job, split.train)
    transform = job.transform.fit(split.train.impostors_only())
    train_d = transform.apply(split.train)
    training = training_of(job, train_d)
    impostors = training.impostors
    if job.cache is not None:  # what the later passes need, so that they do not read and parse the shard again
        test_d = transform.apply(split.test)
        test_d.check_distances(f"evaluation distances ({job.shard[-1]})")
        save_shard_data(job.cache, impostors, test_d, training.genuine, training.groups, training.probes)
    classes = [str(c) for c in impostors.classes]
    hashes = name_hashes(classes)
    d = impostors.values
    positive = d[d > 0]
    first = {label: function(impostors, arg, job.index) for label, function, arg in firsts}
    out = {"columns": columns, "moments": score_moments(split.test), "classes": len(classes), "hashes": hashes,
           "state": transform.fitted_state(), "first": first, "failed": split.missing, "absent": absent,
           "notes": notes, "train": int(d.size), "scores": training_span(split.train),
           "min": float(d.min()) if d.size else np.inf, "min_positive": float(positive.min()) if positive.size else np.inf,
           "per_class": ShardClasses(impostors.counts(), training.genuine.counts(),
                                     None if training.groups is None else training.groups.of_class)}
    if job.groups is not None:
        out["groups"] = groups_survey(job, split, training, left_out, kept)
    return out


def _finish_shard(item):
    """The last pass: fit each estimator's part, write the part files, count for the evaluation."""
    job, plan, sampled = item
    training, test_d = shard_training(job, evaluation=True)
    impostors = training.impostors
    part = PART.format(job.index)
    folder = Path(plan["staging"])
    tables, rows, states, counts = [], [], {}, {}
    imp, gen = test_d.impostor_mask(), test_d.genuine_mask()
    gen_rows, gen_cols = np.nonzero(gen)
    index = {c: i for i, c in enumerate(impostors.classes)}
    order = np.array([index[c] for c in test_d.gallery_classes.tolist()], dtype=np.int64)
    targets = np.asarray(plan["targets"])
    n_imp = imp.sum(axis=0)
    scored = n_imp > 0
    accepts = {}
    evaluation = ShardCounts(impostors, test_d, order) if plan["evaluate"] else None
    for label, (plugin, params, fitter) in plan["estimators"].items():
        fit = getattr(fitter, "fit_training", None)  # optional: a fit that reads the classes' groups too
        model = fit(training) if fit is not None else fitter.fit_part(impostors)
        table = model.thresholds(plan["targets"], label=label)
        tables.append(table)
        rows += [{"estimator": label, **row} for row in model.parameters()]
        states[label] = (plugin, params, model.to_state())
        tau = table.values[order]                                    # (classes, targets), test column order
        accept = test_d.values[:, :, None] <= tau[None, :, :]
        fa = (accept & imp[:, :, None]).sum(axis=0)                  # (classes, targets)
        rate = fa[scored] / n_imp[scored][:, None]
        counts[label] = {"fa": fa.sum(axis=0), "imp": np.full(targets.size, int(n_imp.sum())),
                         "ga": (accept & gen[:, :, None]).sum(axis=(0, 1)), "gen": np.full(targets.size, int(gen.sum())),
                         "scored": int(scored.sum()), "over2": (rate > 2 * targets).sum(axis=0),
                         "over10": (rate > 10 * targets).sum(axis=0),
                         "gen_accept": accept[gen_rows, gen_cols, :].T}  # (targets, genuine attempts)
        if job.groups is not None:
            accepts[label] = accept
        if evaluation is not None:
            evaluation.add(label, table, fa, job.transform, plan["kind"], plan["plots"])
    files = [write_staged(folder, f"thresholds-{part}.csv", thresholds_csv(tables, job.transform, plan["kind"])),
             write_staged(folder, f"classes-{part}.json", json.dumps(list(impostors.classes)))]
    if rows:
        files.append(write_staged(folder, f"models-{part}.csv", models_csv(rows)))
    if plan["save_calibration"]:
        doc = artifact(kind=plan["kind"], transform_plugin=plan["transform_plugin"],
                       transform_params=plan["transform_params"], transform_state=job.transform.fitted_state(),
                       targets=plan["targets"], fingerprint="", versions={}, estimators=states)
        files.append(write_staged(folder, f"calibration-{part}.json", dumps_artifact(doc)))
    bins, per_bin = np.unique(order_keys(test_d.values[imp]) >> np.uint64(_BIN_SHIFT), return_counts=True)
    if evaluation is not None:
        evaluation.save(attempts_file(job))
    out = {"counts": counts, "files": files, "train": int(impostors.values.size),
           "gen_values": test_d.values[gen_rows, gen_cols], "imp_hist": (bins.astype(np.int64), per_bin),
           "eval": None if evaluation is None else evaluation.result()}
    if job.groups is not None:
        out["groups"] = shard_counts(test_d, job.groups, job.groups.codes(test_d.probe_classes),
                                     job.groups.codes(test_d.gallery_classes), accepts)
    if plan["predict"]:  # the predicted intervals' sample (calibrate.running.sharded_predict)
        out["probe_attempts"] = probe_attempts(test_d)
        if sampled is not None:
            out["sample"] = training.subset(sampled)
    return out


# ---- one pooled threshold at each estimator's achieved FPR, over every shard's evaluation impostors -----------

def _evaluation_below(item):
    """Pass 3: a shard's evaluation impostor distances whose order-key bin is at most ``cut``, to a scratch file (with
    groups, each one's (claimed group, probe group) pair code after them); and with ``own`` (group code -> bins), each
    such group's same-group attempts in those bins (calibrate.running.sharded_groups)."""
    job, cut, prefix, own = item
    test_d = shard_data(job)[1]
    imp = test_d.impostor_mask()
    values = test_d.values[imp]
    below = ((order_keys(values) >> np.uint64(_BIN_SHIFT)) <= np.uint64(cut) if cut is not None
             else np.zeros(values.size, dtype=bool))
    path = f"{prefix}-{job.index:05d}.npy"
    found = {}
    with open(path, "wb") as fh:
        np.save(fh, values[below])
        if job.groups is not None:
            probe, claimed = job.groups.codes(test_d.probe_classes), job.groups.codes(test_d.gallery_classes)
            rows, cols = np.nonzero(imp)
            np.save(fh, (claimed[cols] * (job.groups.labelled + 1) + probe[rows])[below])
            if own:
                found = same_group_values(test_d, probe, claimed, job.groups.labelled, own)
    return path, int(np.count_nonzero(below)), found


def _ranked(arg):
    """The pooled values at 0-based ``ranks`` (each a distance, or inf past the end) and how many values lie strictly
    below each: one task reading what pass 3 wrote; with ``pairs`` (the number of group codes), per rank the values
    strictly below it counted by (claimed group, probe group)."""
    paths, ranks, below, pairs = arg
    parts = []
    for p in paths:
        with open(p, "rb") as fh:
            parts.append((np.load(fh), np.load(fh) if pairs else None))
    values = np.concatenate([v for v, _ in parts]) if parts else np.empty(0)
    order = np.argsort(values, kind="stable")
    values = values[order]
    at = [float(values[r - below]) if r - below < values.size else float("inf") for r in ranks]
    admitted = [below + int(np.searchsorted(values, v, side="left")) if np.isfinite(v) else None for v in at]
    by_pair = None
    if pairs:
        codes = np.concatenate([c for _, c in parts])[order] if parts else np.zeros(0, np.int64)
        by_pair = [np.bincount(codes[:int(np.searchsorted(values, v, side="left"))], minlength=pairs * pairs)
                   .reshape(pairs, pairs) for v in at]
    return at, admitted, by_pair


def _one_threshold_references(context, jobs: list, parts: list[dict], results: dict, scratch: Path, transform,
                              kind: str, totals: GroupTotals | None = None) -> dict:
    """Each estimator's rows with ``fnr_one_threshold``, ``fnr_paired`` and ``one_threshold`` (as an in-memory run
    has them, calibrate.statistics.verification): the loosest single threshold admitting no more of the pooled evaluation
    impostors than the estimator did, found exactly from per-shard histograms of their order keys and one pass that
    gathers the values up to the bin of the largest rank needed; the genuine attempts' decisions come back with the
    counts of the last pass. With groups (``totals``), the figures per group of both (calibrate.running.sharded_groups),
    each group's own threshold found in the same pass."""
    from calibrate.statistics.verification import OneThreshold, paired_fields, paired_fnr

    hist = {}
    for p in parts:
        for b, c in zip(*p["imp_hist"]):
            hist[int(b)] = hist.get(int(b), 0) + int(c)
    n_total = sum(hist.values())
    gen_values = np.concatenate([p["gen_values"] for p in parts])
    gen_accept = {label: [np.concatenate([p["counts"][label]["gen_accept"][k] for p in parts]) for k in range(len(rows))]
                  for label, rows in results.items()}
    ranks = sorted({r.false_accepts for rows in results.values() for r in rows if r.false_accepts < n_total})
    own = {} if totals is None else totals.own_bins()
    pairs = 0 if totals is None else len(totals.names) + 1
    found, own_values, by_pair = {}, {}, {}
    if ranks or own:
        cut = None
        if ranks:
            bins = np.array(sorted(hist), dtype=np.int64)
            cumulative = np.cumsum([hist[int(b)] for b in bins])
            cut = int(bins[np.searchsorted(cumulative, ranks[-1] + 1)])  # the bin holding the largest rank needed
        prefix = str(scratch / f".one-threshold-{uuid.uuid4().hex[:8]}")
        written = context.map(_evaluation_below, [(job, cut, prefix, own) for job in jobs])
        try:
            own_values = {g: np.sort(np.concatenate([w[2].get(g, np.zeros(0)) for w in written])) for g in own}
            if cut is not None:
                at, admitted, counted = context.map(_ranked, [([p for p, n, _ in written if n], ranks, 0, pairs)])[0]
                found = dict(zip(ranks, zip(at, admitted)))
                by_pair = dict(zip(ranks, counted or [None] * len(ranks)))
        finally:
            for path, _, _ in written:
                Path(path).unlink(missing_ok=True)
    if not n_total:
        return results if totals is None else add_group_figures(results, totals, {}, own_values, gen_values, gen_accept)
    out, reference = {}, {}
    for label, rows in results.items():
        new = []
        for k, row in enumerate(rows):
            v, admitted = found.get(row.false_accepts, (float("inf"), n_total))
            t = float(np.nextafter(v, -np.inf)) if np.isfinite(v) else float("inf")
            ref_accept = gen_values <= t
            est_accept = gen_accept[label][k]
            ref = OneThreshold(t, int(admitted), n_total, int(ref_accept.sum()), int(gen_values.size))
            score = None
            if np.isfinite(t):
                scores = transform.score_thresholds(np.array([t]), kind)
                score = None if scores is None else float(scores[0])
            extra = dict(row.extra)
            if gen_values.size:  # as in memory: no paired comparison without genuine attempts
                extra["fnr_paired"] = paired_fields(paired_fnr(est_accept, ref_accept), row.false_accepts, ref)
            extra["one_threshold"] = {"score_threshold": score, "false_accepts": ref.false_accepts, "fpr": ref.fpr,
                                      "fnr": ref.fnr}
            new.append(replace(row, extra=extra, fnr_one_threshold=ref.fnr))
            if totals is not None:
                counted = by_pair.get(row.false_accepts) if np.isfinite(v) else totals.imp
                reference.setdefault(label, {})[k] = (counted, ref_accept)
        out[label] = new
    return out if totals is None else add_group_figures(out, totals, reference, own_values, gen_values, gen_accept)


def _sum_counts(parts: list[dict], labels: list[str], targets: tuple[float, ...], n_train: int) -> dict[str, list[TargetResult]]:
    nan = float("nan")
    results = {}
    for label in labels:
        total = {key: sum(np.asarray(p["counts"][label][key]) for p in parts) for key in ("fa", "imp", "ga", "gen",
                                                                                        "over2", "over10")}
        scored = sum(p["counts"][label]["scored"] for p in parts)
        rows = []
        for k, target in enumerate(targets):
            n_fa, n_imp = int(total["fa"][k]), int(total["imp"][k])
            ga, gen = int(total["ga"][k]), int(total["gen"][k])
            fpr = n_fa / n_imp if n_imp else nan
            low, high = clopper_pearson(n_fa, n_imp)
            extra = {"fpr_ci_low": low, "fpr_ci_high": high, "ratio_ci_low": low / target, "ratio_ci_high": high / target,
                     "genuine_attempts": gen,
                     "share_classes_over_2x": int(total["over2"][k]) / scored if scored else nan,
                     "share_classes_over_10x": int(total["over10"][k]) / scored if scored else nan,
                     "training_support": target * n_train}
            rows.append(TargetResult(target, fpr, fpr / target, n_fa, n_imp, (1 - ga / gen) if gen else None, extra))
        results[label] = rows
    return results


class Sharded(Route):
    """The route of scores that stay in shards (the dataset returned :class:`ShardedScores`): every pass is a
    ``context.map`` over the shards, so the shards are read, and the models fitted, written and counted, on the
    workers; the main process sums per-shard summaries and writes the run's own files."""

    def __enter__(self) -> "Sharded":
        # scratch files in the staging folder, removed before the commit and on leaving (whatever happened): each
        # shard's distances, which pass 0 saves for the later passes ({cache}-<shard's index>.npy), and what the
        # estimators' first passes write ({first}-<estimator's position>...)
        self.cache = str(self.staged.dir / f".shard-{uuid.uuid4().hex[:8]}")
        self.first = str(self.staged.dir / f".first-{uuid.uuid4().hex[:8]}")
        self.groups: ShardGroups | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        _remove_cache(self.cache, len(self.data.shards))
        _remove_scratch(self.staged.dir, Path(self.first).name)
        if self.groups is not None:
            Path(self.groups.path).unlink(missing_ok=True)

    def read(self) -> str:
        """What a sharded run cannot do refused (patterns, a transform without fitted_state, `confidence:`), what it
        leaves out said, and the recipe's transform found (spec, unfitted instance). The shards are read in pass 0."""
        recipe, data, context = self.recipe, self.data, self.context
        if recipe.distance is not None:
            raise RecipeError("sharded scores are comparisons, not patterns; remove `distance:`", source=recipe.source,
                              where="distance")
        self.spec = recipe.transform_for(data.kind)
        self.base = self.spec.build()
        if overrides(self.base, Transform, "_fit") and not overrides(self.base, Transform, "fitted_state"):
            raise RecipeError(f"transform {self.spec.info.name!r} is fitted to the data but cannot hand its fitted "
                              "state to the workers (no fitted_state); sharded runs need a transform that can",
                              source=recipe.source, where="transform")
        confident = [e.label for e in recipe.estimators if e.confidence is not None]
        if confident:
            raise RecipeError(f"estimator {confident[0]!r}: `confidence:` sets every class's threshold from simulated "
                              "copies of the whole gallery, which a sharded run predicts from a sample of its classes "
                              "only; remove `confidence:` or run the scores in one piece", source=recipe.source,
                              where="estimators")
        if recipe.same_group and recipe.groups is None:
            raise RecipeError("`impostors: same-group` needs the classes' demographic groups: add `groups: FILE` under "
                              "`data:` (a CSV with a header `class,group`)", source=recipe.source,
                              where="data.impostors")
        if recipe.groups is not None:  # read by the workers from a scratch file (no task carries every name)
            self.groups = ShardGroups.write(recipe.groups, self.staged.dir / f".groups-{uuid.uuid4().hex[:8]}.npy",
                                            recipe.same_group)
        context.note("a sharded run judges each threshold against one pooled threshold at the same FPR "
                     "(fnr_one_threshold, fnr_paired) on the transformed evaluation distances; what else it leaves out "
                     "is listed at the top of report.md (results.json: partitions.left_out). Run a sample of the "
                     "classes in one piece for those")
        return data.kind

    def fit(self) -> None:
        """Pass 0 (each shard read, its transform fitted, the estimators' first passes), each estimator's pooled
        reduction, and the last pass: each shard's part models fitted, written and counted."""
        recipe, context, times, staged = self.recipe, self.context, self.times, self.staged
        built = {est.label: (est, fitter_for(est.build(), est.label)) for est in recipe.estimators}
        firsts = []  # the estimators' first passes run in pass 0, which reads every shard anyway
        for i, (label, (_, fitter)) in enumerate(built.items()):
            plan = None if recipe.same_group else getattr(fitter, "first_pass", None)
            got = plan(len(self.data.shards), f"{self.first}-{i}", recipe.targets) if plan is not None else None
            if got is not None:
                firsts.append((label, *got))
        runner = self._pass0(tuple(firsts))
        if recipe.same_group:  # each estimator once per group (calibrate.running.sharded_groups)
            present = strata(self.groups.names, np.concatenate([c.groups for c in runner.classes]))
            built = {label: (est, GroupedPartitioned(lambda est=est: fitter_for(est.build(), est.label), present))
                     for label, (est, _) in built.items()}
        self.fitters = {}
        for label, (est_spec, fitter) in built.items():
            with times(f"fit {label} (pooled)"):
                if getattr(fitter, "note", None):
                    context.note(fitter.note)
                fitter.reduce(runner, recipe.targets, label)
                runner.first.pop(label, None)
                self.fitters[label] = (est_spec.info.name, est_spec.params, fitter)
        _remove_scratch(staged.dir, Path(self.first).name)
        predict = recipe.prediction.enabled
        plan = {"staging": str(staged.dir), "estimators": self.fitters, "targets": recipe.targets,
                "kind": self.data.kind, "transform_plugin": self.spec.info.name, "transform_params": self.spec.params,
                "save_calibration": recipe.save_calibration, "predict": predict,
                "evaluate": bool(recipe.evaluators), "plots": recipe.plots}
        sampled = sample_positions([s["classes"] for s in self.survey], recipe.seed) if predict else {}
        with times("fit, write and evaluate per shard"):
            self.parts = context.map(_finish_shard, [(job, plan, sampled.get(job.index)) for job in self.jobs],
                                     description=f"fitting and evaluating {len(self.jobs)} shards", unit="shards")
        self.predictions, self.unit_size = {}, None
        if predict:
            self.unit_size = unit_size([p.pop("probe_attempts") for p in self.parts])
            sample = [p.pop("sample") for p in self.parts if "sample" in p]
            try:
                self.predictions = predict_sample(recipe, self.fitters, sample, self.n_classes, context, times)
            except DataError as exc:  # the thresholds stand without it, as in memory
                context.note(f"no predicted FPR intervals: {exc}")

    def _pass0(self, firsts: tuple) -> ShardRunner:
        """The survey of the shards (pass 0), its transform states agreed and its notes said; the later passes' jobs,
        and the runner of the reductions (with the first passes' results)."""
        data, context = self.data, self.context
        with self.times("survey shards"):
            self.survey, offsets = _survey_shards(data, self.base, context, self.cache, firsts, self.groups,
                                                  self.recipe.prediction.enabled)
        survey = self.survey
        states = _one_transform_state(self.spec, data, survey)
        self.transform = self.spec.build().set_fitted_state(states) if states else self.base
        # the later passes read the shard's distances that pass 0 saved: the transform there had the same parameters
        # and (checked above) the same fitted state, so its distances are these
        self.jobs = [ShardJob(data.dataset, shard, int(off), i, self.transform, _cache_file(self.cache, i), self.groups,
                              self.recipe.prediction.enabled)
                     for i, (shard, off) in enumerate(zip(data.shards, offsets))]
        failed = sum(s["failed"] for s in survey)
        if failed:
            context.note(f"failed comparisons (the dataset's `missing:` marker) were excluded from fitting and "
                         f"evaluation: {failed} in {sum(1 for s in survey if s['failed'])} shard(s)")
        for s in survey:
            for note in s["notes"]:
                context.note(note)
        self.n_classes = sum(s["classes"] for s in survey)
        self.n_train = sum(s["train"] for s in survey)
        if self.groups is not None:
            groups_said(context, self.recipe, self.groups, survey)
        runner = ShardRunner(context, self.jobs, self.staged.dir, min(s["min"] for s in survey),
                             min(s["min_positive"] for s in survey), self.n_train,
                             {label: [s["first"].get(label) for s in survey] for label, _, _ in firsts},
                             [s.pop("per_class") for s in survey], () if self.groups is None else self.groups.names,
                             strata_minima(survey))
        for s in survey:
            del s["first"]
        return runner

    def evaluate(self) -> dict[str, list[TargetResult]]:
        """The shards' counts summed, each estimator's one pooled threshold at its achieved FPR (with groups the
        figures per group of both, and the warning of an estimator that widens a differential between groups), then
        the recipe's evaluators on what the shards counted (Evaluator.evaluate_sharded: rows given replace these)."""
        results = _sum_counts(self.parts, list(self.fitters), self.recipe.targets, self.n_train)
        self.totals = None if self.groups is None else GroupTotals(self.groups.names, [p["groups"] for p in self.parts])
        with self.times("one pooled threshold at each achieved FPR"):
            results = _one_threshold_references(self.context, self.jobs, self.parts, results, self.staged.dir,
                                                self.transform, self.data.kind, self.totals)
        for note in widening_notes(results):
            self.context.note(note)
        self.evaluated = []
        if not self.recipe.evaluators:
            return results
        data = sharded_evaluation(self.recipe, self.context, self.jobs, self.parts,
                                  [s["moments"] for s in self.survey], results, self.n_train, self.transform,
                                  self.data.kind, self.context.seed, self.fitters)
        data = replace(data, predictions=self.predictions, unit_size=self.unit_size)
        for spec in self.recipe.evaluators:
            with self.times(f"evaluate {spec.label}"):
                res = spec.build().evaluate_sharded(data, self.context)
            if res is not None:
                self.evaluated.append(res)
                results.update(res.estimators)
        return results

    def write(self, results: dict[str, list[TargetResult]]) -> None:
        """The parts the workers wrote adopted, the head (calibration.json), report.md and results.json committed."""
        recipe, staged, n_jobs = self.recipe, self.staged, len(self.jobs)
        _remove_cache(self.cache, n_jobs)  # before the commit, which must find only the run's files
        if self.groups is not None:
            Path(self.groups.path).unlink(missing_ok=True)
        for p in self.parts:
            for name, size, sha in p["files"]:
                staged.adopt(name, size, sha)
        with self.times("write outputs"):
            for label, (_, _, fitter) in self.fitters.items():
                for name, size, sha in getattr(fitter, "files", ()):  # optional (PartitionedFitter.files)
                    staged.adopt(name, size, sha)
            if recipe.save_calibration:
                ranges = [s["scores"] for s in self.survey if s["scores"] is not None]
                scores = ((min(r[0] for r in ranges), max(r[1] for r in ranges), any(r[2] for r in ranges))
                          if ranges else None)
                staged.write_text("calibration.json", _head(recipe, self.data, self.spec, self.transform,
                                                            self.fitters, self.n_classes, n_jobs, self.n_train, scores))
            for res in self.evaluated:
                for name, content in res.files.items():
                    staged.write_bytes(name, content)
        summary = evaluators_summary(self.evaluated)
        if self.totals is not None:
            summary["groups"] = groups_summary(recipe.groups.source, self.totals)
        write_reports(staged, recipe, results, list(self.context.notes), self.times, estimators=len(self.fitters),
                      classes=self.n_classes, shards={"shards": n_jobs, "classes": self.n_classes,
                                                      "training_impostors": self.n_train},
                      sections=[s for res in self.evaluated for s in res.sections], summary=summary)
        staged.commit()


def _remove_cache(cache: str, shards: int) -> None:
    for i in range(shards):
        Path(_cache_file(cache, i)).unlink(missing_ok=True)
        Path(f"{_cache_file(cache, i)}.eval").unlink(missing_ok=True)  # sharded_eval.attempts_file


def _cache_file(cache: str, index: int) -> str:
    """Shard ``index``'s scratch file of distances (calibrate.contract.sharded.save_shard_data)."""
    return f"{cache}-{index:05d}.npy"


def _remove_scratch(folder: Path, prefix: str) -> None:
    for path in folder.glob(f"{prefix}*"):
        path.unlink(missing_ok=True)


def _survey_shards(data: ShardedScores, base: Transform, context, cache: str | None = None,
                   firsts: tuple = (), groups: ShardGroups | None = None, units: bool = False
                   ) -> tuple[list[dict], np.ndarray]:
    """Each shard's survey (transform state, class hashes, counts, notes) and its column offset; with ``cache``,
    each shard's distances are saved to ``{cache}-{index:05d}.npy`` for the later passes; ``firsts``: the
    estimators' first passes, (label, function, arg) each, whose results are each survey's ``first``."""
    jobs0 = [ShardJob(data.dataset, shard, 0, i, base) for i, shard in enumerate(data.shards)]
    # the split's seeds continue across shards: the first pass needs each shard's column offset, which needs
    # the class counts of the shards before it; a shard's count does not depend on its offset
    if data.dataset.offsets_matter:
        counts = context.map(_count_columns, jobs0, description=f"counting the classes of {len(jobs0)} shards",
                             unit="shards")
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    else:
        offsets = np.zeros(len(jobs0), dtype=int)
    jobs0 = [ShardJob(data.dataset, shard, int(off), i, base, None if cache is None else _cache_file(cache, i), groups,
                      units)
             for i, (shard, off) in enumerate(zip(data.shards, offsets))]
    return context.map(_survey, [(job, firsts) for job in jobs0], description="reading the shards",
                       unit="shards"), offsets


def _one_transform_state(spec, data: ShardedScores, survey: list[dict]) -> dict:
    """The transform's fitted state, the same on every shard, after checking that no class is in two shards."""
    states = [s["state"] for s in survey]
    first = json.dumps(states[0], sort_keys=True, default=str)
    for i, state in enumerate(states):
        if json.dumps(state, sort_keys=True, default=str) != first:
            raise DataError(f"transform {spec.info.name!r} fitted to shard {data.shards[i][0]} gives {state}, but to "
                            f"{data.shards[0][0]} {states[0]}: its fit depends on the data, which a sharded run cannot "
                            "pool; give its parameters in the recipe (e.g. `transform: {plugin: similarity-to-distance, "
                            "upper: 1.0}`) or use distances (`kind: distance`)")
    hashes = np.concatenate([s["hashes"] for s in survey])
    uniq, seen = np.unique(hashes, return_counts=True)
    if (seen > 1).any():
        dup = uniq[seen > 1][0]
        where = [data.shards[i][0] for i, s in enumerate(survey) if dup in s["hashes"]]
        raise DataError(f"a claimed class appears in more than one shard ({', '.join(where[:2])}); shards partition the "
                        "enrolled classes: keep all comparisons of a class in one shard")
    return states[0]


def _head(recipe, data: ShardedScores, spec, transform: Transform, fitters: dict, n_classes: int, parts: int,
          n_train: int, scores: tuple[float, float] | None = None) -> str:
    """The partitioned calibration's head (calibration.json), naming the parts the shards wrote; ``scores``: the
    lowest and highest training score over every shard."""
    training = {"impostors": int(n_train), **training_entry(scores)}
    head = {"format": HEAD_FORMAT, "version": HEAD_VERSION, "kind": data.kind, "classes": n_classes,
            "targets": list(recipe.targets), "parts": parts, "training": training,
            "estimators": {label: {"plugin": plugin, "params": json.loads(json.dumps(params, default=str))}
                           for label, (plugin, params, _) in fitters.items()},
            "transform": {"plugin": spec.info.name, "params": json.loads(json.dumps(spec.params, default=str)),
                          "state": transform.fitted_state()},
            "versions": versions(recipe)}
    return json.dumps(head, indent=1) + "\n"


def _count_columns(job: ShardJob) -> int:
    return int(job.dataset.shard_columns(job.shard))
