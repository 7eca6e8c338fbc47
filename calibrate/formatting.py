"""How numbers read in reports: shared by the core's report (calibrate.outputs) and the report
sections an evaluator renders itself (e.g. the fpr evaluator's), so that a rate looks the same in
both. A public module (calibrate.PUBLIC_MODULES) with no imports from the rest of calibrate."""

from __future__ import annotations

import math


def format_pct(x: float | None) -> str:
    """A rate as a percentage for report tables; n/a for none."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.3f}%"


def format_count(x: float | None) -> str:
    """An expected count (e.g. a training support e x N): whole from 100 up (``199``, ``39,800``),
    three significant digits below (``19.9``, ``3.96``, ``0.04``); n/a for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"
