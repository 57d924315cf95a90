"""``ui.maps_figure.maps_figure`` on two hand-made maps: which points each trace holds, on which map, under which
legend entry, with which document ids; documents not in the index left out; the titles and height."""

from __future__ import annotations

import numpy as np

from mrag_core.projection import SpaceMap
from ui.category_style import category_styles
from ui.maps_figure import maps_figure, space_title


def _map(space: str, doc_ids: list[int], coords: list[list[float]]) -> SpaceMap:
    return SpaceMap(space, "pca", doc_ids, np.array(coords, dtype=np.float32), None, True)


MAPS = {
    "standard": _map("standard", [10, 11, 12, 99], [[0, 1], [2, 3], [4, 5], [9, 9]]),  # 99: not in the index
    "head:1": _map("head:1", [12, 10, 11], [[-1, -2], [-3, -4], [-5, -6]]),
}
DOC_IDS, TITLES, LABELS = [10, 11, 12], ["Ten", "<b>Eleven</b>", "Twelve"], ["sea", "cats", "sea"]


def _traces(fig) -> list[tuple]:  # noqa: ANN001
    return [(t.name, t.xaxis, list(t.x), list(t.y), [int(c) for c in t.customdata] if t.customdata is not None
             else None, t.showlegend) for t in fig.data]


def test_each_map_has_a_trace_per_category_then_retrieved_missed_and_the_query() -> None:
    fig = maps_figure(MAPS, DOC_IDS, TITLES, LABELS, [0.9, 0.4236], {"head:1": (0.5, 0.25)}, retrieved={11, 12},
                      ground_truth={10, 12})
    assert _traces(fig) == [
        # standard (x): cats then sea (sorted), document 99 left out
        ("cats", "x", [2.0], [3.0], [11], True),
        ("sea", "x", [0.0, 4.0], [1.0, 5.0], [10, 12], True),
        ("retrieved", "x", [2.0, 4.0], [3.0, 5.0], [11, 12], True),
        ("missed ground truth", "x", [0.0], [1.0], [10], True),
        # head 1 (x2), the map's own order of points; the query placed here only
        ("cats", "x2", [-5.0], [-6.0], [11], False),
        ("sea", "x2", [-1.0, -3.0], [-2.0, -4.0], [12, 10], False),
        ("retrieved", "x2", [-1.0, -5.0], [-2.0, -6.0], [12, 11], False),
        ("missed ground truth", "x2", [-3.0], [-4.0], [10], False),
        ("query", "x2", [0.5], [0.25], None, False),
    ]
    style = category_styles(LABELS)
    cats = [t for t in fig.data if t.name in ("cats", "sea")]
    assert [(t.marker.color, t.marker.symbol, t.legendgroup) for t in cats] == [
        (style[t.name].color, style[t.name].symbol, t.name) for t in cats]
    # hover text: title and category, shown verbatim (Plotly reads < > as markup)
    assert list(fig.data[0].text) == ["&lt;b&gt;Eleven&lt;/b&gt; · cats"]
    assert list(fig.data[1].text) == ["Ten · sea", "Twelve · sea"]
    assert [a.text for a in fig.layout.annotations] == ["standard", "head 1 · s=0.42"]
    assert fig.layout.height == 260 + 100 and fig.layout.dragmode == "lasso"


def test_nothing_retrieved_draws_only_the_categories() -> None:
    fig = maps_figure(MAPS, DOC_IDS, TITLES, LABELS, [0.9, 0.4], {}, retrieved=set(), ground_truth=set())
    assert [(t.name, t.xaxis) for t in fig.data] == [("cats", "x"), ("sea", "x"), ("cats", "x2"), ("sea", "x2")]


def test_five_maps_take_two_rows_of_four() -> None:
    maps = {s: _map(s, [10], [[0, 0]]) for s in ["standard", "head:0", "head:1", "head:2", "head:3"]}
    fig = maps_figure(maps, [10], ["T"], ["c"], [0.1, 0.2, 0.3, 0.4], {}, set(), set())
    assert [t.xaxis for t in fig.data] == ["x", "x2", "x3", "x4", "x5"]
    assert fig.layout.height == 2 * 260 + 100
    assert space_title("head:3", [0.1, 0.2, 0.3, 0.456]) == "head 3 · s=0.46" and space_title("standard", []) == \
        "standard"
