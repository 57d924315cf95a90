"""ui.category_style: categories get colours far apart (CIEDE2000), and marker shapes tell apart the ones that
share a colour; the Maps page draws categories with them."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from coloraide import Color
from streamlit.testing.v1 import AppTest

import db
from services.demo import load_demo
from ui.category_style import CATEGORY_PALETTE, CATEGORY_SYMBOLS, category_styles

MAPS_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "7_Maps.py")
MIN_DELTA_E = 15.0
"""CIEDE2000 between any two category colours: about 2.3 is a just-noticeable difference; Dark24's two magentas
(#DA16FF, #FB00D1), which the Maps page gave two of the demo's twelve categories, are 9.3 apart."""
PLOT_BACKGROUNDS = ("#E5ECF6", "#FFFFFF")  # Plotly's default plot area; Streamlit's light page


def delta_e(a: str, b: str) -> float:
    return Color(a).delta_e(Color(b), method="2000")


def closest_pair(colours: list[str]) -> tuple[float, tuple[str, str]]:
    return min((delta_e(a, b), (a, b)) for a, b in itertools.combinations(colours, 2))


def test_the_palette_has_twelve_or_more_colours_far_apart() -> None:
    assert len(CATEGORY_PALETTE) >= 12 and len(set(CATEGORY_PALETTE)) == len(CATEGORY_PALETTE)
    distance, pair = closest_pair(list(CATEGORY_PALETTE))
    assert distance >= 16.0, pair
    assert closest_pair(list(CATEGORY_PALETTE[:12]))[0] >= MIN_DELTA_E


def test_every_colour_stands_out_from_the_plot_background() -> None:
    for colour, background in itertools.product(CATEGORY_PALETTE, PLOT_BACKGROUNDS):
        assert delta_e(colour, background) >= 20.0, (colour, background)


def test_the_twelve_demo_categories_get_distinct_colours_and_one_shape() -> None:
    names = [c["name"] for c in load_demo().categories]
    assert len(names) == 12
    styles = category_styles(reversed(names))  # the order met does not matter
    assert styles == category_styles(names)
    assert closest_pair([s.color for s in styles.values()])[0] >= MIN_DELTA_E
    assert {s.symbol for s in styles.values()} == {"circle"}


def test_categories_past_the_palette_repeat_colours_with_other_shapes() -> None:
    names = [f"topic {i:03d}" for i in range(3 * len(CATEGORY_PALETTE) + 5)]
    styles = category_styles(names)
    pairs = [(s.color, s.symbol) for s in styles.values()]
    assert len(set(pairs)) == len(pairs)  # no two categories look the same
    for (na, a), (nb, b) in itertools.combinations(styles.items(), 2):
        if a.color == b.color:
            assert a.symbol != b.symbol, (na, nb)
    assert [s.symbol for s in styles.values()][len(CATEGORY_PALETTE)] == CATEGORY_SYMBOLS[1]


def test_the_png_export_draws_every_shape() -> None:
    from ui.chart_export import _SYMBOLS

    assert set(CATEGORY_SYMBOLS) <= set(_SYMBOLS)
    assert len({_SYMBOLS[s] for s in CATEGORY_SYMBOLS}) == len(CATEGORY_SYMBOLS)  # distinct in matplotlib too
    assert not {"star", "x"} & set(CATEGORY_SYMBOLS)  # the query's and a missed document's marks


@pytest.mark.usefixtures("fresh_env")
def test_maps_page_colours_categories_apart_and_alike_in_every_space() -> None:
    """The Maps page on an index whose documents carry the demo's twelve categories and 18 more: the twelve's
    colours are far apart, no two categories share colour and shape, and a category looks the same in each map."""
    demo = [c["name"] for c in load_demo().categories]
    labels = demo + [f"zz extra {i:02d}" for i in range(18)]
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, "Many categories")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"text {i}", "label": labels[i % 30]}
                                              for i in range(60)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=3, dim=6)
    rng = np.random.default_rng(0)
    db.save_vectors(store, run.id, ids, rng.normal(size=(60, 6)), rng.normal(size=(60, 2, 3)))
    db.finish_embedding_run(store, run.id)
    store.close()
    at = AppTest.from_file(MAPS_PAGE, default_timeout=120)
    at.session_state["corpus_id"] = corpus.id
    at.session_state["maps_method"] = "pca"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    traces = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    seen: dict[str, set[tuple[str, str]]] = {}
    for t in traces:
        if t.get("legendgroup") in labels:
            marker = t["marker"]
            seen.setdefault(t["legendgroup"], set()).add((marker["color"], marker.get("symbol", "circle")))
    assert set(seen) == set(labels)
    assert all(len(looks) == 1 for looks in seen.values()), seen  # the same in the standard and each head's map
    look = {name: next(iter(looks)) for name, looks in seen.items()}
    assert len(set(look.values())) == len(labels)
    distance, pair = closest_pair([look[name][0] for name in demo])
    assert distance >= MIN_DELTA_E, pair
