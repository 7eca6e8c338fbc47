"""What the predicted FPR interval costs: every example recipe with prediction on (the default) and
off, end to end, measured in one run.

    .venv/bin/python benchmarks/prediction_cost.py [--rounds 3] [--only quickstart auto ...] [--json out.json]
                                                   [--extra RECIPE ...]

For each recipe: ``calibrate run -q RECIPE --out DIR`` as a subprocess of the installed console
script (interpreter start, imports, pictures and outputs all count), once as shipped and once with
``evaluation: {prediction: false}`` added to a copy of the recipe (paths rewritten to absolute
ones), alternating on/off ``rounds`` times so that machine load hits both; the median of each and
their ratio are printed, with the stage timings of the median "on" run that concern the
prediction, and each estimator's prediction in one word (how many simulated galleries, vectorised
or refitted, or why none). Recipes whose data are absent (../shared/data) are listed as skipped.

The goal (issue 18): every example runs in at most 1.25x its time with prediction off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def _run(cli: Path, recipe: Path, out: Path) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run([str(cli), "run", "-q", str(recipe), "--out", str(out)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{recipe.name}: calibrate run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds, json.loads((out / "results.json").read_text(encoding="utf-8"))


def _how(results: dict) -> str:
    """Each estimator's prediction in a few words, from results.json."""
    words = []
    for label, entry in results.get("estimators", {}).items():
        rows = entry.get("targets", [])
        first = rows[0] if rows else {}
        if "simulated_galleries" in first:
            missing = sum(r.get("prediction_status", "fits") not in ("fits", "tail") for r in rows)
            words.append(f"{label}: {first['simulated_galleries']} {first.get('prediction_simulation', '?')}"
                         + (f", {missing} of {len(rows)} targets without" if missing else ""))
        else:
            words.append(f"{label}: none")
    return "; ".join(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help=f"examples to run (default all: {', '.join(EXAMPLES)})")
    parser.add_argument("--extra", nargs="*", default=[], type=Path, help="more recipes to measure")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    cli = Path(sys.executable).with_name("calibrate")
    recipes = {k: v for k, v in EXAMPLES.items() if args.only is None or k in args.only}
    recipes.update({p.stem: p.resolve() for p in args.extra})
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.rounds} rounds, on/off alternating")
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for name, recipe in recipes.items():
            pair = _variants(recipe, tmp)
            if pair is None:
                print(f"{name}: skipped (its data are absent)")
                continue
            on_s, off_s, last = [], [], {}
            for _ in range(args.rounds):
                s, last = _run(cli, pair[0], tmp / "out-on")
                on_s.append(s)
                s, _ = _run(cli, pair[1], tmp / "out-off")
                off_s.append(s)
            on, off = statistics.median(on_s), statistics.median(off_s)
            predict = {k: v for k, v in last.get("timings", {}).get("seconds", {}).items() if k.startswith("predict")}
            row = {"recipe": name, "on_s": on, "off_s": off, "ratio": on / off, "predict_stages": predict,
                   "how": _how(last)}
            rows.append(row)
            print(f"{name}: on {on:.2f} s, off {off:.2f} s, ratio {on / off:.2f}; prediction stages "
                  f"{sum(predict.values()):.2f} s; {row['how']}", flush=True)
    print()
    print("| recipe | prediction on (s) | off (s) | ratio | predicted how |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['recipe']} | {r['on_s']:.2f} | {r['off_s']:.2f} | {r['ratio']:.2f} | {r['how']} |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
