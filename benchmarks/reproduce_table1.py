"""Run the reproduction recipes and print the paper's Table 1 analogue for each, in Markdown.

    .venv/bin/python benchmarks/reproduce_table1.py [RECIPE ...]

Default recipes: examples/paper-yale.yaml, examples/bssr1-face-c.yaml,
examples/bssr1-finger-left.yaml (they need ../shared/data). Each run's outputs go where the
recipe says (results/...); the tables are read back from its results.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["examples/paper-yale.yaml", "examples/bssr1-face-c.yaml", "examples/bssr1-finger-left.yaml"]

#: Table 1 of the paper: target -> (FPR %, ratio) for generic, class-specific, proposed
PAPER = {0.005: ((1.52, 3.0), (0.02, 0.05), (0.91, 1.8)),
         0.0025: ((0.79, 3.1), (0.00, 0.00), (0.39, 1.6)),
         0.001: ((0.36, 3.6), (0.00, 0.00), (0.13, 1.3)),
         0.0005: ((0.19, 3.8), (0.00, 0.00), (0.06, 1.2))}


def table(results: dict) -> str:
    labels = list(results["estimators"])
    head = "| Target FPR | " + " | ".join(f"{l}: FPR | ratio [95% CI]" for l in labels) + \
        " | paper generic | paper class | paper proposed |"
    lines = [head, "|" + "---|" * (1 + 2 * len(labels) + 3)]
    rows = {l: results["estimators"][l]["targets"] for l in labels}
    for k, t in enumerate(r["target_fpr"] for r in rows[labels[0]]):
        cells = []
        for l in labels:
            r = rows[l][k]
            cells += [f"{100 * r['fpr']:.3f}%", f"{r['ratio']:.2f} [{r['ratio_ci_low']:.2f}, {r['ratio_ci_high']:.2f}]"]
        paper = " | ".join(f"{f:.2f}% ({q:g})" for f, q in PAPER.get(t, ()))
        lines.append(f"| {100 * t:g}% | " + " | ".join(cells) + f" | {paper} |")
    first = rows[labels[0]][0]
    lines.append("")
    lines.append(f"Impostor attempts per target: {first['impostor_attempts']}; genuine attempts: {first['genuine_attempts']}.")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    import calibrate

    for recipe in argv or DEFAULT:
        path = ROOT / recipe if not Path(recipe).is_absolute() else Path(recipe)
        start = time.perf_counter()
        result = calibrate.run(path)
        took = time.perf_counter() - start
        doc = json.loads((result.out_dir / "results.json").read_text())
        print(f"### {Path(recipe).name}\n\n`calibrate run {recipe}` ({took:.0f} s)\n")
        print(table(doc))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
