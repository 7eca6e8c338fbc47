"""Peak memory and time of the score-list commands against a recipe run on the same files (issue 32).

    .venv/bin/python benchmarks/bench_cli_memory.py                     # 500 classes x 2,000 probes: 1M lines a file
    .venv/bin/python benchmarks/bench_cli_memory.py --classes 100 --probes 1000 --keep

Writes a pair of bob 4-column score lists (``claimed_id real_id test_label score``, probe by probe, seeded; a
dev and an eval file with their own probes and scores, the same claimed classes) with
bench_score_list.generate, then runs, each as a child process of the installed console script:

* ``calibrate run -q RECIPE``: dataset ``score-list`` ``train: dev``, ``test: eval``, estimator ``auto``, the
  default targets, no pictures (the recipe run that reads both files);
* ``calibrate fit -q dev --out cal.json`` (estimator ``auto``, the default targets and predicted intervals);
* ``calibrate evaluate -q cal.json eval``;
* ``calibrate accept -q cal.json eval --fpr 0.001 --out decisions.csv``.

Each child's peak resident memory is its ``ru_maxrss`` (``os.wait4``), its time the wall clock from spawn to
exit. Prints one line per command and each command's peak as a ratio to the recipe run's; the check of issue
32 is ``fit`` <= 1.5x the recipe run's peak (exit status 1 when it fails, with ``--check``). Results:
docs/performance.md, "Score-list commands: memory and progress".
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the bar of issue 32: `calibrate fit`'s peak against the recipe run's on the same files
FIT_BAR = 1.5


def cli() -> str:
    """The installed console script next to this interpreter (else the one on PATH)."""
    here = Path(sys.executable).parent / "calibrate"
    found = str(here) if here.exists() else shutil.which("calibrate")
    if not found:
        raise SystemExit("the `calibrate` command is not installed (pip install -e . in the repository)")
    return found


def measured(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one child process; its output is discarded, its failure stops the run."""
    t0 = time.perf_counter()
    with open(cwd / "stderr.txt", "wb") as err:
        child = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {child.returncode}):\n"
                         + (cwd / "stderr.txt").read_text(errors="replace")[-2000:])
    return usage.ru_maxrss / 1024, seconds  # Linux: kB


def recipe(dev: Path, eval_: Path, out: Path) -> str:
    return (f"version: 1\n"
            f"data: {{plugin: score-list, train: {dev}, test: {eval_}, kind: similarity}}\n"
            f"estimators:\n  - {{plugin: auto}}\n"
            f"output: {{dir: {out}, plots: false}}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=500)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "bench_cli_memory",
                    help="where the score lists are written (kept; reused with --keep)")
    ap.add_argument("--labels", nargs="+", choices=("short", "lfw"), default=["short", "lfw"],
                    help="label styles: short (c00042, p1234) and/or lfw (names of 8-32 characters, probes "
                         "Name/Name_0003.jpg), a pair of files each")
    ap.add_argument("--keep", action="store_true", help="reuse the score lists in --dir when they exist")
    ap.add_argument("--check", action="store_true", help=f"exit 1 unless fit peaks at <= {FIT_BAR}x the recipe run")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"{platform.processor() or platform.machine()}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    exe = cli()
    # -q where the commands take it (before issue 32 only `run` did, and the others printed no progress)
    quiet = ["-q"] if "--quiet" in subprocess.run([exe, "fit", "--help"], capture_output=True, text=True).stdout else []
    over = []
    for labels in args.labels:
        ratio = compare(exe, quiet, args, labels)
        if ratio > FIT_BAR:
            over.append(labels)
    print(f"this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, load "
          f"{os.getloadavg()[0]:.1f}")
    if args.check and over:
        sys.exit(1)


def files(args: argparse.Namespace, labels: str) -> tuple[Path, Path]:
    """The dev and eval score lists of one label style, written unless kept."""
    dev, eval_ = args.dir / f"scores-dev-{labels}", args.dir / f"scores-eval-{labels}"
    for seed, path in ((0, dev), (1, eval_)):
        if not (args.keep and path.exists()):
            t = time.perf_counter()
            # in a child process: Linux keeps a process's peak RSS across exec, so a child forked from a parent that
            # held the generator's arrays would report the parent's peak as its own
            subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from bench_score_list "
                            "import generate; generate(__import__('pathlib').Path(sys.argv[2]), *map(int, sys.argv[3:6]), "
                            "labels=sys.argv[6])", str(HERE), str(path), str(args.classes), str(args.probes), str(seed),
                            labels], check=True)
            print(f"wrote {args.classes * args.probes:,} lines ({path.stat().st_size / 1e6:.0f} MB) to {path} in "
                  f"{time.perf_counter() - t:.1f} s")
    return dev, eval_


def compare(exe: str, quiet: list[str], args: argparse.Namespace, labels: str) -> float:
    """Runs the recipe and the three commands on one pair of files; returns fit's peak over the recipe run's."""
    dev, eval_ = files(args, labels)
    print(f"{labels} labels, {args.classes:,} classes x {args.probes:,} probes a file:")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "recipe.yaml").write_text(recipe(dev, eval_, work / "out"))
        cal, decisions = work / "cal.json", work / "decisions.csv"
        runs = [("recipe run (dev + eval)", [exe, "run", "-q", str(work / "recipe.yaml")]),
                ("fit dev", [exe, "fit", *quiet, str(dev), "--out", str(cal)]),
                ("evaluate cal eval", [exe, "evaluate", *quiet, str(cal), str(eval_)]),
                ("accept cal eval", [exe, "accept", *quiet, str(cal), str(eval_), "--fpr", "0.001", "--out",
                                     str(decisions)])]
        peaks = {}
        for name, cmd in runs:
            peak, seconds = measured(cmd, work)
            peaks[name] = peak
            ratio = "" if name == runs[0][0] else f"  {peak / peaks[runs[0][0]]:.2f}x the recipe run's peak"
            print(f"  {name:24s} peak {peak:7.0f} MB  {seconds:6.1f} s{ratio}")
    ratio = peaks["fit dev"] / peaks[runs[0][0]]
    print(f"  fit / recipe run peak: {ratio:.2f} (bar {FIT_BAR}): {'ok' if ratio <= FIT_BAR else 'over'}")
    return ratio

if __name__ == "__main__":
    main()
