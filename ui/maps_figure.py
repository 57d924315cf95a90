"""The Maps page's figure: one small map per space (the standard space, then each head, ``NCOLS`` to a row), the
documents coloured by category (shapes once the colours repeat), the retrieved ones ringed, the ground truth missed
marked with a red cross, the query a star.

Built from plain arrays and added in one call: per-trace pandas frames and one ``add_trace`` per trace took 0.6 s
(1.1 s on a server's first figure) for the demo's 13 maps of 12 categories, time the page spent before its chart
showed (``bench/demo_waits.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.category_style import category_styles
from ui.render import TITLES_BELOW_TOOLBAR, plotly_text

NCOLS = 4
"""Maps to a row."""

RETRIEVED_MARKER = dict(size=12, color="rgba(0,0,0,0)", line=dict(color="black", width=2))
MISSED_MARKER = dict(size=13, symbol="x-open", color="crimson", line=dict(width=2))
QUERY_MARKER = dict(symbol="star", size=16, color="gold", line=dict(color="black", width=1))


def space_title(space: str, importance: Sequence[float]) -> str:
    """A map's title: ``standard``, or ``head 3 · s=0.42`` (the head's importance score)."""
    if space == "standard":
        return space
    return f"{space.replace('head:', 'head ')} · s={importance[int(space.split(':')[1])]:.2f}"


def _scatter(x: Any, y: Any, **kw: Any) -> dict[str, Any]:
    return dict(type="scatter", mode="markers", x=x, y=y, **kw)


def maps_figure(maps: Mapping[str, Any], doc_ids: Sequence[int], titles: Sequence[str], labels: Sequence[str],
                importance: Sequence[float], query_xy: Mapping[str, tuple[float, float]], retrieved: set[int],
                ground_truth: set[int]) -> go.Figure:
    """The figure of ``maps`` (space -> :class:`~mrag_core.projection.SpaceMap`, in order) for the index whose row
    ``i`` is document ``doc_ids[i]`` titled ``titles[i]`` in category ``labels[i]``; a map's documents not among
    them are left out. Per map: one trace per category (legend groups: clicking a category in the legend hides it on
    every map), then the retrieved and the missed ground truth, then the query where ``query_xy`` places it. Every
    document point carries its id as ``customdata`` (what a selection returns)."""
    row_of = {int(d): i for i, d in enumerate(doc_ids)}
    style = category_styles(labels)
    spaces = list(maps)
    nrows = max(1, math.ceil(len(spaces) / NCOLS))
    fig = make_subplots(rows=nrows, cols=NCOLS, subplot_titles=[space_title(s, importance) for s in spaces],
                        horizontal_spacing=0.02, vertical_spacing=0.06)
    traces: list[dict[str, Any]] = []
    rows: list[int] = []
    cols: list[int] = []
    for i, space in enumerate(spaces):
        m = maps[space]
        at = [(j, row_of[int(d)]) for j, d in enumerate(m.doc_ids) if int(d) in row_of]
        picked = np.array([j for j, _ in at], dtype=int)
        index_rows = [r for _, r in at]
        docs = np.array([int(doc_ids[r]) for r in index_rows], dtype=int)
        coords = np.asarray(m.coords)[picked]  # as stored (float32: half the bytes sent)
        cats = np.array([labels[r] for r in index_rows], dtype=object)
        text = np.array([plotly_text(f"{titles[r]} · {labels[r]}") for r in index_rows], dtype=object)
        first = i == 0

        def add(mask: np.ndarray, **kw: Any) -> None:
            traces.append(_scatter(coords[mask, 0], coords[mask, 1], customdata=docs[mask], text=text[mask],
                                   showlegend=first, **kw))
            rows.append(i // NCOLS + 1)
            cols.append(i % NCOLS + 1)

        for cat, how in style.items():
            mask = cats == cat
            if mask.any():
                add(mask, name=plotly_text(cat), legendgroup=cat, hovertemplate="%{text}<extra></extra>",
                    marker=dict(color=how.color, symbol=how.symbol, size=6, opacity=0.75))
        for label, ids, marker in (("retrieved", retrieved, RETRIEVED_MARKER),
                                   ("missed ground truth", ground_truth - retrieved, MISSED_MARKER)):
            mask = np.isin(docs, np.array(sorted(ids), dtype=int))
            if mask.any():
                add(mask, name=label, legendgroup=label, marker=marker,
                    hovertemplate=f"{label}: %{{text}}<extra></extra>")
        if space in query_xy:
            qx, qy = query_xy[space]
            traces.append(_scatter([qx], [qy], name="query", legendgroup="query",
                                   showlegend=first, marker=QUERY_MARKER, hovertemplate="the query<extra></extra>"))
            rows.append(i // NCOLS + 1)
            cols.append(i % NCOLS + 1)
    if traces:
        fig.add_traces(traces, rows=rows, cols=cols)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    # t: the first row's titles sit below the toolbar Plotly shows at the top right on hover
    fig.update_layout(height=260 * nrows + 100, margin=dict(l=10, r=10, t=TITLES_BELOW_TOOLBAR, b=10),
                      dragmode="lasso", legend=dict(orientation="h", y=-0.02, yanchor="top"))
    return fig
