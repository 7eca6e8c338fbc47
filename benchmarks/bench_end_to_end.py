"""End to end: ``calibrate run`` (the installed CLI, imports included) against a plain Algorithm 1, and start-up.

    .venv/bin/python benchmarks/bench_end_to_end.py [--classes 1000] [--train 1000] [--ref-classes 20]
                                                    [--rounds 3] [--repeats 7] [--seed 0] [--competing 1]
                                                    [--baseline COMMAND]

One run prints every figure, all measured in that run (load average printed):

* **run**: ``calibrate run -q RECIPE --out DIR`` as a subprocess of the installed console script,
  wall clock from spawn to exit (so interpreter start, imports, recipe validation, pictures and
  output writing all count). The recipe: dataset ``synthetic-impostors`` with ``classes`` classes x
  ``train`` training impostor distances (+ ``test`` evaluation ones), estimator ``ncx2-grid`` with
  Algorithm 1's defaults (exact mode, 8 dims 15..22 x 100 log-spaced sigmas), the default fpr
  evaluator with its pictures, no executor (the default: the fit's chunks are shared with a process
  forked on the machine's other core). Median of ``rounds`` runs; the stage timings the median run
  wrote to results.json (``timings``) are printed with it.
* **reference**: Algorithm 1 written plainly (``reference_fit``/``reference_grid`` from
  bench_ncx2.py: loops over dim and sigma, ``scipy.stats.ncx2.cdf`` and ``np.corrcoef``), on the very
  same training distances (the dataset's generator, same seed), timed on ``ref-classes`` classes
  spread over the set and scaled to all classes. The fit alone: no imports, no evaluation, no
  outputs are charged to it. Interleaved with the runs so that machine load hits both.
* **competing load** (``--competing N``, default 1): every round measures the run and its part of
  the reference a second time with N processes spinning on the CPU (busy loops started and stopped
  by the benchmark): on a 2-core machine, 1 takes the run's other core. Printed as a second block.
* **CPU seconds**: the same ratio in CPU time (the run's processes, its forked ones included, against the
  reference's), which is what a machine whose every core is busy shares out; steadier under load than
  wall time, and blind to the second core.
* **baseline** (``--baseline COMMAND``): another ``calibrate`` command (say, a script that runs the
  tree before a change) timed in the same rounds, right after the run, against the same reference.
* **check**: the run's thresholds (thresholds.csv) equal the reference's on the reference classes
  (1e-12 relative), i.e. the run computed Algorithm 1's answer.
* **start-up**: ``calibrate --help``, ``calibrate validate examples/quickstart.yaml`` and
  ``calibrate plugins``, median of ``repeats`` runs each (after one warm-up run).

Exit status 1 if the check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli_memory import cli  # noqa: E402
from bench_ncx2 import DIMS, machine, reference_fit, reference_grid  # noqa: E402

from calibrate_builtins.datasets.synthetic_impostors import impostor_distances  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (0.005, 0.0025, 0.001, 0.0005)  # the recipe default
GOAL = 100.0
#: exact mode returns Algorithm 1's grid point: thresholds equal to rounding
TOLERANCE = 1e-12


def recipe_text(classes: int, train: int, test: int, seed: int) -> str:
    return (f"version: 1\n"
            f"data: {{plugin: synthetic-impostors, classes: {classes}, train: {train}, test: {test}, seed: {seed}}}\n"
            f"transform: {{plugin: identity}}\n"
            f"estimators:\n  - {{plugin: ncx2-grid}}   # Algorithm 1: exact, dim [15, 22], 100 log-spaced sigmas\n"
            f"evaluation: {{targets: [{', '.join(f'{t:g}' for t in TARGETS)}]}}\n"
            f"output: {{dir: out}}\n"
            f"seed: {seed}\n")


def timed(cmd: list[str], cwd: Path | None = None) -> float:
    return timed_cpu(cmd, cwd)[0]


def timed_cpu(cmd: list[str], cwd: Path | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it started and waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@contextlib.contextmanager
def spinning(processes: int):
    """``processes`` busy loops (other work on the machine) for the duration of the block."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(0.2 if spinners else 0.0)  # spinning before the clock starts
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def read_thresholds(path: Path) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            out.setdefault(row["class"], {})[float(row["target_fpr"])] = float(row["threshold"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--ref-classes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="end-to-end runs, interleaved with parts of the reference")
    ap.add_argument("--repeats", type=int, default=7, help="runs of each start-up command")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", default=None, metavar="COMMAND",
                    help="another `calibrate` command (e.g. a script running another version's tree) timed in the "
                         "same rounds, interleaved")
    ap.add_argument("--competing", type=int, default=1,
                    help="processes spinning on the CPU during the second measurement of each round (0: none)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    exe = cli()
    print(f"machine: {machine()}; load average {os.getloadavg()}")
    print(f"command: {exe}")

    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        work = Path(tmp)
        recipe = work / "recipe.yaml"
        recipe.write_text(recipe_text(args.classes, args.train, args.test, args.seed))
        # the dataset's own generator and seed: the reference fits the run's training distances
        values = impostor_distances(args.classes, args.train + args.test, args.seed)[0][:args.train]
        ref_idx = np.linspace(0, args.classes - 1, args.ref_classes).round().astype(int)
        print(f"data: synthetic-impostors, {args.classes} classes x {args.train} training distances "
              f"(+ {args.test} evaluation), seed {args.seed}; ncx2-grid exact, grid 8 dims x 100 sigmas; "
              f"reference on {args.ref_classes} of the classes")

        # each round: the run (and --baseline's) and a part of the reference as the machine is, then (--competing)
        # all again with that many processes spinning on the CPU (on this 2-core machine, 1 takes the other core)
        settings = [("as the machine is", 0)] + ([(f"{args.competing} competing process(es) spinning", args.competing)]
                                                  if args.competing else [])
        commands = [("this tree", exe)] + ([("baseline", args.baseline)] if args.baseline else [])
        runs: dict[tuple[int, str], list[tuple[float, dict, Path]]] = {(k, c): [] for _, k in settings
                                                                        for c, _ in commands}
        cpu: dict[tuple[int, str], list[float]] = {key: [] for key in runs}
        ref_time = {k: 0.0 for _, k in settings}
        ref_cpu = {k: 0.0 for _, k in settings}
        ref_fits: dict[int, tuple] = {}
        load: dict[int, list[float]] = {k: [] for _, k in settings}
        for r, part in enumerate(np.array_split(ref_idx, args.rounds)):
            for name, busy in settings:
                with spinning(busy):
                    walls = []
                    for label, command in commands:
                        out = work / f"out{r}-{busy}-{len(walls)}"
                        wall, seconds = timed_cpu([command, "run", "-q", str(recipe), "--out", str(out)], cwd=work)
                        walls.append(wall)
                        cpu[busy, label].append(seconds)
                        runs[busy, label].append((walls[-1], json.loads((out / "results.json").read_text())["timings"],
                                                  out))
                    t0, c0 = time.perf_counter(), time.process_time()
                    for i in part:
                        d = values[:, i]
                        ref_fits[i] = reference_fit(d, DIMS, reference_grid(d))
                    ref_time[busy] += time.perf_counter() - t0
                    ref_cpu[busy] += time.process_time() - c0
                    load[busy].append(os.getloadavg()[0])
                print(f"round {r + 1}, {name}: run {' / '.join(f'{w:.2f}' for w in walls)} s; reference "
                      f"{len(ref_fits)} classes so far {ref_time[busy]:.1f} s; load {load[busy][-1]:.2f}", flush=True)

        width = len(str(args.classes - 1))
        dev = 0.0
        for name, busy in settings:
            ref_total = ref_time[busy] / len(ref_idx) * args.classes
            print()
            print(f"== {name.upper()} (load average after each round: {', '.join(f'{x:.2f}' for x in load[busy])})")
            print(f"REFERENCE Algorithm 1: {ref_time[busy] / len(ref_idx) * 1e3:.0f} ms per class x {args.classes} "
                  f"classes = {ref_total:.1f} s (timed on {len(ref_idx)} classes)")
            for label, command in commands:
                walls = sorted(w for w, _, _ in runs[busy, label])
                median = float(np.median(walls))
                wall, timings, out = min(runs[busy, label], key=lambda x: abs(x[0] - median))
                got = read_thresholds(out / "thresholds.csv")
                dev = max(dev, max(abs(got[f"c{i:0{width}d}"][t] / (s * np.sqrt(stats.ncx2.ppf(t, k, lam))) - 1)
                                   for i in ref_idx for t in TARGETS for k, s, lam, _ in [ref_fits[i]]))
                stages = timings["seconds"]
                print(f"{label.upper()}: END TO END `calibrate run` ({args.classes} classes): median {median:.2f} s of "
                      f"{args.rounds} runs ({', '.join(f'{w:.2f}' for w in walls)})")
                print(f"  stage timings of the median run (results.json): "
                      + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()) + f"; total {timings['total']:.2f} s"
                      + (f" (beside the run: {', '.join(timings['beside'])})" if timings.get("beside") else ""))
                print(f"  outside the stages (interpreter start, imports, recipe validation, committing the outputs, "
                      f"exit): {wall - timings['total']:.2f} s")
                print(f"  RATIO reference / run: {ref_total / median:.0f}x (goal >= {GOAL:.0f}x: "
                      f"{'OK' if ref_total / median >= GOAL else 'BELOW'}); reference / fit stage alone: "
                      f"{ref_total / stages.get('fit ncx2-grid', float('nan')):.0f}x")
                run_cpu = float(np.median(cpu[busy, label]))
                print(f"  CPU seconds (all the run's processes; what counts when every core is busy): run "
                      f"{run_cpu:.2f} s (median), reference {ref_cpu[busy] / len(ref_idx) * args.classes:.1f} s: "
                      f"{ref_cpu[busy] / len(ref_idx) * args.classes / run_cpu:.0f}x")
        print(f"check: run thresholds vs reference on {len(ref_idx)} classes, max relative difference {dev:.1e} "
              f"(must be <= {TOLERANCE:g}): {'OK' if dev <= TOLERANCE else 'FAIL'}")

        print()
        print(f"START-UP (median of {args.repeats} runs after a warm-up; min..max):")
        quick = ROOT / "examples" / "quickstart.yaml"
        for name, cmd in (("calibrate --help", [exe, "--help"]),
                          ("calibrate validate examples/quickstart.yaml", [exe, "validate", str(quick)]),
                          ("calibrate plugins", [exe, "plugins"])):
            timed(cmd, cwd=work)
            times = sorted(timed(cmd, cwd=work) for _ in range(args.repeats))
            print(f"  {name}: {np.median(times) * 1e3:.0f} ms ({times[0] * 1e3:.0f}..{times[-1] * 1e3:.0f})")
    print(f"load average at the end {os.getloadavg()}")
    if dev > TOLERANCE:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
