"""ui.chart_export: plotly figures redrawn with matplotlib as PNG (no kaleido, no browser)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import pytest
from matplotlib import image as mimage
from matplotlib.collections import QuadMesh
from matplotlib.patches import Rectangle
from plotly.subplots import make_subplots

from ui.chart_export import figure_png, plain_text, to_color, to_matplotlib

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _curves() -> pd.DataFrame:
    rows = [(s, k, metric, (k + i) / 40) for i, s in enumerate(["standard", "mrag"]) for k in range(1, 9)
            for metric in ["exact (RSR)", "category (CSR)"]]
    return pd.DataFrame(rows, columns=["strategy", "k", "metric", "ratio"])


def _plot_axes(mfig):
    """The plot axes (colour bars left out)."""
    return [ax for ax in mfig.axes if ax.get_label() != "<colorbar>"]


def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.mark.parametrize("width, height, scale", [(640, 360, 1.0), (500, 300, 2.0), (300, 200, 1.5)])
def test_png_is_valid_with_the_requested_size(width: int, height: int, scale: float) -> None:
    fig = px.line(_curves(), x="k", y="ratio", color="strategy", facet_col="metric", markers=True,
                  range_y=[0, 1.05], title="3-aspect queries")
    png = figure_png(fig, width=width, height=height, scale=scale)
    assert png[:8] == PNG_MAGIC
    pixels = mimage.imread(io.BytesIO(png), format="png")
    assert pixels.shape[:2] == (round(height * scale), round(width * scale))


def test_empty_figure_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="no data to draw"):
        figure_png(go.Figure())
    with pytest.raises(ValueError, match="no data to draw"):
        figure_png(go.Figure(go.Scatter(x=[], y=[])))
    with pytest.raises(ValueError, match="scale must be positive"):
        figure_png(go.Figure(go.Bar(x=["a"], y=[1])), scale=0)


def test_two_facets_give_two_axes_with_the_line_data_and_titles() -> None:
    frame = _curves()
    fig = px.line(frame, x="k", y="ratio", color="strategy", facet_col="metric", markers=True,
                  range_y=[0, 1.05], title="3-aspect queries")
    mfig = to_matplotlib(fig, width=800, height=400)
    axes = _plot_axes(mfig)
    assert len(axes) == 2
    left, right = sorted(axes, key=lambda ax: ax.get_position().x0)
    assert left.get_position().x1 < right.get_position().x0  # side by side, as the facet domains say
    for ax in axes:
        assert ax.get_ylim() == pytest.approx((0, 1.05))
        assert ax.get_xlabel() == "k"
    # every trace's points are drawn exactly, on its own facet, in the trace's colour
    for trace in fig.data:
        ax = left if trace.xaxis == "x" else right
        match = [ln for ln in ax.get_lines() if ln.get_label() == trace.name]
        assert len(match) == 1
        xy = match[0].get_xydata()
        np.testing.assert_allclose(xy[:, 0], np.asarray(trace.x, dtype=float))
        np.testing.assert_allclose(xy[:, 1], np.asarray(trace.y, dtype=float))
        assert match[0].get_marker() == "o" and match[0].get_color() == trace.line.color
    texts = {t.get_text() for t in mfig.texts}
    assert {"3-aspect queries", "metric=exact (RSR)", "metric=category (CSR)"} <= texts
    legend = mfig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["standard", "mrag"]  # once each, not per facet
    assert legend.get_title().get_text() == "strategy"


def test_line_dash_and_explicit_names() -> None:
    fig = go.Figure([go.Scatter(x=[0, 1, 2], y=[3, 1, 2], mode="lines", name="dashed", line=dict(dash="dash",
                                                                                                 color="crimson")),
                     go.Scatter(x=[0, 1, 2], y=[1, 1, 1], mode="markers", name="dots",
                                marker=dict(symbol="x-open", color="rgba(0, 0, 255, 0.5)"))])
    ax = _plot_axes(to_matplotlib(fig))[0]
    dashed, dots = ax.get_lines()
    assert dashed.get_linestyle() == "--" and dashed.get_color() == "crimson"
    assert dots.get_linestyle() == "None" and dots.get_marker() == "x"
    assert dots.get_markeredgecolor() == (0.0, 0.0, 1.0, 0.5)


def test_grouped_bar_heights_equal_the_trace_values() -> None:
    frame = pd.DataFrame({"n_aspects": [1, 2, 3, 1, 2, 3], "improvement": [5.0, -2.0, 7.5, 1.0, 3.0, 4.0],
                          "strategy": ["mrag"] * 3 + ["split"] * 3})
    fig = px.bar(frame, x="n_aspects", y="improvement", color="strategy", barmode="group",
                 labels={"improvement": "vs standard (%)"}, title="Relative improvement")
    ax = _plot_axes(to_matplotlib(fig))[0]
    bars = _bars(ax)
    assert len(bars) == 6
    heights = [b.get_height() for b in bars]
    assert heights == [5.0, -2.0, 7.5, 1.0, 3.0, 4.0]
    # grouped: the two strategies' bars sit side by side around each x value, never on top of each other
    for i in range(3):
        a, b = bars[i], bars[i + 3]
        assert a.get_x() + a.get_width() <= b.get_x() + 1e-9
        assert (a.get_x() + b.get_x() + b.get_width()) / 2 == pytest.approx(i + 1)
    assert ax.get_ylabel() == "vs standard (%)"


def test_stacked_and_horizontal_bars_with_error_bars() -> None:
    fig = go.Figure([go.Bar(x=["a", "b"], y=[1, 2], name="one", error_y=dict(type="data", array=[0.1, 0.2])),
                     go.Bar(x=["a", "b"], y=[3, 4], name="two")])
    fig.update_layout(barmode="stack")
    ax = _plot_axes(to_matplotlib(fig))[0]
    bars = _bars(ax)
    assert [(b.get_y(), b.get_height()) for b in bars] == [(0, 1), (0, 2), (1, 3), (2, 4)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    (with_errors,) = [c for c in ax.containers if getattr(c, "errorbar", None) is not None]
    assert [b.get_height() for b in with_errors] == [1, 2]  # the error bars belong to trace "one"

    horizontal = go.Figure(go.Bar(x=[0.5, 0.25], y=["h0", "h1"], orientation="h"))
    hax = _plot_axes(to_matplotlib(horizontal))[0]
    assert [b.get_width() for b in _bars(hax)] == [0.5, 0.25]
    assert [t.get_text() for t in hax.get_yticklabels()] == ["h0", "h1"]


def test_histogram_counts_match_numpy_on_shared_bins() -> None:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"weighted": rng.random(60), "strategy": ["a"] * 30 + ["b"] * 30})
    fig = px.histogram(frame, x="weighted", color="strategy", barmode="group", nbins=6)
    ax = _plot_axes(to_matplotlib(fig))[0]
    bars = _bars(ax)
    edges = np.histogram_bin_edges(frame["weighted"], bins=6)
    expected = [*np.histogram(frame["weighted"][:30], edges)[0], *np.histogram(frame["weighted"][30:], edges)[0]]
    assert [b.get_height() for b in bars] == [float(c) for c in expected]
    assert sum(b.get_height() for b in bars) == 60


def test_make_subplots_heatmap_and_bars_share_categories_and_annotations() -> None:
    heads = ["h0", "h1", "h2"]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.8, 0.2],
                        subplot_titles=("vote contribution", "importance s_i"))
    fig.add_trace(go.Heatmap(z=[[1, 0], [0, 2], [3, 1]], x=["doc A", "doc B"], y=heads, text=[["1", ""], ["", "2"],
                                                                                               ["3", "1"]],
                             texttemplate="%{text}", colorscale="Blues", showscale=False), row=1, col=1)
    fig.add_trace(go.Bar(x=[0.3, 0.2, 0.1], y=heads, orientation="h"), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.add_annotation(x="doc B", y="h2", xref="x", yref="y", text="<b>best</b>", showarrow=True)
    mfig = to_matplotlib(fig, width=700, height=300)
    left, right = sorted(_plot_axes(mfig), key=lambda ax: ax.get_position().x0)
    assert any(isinstance(c, QuadMesh) for c in left.collections)
    assert [t.get_text() for t in left.texts if t.get_text() in {"1", "2", "3"}] == ["1", "2", "3", "1"]
    assert left.yaxis_inverted() and right.yaxis_inverted()
    assert [b.get_y() + b.get_height() / 2 for b in _bars(right)] == [0.0, 1.0, 2.0]  # same rows as the heatmap
    assert left.get_position().width > 3 * right.get_position().width
    assert {"vote contribution", "importance s_i"} <= {t.get_text() for t in mfig.texts}
    assert "best" in [t.get_text() for t in left.texts]


def test_every_page_figure_kind_renders() -> None:
    """The figure shapes the pages build (3 confusion heatmap, 4 importance bars, 6 attention heatmaps,
    7 map scatter grid, 9 curves / histogram / improvement / comparison bars / sweep) all give PNGs."""
    rng = np.random.default_rng(0)
    figs = [
        go.Figure(go.Heatmap(z=[[3, 1], [0, 2]], x=["a", "b"], y=["a", "b"], colorscale="Blues", text=[[3, 1], [0, 2]],
                             texttemplate="%{text}")).update_layout(yaxis_autorange="reversed"),
        make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=("a", "b", "c"))
        .add_trace(go.Bar(x=["h0", "h1"], y=[1, 2], marker_color="#5b8def"), row=1, col=1)
        .add_trace(go.Bar(x=["h0", "h1"], y=[2, 1], marker_color="#f2a541"), row=2, col=1)
        .add_trace(go.Bar(x=["h0", "h1"], y=[2, 2], marker_color="#3aa675"), row=3, col=1)
        .update_layout(showlegend=False),
        go.Figure(go.Heatmap(z=rng.random((4, 4)), x=list("wxyz"), y=list("wxyz"), colorscale="Viridis", zmin=0)),
        make_subplots(rows=1, cols=2, subplot_titles=("standard", "head 0"))
        .add_trace(go.Scatter(x=[0, 1], y=[1, 0], mode="markers", name="cat", marker=dict(color="#1f77b4")), 1, 1)
        .add_trace(go.Scatter(x=[0.5], y=[0.5], mode="markers", name="query",
                              marker=dict(symbol="star", size=16, color="gold", line=dict(color="black", width=1))),
                   1, 2)
        .update_layout(legend=dict(orientation="h")),
        px.histogram(pd.DataFrame({"w": rng.random(20), "s": ["a", "b"] * 10}), x="w", color="s", barmode="group",
                     nbins=12),
        px.bar(pd.DataFrame({"n_aspects": ["1", "2"], "weighted": [0.5, 0.7], "item": ["#1 mrag", "#2 mrag"]}),
               x="n_aspects", y="weighted", color="item", barmode="group"),
        px.line(pd.DataFrame({"layer": [0, 2, 4], "weighted": [0.2, 0.4, 0.3], "strategy": ["mrag"] * 3}),
                x="layer", y="weighted", color="strategy", markers=True),
    ]
    for fig in figs:
        png = figure_png(fig, width=400, height=300, scale=1)
        assert png[:8] == PNG_MAGIC and mimage.imread(io.BytesIO(png), format="png").shape[:2] == (300, 400)


def test_text_and_color_helpers() -> None:
    assert plain_text("a<br>b <b>$5</b> &amp; c") == "a\nb \\$5 & c"
    assert plain_text(None) == ""
    assert to_color("rgb(255, 0, 0)") == (1.0, 0.0, 0.0, 1.0)
    assert to_color("#3aa675") == "#3aa675" and to_color("not-a-colour", "black") == "black"
