"""How numbers read in reports: shared by the core's report (calibrate.running.outputs) and the report
sections an evaluator renders itself (e.g. the fpr evaluator's), so that a rate looks the same in
both. A public module (calibrate.PUBLIC_MODULES) with no imports from the rest of calibrate."""

from __future__ import annotations

import math
import re


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


#: a ``<`` that could open HTML in Markdown (a tag, a closing tag, a comment, a declaration or an autolink); calibrate's
#: own ``<=``, ``< 1%`` cannot
_HTML_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
#: an ``&`` that would start a character reference (``&lt;``, ``&#60;``)
_REFERENCE = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def markdown_safe(text: str) -> str:
    """report.md's text with nothing a Markdown viewer renders as HTML, whatever the users' files put in it (group,
    class or file names): each ``<`` that could open a tag or an autolink becomes ``&lt;``, each ``&`` that would start
    a character reference ``&amp;``; both read as written. Applied to the whole report once (its own text uses
    neither), so no place a user's text reaches is left out."""
    return _HTML_OPEN.sub("&lt;", _REFERENCE.sub("&amp;", text))


#: what a Markdown table cell must escape of a user's text besides HTML: the cell separator, the backslash itself,
#: code spans and emphasis, and brackets (no link or image made of a name)
_CELL = re.compile(r"([\\|`*_\[\]])")


def markdown_cell(text: str) -> str:
    """A user's text (a group or an estimator's name) inside a report.md table cell, each Markdown character
    backslash-escaped; HTML is :func:`markdown_safe`'s."""
    return _CELL.sub(r"\\\1", " ".join(str(text).split()))  # a line break would end the table row
