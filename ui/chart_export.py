"""Plotly figures as PNG without kaleido or a browser: redrawn with matplotlib (Agg, no pyplot).

:func:`figure_png` returns the PNG bytes; :func:`to_matplotlib` returns the matplotlib Figure
before saving (for tests and for callers that want another format).

What is redrawn (everything the app's pages build with ``plotly.express`` / ``graph_objects``):

* ``scatter`` traces: mode ``lines`` / ``markers`` / ``lines+markers`` / ``text``, name, line
  colour, width and dash, marker colour (one or per point), size and symbol, ``error_x`` /
  ``error_y``;
* ``bar`` traces: vertical or ``orientation="h"``, grouped / stacked / overlaid / relative per
  ``layout.barmode``, per-bar colours, error bars;
* ``histogram`` traces: counts (or ``histnorm`` percent / probability / density) over bins shared by
  the traces of one axis (``nbinsx`` / ``xbins``), arranged per ``barmode`` like bars;
* ``heatmap`` traces: ``z`` over categorical or numeric ``x`` / ``y``, the trace's colourscale,
  ``zmin`` / ``zmax``, cell text (``text``) and a colour bar unless ``showscale=False``;
* layout: subplots and facets (axis ``domain`` / ``anchor`` / ``matches``, from
  ``make_subplots`` or ``facet_col`` / ``facet_row``), axis types (linear, log, category), titles,
  ranges, ``autorange="reversed"``, ``showticklabels`` / ``showgrid``, ``tickangle``; the figure
  title, the legend (deduplicated by legend group, vertical at the right or horizontal below) and
  annotations (paper or data coordinates, facet and subplot titles included).

Hover text, animations and 3-D traces are not drawn; an unsupported trace type is skipped (and
a figure with nothing drawable raises ``ValueError``). HTML in texts is reduced to plain text
(``<br>`` becomes a line break, other tags are dropped) and ``$`` is never read as mathtext.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go
from matplotlib import colors as mcolors
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

__all__ = ["DEFAULT_HEIGHT", "DEFAULT_WIDTH", "figure_png", "to_matplotlib"]

DEFAULT_WIDTH = 1000
DEFAULT_HEIGHT = 560
DPI = 100
PLOT_BG = "#E5ECF6"  # plotly's default template
GRID = "white"
DEFAULT_COLORWAY = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880",
                    "#FF97FF", "#FECB52")
DRAWN_TYPES = ("scatter", "scattergl", "bar", "histogram", "heatmap")

_DASHES: dict[str, Any] = {"solid": "-", "dot": ":", "dash": "--", "dashdot": "-.", "longdash": (0, (10, 4)),
                           "longdashdot": (0, (10, 3, 2, 3))}
_SYMBOLS = {"circle": "o", "square": "s", "diamond": "D", "cross": "P", "x": "X", "triangle-up": "^",
            "triangle-down": "v", "triangle-left": "<", "triangle-right": ">", "pentagon": "p", "hexagon": "h",
            "star": "*", "hexagram": "*", "line-ns": "|", "line-ew": "_", "asterisk": "*"}
_TAG = re.compile(r"<[^>]+>")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_RGBA = re.compile(r"rgba?\(\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)\s*(?:,\s*([\d.]+)\s*)?\)", re.IGNORECASE)


# --------------------------------------------------------------------------- small pure helpers


def plain_text(text: Any) -> str:
    """Plotly rich text as plain text for matplotlib: ``<br>`` -> newline, tags dropped, ``$``
    escaped (no mathtext); None -> ``""``."""
    if text is None:
        return ""
    out = _TAG.sub("", _BR.sub("\n", str(text)))
    out = out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return out.replace("$", r"\$")


def to_color(value: Any, default: Any = None) -> Any:
    """A plotly colour (hex, CSS name, ``rgb()`` / ``rgba()``) as a matplotlib colour; ``default``
    when missing or unknown."""
    if value is None:
        return default
    if isinstance(value, str):
        m = _RGBA.fullmatch(value.strip())
        if m:
            r, g, b = (float(m.group(i)) / 255 for i in (1, 2, 3))
            a = float(m.group(4)) if m.group(4) is not None else 1.0
            return (r, g, b, a)
        if mcolors.is_color_like(value):
            return value
        return default
    return default


def _colormap(colorscale: Any, name: str = "plotly") -> mcolors.Colormap:
    """A matplotlib colormap from a plotly colourscale (a list of ``(position, colour)``)."""
    if isinstance(colorscale, (list, tuple)) and colorscale:
        stops = [(float(pos), to_color(col, "black")) for pos, col in colorscale]
        return mcolors.LinearSegmentedColormap.from_list(name, stops)
    try:
        import matplotlib

        return matplotlib.colormaps[str(colorscale or "viridis").lower()]
    except KeyError:
        import matplotlib

        return matplotlib.colormaps["viridis"]


def _values(data: Any) -> list[Any]:
    """A trace data array as a plain list (numpy, pandas, tuples; None -> [])."""
    if data is None:
        return []
    if isinstance(data, np.ndarray):
        return data.tolist()
    return list(data)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)) or v is None


def _floats(values: Sequence[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _axis_key(ref: str | None, letter: str) -> str:
    """``"x2"`` -> ``"xaxis2"``, None/``"x"`` -> ``"xaxis"``."""
    ref = ref or letter
    return f"{letter}axis{ref[1:]}"


def _layout_axis(fig: go.Figure, key: str) -> Any:
    try:
        return fig.layout[key]
    except (KeyError, ValueError):
        return None


def _prop(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    try:
        value = obj[name]
    except (KeyError, ValueError, TypeError):
        return default
    return default if value is None else value


# --------------------------------------------------------------------------- axis bookkeeping


@dataclass
class _AxisInfo:
    """One plotly axis: its canonical name (after ``matches``), type and categories in order."""

    key: str
    canonical: str
    kind: str  # "linear", "log" or "category"
    categories: list[Any] = field(default_factory=list)

    def position(self, v: Any) -> float:
        """Where value ``v`` sits on this axis (category index for categorical axes)."""
        if self.kind == "category":
            if v not in self.categories:
                self.categories.append(v)
            return float(self.categories.index(v))
        return math.nan if v is None else float(v)

    def positions(self, values: Sequence[Any]) -> np.ndarray:
        return np.array([self.position(v) for v in values], dtype=float)


def _trace_axis_values(trace: Any, letter: str) -> list[Any]:
    """Values a trace puts on its ``letter`` axis (for deciding the axis type)."""
    t = trace.type
    if t == "heatmap":
        vals = _values(trace[letter])
        return vals if vals else list(range(len(_values(trace.z)) if letter == "y" else
                                            (len(_values(trace.z)[0]) if _values(trace.z) else 0)))
    if t == "histogram":
        orient_h = (trace.orientation == "h") or (trace.x is None and trace.y is not None)
        data_letter = "y" if orient_h else "x"
        return _values(trace[letter]) if letter == data_letter else []
    return _values(trace[letter])


def _axis_infos(fig: go.Figure, traces: Sequence[Any]) -> dict[str, _AxisInfo]:
    """Every axis used by the traces (and the axes they match), typed from the layout or the data."""
    keys: dict[str, list[Any]] = {}
    for tr in traces:
        for letter in ("x", "y"):
            key = _axis_key(tr[f"{letter}axis"], letter)
            keys.setdefault(key, []).extend(_trace_axis_values(tr, letter))
    infos: dict[str, _AxisInfo] = {}
    shared: dict[str, list[Any]] = {}
    for key, vals in keys.items():
        ax = _layout_axis(fig, key)
        matches = _prop(ax, "matches")
        canonical = _axis_key(matches, key[0]) if matches else key
        declared = _prop(ax, "type", "-")
        if declared in ("category", "multicategory"):
            kind = "category"
        elif declared == "log":
            kind = "log"
        elif declared in ("linear", "date"):
            kind = "linear"
        else:
            kind = "linear" if all(_is_number(v) for v in vals) else "category"
        cats = shared.setdefault(canonical, [])
        infos[key] = _AxisInfo(key, canonical, kind, cats)
    # matched axes share one category list and one type
    for info in infos.values():
        base = infos.get(info.canonical)
        if base is not None and base.kind == "category":
            info.kind = "category"
    return infos


# --------------------------------------------------------------------------- drawing traces


def _trace_color(trace: Any, index: int, colorway: Sequence[str]) -> Any:
    for path in (("marker", "color"), ("line", "color")):
        c = _prop(_prop(trace, path[0]), path[1])
        if isinstance(c, str):
            return to_color(c, colorway[index % len(colorway)])
    return colorway[index % len(colorway)]


def _marker_style(trace: Any, color: Any) -> tuple[str, float, Any, Any, float]:
    """(matplotlib marker, size in points, face colour, edge colour, edge width)."""
    marker = _prop(trace, "marker")
    symbol = str(_prop(marker, "symbol", "circle"))
    is_open = symbol.endswith("-open") or symbol.endswith("-open-dot")
    base = symbol.replace("-open-dot", "").replace("-open", "").replace("-dot", "")
    mpl_marker = _SYMBOLS.get(base, "o")
    if base == "x" and is_open:
        mpl_marker, is_open = "x", False
    size = float(_prop(marker, "size", 6)) * 72 / DPI * 1.2
    line = _prop(marker, "line")
    edge = to_color(_prop(line, "color"), None)
    edge_w = float(_prop(line, "width", 0.0)) * 72 / DPI
    face = "none" if is_open else color
    if is_open:
        edge = color
        edge_w = max(edge_w, 1.2)
    return mpl_marker, size, face, edge if edge is not None else face, edge_w


def _error_array(err: Any, n: int) -> np.ndarray | None:
    if err is None or _prop(err, "visible") is False:
        return None
    array = _values(_prop(err, "array"))
    if array:
        return _floats(array)[:n]
    value = _prop(err, "value")
    if value is not None and _prop(err, "type") in (None, "constant"):
        return np.full(n, float(value))
    return None


def _draw_scatter(ax: Axes, trace: Any, xa: _AxisInfo, ya: _AxisInfo, color: Any, label: str) -> None:
    xs, ys = _values(trace.x), _values(trace.y)
    if not xs and ys:
        xs = list(range(len(ys)))
    if not ys and xs:
        ys = list(range(len(xs)))
    x, y = xa.positions(xs), ya.positions(ys)
    mode = trace.mode or ("lines+markers" if len(x) < 20 else "lines")
    line = _prop(trace, "line")
    marker_colors = _prop(_prop(trace, "marker"), "color")
    mpl_marker, size, face, edge, edge_w = _marker_style(trace, color)
    if "lines" in mode:
        dash = _DASHES.get(str(_prop(line, "dash", "solid")), "-")
        width = float(_prop(line, "width", 2)) * 72 / DPI * 1.2
        ax.plot(x, y, linestyle=dash, linewidth=width, color=to_color(_prop(line, "color"), color),
                marker=mpl_marker if "markers" in mode else None, markersize=size,
                markerfacecolor=face, markeredgecolor=edge, markeredgewidth=edge_w, label=label, zorder=3)
    elif "markers" in mode:
        if isinstance(marker_colors, (list, tuple, np.ndarray)) and len(marker_colors) == len(x):
            if all(_is_number(c) for c in marker_colors):
                cmap = _colormap(_prop(_prop(trace, "marker"), "colorscale"))
                ax.scatter(x, y, c=_floats(list(marker_colors)), cmap=cmap, s=size ** 2, marker=mpl_marker,
                           label=label, zorder=3)
            else:
                ax.scatter(x, y, c=[to_color(c, color) for c in marker_colors], s=size ** 2, marker=mpl_marker,
                           label=label, zorder=3)
        else:
            ax.plot(x, y, linestyle="none", marker=mpl_marker, markersize=size, markerfacecolor=face,
                    markeredgecolor=edge, markeredgewidth=edge_w, label=label, zorder=3)
    if "text" in mode:
        for xi, yi, t in zip(x, y, _values(trace.text)):
            ax.annotate(plain_text(t), (xi, yi), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    yerr, xerr = _error_array(trace.error_y, len(x)), _error_array(trace.error_x, len(x))
    if yerr is not None or xerr is not None:
        ax.errorbar(x, y, yerr=yerr, xerr=xerr, fmt="none", ecolor=color, elinewidth=1, capsize=3, zorder=2)


@dataclass
class _BarSeries:
    """One bar-like trace ready to draw: positions, lengths and style."""

    trace: Any
    pos: np.ndarray
    length: np.ndarray
    horizontal: bool
    color: Any
    label: str
    width: float | None = None
    err: np.ndarray | None = None


def _bar_series(trace: Any, xa: _AxisInfo, ya: _AxisInfo, color: Any, label: str) -> _BarSeries:
    horizontal = trace.orientation == "h"
    cat_vals, len_vals = (_values(trace.y), _values(trace.x)) if horizontal else (_values(trace.x), _values(trace.y))
    if not cat_vals:
        cat_vals = list(range(len(len_vals)))
    cat_axis = ya if horizontal else xa
    err = _error_array(trace.error_x if horizontal else trace.error_y, len(len_vals))
    return _BarSeries(trace, cat_axis.positions(cat_vals), _floats(len_vals), horizontal, color, label, err=err)


def _hist_series(traces: Sequence[tuple[Any, Any, str]], xa: _AxisInfo, ya: _AxisInfo) -> list[_BarSeries]:
    """Histogram traces of one axis pair binned on shared edges (as plotly bins a bingroup)."""
    data = []
    for trace, color, label in traces:
        horizontal = trace.orientation == "h" or (trace.x is None and trace.y is not None)
        axis = ya if horizontal else xa
        vals = axis.positions(_values(trace.y if horizontal else trace.x))
        data.append((trace, color, label, horizontal, vals[~np.isnan(vals)]))
    all_vals = np.concatenate([d[4] for d in data]) if data else np.array([])
    first = data[0][0]
    bins_spec = _prop(first, "ybins" if data[0][3] else "xbins")
    start, end, size = (_prop(bins_spec, k) for k in ("start", "end", "size"))
    if all_vals.size == 0:
        edges = np.array([0.0, 1.0])
    elif size is not None and float(size) > 0:
        lo = float(start) if start is not None else float(all_vals.min())
        hi = float(end) if end is not None else float(all_vals.max())
        edges = np.arange(lo, hi + float(size), float(size))
        edges = edges if len(edges) > 1 else np.array([lo, lo + float(size)])
    else:
        nb = _prop(first, "nbinsy" if data[0][3] else "nbinsx")
        edges = np.histogram_bin_edges(all_vals, bins=int(nb) if nb else "auto")
    out = []
    for trace, color, label, horizontal, vals in data:
        counts, _ = np.histogram(vals, bins=edges)
        norm = _prop(trace, "histnorm", "")
        counts = counts.astype(float)
        total = counts.sum() or 1.0
        if norm == "percent":
            counts = counts / total * 100
        elif norm == "probability":
            counts = counts / total
        elif norm in ("density", "probability density"):
            counts = counts / (total if norm == "probability density" else 1.0) / np.diff(edges)
        centers = (edges[:-1] + edges[1:]) / 2
        out.append(_BarSeries(trace, centers, counts, horizontal, color, label, width=float(np.min(np.diff(edges)))))
    return out


def _draw_bars(ax: Axes, series: Sequence[_BarSeries], barmode: str, bargap: float) -> None:
    """Bars of one axis pair arranged per ``barmode`` (group, stack, relative, overlay)."""
    if not series:
        return
    all_pos = np.unique(np.concatenate([s.pos[~np.isnan(s.pos)] for s in series]))
    step = float(np.min(np.diff(all_pos))) if len(all_pos) > 1 else 1.0
    slot = (series[0].width or step) * (1 - bargap)
    grouped = barmode == "group"
    n = len(series)
    base_pos: dict[float, float] = {}
    base_neg: dict[float, float] = {}
    for i, s in enumerate(series):
        width = slot / n if grouped else slot
        offset = (i - (n - 1) / 2) * width if grouped else 0.0
        pos = s.pos + offset
        bottoms = np.zeros(len(pos))
        if barmode in ("stack", "relative"):
            for j, (p, v) in enumerate(zip(s.pos, s.length)):
                table = base_neg if (barmode == "relative" and v < 0) else base_pos
                bottoms[j] = table.get(float(p), 0.0)
                table[float(p)] = bottoms[j] + (0.0 if np.isnan(v) else v)
        colors = _prop(_prop(s.trace, "marker"), "color")
        face = ([to_color(c, s.color) for c in colors] if isinstance(colors, (list, tuple, np.ndarray))
                and not all(_is_number(c) for c in colors) else s.color)
        alpha = 0.6 if barmode == "overlay" and n > 1 else None
        lengths = np.nan_to_num(s.length)
        if s.horizontal:
            ax.barh(pos, lengths, height=width, left=bottoms, color=face, label=s.label, alpha=alpha,
                    xerr=s.err, ecolor="#444", capsize=3 if s.err is not None else 0, zorder=3)
        else:
            ax.bar(pos, lengths, width=width, bottom=bottoms, color=face, label=s.label, alpha=alpha,
                   yerr=s.err, ecolor="#444", capsize=3 if s.err is not None else 0, zorder=3)


def _draw_heatmap(ax: Axes, fig: Figure, trace: Any, xa: _AxisInfo, ya: _AxisInfo) -> None:
    z = np.array([[np.nan if v is None else float(v) for v in row] for row in _values(trace.z)], dtype=float)
    if z.ndim != 2 or z.size == 0:
        return
    xs = _values(trace.x) or list(range(z.shape[1]))
    ys = _values(trace.y) or list(range(z.shape[0]))
    xp, yp = xa.positions(xs[: z.shape[1]]), ya.positions(ys[: z.shape[0]])

    def edges(p: np.ndarray) -> np.ndarray:
        if len(p) == 1:
            return np.array([p[0] - 0.5, p[0] + 0.5])
        mid = (p[:-1] + p[1:]) / 2
        return np.concatenate([[p[0] - (mid[0] - p[0])], mid, [p[-1] + (p[-1] - mid[-1])]])

    cmap = _colormap(trace.colorscale)
    if trace.reversescale:
        cmap = cmap.reversed()
    vmin = trace.zmin if trace.zmin is not None else np.nanmin(z)
    vmax = trace.zmax if trace.zmax is not None else np.nanmax(z)
    mesh = ax.pcolormesh(edges(xp), edges(yp), z, cmap=cmap, vmin=vmin, vmax=vmax, shading="flat")
    text = _values(trace.text)
    if text and trace.texttemplate and z.size <= 900:
        norm = mcolors.Normalize(vmin=vmin, vmax=vmax)
        for i, row in enumerate(text[: z.shape[0]]):
            for j, t in enumerate(_values(row)[: z.shape[1]]):
                if t is None or str(t) == "":
                    continue
                shade = norm(z[i, j]) if not np.isnan(z[i, j]) else 0
                ax.text(xp[j], yp[i], plain_text(t), ha="center", va="center", fontsize=8,
                        color="white" if shade > 0.6 else "black")
    if trace.showscale is not False:
        fig.colorbar(mesh, ax=ax, fraction=0.04, pad=0.02)


# --------------------------------------------------------------------------- layout


def _margins(fig: go.Figure, width: int, height: int, legend_right: bool, legend_below: bool) -> tuple[float, ...]:
    """(left, bottom, right, top) of the plot area in figure fractions."""
    has_title = bool(plain_text(_prop(_prop(fig.layout, "title"), "text")))
    left, right = 70.0, 20.0 + (170.0 if legend_right else 0.0)
    top = 60.0 if has_title else 30.0
    if any(_prop(a, "yref") == "paper" and float(_prop(a, "y", 0)) >= 1.0 for a in fig.layout.annotations or ()):
        top += 18.0
    bottom = 60.0 + (50.0 if legend_below else 0.0)
    return left / width, bottom / height, 1 - right / width, 1 - top / height


def _style_axes(ax: Axes, fig: go.Figure, xa: _AxisInfo, ya: _AxisInfo) -> None:
    ax.set_facecolor(PLOT_BG)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for letter, info in (("x", xa), ("y", ya)):
        lay = _layout_axis(fig, info.key)
        base = _layout_axis(fig, info.canonical)
        title = plain_text(_prop(_prop(lay, "title"), "text"))
        (ax.set_xlabel if letter == "x" else ax.set_ylabel)(title)
        if info.kind == "log":
            (ax.set_xscale if letter == "x" else ax.set_yscale)("log")
        if info.kind == "category":
            ticks = list(range(len(info.categories)))
            labels = [plain_text(c) for c in info.categories]
            if letter == "x":
                ax.set_xticks(ticks, labels)
            else:
                ax.set_yticks(ticks, labels)
        rng = _prop(lay, "range") or _prop(base, "range")
        if rng is not None and len(rng) == 2 and None not in rng:
            lo, hi = float(rng[0]), float(rng[1])
            if info.kind == "log":
                lo, hi = 10 ** lo, 10 ** hi
            (ax.set_xlim if letter == "x" else ax.set_ylim)(lo, hi)
        elif info.kind == "category" and info.categories:
            (ax.set_xlim if letter == "x" else ax.set_ylim)(-0.5, len(info.categories) - 0.5)
        if (_prop(lay, "autorange") or _prop(base, "autorange")) == "reversed":
            (ax.invert_xaxis if letter == "x" else ax.invert_yaxis)()
        angle = _prop(lay, "tickangle")
        if angle is None and letter == "x" and info.kind == "category" and \
                sum(len(str(c)) for c in info.categories) > 60:
            angle = -30
        if angle is not None:
            ax.tick_params(axis=letter, labelrotation=-float(angle))
            if letter == "x":
                for lab in ax.get_xticklabels():
                    lab.set_horizontalalignment("right" if float(angle) < 0 else "left")
        if _prop(lay, "showticklabels") is False:
            ax.tick_params(axis=letter, labelbottom=False, labelleft=False)
        if _prop(lay, "showgrid") is not False:
            ax.grid(True, axis=letter, color=GRID, linewidth=1, zorder=0)
        ax.set_axisbelow(True)
        ax.tick_params(axis=letter, length=0, labelsize=9)


def _fit_inside(mfig: Figure, area: tuple[float, float, float, float], pad_px: float = 6.0
                ) -> tuple[float, float, float, float]:
    """Shrink the plot area (every axes, colour bars included, mapped alike) so tick labels and
    axis titles that stick out at the left, bottom or right stay inside the image; returns the new
    area."""
    renderer = mfig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in mfig.axes]
    boxes = [b for b in boxes if b is not None]
    if not boxes:
        return area
    w, h = mfig.bbox.width, mfig.bbox.height
    d_left = max(0.0, (pad_px - min(b.x0 for b in boxes)) / w)
    d_bottom = max(0.0, (pad_px - min(b.y0 for b in boxes)) / h)
    d_right = max(0.0, (max(b.x1 for b in boxes) - (w - pad_px)) / w)
    if not (d_left or d_bottom or d_right):
        return area
    left, bottom, right, top = area
    new_l, new_b, new_r = left + d_left, bottom + d_bottom, right - d_right
    if new_r - new_l < 0.2 or top - new_b < 0.2:  # too little room: keep the layout as it is
        return area
    sx, sy = (new_r - new_l) / (right - left), (top - new_b) / (top - bottom)
    for ax in mfig.axes:
        p = ax.get_position()
        ax.set_position([new_l + (p.x0 - left) * sx, new_b + (p.y0 - bottom) * sy, p.width * sx, p.height * sy])
    return new_l, new_b, new_r, top


def _draw_annotations(mfig: Figure, fig: go.Figure, axes: dict[tuple[str, str], Axes],
                      area: tuple[float, float, float, float]) -> None:
    left, bottom, right, top = area
    by_x = {xk: ax for (xk, _), ax in axes.items()}
    by_y = {yk: ax for (_, yk), ax in axes.items()}
    ha_map = {"left": "left", "right": "right", "center": "center", "auto": "center"}
    va_map = {"top": "top", "bottom": "bottom", "middle": "center", "auto": "center"}
    for a in fig.layout.annotations or ():
        text = plain_text(a.text)
        if not text or a.visible is False:
            continue
        size = float(_prop(_prop(a, "font"), "size", 12)) * 0.8
        ha, va = ha_map.get(a.xanchor or "auto", "center"), va_map.get(a.yanchor or "auto", "center")
        xref, yref = a.xref or "x", a.yref or "y"
        if xref.startswith("paper") and yref.startswith("paper"):
            fx = left + float(a.x or 0) * (right - left)
            fy = bottom + float(a.y or 0) * (top - bottom)
            mfig.text(fx, fy, text, ha=ha, va=va, fontsize=size)
            continue
        ax = by_x.get(_axis_key(xref.split(" ")[0], "x")) or by_y.get(_axis_key(yref.split(" ")[0], "y"))
        if ax is None:
            continue
        arrow = dict(arrowstyle="->", color="#444") if a.showarrow is not False else None
        offset = (float(a.ax or -10) * 0.75, -float(a.ay or -30) * 0.75) if arrow else (0, 0)
        ax.annotate(text, (a.x, a.y), xytext=offset, textcoords="offset points", ha=ha, va=va, fontsize=size,
                    arrowprops=arrow)


def _legend(mfig: Figure, fig: go.Figure, traces: Sequence[tuple[Any, Any, str]],
            area: tuple[float, float, float, float]) -> None:
    handles: list[Any] = []
    labels: list[str] = []
    seen: set[str] = set()
    for trace, color, label in traces:
        group = trace.legendgroup or label
        if not label or trace.showlegend is False or group in seen:
            continue
        seen.add(group)
        if trace.type in ("bar", "histogram"):
            handles.append(Patch(facecolor=color))
        else:
            mode = trace.mode or "lines"
            mk, size, face, edge, edge_w = _marker_style(trace, color)
            dash = _DASHES.get(str(_prop(_prop(trace, "line"), "dash", "solid")), "-")
            handles.append(Line2D([], [], color=to_color(_prop(_prop(trace, "line"), "color"), color),
                                  linestyle=dash if "lines" in mode else "none",
                                  marker=mk if "markers" in mode else None, markersize=size,
                                  markerfacecolor=face, markeredgecolor=edge, markeredgewidth=edge_w))
        labels.append(label)
    if not handles:
        return
    left, bottom, right, top = area
    title = plain_text(_prop(_prop(_prop(fig.layout, "legend"), "title"), "text")) or None
    if _prop(_prop(fig.layout, "legend"), "orientation") == "h":
        mfig.legend(handles, labels, title=title, loc="upper center",
                    bbox_to_anchor=((left + right) / 2, bottom - 0.06), ncol=min(len(handles), 6), frameon=False,
                    fontsize=9)
    else:
        mfig.legend(handles, labels, title=title, loc="upper left", bbox_to_anchor=(right + 0.01, top),
                    frameon=False, fontsize=9)


def _shows_legend(fig: go.Figure, traces: Sequence[Any]) -> bool:
    flag = fig.layout.showlegend
    if flag is False:
        return False
    named = [t for t in traces if t.name and t.showlegend is not False and t.type != "heatmap"]
    return bool(named) and (flag is True or len(traces) > 1 or any(t.showlegend for t in traces))


# --------------------------------------------------------------------------- entry points


def to_matplotlib(fig: go.Figure, *, width: int | None = None, height: int | None = None) -> Figure:
    """Redraw a plotly figure as a matplotlib Figure of ``width`` x ``height`` pixels at 100 dpi
    (default: the figure's layout size, else 1000 x 560). Raises ``ValueError`` when the figure
    has no trace with data that can be drawn."""
    width = int(width or fig.layout.width or DEFAULT_WIDTH)
    height = int(height or fig.layout.height or DEFAULT_HEIGHT)
    if width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive, got {width} x {height}")
    traces = [t for t in fig.data if t.type in DRAWN_TYPES and t.visible not in (False, "legendonly")
              and (_values(t.x) or _values(t.y) or (t.type == "heatmap" and _values(t.z)))]
    if not traces:
        raise ValueError("The figure has no data to draw (no visible scatter, bar, histogram or heatmap trace "
                         "with values).")
    colorway = tuple(fig.layout.colorway or _prop(_prop(fig.layout.template, "layout"), "colorway") or DEFAULT_COLORWAY)
    infos = _axis_infos(fig, traces)
    styled = [(t, _trace_color(t, i, colorway), plain_text(t.name)) for i, t in enumerate(traces)]
    show_legend = _shows_legend(fig, traces)
    legend_h = _prop(_prop(fig.layout, "legend"), "orientation") == "h"
    area = _margins(fig, width, height, show_legend and not legend_h, show_legend and legend_h)
    left, bottom, right, top = area

    mfig = Figure(figsize=((width + 0.01) / DPI, (height + 0.01) / DPI), dpi=DPI, facecolor="white")
    FigureCanvasAgg(mfig)
    pairs: list[tuple[str, str]] = []
    for t in traces:
        pair = (_axis_key(t.xaxis, "x"), _axis_key(t.yaxis, "y"))
        if pair not in pairs:
            pairs.append(pair)
    axes: dict[tuple[str, str], Axes] = {}
    for xk, yk in pairs:
        xd = _prop(_layout_axis(fig, xk), "domain", (0.0, 1.0))
        yd = _prop(_layout_axis(fig, yk), "domain", (0.0, 1.0))
        rect = (left + xd[0] * (right - left), bottom + yd[0] * (top - bottom),
                (xd[1] - xd[0]) * (right - left), (yd[1] - yd[0]) * (top - bottom))
        axes[(xk, yk)] = mfig.add_axes(rect)

    barmode = fig.layout.barmode or "group"
    bargap = float(fig.layout.bargap if fig.layout.bargap is not None else 0.2)
    for (xk, yk), ax in axes.items():
        xa, ya = infos[xk], infos[yk]
        mine = [s for s in styled if (_axis_key(s[0].xaxis, "x"), _axis_key(s[0].yaxis, "y")) == (xk, yk)]
        bars = [_bar_series(t, xa, ya, c, lab) for t, c, lab in mine if t.type == "bar"]
        hists = [s for s in mine if s[0].type == "histogram"]
        if hists:
            bars += _hist_series(hists, xa, ya)
        _draw_bars(ax, bars, barmode, 0.0 if hists and not [t for t, _, _ in mine if t.type == "bar"] and
                   fig.layout.bargap is None else bargap)
        for t, c, lab in mine:
            if t.type in ("scatter", "scattergl"):
                _draw_scatter(ax, t, xa, ya, c, lab)
            elif t.type == "heatmap":
                _draw_heatmap(ax, mfig, t, xa, ya)
        _style_axes(ax, fig, xa, ya)

    area = _fit_inside(mfig, area)
    left = area[0]
    title = plain_text(_prop(_prop(fig.layout, "title"), "text"))
    if title:
        mfig.text(left, 1 - 12 / height, title, ha="left", va="top", fontsize=13)
    _draw_annotations(mfig, fig, axes, area)
    if show_legend:
        _legend(mfig, fig, styled, area)
    return mfig


def figure_png(fig: go.Figure, *, width: int | None = None, height: int | None = None, scale: float = 2.0) -> bytes:
    """The figure as PNG bytes of ``round(width * scale)`` x ``round(height * scale)`` pixels, drawn by
    matplotlib (no kaleido, no browser, nothing downloaded). ``width`` / ``height`` default to the
    figure's layout size, else 1000 x 560. Raises ``ValueError`` for an empty figure or a
    non-positive size or scale."""
    if not scale or scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    mfig = to_matplotlib(fig, width=width, height=height)
    w_px = round(int(mfig.get_figwidth() * DPI) * scale)
    h_px = round(int(mfig.get_figheight() * DPI) * scale)
    # +0.01 px: Agg truncates the canvas size, so a float just under the target would lose a pixel
    mfig.set_size_inches((w_px + 0.01) / (DPI * scale), (h_px + 0.01) / (DPI * scale))
    buf = io.BytesIO()
    mfig.savefig(buf, format="png", dpi=DPI * scale, facecolor="white")
    return buf.getvalue()
