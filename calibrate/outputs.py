"""Writing run outputs atomically: everything is staged in a sibling folder and swapped in at
the end, so an interrupted or failed run never leaves a partial result that looks complete."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .types import TargetResult, ThresholdTable


class StagedOutput:
    """Collects files in a temporary folder beside ``final``; :meth:`commit` swaps it in."""

    def __init__(self, final: Path):
        self.final = Path(final)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.partial-", dir=self.final.parent))

    def write_text(self, name: str, text: str) -> None:
        (self.dir / name).write_text(text, encoding="utf-8")

    def write_bytes(self, name: str, data: bytes) -> None:
        (self.dir / name).write_bytes(data)

    def commit(self) -> Path:
        old = None
        if self.final.exists():
            old = self.final.parent / f".{self.final.name}.old-{os.getpid()}"
            os.replace(self.final, old)
        os.replace(self.dir, self.final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.final

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def thresholds_csv(tables: list[ThresholdTable]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["estimator", "class", "target_fpr", "threshold"])
    for table in tables:
        for i, cls in enumerate(table.classes):
            for k, target in enumerate(table.targets):
                w.writerow([table.estimator, cls, repr(target), repr(float(table.values[i, k]))])
    return buf.getvalue()


def models_csv(rows: list[dict[str, Any]]) -> str:
    """estimator, class, then the union of parameter columns in first-seen order."""
    columns = ["estimator", "class"]
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    w.writeheader()
    for row in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def results_json(results: dict[str, list[TargetResult]], recipe: dict, versions: dict, extra: dict | None = None) -> str:
    doc = {"estimators": {label: {"targets": [r.as_dict() for r in rows]} for label, rows in results.items()},
           "recipe": recipe, "versions": versions}
    if extra:
        doc.update(extra)
    return json.dumps(_clean(doc), indent=2, default=str) + "\n"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.3f}%"


def report_md(title: str, results: dict[str, list[TargetResult]], sections: list[str], notes: list[str],
              preamble: str = "") -> str:
    labels = list(results)
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    lines += ["## Achieved vs target false positive rate", "",
              "Achieved FPR on the evaluation (unseen) impostor attempts and its ratio to the target; "
              "1.0 is perfect, above 1 admits more intruders than promised.", ""]
    head = "| Target FPR | " + " | ".join(f"{l} FPR | {l} ratio" for l in labels) + " |"
    lines += [head, "|" + "---|" * (1 + 2 * len(labels))]
    targets = [r.target_fpr for r in results[labels[0]]] if labels else []
    for k, t in enumerate(targets):
        cells = []
        for l in labels:
            r = results[l][k]
            cells += [_pct(r.fpr), f"{r.ratio:.2f}"]
        lines.append(f"| {100 * t:.3g}% | " + " | ".join(cells) + " |")
    lines.append("")
    if any("fpr_ci_low" in r.extra for rows in results.values() for r in rows):
        lines += ["## Uncertainty and per-class spread", "",
                  "Each achieved FPR as a ratio to the target with two 95% intervals: Clopper-Pearson (every impostor "
                  "attempt independent) and a bootstrap over enrolled classes (a class's attempts resampled together), "
                  "which is the one to read when false accepts cluster in a few look-alike class pairs. Then the false "
                  "accepts out of impostor attempts and how many distinct class pairs they come from; the training "
                  "support (target x training impostor distances: how many training distances an on-target threshold "
                  "has below it; under about 10 every estimator extrapolates); the share of enrolled classes whose own "
                  "FPR exceeds 2x and 10x the target; the FNR.", "",
                  "| Estimator | Target FPR | Ratio [Clopper-Pearson] | Class bootstrap | False accepts / attempts "
                  "(class pairs) | Training support | Classes > 2x | Classes > 10x | FNR |",
                  "|---|---|---|---|---|---|---|---|---|"]
        nan = float("nan")
        for l in labels:
            for r in results[l]:
                e = r.extra
                ci = f"{r.ratio:.2f} [{e.get('ratio_ci_low', nan):.2f}, {e.get('ratio_ci_high', nan):.2f}]"
                boot = f"[{e.get('ratio_boot_low', nan):.2f}, {e.get('ratio_boot_high', nan):.2f}]"
                pairs = f" ({e['false_accept_pairs']})" if "false_accept_pairs" in e else ""
                lines.append(f"| {l} | {100 * r.target_fpr:.3g}% | {ci} | {boot} | {r.false_accepts} / {r.impostor_attempts}"
                             f"{pairs} | {e.get('training_support', nan):.1f} | "
                             f"{100 * e.get('share_classes_over_2x', nan):.1f}% | "
                             f"{100 * e.get('share_classes_over_10x', nan):.1f}% | {_pct(r.fnr)} |")
        lines.append("")
    for section in sections:
        lines += [section.rstrip(), ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)
