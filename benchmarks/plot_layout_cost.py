"""What laying each picture out before drawing it costs (issue 41): every picture built and encoded by this checkout's
code and by another version's source tree, in fresh interpreters, alternately, on the generated results the picture
tests use (tests/test_plot_fit.py: 3 estimators, 5 groups, long class names).

    git archive e1489f3 | tar -x -C /tmp/base
    .venv/bin/python benchmarks/plot_layout_cost.py /tmp/base [--rounds 6]

Prints per picture the median seconds of each and their ratio (this / base), and the load average.
Results: docs/performance.md, "Pictures".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = f'''
import json, sys, time
sys.path.insert(0, {str(ROOT / "tests")!r})
from test_plot_fit import GROUPS, estimators, evaluation_input, group_rows
from calibrate_builtins.evaluators import groups, plots
cases = {{"calibration.png": lambda: plots.calibration_plot(estimators(3)),
         "det.png": lambda: plots.det_plot(evaluation_input(n_probes=400), estimators(3)),
         "cdf-fits.png": lambda: plots.cdf_plot(evaluation_input()),
         "groups.png": lambda: groups.groups_plot(group_rows(3, GROUPS[:5]), GROUPS[:5])}}
for draw in cases.values():
    draw()  # imports and fonts first
seconds = {{}}
for name, draw in cases.items():
    start = time.perf_counter()
    draw()
    seconds[name] = time.perf_counter() - start
print(json.dumps(seconds))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the other version's source tree")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    times: dict[str, list] = {"this": [], "base": []}
    for r in range(args.rounds):
        for which in ("base", "this") if r % 2 else ("this", "base"):
            env = dict(os.environ)
            if which == "base":
                env["PYTHONPATH"] = f"{args.base.resolve()}/plugins:{args.base.resolve()}"
            out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
            times[which].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for name in times["this"][0]:
        this = statistics.median(t[name] for t in times["this"])
        base = statistics.median(t[name] for t in times["base"])
        print(f"{name:16s} this {this:.3f} s   base {base:.3f} s   ratio {this / base:.2f}")
    print(f"medians of {args.rounds} interleaved rounds; load average {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
