"""What every picture beside report.md shares: a frame laid out so nothing is cut, and marks set apart where
they would hide each other.

A figure is built in two steps. First its frame: axes, scales, limits, labels, titles and legends (of proxy
handles, placed outside the axes so they cover no label or data), laid out by matplotlib's constrained layout;
:func:`settle` then wraps each title to the width it has, gives a legend fewer columns until it fits, widens
the figure for what still does not, and fixes that layout. Then its data: :func:`apart` places marks in
pixels on the fixed frame, moving a mark that would sit on another series' mark by one mark's width (sideways
first), and :func:`marks` draws each mark where it was placed (the data keep their true values; only the
drawing is offset, by a few pixels).
"""

from __future__ import annotations

import io
import textwrap

import numpy as np

DPI = 100
#: pixels kept between a legend or a figure-wide title and the figure's edge
PAD = 6
#: offsets tried for a mark that would hide another, in marks' widths: nearest first, sideways before up/down
_STEPS = sorted(((a, b) for a in range(-3, 4) for b in range(-3, 4)), key=lambda s: (s[0] ** 2 + s[1] ** 2, abs(s[1]), s[0] < 0))
_SIDEWAYS = sorted(((a, 0) for a in range(-5, 6)), key=lambda s: (abs(s[0]), s[0] < 0))


def new_figure(width: float, height: float):
    """A figure (inches) on the Agg canvas, laid out by matplotlib's constrained layout until :func:`settle`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    fig.clear()
    return buf.getvalue()


def _room(text, fig) -> float:
    """Pixels a title may take: its axes' width, or the figure's less the padding for a figure-wide one."""
    ax = text.axes
    return (ax.bbox.width if ax is not None else fig.bbox.width) - 2 * PAD


def outside_legend(fig, handles, fontsize: float = 8, ncol: int = 3):
    """A figure legend below the axes, and how :func:`settle` redraws it with fewer columns."""
    ncol = max(1, min(ncol, len(handles)))

    def draw(n: int):
        return fig.legend(handles=handles, loc="outside lower center", ncol=n, fontsize=fontsize, frameon=False)

    return [draw(ncol), ncol, draw]


def _fit(fig, renderer, titles, raw, legends) -> bool:
    """Wrap each title wider than its room and give each legend wider than the figure fewer columns; whether
    anything changed. Widths of texts and legends do not depend on the layout; only an axes title's room does."""
    changed = False
    room = fig.bbox.width - 2 * PAD
    for item in legends:
        legend, ncol, draw = item
        while ncol > 1 and (width := legend.get_window_extent(renderer).width) > room:
            legend.remove()
            ncol = max(1, min(ncol - 1, int(ncol * room / width)))
            legend = draw(ncol)
            item[0], item[1] = legend, ncol
            changed = True
    for text in titles:
        width, room = text.get_window_extent(renderer).width, _room(text, fig)
        longest = max(len(line) for line in text.get_text().split("\n"))
        if width > room and longest > 8:
            chars = max(8, int(longest * room / width) - 1)
            # at spaces first; a word wider than the room (a 32-digit id in a narrow panel) is then broken
            for broken in (False, True):
                wrapped = textwrap.fill(raw[id(text)], chars, break_on_hyphens=False, break_long_words=broken)
                if wrapped != text.get_text():
                    text.set_text(wrapped)
                    changed = True
                    break
    return changed


def settle(fig, titles=(), legends=()) -> list:
    """Lay out ``fig`` so every title (matplotlib ``Text``) and legend (:func:`outside_legend`) lies inside it, then
    fix the layout so marks can be placed in pixels. A title too wide is wrapped at spaces (a long name is broken),
    a legend too wide loses columns; what is wider than the figure even so (one legend entry) widens the figure.
    Returns the legends as drawn."""
    renderer = fig.canvas.get_renderer()
    raw = {id(t): t.get_text() for t in titles}
    _fit(fig, renderer, titles, raw, legends)  # before the layout: it costs as much as drawing the figure
    for _ in range(6):
        fig.get_layout_engine().execute(fig)
        if not _fit(fig, renderer, titles, raw, legends):
            break
    need = max([item[0].get_window_extent(renderer).width for item in legends], default=0.0) + 2 * PAD
    if need > fig.bbox.width:
        fig.set_figwidth(need / fig.dpi)
        fig.get_layout_engine().execute(fig)
    fig.set_layout_engine("none")
    return [item[0] for item in legends]


def marker_pixels(size_points: float) -> float:
    """A marker's width in pixels (matplotlib sizes markers in points)."""
    return size_points * DPI / 72.0


def apart(series, width: float, sideways: bool = False) -> list[np.ndarray]:
    """Pixel offsets, one (dx, dy) row per point, that keep each series' marks at least ``width`` pixels from the
    marks of the series before it. ``series``: one (n, 2) array of pixel positions per series, in drawing order (a
    fixed mark that nothing may cover, such as a curve's end, is a series of its own, first). The first series
    stays where it is; a point whose every nearby place is taken (more than 48 marks on one spot, or 11 moved only
    ``sideways``, as marks on an axis floor are) stays put."""
    placed = np.empty((0, 2))
    out = []
    for xy in series:
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        offsets = np.zeros_like(xy)
        for k, p in enumerate(xy):
            if not np.all(np.isfinite(p)):
                continue
            for a, b in _SIDEWAYS if sideways else _STEPS:
                q = p + (a * width, b * width)
                if placed.size == 0 or np.min(np.hypot(*(placed - q).T)) >= width - 1e-9:
                    offsets[k] = (a * width, b * width)
                    break
        out.append(offsets)
        moved = xy + offsets
        placed = np.vstack([placed, moved[np.all(np.isfinite(moved), axis=1)]])
    return out


def shifted(ax, dx: float, dy: float):
    """``ax``'s data transform moved by (dx, dy) pixels."""
    from matplotlib.transforms import offset_copy

    return ax.transData if dx == 0 and dy == 0 else offset_copy(ax.transData, fig=ax.figure, x=dx, y=dy, units="dots")


def marks(ax, x, y, offsets, **style) -> list:
    """Draw points (x, y) as marks without a connecting line, each moved by its pixel offset (:func:`apart`): one
    ``Line2D`` per distinct offset, carrying ``style`` (gid, label, marker...)."""
    x, y, offsets = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(offsets).reshape(-1, 2)
    drawn = []
    for off in np.unique(offsets, axis=0) if len(offsets) else []:
        m = np.all(offsets == off, axis=1)
        (line,) = ax.plot(x[m], y[m], linestyle="none", transform=shifted(ax, *off), **style)
        drawn.append(line)
    return drawn


def pixels(ax, x, y) -> np.ndarray:
    """Pixel positions of data points (x, y) on ``ax`` (after :func:`settle`)."""
    return ax.transData.transform(np.column_stack([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)]))
