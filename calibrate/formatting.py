"""How numbers read in reports: shared by the core's report (calibrate.running.outputs) and the report
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


def shown(items, limit: int = 8, width: int = 40, quote: bool = True) -> str:
    """Some of ``items`` for a one-line message: the first ``limit`` (each repr'd, or as text without ``quote``,
    cut to ``width`` characters), then how many there are in all when some are left out: ``'a', 'b', ... (500 in
    all)``."""
    items = items.tolist() if hasattr(items, "tolist") else list(items)  # numpy strings repr as plain ones
    texts = [repr(x) if quote else str(x) for x in items[:limit]]
    head = ", ".join(t if len(t) <= width else t[:width - 3] + "..." for t in texts)
    return head if len(items) <= limit else f"{head}, ... ({len(items):,} in all)"
