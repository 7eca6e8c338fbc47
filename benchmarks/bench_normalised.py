"""What the normaliser stage and normalised decisions cost at scale (issue 32), measured in one sitting.

    .venv/bin/python benchmarks/bench_normalised.py [--classes 500] [--probes 2000] [--models 200] [--seed 0]
                                                    [--rounds 1] [--lfw-scale 1] [--skip-lfw] [--skip-lists]
                                                    [--baseline DIR]
                                                    [--baseline-attempts 100000]

Generates (seeded) a pair of bob 4-column score lists, ``scores-dev`` and ``scores-eval``: ``--classes``
enrolled classes x ``--probes`` probes each (500 x 2,000: 1M lines per list; 90% of the probes belong to an
enrolled class, the rest to nobody), similarity scores with a per-class and a per-probe offset (what a
normaliser removes), 6 decimals, 0.1% failed comparisons (-1); and bob's cohort files as
examples/bob-scores/make_scores.py writes them, bigger: ``cohort-znorm`` (every class's model against 2
probes of each of ``--models`` cohort people) and ``cohort-tnorm`` (every cohort model against every probe
of both lists). Then measures, each command in its own process (wall clock, CPU seconds, peak RSS read by
/usr/bin/time -v):

(a) ``calibrate run`` of the recipe with ``normalizer: {plugin: snorm}`` against the same recipe without the
    normaliser and without cohort files (the defaults otherwise: estimator auto, predicted intervals, the fpr
    evaluator's pictures): the ratio, issue 32 asks for <= 2. The same on a score matrix of the size of the
    unseen real face matcher's (5,701 probes x 1,680 classes, benchmarks/bench_whole_run.py's generator;
    ``--lfw-scale k`` multiplies the probes by k) for snorm and asnorm.
(b) ``calibrate accept RUN scores-eval --fpr 0.01 --out d.csv --cohort cohort-tnorm`` on the 1M evaluation
    attempts: peak RSS (asked: < 1 GB) and attempts per second from spawn to exit (asked: >= 200k/s).
(c) ``Calibration.accept(claimed, scores, 0.01, probe_cohort_scores=...)`` in a process of its own, the
    calibration and the cohort rows in memory: decisions per second, for the lists' run (cohort of
    ``--models``) and for the score matrix's (its gallery, 1,680 members, as the cohort; every comparison of
    the matrix decided). Each probe's row is given once (calibrate.ProbeCohorts).

``--baseline DIR``: another version's source tree (e.g. ``git archive BRANCH_POINT | tar -x -C DIR``), run
through PYTHONPATH in the same rounds. A version without calibrate.ProbeCohorts gets one cohort row per
attempt (its only form), on the first ``--baseline-attempts`` attempts (its accept on all 1M was killed at
23 GB), and its figures are per attempt, so that they compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CALIBRATE = Path(sys.executable).with_name("calibrate")
sys.path.insert(0, str(HERE))


# ---- data -------------------------------------------------------------------------------------------

def write_lists(folder: Path, classes: int, probes: int, models: int, seed: int) -> dict[str, Path]:
    """The two score lists and the two cohort files (see the module); returns their paths."""
    rng = np.random.default_rng(seed)
    names = np.array([f"c{j:04d}" for j in range(classes)])
    class_shift = rng.normal(0.0, 0.05, classes)
    cohort = np.array([f"t{k:04d}" for k in range(models)])
    out = {}
    probe_sets = {}
    for group in ("dev", "eval"):
        known = int(round(0.9 * probes))
        real = np.concatenate([names[np.arange(known) % classes], [f"u{k:05d}" for k in range(probes - known)]])
        label = np.array([f"{r}/{group}_{i:05d}" for i, r in enumerate(real)])
        probe_shift = rng.normal(0.0, 0.04, probes)
        probe_sets[group] = (real, label, probe_shift)
        scores = np.clip(rng.beta(2.0, 5.0, (probes, classes)) + class_shift[None, :] + probe_shift[:, None], 0, 1)
        genuine = real[:, None] == names[None, :]
        scores = np.where(genuine, rng.beta(6.0, 2.0, genuine.shape), scores)
        text = np.char.mod("%.6f", scores)
        text[rng.random(scores.shape) < 0.001] = "-1"
        out[f"scores-{group}"] = _write(folder / f"scores-{group}", np.broadcast_to(names[None, :], scores.shape),
                                        np.broadcast_to(real[:, None], scores.shape),
                                        np.broadcast_to(label[:, None], scores.shape), text)
    z_real = np.repeat(cohort, 2)
    z_label = np.array([f"{c}/z_{n}" for c in cohort for n in range(2)])
    z = np.clip(rng.beta(2.0, 5.0, (classes, z_label.size)) + class_shift[:, None], 0, 1)
    out["cohort-znorm"] = _write(folder / "cohort-znorm", np.broadcast_to(names[:, None], z.shape),
                                 np.broadcast_to(z_real[None, :], z.shape), np.broadcast_to(z_label[None, :], z.shape),
                                 np.char.mod("%.6f", z))
    parts = []
    for group in ("dev", "eval"):
        real, label, probe_shift = probe_sets[group]
        t = np.clip(rng.beta(2.0, 5.0, (probes, models)) + probe_shift[:, None], 0, 1)
        parts.append((np.broadcast_to(cohort[None, :], t.shape), np.broadcast_to(real[:, None], t.shape),
                      np.broadcast_to(label[:, None], t.shape), np.char.mod("%.6f", t)))
    out["cohort-tnorm"] = _write(folder / "cohort-tnorm", *(np.concatenate([p[k] for p in parts]) for k in range(4)))
    return out


def _write(path: Path, claimed, real, label, text) -> Path:
    with path.open("w", encoding="ascii") as f:
        for row in range(claimed.shape[0]):
            f.write("".join(f"{c} {r} {p} {s}\n" for c, r, p, s in zip(claimed[row], real[row], label[row], text[row])))
    return path


# ---- measuring one command ------------------------------------------------------------------------------

def measured(command: list[str], source: Path | None, cwd: Path | None = None) -> dict:
    """Wall seconds, CPU seconds and peak RSS (MB) of ``command`` (a calibrate command line, run by this
    install or by the source tree ``source``), through /usr/bin/time -v."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    head = [str(CALIBRATE)]
    if source is not None:
        head = [sys.executable, "-P", "-c", "from calibrate.cli import main; main()"]
        env["PYTHONPATH"] = os.pathsep.join([str(source), str(source / "plugins")])
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v"] + head + command, capture_output=True, text=True, env=env,
                          cwd=cwd or source)
    wall = time.perf_counter() - t0
    report = done.stderr
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:2])} failed ({done.returncode}):\n{report[-3000:]}")

    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([0-9.]+)", report).group(1))

    return {"wall": wall, "cpu": field("User time (seconds)") + field("System time (seconds)"),
            "rss_mb": field("Maximum resident set size (kbytes)") / 1024}


def python_in(source: Path | None, code: str, *args: str) -> dict:
    """Run ``code`` (prints one JSON line last) with this install or the source tree ``source``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), str(source / "plugins")])
    done = subprocess.run([sys.executable, "-P", "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=source or HERE)
    if done.returncode != 0:
        raise SystemExit(f"API timing failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# the API's decisions per second: a calibration in memory, each probe's cohort row once (or, for a version
# without calibrate.ProbeCohorts, one row per attempt for the first `limit` attempts)
API_LISTS = r'''
import json, sys, time, warnings
import numpy as np
import calibrate
from calibrate.scorefiles import read_comparisons  # the former name: a baseline tree may predate issue 33's
out, scores_path, tnorm_path, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
warnings.simplefilter("ignore")
cal = calibrate.load(out, "auto")
att = read_comparisons(scores_path, missing=-1.0)
keep = att.scores != -1.0
claimed = np.asarray(att.claimed_labels, dtype=object)[att.claimed[keep]].astype(str)
real = np.asarray(att.real_labels, dtype=object)[att.real[keep]].astype(str)
probe = np.asarray(att.probe_labels, dtype=object)[att.probe[keep]].astype(str)
scores = att.scores[keep]
t = read_comparisons(tnorm_path)
models = np.asarray(t.claimed_labels, dtype=object)
index = {p: i for i, p in enumerate(t.probe_labels)}
table = np.full((len(t.probe_labels), len(models)), np.nan)
table[t.probe, t.claimed] = t.scores
rows = np.array([index[p] for p in probe.tolist()])
owner = np.empty(len(t.probe_labels), dtype=object)
owner[t.probe] = np.asarray(t.real_labels, dtype=object)[t.real]
if hasattr(calibrate, "ProbeCohorts"):
    cohorts = calibrate.ProbeCohorts(table, models.tolist(), rows, owner.tolist())
    n = scores.size
    t0 = time.perf_counter(); c0 = time.process_time()
    decided = cal.accept(claimed, scores, 0.01, probe_cohort_scores=cohorts)
else:
    n = min(limit, scores.size)
    lists = []
    for a in range(n):
        row = table[rows[a]]
        keep_m = ~np.isnan(row) & (models != claimed[a]) & (models != real[a])
        lists.append(row[keep_m])
    t0 = time.perf_counter(); c0 = time.process_time()
    decided = cal.accept(claimed[:n], scores[:n], 0.01, probe_cohort_scores=lists)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"attempts": int(n), "wall": wall, "cpu": cpu, "accepted": int(np.sum(decided))}))
'''

API_MATRIX = r'''
import json, sys, time, warnings
import numpy as np
import calibrate
out, matrix_path, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
warnings.simplefilter("ignore")
cal = calibrate.load(out, "auto")
import pyarrow.csv as pacsv
table = pacsv.read_csv(matrix_path)
gallery = table.column_names[1:]
owner = np.asarray(table.column(0).to_pylist(), dtype=object)
sim = np.column_stack([table.column(k).to_numpy() for k in range(1, table.num_columns)]).astype(np.float64)
probes, classes = np.nonzero(np.ones(sim.shape, bool))
claimed = np.asarray(gallery, dtype=object)[classes].astype(str)
scores = sim[probes, classes]
if hasattr(calibrate, "ProbeCohorts"):
    cohorts = calibrate.ProbeCohorts(sim, gallery, probes, owner.tolist())
    n = scores.size
    t0 = time.perf_counter(); c0 = time.process_time()
    decided = cal.accept(claimed, scores, 0.01, probe_cohort_scores=cohorts)
else:
    n = min(limit, scores.size)
    names = np.asarray(gallery, dtype=object)
    lists = [sim[probes[a]][(names != claimed[a]) & (names != owner[probes[a]])] for a in range(n)]
    t0 = time.perf_counter(); c0 = time.process_time()
    decided = cal.accept(claimed[:n], scores[:n], 0.01, probe_cohort_scores=lists)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"attempts": int(n), "wall": wall, "cpu": cpu, "accepted": int(np.sum(decided))}))
'''


# ---- the sitting --------------------------------------------------------------------------------------

def lists_recipe(files: dict[str, Path], normalised: bool) -> dict:
    data = {"plugin": "score-list", "train": str(files["scores-dev"]), "test": str(files["scores-eval"]),
            "kind": "similarity", "missing": -1}
    doc = {"version": 1, "data": data}
    if normalised:
        data.update(cohort_enrolled=str(files["cohort-znorm"]), cohort_probes=str(files["cohort-tnorm"]))
        doc["normalizer"] = {"plugin": "snorm"}
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=500)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--models", type=int, default=200, help="cohort people (T-models; 2 Z-probes each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--lfw-scale", type=float, default=1.0, help="the score matrix's probes x this")
    ap.add_argument("--skip-lfw", action="store_true", help="the score lists only")
    ap.add_argument("--skip-lists", action="store_true", help="the score matrix's runs only (e.g. with --lfw-scale 10)")
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--baseline-attempts", type=int, default=100_000)
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args()
    import yaml

    versions = [("this", None)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        files = write_lists(tmp, args.classes, args.probes, args.models, args.seed)
        print(f"generated {args.classes} classes x {args.probes} probes per list, {args.models} cohort models: "
              + ", ".join(f"{k} {sum(1 for _ in open(v))} lines" for k, v in files.items())
              + f" in {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.2f}")
        recipes = {}
        for name, normalised in (() if args.skip_lists else (("plain", False), ("snorm", True))):
            recipes[f"lists {name}"] = tmp / f"lists-{name}.yaml"
            recipes[f"lists {name}"].write_text(yaml.safe_dump(lists_recipe(files, normalised)), encoding="utf-8")
        matrix = tmp / "matrix.csv"
        if not args.skip_lfw:
            from bench_whole_run import write_matrix

            probes = int(round(5701 * args.lfw_scale))
            write_matrix(matrix, probes, 1680, args.seed)
            print(f"generated a {probes} x 1680 score matrix ({matrix.stat().st_size / 1e6:.0f} MB)")
            for name, norm in (("plain", None), ("snorm", {"plugin": "snorm"}), ("asnorm", {"plugin": "asnorm"})):
                doc = {"version": 1, "data": {"plugin": "score-matrix", "path": str(matrix), "kind": "similarity"}}
                if norm:
                    doc["normalizer"] = norm
                recipes[f"matrix {name}"] = tmp / f"matrix-{name}.yaml"
                recipes[f"matrix {name}"].write_text(yaml.safe_dump(doc), encoding="utf-8")
        # (a) runs, interleaved per round
        runs: dict = {}
        for r in range(args.rounds):
            for version, source in versions:
                for name, recipe in recipes.items():
                    out = tmp / f"out-{version}-{name.replace(' ', '-')}"
                    got = measured(["run", "-q", str(recipe), "--out", str(out)], source, tmp)
                    runs.setdefault((version, name), []).append(got)
                    print(f"  round {r + 1} {version:8s} run {name:14s} {got['wall']:7.1f} s wall, {got['cpu']:7.1f} s "
                          f"CPU, peak {got['rss_mb']:6.0f} MB; load average {os.getloadavg()[0]:.2f}", flush=True)
        figures["runs"] = {f"{v} {n}": rs for (v, n), rs in runs.items()}
        for version, _ in versions:
            for base, others in (("lists plain", ["lists snorm"]), ("matrix plain", ["matrix snorm", "matrix asnorm"])):
                if (version, base) not in runs:
                    continue
                for other in others:
                    ratio = float(np.median([o["wall"] / b["wall"] for o, b in zip(runs[(version, other)],
                                                                                     runs[(version, base)])]))
                    cpu = float(np.median([o["cpu"] / b["cpu"] for o, b in zip(runs[(version, other)],
                                                                                runs[(version, base)])]))
                    figures.setdefault("ratios", {})[f"{version} {other} / {base}"] = {"wall": ratio, "cpu": cpu}
                    print(f"(a) {version}: {other} / {base}: {ratio:.2f}x wall, {cpu:.2f}x CPU (asked: <= 2)")
        # (b) accept --cohort on the evaluation list, (c) the API
        eval_lines = sum(1 for _ in open(files["scores-eval"]))
        for version, source in ([] if args.skip_lists else versions):
            out = tmp / f"out-{version}-lists-snorm"
            new = source is None or any("class ProbeCohorts" in f.read_text() for f in (source / "calibrate").rglob("*.py"))
            scores = files["scores-eval"]
            if not new:  # the baseline on a prefix of the list (all of it was killed at 23 GB)
                scores = tmp / "scores-eval-prefix"
                with open(files["scores-eval"]) as f, open(scores, "w") as g:
                    for _, line in zip(range(args.baseline_attempts), f):
                        g.write(line)
            n = min(eval_lines, args.baseline_attempts) if not new else eval_lines
            got = measured(["accept", str(out), str(scores), "--fpr", "0.01", "--missing", "-1", "--out",
                            str(tmp / f"decisions-{version}.csv"), "--cohort", str(files["cohort-tnorm"])], source, tmp)
            rate = n / got["wall"]
            figures.setdefault("accept", {})[version] = {**got, "lines": n, "per_second": rate,
                                                         "kb_per_attempt": got["rss_mb"] * 1024 / n}
            print(f"(b) {version}: accept --cohort on {n} lines: {got['wall']:.1f} s wall ({rate / 1e3:.0f}k attempts/s; "
                  f"asked >= 200k/s), peak {got['rss_mb']:.0f} MB (asked < 1 GB; {got['rss_mb'] * 1024 / n:.2f} KB "
                  "per attempt)", flush=True)
            api = python_in(source, API_LISTS, str(out), str(files["scores-eval"]), str(files["cohort-tnorm"]),
                            str(args.baseline_attempts))
            figures.setdefault("api lists", {})[version] = api
            print(f"(c) {version}: Calibration.accept, lists' run (cohort of {args.models}): {api['attempts']} "
                  f"attempts in {api['wall']:.2f} s = {api['attempts'] / api['wall'] / 1e6:.2f}M/s wall, "
                  f"{api['attempts'] / api['cpu'] / 1e6:.2f}M/s CPU", flush=True)
            if not args.skip_lfw:
                api = python_in(source, API_MATRIX, str(tmp / f"out-{version}-matrix-snorm"), str(matrix),
                                str(args.baseline_attempts // 10))
                figures.setdefault("api matrix", {})[version] = api
                print(f"(c) {version}: Calibration.accept, matrix run (cohort of 1,680): {api['attempts']} attempts "
                      f"in {api['wall']:.2f} s = {api['attempts'] / api['wall'] / 1e6:.2f}M/s wall, "
                      f"{api['attempts'] / api['cpu'] / 1e6:.2f}M/s CPU (asked >= 1M/s on one core)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
