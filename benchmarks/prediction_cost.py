"""What the predicted FPR interval costs: every example recipe with prediction on (the default) and
off, end to end, measured in one run.

    .venv/bin/python benchmarks/prediction_cost.py [--rounds 3] [--only quickstart auto ...] [--json out.json]
                                                   [--extra RECIPE ...] [--generated 5701x1680 ...]
                                                   [--generated-only] [--baseline DIR]

For each recipe: ``calibrate run -q RECIPE --out DIR`` as a subprocess of the installed console
script (interpreter start, imports, pictures and outputs all count), once as shipped and once with
``evaluation: {prediction: false}`` added to a copy of the recipe (paths rewritten to absolute
ones), alternating on/off ``rounds`` times so that machine load hits both, after one untimed run; the median
of each, the median of each round's ratio on / off and the CPU seconds of each (user + system, every process:
the prediction's child beside the run too) are printed, with the stage timings of the last "on" run that
concern the prediction, and each estimator's prediction in one word (how many simulated galleries, vectorised
or refitted, or why none). ``--baseline DIR`` measures another version's source tree in the same rounds
(``git archive REV | tar -x -C DIR``), as benchmarks/bench_whole_run.py does. Recipes whose data are absent
(../shared/data) are listed as skipped.

``--generated PROBESxCLASSES`` adds a data-only recipe (the defaults: auto, its predicted interval, the fpr
evaluator with its pictures) on the similarity matrix benchmarks/bench_whole_run.py generates with a fixed seed:
5701x1680 is the unseen face matcher's size (LFW's, 9.6 million comparisons), where the simulated galleries are
largest. ``--generated-only`` skips the example recipes. ``--structures`` adds, on each generated matrix, every
structure auto can choose, fixed (``structure: one``, ``anchored``, ``bulk``), each also with a groups file (two
groups over 44% of the classes, the rest unlabelled): a default is as fast as its slowest path, and which one it
takes depends on the gallery (issue 38: ``one`` took 130x the others' prediction, its galleries refitted whole).

The goal (issues 18 and 38): every example, and every structure at every size, runs in at most 1.25x its time with
prediction off, and no simulated gallery is refitted whole (``refitted`` in the last column).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "quickstart": ROOT / "examples" / "quickstart.yaml",
    "auto": ROOT / "examples" / "auto.yaml",
    "bssr1-face-c": ROOT / "examples" / "bssr1-face-c.yaml",
    "bssr1-finger-left": ROOT / "examples" / "bssr1-finger-left.yaml",
    "paper-yale": ROOT / "examples" / "paper-yale.yaml",
    "bob-scores": ROOT / "examples" / "bob-scores" / "recipe.yaml",
}


def _absolute(doc: dict, base: Path) -> dict:
    """The recipe with its data paths made absolute (the copy lives elsewhere)."""
    data = dict(doc.get("data", {}))
    for key in ("path", "train", "test"):
        if isinstance(data.get(key), str):
            data[key] = str((base / data[key]).resolve())
    return {**doc, "data": data}


def _variants(recipe: Path, tmp: Path) -> tuple[Path, Path] | None:
    doc = _absolute(yaml.safe_load(recipe.read_text(encoding="utf-8")), recipe.parent)
    path = doc["data"].get("path") or doc["data"].get("train")
    if path and not Path(path).exists():
        return None
    on = tmp / f"{recipe.stem}-on.yaml"
    off = tmp / f"{recipe.stem}-off.yaml"
    on.write_text(yaml.safe_dump(doc), encoding="utf-8")
    evaluation = dict(doc.get("evaluation") or {})
    evaluation["prediction"] = False
    off.write_text(yaml.safe_dump({**doc, "evaluation": evaluation}), encoding="utf-8")
    return on, off


def _run(cli: Path, recipe: Path, out: Path, source: Path | None = None) -> tuple[float, dict, float]:
    """Wall seconds of ``calibrate run`` (this install, or the source tree ``source``), its results.json, and the CPU
    seconds (user + system) of it and every process it waited for (the prediction's child beside the run too)."""
    shutil.rmtree(out, ignore_errors=True)
    # as on a user's machine, compiled modules are cached (as bench_whole_run.py does: where the environment sets
    # PYTHONDONTWRITEBYTECODE every run would compile calibrate's modules again, the same 0.2-0.5 s on and off)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [str(cli)]
    if source is not None:  # -P: the working folder must not shadow the source tree's packages
        command = [sys.executable, "-P", "-c", "from calibrate.cli import main; main()"]
        env["PYTHONPATH"] = os.pathsep.join([str(source), str(source / "plugins")])
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command + ["run", "-q", str(recipe), "--out", str(out)], capture_output=True, text=True,
                          env=env, cwd=source)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{recipe.name}: calibrate run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds, json.loads((out / "results.json").read_text(encoding="utf-8")), cpu


def _how(results: dict) -> str:
    """Each estimator's prediction in a few words, from results.json."""
    words = []
    for label, entry in results.get("estimators", {}).items():
        rows = entry.get("targets", [])
        first = rows[0] if rows else {}
        if "simulated_galleries" in first:
            missing = sum(r.get("prediction_status", "fits") not in ("fits", "tail") for r in rows)
            words.append(f"{label}: {first['simulated_galleries']} {first.get('prediction_simulation', '?')}"
                         + "".join(f", {first[k]} {k[10:]}" for k in ("simulated_widened", "simulated_refitted")
                                   if first.get(k))
                         + (f", {missing} of {len(rows)} targets without" if missing else ""))
        else:
            words.append(f"{label}: none")
    return "; ".join(words)


def _generated(shape: str, tmp: Path) -> Path:
    """A data-only recipe on bench_whole_run's generated similarity matrix of ``shape`` (PROBESxCLASSES)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_whole_run import write_matrix

    try:
        probes, classes = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--generated: expected PROBESxCLASSES such as 5701x1680; got {shape!r}") from None
    matrix = tmp / f"matrix-{probes}x{classes}.csv"
    write_matrix(matrix, probes, classes, 0)
    recipe = tmp / f"generated-{probes}x{classes}.yaml"
    recipe.write_text(yaml.safe_dump({"version": 1, "data": {"plugin": "score-matrix", "path": str(matrix),
                                                             "kind": "similarity"}}), encoding="utf-8")
    return recipe


def _structures(recipe: Path, tmp: Path) -> dict[str, Path]:
    """``recipe`` (a generated matrix's) with auto's structure fixed to each it can choose, each also with groups."""
    doc = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    groups = tmp / f"{recipe.stem}-groups.csv"
    classes = len(Path(doc["data"]["path"]).open(encoding="ascii").readline().split(",")) - 1
    labels = np.random.default_rng(1).random(classes)
    groups.write_text("class,group\n" + "".join(f"id{j:05d},{'F' if u < 0.1 else 'M'}\n"
                                                 for j, u in enumerate(labels) if u < 0.44), encoding="utf-8")
    out = {}
    for structure in ("one", "anchored", "bulk"):
        for grouped in (False, True):
            data = {**doc["data"], **({"groups": str(groups)} if grouped else {})}
            name = f"{recipe.stem}-{structure}{'-groups' if grouped else ''}"
            out[name] = tmp / f"{name}.yaml"
            out[name].write_text(yaml.safe_dump({**doc, "data": data, "estimators": [
                {"plugin": "auto", "structure": structure}]}), encoding="utf-8")
    out[f"{recipe.stem}-groups"] = tmp / f"{recipe.stem}-groups.yaml"
    out[f"{recipe.stem}-groups"].write_text(yaml.safe_dump({**doc, "data": {**doc["data"], "groups": str(groups)}}),
                                            encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help=f"examples to run (default all: {', '.join(EXAMPLES)})")
    parser.add_argument("--extra", nargs="*", default=[], type=Path, help="more recipes to measure")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--generated", nargs="*", default=[], metavar="PROBESxCLASSES",
                        help="also a generated similarity matrix of this size (5701x1680: LFW's)")
    parser.add_argument("--generated-only", action="store_true", help="only the generated matrices")
    parser.add_argument("--structures", action="store_true",
                        help="on each generated matrix, also each structure auto can choose, with and without groups")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another version's source tree (e.g. git archive REV | tar -x -C DIR), measured in the "
                             "same rounds")
    args = parser.parse_args(argv)
    cli = Path(sys.executable).with_name("calibrate")
    recipes = {k: v for k, v in EXAMPLES.items()
               if not args.generated_only and (args.only is None or k in args.only)}
    recipes.update({p.stem: p.resolve() for p in args.extra})
    versions = [("this", None)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.rounds} rounds, on/off alternating"
          + (f"; baseline {args.baseline}" if args.baseline else ""))
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for shape in args.generated:
            recipe = _generated(shape, tmp)
            recipes[recipe.stem] = recipe
            if args.structures:
                recipes.update(_structures(recipe, tmp))
        for name, recipe in recipes.items():
            pair = _variants(recipe, tmp)
            if pair is None:
                print(f"{name}: skipped (its data are absent)")
                continue
            runs = {v: [] for v, _ in versions}
            for version, source in versions:  # untimed: the data in the page cache, compiled modules cached
                _run(cli, pair[1], tmp / "out-off", source)
            for _ in range(args.rounds):
                for version, source in versions:
                    on = _run(cli, pair[0], tmp / "out-on", source)
                    off = _run(cli, pair[1], tmp / "out-off", source)
                    runs[version].append((on, off))
            for version, _ in versions:
                row = _row(name, version, runs[version])
                rows.append(row)
                print(f"{name}{'' if version == 'this' else ' (baseline)'}: on {row['on_s']:.2f} s, off "
                      f"{row['off_s']:.2f} s, ratio {row['ratio']:.2f} (CPU {row['cpu_ratio']:.2f}); prediction "
                      f"stages {sum(row['predict_stages'].values()):.2f} s; {row['how']}", flush=True)
    print()
    print("| recipe | prediction on (s) | off (s) | ratio | CPU seconds on / off | predicted how |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        label = r["recipe"] + ("" if r["version"] == "this" else " (baseline)")
        print(f"| {label} | {r['on_s']:.2f} | {r['off_s']:.2f} | {r['ratio']:.2f} | {r['on_cpu']:.2f} / "
              f"{r['off_cpu']:.2f} | {r['how']} |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


def _row(name: str, version: str, runs: list) -> dict:
    """Medians over rounds; the ratio is the median of each round's on / off (both made under that round's load)."""
    on = statistics.median(r[0][0] for r in runs)
    off = statistics.median(r[1][0] for r in runs)
    last = runs[-1][0][1]
    predict = {k: v for k, v in last.get("timings", {}).get("seconds", {}).items() if k.startswith("predict")}
    return {"recipe": name, "version": version, "on_s": on, "off_s": off,
            "ratio": statistics.median(r[0][0] / r[1][0] for r in runs),
            "on_cpu": statistics.median(r[0][2] for r in runs), "off_cpu": statistics.median(r[1][2] for r in runs),
            "cpu_ratio": statistics.median(r[0][2] / r[1][2] for r in runs), "predict_stages": predict,
            "how": _how(last)}


if __name__ == "__main__":
    raise SystemExit(main())
